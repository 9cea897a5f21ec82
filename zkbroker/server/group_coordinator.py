"""The broker's group coordinator (Kafka's GroupCoordinator and GroupMetadataManager, their I/O half): drives
the pure state machine of zkbroker/coordinator/ from requests, a timer and `__consumer_offsets`.

- Requests: each handler calls the machine with the wall clock (Kafka's coordinator, too, uses it) and an asyncio
  future as the reply token, then runs the machine's outbox: replies resolve futures, appends go to the offsets
  topic through the ReplicaManager with offsets.commit.required.acks (-1: the ISR) and report back.
- One timer: set for the machine's next deadline (a rebalance timeout, an initial delay, a session expiry).
- Leadership: after every LeaderAndIsr and StopReplica the coordinator looks at the offsets partitions this
  broker leads. A partition it now leads is loaded (its log read from the start, in chunks of
  offsets.load.buffer.size, yielding to the loop between them; meanwhile its groups answer
  COORDINATOR_LOAD_IN_PROGRESS); one it no longer leads is unloaded, and its groups' waiting members hear
  NOT_COORDINATOR and find the new coordinator -- the leader the controller elected.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from zkbroker import admin
from zkbroker.config import KafkaConfig
from zkbroker.coordinator.group_coordinator import (
    Append,
    CoordinatorConfig,
    GroupCoordinator,
    Reply,
    resolve_transactional_records,
)
from zkbroker.fault_points import FAULTS
from zkbroker.log.log import Log
from zkbroker.protocol.compression import CODEC_NAMES
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.message_set import build_message_set, iter_batch_records, iter_entries, iter_messages
from zkbroker.protocol.record_batch import build_record_batch, parse_end_txn_marker
from zkbroker.server.metadata_cache import MetadataCache
from zkbroker.server.network import CONNECTION, SESSION
from zkbroker.server.replica_manager import ReplicaManager
from zkbroker.server.topic_creation import TopicAutoCreator
from zkbroker.topic_partition import TopicPartition

log = logging.getLogger("zkbroker.server.GroupCoordinator")

_CODECS = {name: code for code, name in CODEC_NAMES.items()} | {str(code): code for code in CODEC_NAMES}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _client_host() -> str:
    """Kafka's member client host: "/" and the peer's address (the connection is named host:port#n)."""
    name = CONNECTION.get().rsplit("#", 1)[0]
    return "/" + name.rsplit(":", 1)[0]


class GroupCoordinatorDriver:
    def __init__(self, config: KafkaConfig, metadata_cache: MetadataCache, replica_manager: ReplicaManager,
                 topic_creator: TopicAutoCreator) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.topic_creator = topic_creator
        self.machine = GroupCoordinator(CoordinatorConfig.from_broker_config(config))
        self.required_acks = config["offsets.commit.required.acks"]
        self.commit_timeout_ms = config["offsets.commit.timeout.ms"]
        self.codec = _CODECS[config["offsets.topic.compression.codec"]]
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._loads: dict[int, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()

    # ---- driving the machine ------------------------------------------------------------------------------

    def _run(self) -> None:
        for event in self.machine.take_outbox():
            if isinstance(event, Reply):
                if not event.token.done():
                    event.token.set_result(event.body)
            else:
                self._spawn(self._write(event))
        self._schedule()

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, event: Append) -> None:
        if event.producer_id >= 0:  # TxnOffsetCommit: the producer's transactional batch
            records = bytearray(build_record_batch(event.records, codec=self.codec, timestamp=_now_ms(),
                                                   producer_id=event.producer_id,
                                                   producer_epoch=event.producer_epoch, transactional=True))
        else:
            records = build_message_set([(key, value, _now_ms()) for key, value in event.records], magic=1,
                                        codec=self.codec)
        try:
            error = await self.replica_manager.append_and_wait(admin.OFFSETS_TOPIC, event.partition, records,
                                                               self.required_acks, self.commit_timeout_ms)
        except Exception:
            log.exception("Broker %d could not append to [%s,%d]", self.broker_id, admin.OFFSETS_TOPIC,
                          event.partition)
            error = ErrorCode.UNKNOWN
        self.machine.append_completed(event.write_id, error, _now_ms())
        self._run()

    def _schedule(self) -> None:
        deadline = self.machine.next_deadline_ms()
        if deadline is None or (self._timer_at is not None and self._timer_at <= deadline):
            return  # an earlier timer will tick and look again
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer_at = deadline
        self._timer = loop.call_later(max(deadline - _now_ms(), 0) / 1000.0, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = self._timer_at = None
        self.machine.tick(_now_ms())
        self._run()

    async def _call(self, method: Any, *args: Any) -> dict:
        """Call a machine method that answers through a reply token, and wait for its answer."""
        future = asyncio.get_running_loop().create_future()
        method(_now_ms(), future, *args)
        self._run()
        return await future

    # ---- group membership ---------------------------------------------------------------------------------

    async def join_group(self, header: Any, request: Any) -> dict:
        rebalance_timeout = getattr(request, "rebalance_timeout", request.session_timeout)  # v0: the session's
        protocols = [(p.protocol_name, p.protocol_metadata) for p in request.group_protocols]
        return await self._call(self.machine.join_group, request.group_id, request.member_id,
                                header.client_id or "", _client_host(), request.session_timeout, rebalance_timeout,
                                request.protocol_type, protocols)

    async def sync_group(self, header: Any, request: Any) -> dict:
        assignments = {a.member_id: bytes(a.member_assignment) for a in request.group_assignment}
        return await self._call(self.machine.sync_group, request.group_id, request.generation_id,
                                request.member_id, assignments)

    def heartbeat(self, request: Any) -> dict:
        error = self.machine.heartbeat(_now_ms(), request.group_id, request.generation_id, request.member_id)
        self._run()
        return {"error_code": error}

    def leave_group(self, request: Any) -> dict:
        error = self.machine.leave_group(_now_ms(), request.group_id, request.member_id)
        self._run()
        return {"error_code": error}

    def describe_groups(self, request: Any) -> dict:
        return {"groups": [self.machine.describe_group(group_id) for group_id in request.group_ids]}

    def delete_groups(self, request: Any) -> dict:
        results = self.machine.delete_groups(list(request.groups_names))
        self._run()  # the tombstones
        return {"results": [{"group_id": g, "error_code": e} for g, e in results.items()]}

    def delete_offsets(self, request: Any) -> dict:
        wanted = [TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions]
        error, results = self.machine.delete_offsets(request.group_id, wanted)
        self._run()  # the tombstones
        topics: dict[str, list] = {}
        for tp, code in results.items():
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": code})
        return {"error_code": error, "topics": [{"name": t, "partitions": rows} for t, rows in topics.items()]}

    def list_groups(self) -> dict:
        error, groups = self.machine.list_groups()
        return {"error_code": error, "groups": [{"group_id": g, "protocol_type": t} for g, t in groups]}

    async def find_coordinator(self, group_id: str) -> dict:
        """The leader of the group's offsets partition; the offsets topic is created on first use."""
        unavailable = {"error_code": ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE, "node_id": -1, "host": "",
                       "port": -1}
        snapshot = self.metadata_cache.snapshot
        partitions = snapshot.partitions.get(admin.OFFSETS_TOPIC)
        if partitions is None:
            await self.topic_creator.create_offsets_topic()
            return unavailable
        state = partitions.get(self.machine.partition_for(group_id))
        broker = None if state is None else snapshot.brokers.get(state.leader)
        endpoint = None if broker is None else broker.endpoint(SESSION.get().listener_name)
        if endpoint is None:
            return unavailable
        return {"error_code": ErrorCode.NONE, "node_id": broker.broker_id, "host": endpoint[0], "port": endpoint[1]}

    # ---- offsets (OffsetCommit v1+, OffsetFetch v1+) ----------------------------------------------------

    async def commit_offsets(self, request: Any, unknown_topics: set[str]) -> dict:
        offsets = {TopicPartition(t.topic, p.partition): (p.offset, p.metadata)
                   for t in request.topics if t.topic not in unknown_topics for p in t.partitions}
        epochs = {TopicPartition(t.topic, p.partition): getattr(p, "committed_leader_epoch", -1)  # v6+
                  for t in request.topics if t.topic not in unknown_topics for p in t.partitions}
        body = {"topics": []}
        if offsets:
            # v2-v4 carry retention_time_ms (-1: the broker's); v5+ leave it to offsets.retention.minutes
            body = await self._call(self.machine.commit_offsets, request.group_id, request.generation_id,
                                    request.member_id, offsets, getattr(request, "retention_time_ms", -1), epochs)
        for t in request.topics:
            if t.topic in unknown_topics:
                body["topics"].append({"topic": t.topic, "partitions": [
                    {"partition": p.partition, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
                    for p in t.partitions]})
        return body

    def fetch_offsets(self, request: Any, per_partition_errors: bool, require_stable: bool = False,
                      ) -> tuple[int, list[dict]]:
        """OffsetFetch v1+: (group-level error, topics). Null topics (v2+) ask for every offset the group has. A
        group-level error is repeated in every partition for v0-v1 (``per_partition_errors``); v2+ carry it once,
        at the top, with no partitions (Kafka 2.1's answer)."""
        wanted = None if request.topics is None else [TopicPartition(t.topic, p) for t in request.topics
                                                      for p in t.partitions]
        error, found = self.machine.fetch_offsets(request.group_id, wanted)
        if error != ErrorCode.NONE and not per_partition_errors:
            return error, []
        asked = wanted if wanted is not None else sorted(found)
        unstable = self.machine.unstable_offsets(request.group_id, asked) if require_stable else set()
        topics: dict[str, list] = {}
        for tp in asked:
            stored = None if tp in unstable else found.get(tp)
            topics.setdefault(tp.topic, []).append({
                "partition": tp.partition, "offset": -1 if stored is None else stored.offset,
                "committed_leader_epoch": -1 if stored is None else stored.leader_epoch,
                "metadata": "" if stored is None else stored.metadata,
                "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT if tp in unstable else error})
        return error, [{"topic": t, "partitions": rows} for t, rows in topics.items()]

    def committed(self, group_id: str) -> tuple[int, dict[TopicPartition, int]]:
        """Every offset committed for a group, for tools."""
        error, found = self.machine.fetch_offsets(group_id, None)
        return error, {tp: o.offset for tp, o in found.items()}

    # ---- leadership of the offsets partitions -------------------------------------------------------------

    def on_leadership_change(self) -> None:
        """Load the offsets partitions we now lead, unload those we no longer lead (Kafka's
        handleGroupImmigration and handleGroupEmigration)."""
        machine = self.machine
        for pid in range(machine.config.offsets_topic_partitions):
            p = self.replica_manager.partitions.get(TopicPartition(admin.OFFSETS_TOPIC, pid))
            leading = p is not None and p.is_leader
            known = pid in machine.owned or pid in machine.loading
            if leading and not known:
                machine.begin_loading(pid)
                log.info("Broker %d loading offsets and group metadata from [%s,%d]", self.broker_id,
                         admin.OFFSETS_TOPIC, pid)
                self._loads[pid] = asyncio.get_running_loop().create_task(self._load(pid, p.log))
            elif not leading and known:
                task = self._loads.pop(pid, None)
                if task is not None:
                    task.cancel()
                machine.unload(pid)
                log.info("Broker %d unloaded the groups of [%s,%d]", self.broker_id, admin.OFFSETS_TOPIC, pid)
        self._run()

    async def _load(self, pid: int, log_: Log) -> None:
        started = time.monotonic()
        # The lab's fault point hold_group_loading: COORDINATOR_LOAD_IN_PROGRESS for as long as a test wants.
        await FAULTS.wait_while_group_loading_held(admin.OFFSETS_TOPIC, pid)
        items: list[tuple[bytes | None, bytes | None, int, bool | None]] = []
        end = log_.log_end_offset
        offset = log_.log_start_offset
        chunk = self.config["offsets.load.buffer.size"]
        while offset < end:
            try:
                data = log_.read(offset, chunk, end).read_bytes()
            except Exception:  # the log changed under us (deleted, truncated): serve what was read
                log.exception("Broker %d could not read [%s,%d] at offset %d", self.broker_id,
                              admin.OFFSETS_TOPIC, pid, offset)
                break
            before = offset
            offset = _read_entries(data, offset, end, items)
            if offset == before:
                if not data:
                    break
                chunk *= 2  # a message larger than the buffer
            await asyncio.sleep(0)
        if self._loads.get(pid) is not asyncio.current_task():
            return
        del self._loads[pid]
        records, pending = resolve_transactional_records(items)
        self.machine.finish_loading(pid, records, _now_ms(), pending)
        groups = sum(1 for g in self.machine.groups if self.machine.partition_for(g) == pid)
        log.info("Broker %d finished loading [%s,%d]: %d records, %d groups, in %.0f ms", self.broker_id,
                 admin.OFFSETS_TOPIC, pid, len(records), groups, (time.monotonic() - started) * 1000)
        self._run()

    # ---- transactional offsets (TxnOffsetCommit, KIP-98; OffsetFetch's require_stable, KIP-447) -------------

    async def commit_txn_offsets(self, request: Any, unknown_topics: set[str]) -> dict:
        offsets = {TopicPartition(t.name, p.partition_index): (p.committed_offset, p.committed_metadata)
                   for t in request.topics if t.name not in unknown_topics for p in t.partitions}
        epochs = {TopicPartition(t.name, p.partition_index): getattr(p, "committed_leader_epoch", -1)  # v2+
                  for t in request.topics if t.name not in unknown_topics for p in t.partitions}
        body = {"topics": []}
        if offsets:
            body = await self._call(self.machine.commit_txn_offsets, request.group_id, request.producer_id,
                                    request.producer_epoch, offsets, epochs, getattr(request, "generation_id", -1),
                                    getattr(request, "member_id", ""))
        for t in request.topics:
            if t.name in unknown_topics:
                body["topics"].append({"topic": t.name, "partitions": [
                    {"partition": p.partition_index, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
                    for p in t.partitions]})
        return {"topics": [{"name": t["topic"], "partitions": [
            {"partition_index": p["partition"], "error_code": p["error_code"]} for p in t["partitions"]]}
            for t in body["topics"]]}

    def complete_txn(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A transaction's marker is in one of our offsets partitions (WriteTxnMarkers wrote it)."""
        self.machine.complete_txn(offsets_partition, producer_id, commit)

    async def expire_offsets(self) -> None:
        """Every offsets.retention.check.interval.ms (KafkaServer runs it)."""
        expired = self.machine.expire_offsets(_now_ms())
        if expired:
            log.info("Broker %d removed %d expired offsets", self.broker_id, expired)
        self._run()

    def shutdown(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for task in [*self._loads.values(), *self._tasks]:
            task.cancel()


def _read_entries(data: bytes, offset: int, end: int, items: list) -> int:
    """Add the records of `data` from `offset` (below `end`) to `items` as (key, value, producer id, marker) for
    `resolve_transactional_records`; returns the offset after the last one read."""
    for entry in iter_entries(data):
        if entry.batch is None:
            for message in iter_messages(data[entry.position:entry.position + 12 + entry.size], verify_crc=False):
                if offset <= message.offset < end:
                    items.append((message.key, message.value, -1, None))
                    offset = message.offset + 1
            continue
        header = entry.batch
        if header.last_offset < offset:
            continue
        if header.base_offset >= end:
            break
        _, records = iter_batch_records(data, entry.position)
        producer_id = header.producer_id if header.is_transactional else -1
        if header.is_control:
            if records and header.is_transactional:
                marker = parse_end_txn_marker(records[0].key, records[0].value)
                items.append((None, None, header.producer_id, marker.is_commit))
        else:
            items.extend((r.key, r.value, producer_id, None) for r in records if offset <= r.offset < end)
        offset = min(header.last_offset + 1, end)
    return offset
