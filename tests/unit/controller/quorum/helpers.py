"""A tiny in-memory metadata log standing in for the Raft driver (unit tests only: the real one is
zkbroker/raft/), controllers wired to it, and requests built the way the wire decodes them."""

from __future__ import annotations

import random
from typing import Any

from controller.quorum.controller import QuorumController, QuorumControllerConfig
from zkbroker.protocol.api import REQUEST_SCHEMAS
from zkbroker.protocol.metadata_records import decode_frame, encode_frame
from zkbroker.raft.listener import NotLeaderError

CLUSTER_ID = "fMCL8kv1SWm87L_Md-I2hg"
SESSION_MS = 9000


class MemoryLog:
    """One metadata log shared by every node: batches appended by the leader of the current epoch, committed
    when the test says so, delivered to each node's listener in order. Every record is encoded as it is
    appended and the other nodes get it decoded from those bytes, as through the real log; the node that
    appended a batch gets its own records back, as the real leader's RaftManager hands them over."""

    def __init__(self, commit_on_append: bool = False) -> None:
        self.commit_on_append = commit_on_append  # a quorum of one: commits inside the append
        self.batches: list[tuple[int, int, int, list]] = []  # (base offset, last offset, epoch, records)
        self.appended: dict[int, tuple[int, list]] = {}  # base offset -> (the node that appended it, its records)
        self.end_offset = 0
        self.high_watermark = 0  # offsets below it are committed
        self.leader: int | None = None
        self.epoch = 0
        self.clients: dict[int, MemoryRaftClient] = {}
        self.snapshots: dict[int, tuple[int, list]] = {}  # end offset -> (epoch, records)

    def client(self, node_id: int) -> MemoryRaftClient:
        self.clients[node_id] = MemoryRaftClient(self, node_id)
        return self.clients[node_id]

    def elect(self, node_id: int | None, *, truncate_uncommitted: bool = False) -> None:
        """A new epoch led by `node_id`; its LeaderChange control record takes an offset (so offsets of data
        records have gaps, as in the real log). `truncate_uncommitted`: the new leader lacked the uncommitted
        tail, which is lost."""
        if truncate_uncommitted:
            self.batches = [b for b in self.batches if b[1] < self.high_watermark]
            self.end_offset = self.high_watermark
        self.epoch += 1
        self.leader = node_id
        if node_id is not None:
            self.end_offset += 1  # the LeaderChange record
        for client in self.clients.values():
            for listener in client.listeners:
                listener.handle_leader_change(node_id, self.epoch)

    def commit(self) -> None:
        self.high_watermark = self.end_offset
        for client in self.clients.values():
            client.deliver()

    def append(self, node_id: int, epoch: int, records: list) -> int:
        if node_id != self.leader or epoch != self.epoch:
            raise NotLeaderError(self.leader, self.epoch)
        framed = _Decoded([encode_frame(*item) for item in records])
        base = self.end_offset
        self.end_offset += len(records)
        self.batches.append((base, self.end_offset - 1, epoch, framed))
        self.appended[base] = (node_id, list(records))
        if self.commit_on_append:
            self.commit()
        return self.end_offset - 1

    def committed_records(self) -> list[tuple[int, int, list]]:
        return [(base, epoch, records) for base, last, epoch, records in self.batches if last < self.high_watermark]


class _Decoded(list):
    """A batch's records as the log's bytes decode them, decoded when first read (by a node other than the one
    that appended them)."""

    def __init__(self, frames: list[bytes]) -> None:
        super().__init__()
        self.frames: list[bytes] | None = frames

    def _decode(self) -> None:
        if self.frames is not None:
            frames, self.frames = self.frames, None
            self.extend(decode_frame(frame) for frame in frames)

    def __iter__(self):
        self._decode()
        return super().__iter__()

    def __len__(self) -> int:
        self._decode()
        return super().__len__()

    def __getitem__(self, index):
        self._decode()
        return super().__getitem__(index)

    def __eq__(self, other: object) -> bool:
        self._decode()
        return super().__eq__(other)

    __hash__ = None


class MemoryRaftClient:
    def __init__(self, log: MemoryLog, node_id: int) -> None:
        self.log = log
        self.node_id = node_id
        self.listeners: list[Any] = []
        self.delivered = -1  # the last offset handed to the listeners

    def register(self, listener: Any) -> None:
        """A listener is told the leader, then every committed batch (registered later, it gets them again)."""
        self.listeners.append(listener)
        if self.log.leader is not None:
            listener.handle_leader_change(self.log.leader, self.log.epoch)
        for base, last, epoch, records in self.log.batches:
            if last <= self.delivered:
                listener.handle_commit(base, last, epoch, records)
        self.deliver()

    def deliver(self) -> None:
        for base, last, epoch, records in self.log.batches:
            if base > self.delivered and last < self.log.high_watermark:
                writer, own = self.log.appended.get(base, (None, None))
                for listener in self.listeners:
                    listener.handle_commit(base, last, epoch, own if writer == self.node_id else records)
                self.delivered = last

    def schedule_append(self, epoch: int, records: list) -> int:
        return self.log.append(self.node_id, epoch, records)

    def create_snapshot(self, end_offset: int, epoch: int, records: list) -> None:
        self.log.snapshots[end_offset] = (epoch, [decode_frame(encode_frame(*item)) for item in records])

    def leader_and_epoch(self) -> tuple[int | None, int]:
        return self.log.leader, self.log.epoch


def make_controller(log: MemoryLog, node_id: int = 3001, seed: int = 1, **config: Any) -> QuorumController:
    client = log.client(node_id)
    controller = QuorumController(QuorumControllerConfig(node_id=node_id, cluster_id=CLUSTER_ID,
                                                         session_timeout_ms=SESSION_MS, **config),
                                  client, random.Random(seed))
    client.register(controller)
    return controller


def active_controller(**config: Any) -> tuple[MemoryLog, QuorumController]:
    """A controller elected and bootstrapped (metadata.version committed), at time 0."""
    log = MemoryLog()
    controller = make_controller(log, **config)
    lead(log, controller)
    return log, controller


def lead(log: MemoryLog, controller: QuorumController, *, truncate_uncommitted: bool = False) -> None:
    """Elect `controller` and let it become active: its NoOpRecord committed, then its first events (the
    bootstrap of a new cluster) run and committed."""
    log.elect(controller.config.node_id, truncate_uncommitted=truncate_uncommitted)
    controller.poll(controller.now_ms)
    log.commit()
    assert controller.is_active
    controller.poll(controller.now_ms)
    log.commit()


def wire(api_key: int, version: int, **fields: Any) -> Any:
    """A request as the wire decodes it (real structs, so field names are checked against the schema)."""
    schema = REQUEST_SCHEMAS[(api_key, version)]
    decoded, _ = schema.decode(memoryview(schema.encode(fields)), 0)
    return decoded


def registration(broker_id: int, incarnation: int = 0, cluster_id: str = CLUSTER_ID, max_mv: int = 19) -> Any:
    return wire(62, 0, broker_id=broker_id, cluster_id=cluster_id,
                incarnation_id=bytes([broker_id, incarnation]) + bytes(14),
                listeners=[{"name": "PLAINTEXT", "host": "localhost", "port": 9090 + broker_id,
                            "security_protocol": 0}],
                features=[{"name": "metadata.version", "min_supported_version": 1,
                           "max_supported_version": max_mv}], rack=None)


def heartbeat(broker_id: int, epoch: int, offset: int, want_fence: bool = False, want_shut_down: bool = False) -> Any:
    return wire(63, 0, broker_id=broker_id, broker_epoch=epoch, current_metadata_offset=offset,
                want_fence=want_fence, want_shut_down=want_shut_down)


def create_topics(*topics: tuple[str, int, int], configs: dict[str, str] | None = None,
                  assignments: dict[int, list[int]] | None = None, validate_only: bool = False) -> Any:
    return wire(19, 5, topics=[{"name": name, "num_partitions": n, "replication_factor": rf,
                                "assignments": [{"partition_index": p, "broker_ids": b}
                                                for p, b in (assignments or {}).items()],
                                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
                               for name, n, rf in topics],
                timeout_ms=1000, validate_only=validate_only)


def run(log: MemoryLog, controller: QuorumController, pending: Any, now_ms: int | None = None) -> Any:
    """Poll the controller, commit the log, and hand back the answer (which must be there)."""
    controller.poll(controller.now_ms if now_ms is None else now_ms)
    log.commit()
    assert pending.done, pending
    assert pending.error is None, pending
    return pending.response


def register_brokers(log: MemoryLog, controller: QuorumController, *broker_ids: int,
                     now_ms: int = 0) -> dict[int, int]:
    """Register and unfence brokers; their epochs."""
    epochs = {}
    for broker_id in broker_ids:
        answer = run(log, controller, controller.register_broker(registration(broker_id)), now_ms)
        assert answer["error_code"] == 0, answer
        epochs[broker_id] = answer["broker_epoch"]
    for broker_id, epoch in epochs.items():
        answer = run(log, controller, controller.broker_heartbeat(heartbeat(broker_id, epoch, log.end_offset)),
                     now_ms)
        assert answer["is_fenced"] is False, answer
    return epochs
