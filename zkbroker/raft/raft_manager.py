"""The Raft node's driver on an asyncio loop (Kafka's KafkaRaftManager around KafkaRaftClient): it owns the
clock, the sockets to the other voters, the metadata log on disk and the timer, and performs the node's
effects in order (quorum-state fsynced before a vote leaves, the log flushed before a Fetch acknowledges it).
It is also the RaftClient (listener.py) the metadata layer uses: appends on the leader, committed batches,
snapshots and leader changes handed to the registered listeners, in log order, on the loop.

Inbound requests come from the controller listener (server/controller_apis.py) as messages: the node answers
them among its effects, matched here to the waiting request by a token used as the node's correlation id.
Outbound requests go one at a time per voter over one connection each (the node never has two in flight to
one destination); a connection that fails is dropped and the node's request timeout retries.

Snapshots: a follower whose Fetch falls below the leader's log start is told the leader's latest snapshot and
fetches it whole with FetchSnapshot (59), then loads it; meanwhile the node's next Fetch is held, and sent
once the snapshot is in, from the snapshot's end (the node itself knows nothing of snapshots but the answer
that names one).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zkbroker import timeline
from zkbroker.client.async_connection import AsyncBrokerConnection
from zkbroker.fault_points import FAULTS
from zkbroker.protocol.errors import ErrorCode, ProtocolError
from zkbroker.protocol.metadata_records import RECORD_SCHEMAS, build_snapshot, decode_frame, encode_frame, read_snapshot

from . import messages as m
from . import quorum_state, wire
from .config import QuorumConfig
from .effects import Effect, FlushLog, PersistQuorumState, Send, Timer
from .listener import MetadataRecord, RaftListener
from .metadata_log import MetadataLog
from .node import NotLeaderError, RaftNode, RaftStateError
from .states import Follower

logger = logging.getLogger(__name__)

#: How much of a snapshot one FetchSnapshot asks for (Kafka's raft client asks for up to its fetch max bytes).
SNAPSHOT_CHUNK_BYTES = 1024 * 1024
INCONSISTENT_CLUSTER_ID = int(ErrorCode.INCONSISTENT_CLUSTER_ID)
#: A step longer than this is logged: the node's timers (fetch, election, check-quorum) wait behind it.
SLOW_STEP_MS = 300
#: How much of the committed log the listeners are handed at a time before the loop runs other work.
HAND_OVER_BYTES = 64 * 1024


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Peer:
    connection: AsyncBrokerConnection
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class _SnapshotFetch:
    """A snapshot being fetched from the leader, chunk by chunk."""

    leader: int
    epoch: int
    snapshot: m.SnapshotId
    data: bytearray = field(default_factory=bytearray)


class RaftManager:
    def __init__(self, config: QuorumConfig, voters: dict[int, tuple[str, int]], log: MetadataLog, *,
                 rng: random.Random | None = None, clock: Callable[[], int] = wall_clock_ms,
                 on_fatal: Callable[[BaseException], None] | None = None) -> None:
        self.config = config
        self.voters = voters
        self.log = log
        self._rng = rng or random.Random()
        self._clock = clock
        self._on_fatal = on_fatal
        self.node: RaftNode | None = None
        self._peers: dict[int, _Peer] = {}
        self._inbound: dict[tuple[int, int], asyncio.Future] = {}
        self._tokens = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        self._listeners: list[RaftListener] = []
        self._committed = 0  # the offset up to which every listener has been handed committed batches
        self._leader_seen: tuple[int | None, int] | None = None
        self._snapshot_fetch: _SnapshotFetch | None = None
        self._held_fetch: tuple[int, int, m.FetchRequest] | None = None
        self._loaded_snapshot: tuple[m.SnapshotId, list[MetadataRecord]] | None = None
        self._handing_over = False
        self._stopped = False
        self._snapshot_write: asyncio.Future | None = None  # a snapshot being written on its own thread
        # The batches this node appended as leader, not yet handed over: base offset -> (last offset, epoch,
        # records). Committed, they go to the listeners as they were given, not decoded again from the log (as
        # Kafka's leader hands its listener the batch it appended): on the active controller the codec's cost is
        # the encoding alone. The log's bytes are what the followers and the disk get, so nothing else changes.
        self._own_batches: dict[int, tuple[int, int, list[MetadataRecord]]] = {}
        # In a lab: the timeline's raft_state, vote and metadata_committed events (DESIGN §17), from this source: a
        # voter's as its controller's, an observer's (a KRaft broker following the metadata log) as its broker's.
        role = "controller" if config.node_id in voters else "broker"
        self._timeline_source = f"{role}:{config.node_id}" if timeline.enabled() else None
        self._state_seen: tuple | None = None
        self._hw_seen: int | None = None
        self.prefix = f"[RaftManager id={config.node_id}]"
        # Kafka 3.7's versions, or the later ones that carry the switched-on fixes' fields (wire.quorum_versions)
        self.versions = wire.quorum_versions(config.pre_vote, config.voter_directories is not None)

    # --- lifecycle ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """On the loop: read quorum-state and the latest snapshot, then let the node act."""
        stored = quorum_state.read_file(self.log.dir)
        snapshot = self.log.latest_snapshot
        if snapshot is not None:
            self._loaded_snapshot = (snapshot, self._read_snapshot(snapshot))
            self._committed = snapshot.end_offset
            logger.info("%s Starting from snapshot %s (%d records); the log continues from offset %d to %d",
                        self.prefix, snapshot, len(self._loaded_snapshot[1]), snapshot.end_offset,
                        self.log.end_offset)
        self.node = RaftNode(self.config, self.log, stored, self._rng, self._clock())
        if snapshot is not None:
            # What the snapshot holds was committed; the log after it is committed once the leader says so.
            self.node.high_watermark = snapshot.end_offset
        self._step(lambda now: self.node.poll(now))

    async def shutdown(self, grace_s: float = 0.5) -> None:
        """A leader resigns first (EndQuorumEpoch tells the voters at once), then the connections close."""
        if self.node is not None and not self._stopped:
            self._step(lambda now: self.node.resign(now))
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=grace_s)
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        for future in self._inbound.values():
            if not future.done():
                future.cancel()
        for peer in self._peers.values():
            peer.connection.close()
        if self._snapshot_write is not None and not self._snapshot_write.done():
            await asyncio.wait([self._snapshot_write])  # a snapshot half written would only be removed at the start
        self.log.flush()
        self.log.close()

    # --- RaftClient -----------------------------------------------------------------------------------------

    def register(self, listener: RaftListener) -> None:
        self._listeners.append(listener)
        leader, epoch = self.leader_and_epoch()
        listener.handle_leader_change(leader, epoch)
        start = 0
        if self._loaded_snapshot is not None:
            snapshot, records = self._loaded_snapshot
            listener.handle_load_snapshot(snapshot.end_offset, snapshot.epoch, records)
            start = snapshot.end_offset
        self._hand_over(start, self._committed, [listener])

    def schedule_append(self, epoch: int, records: list[MetadataRecord]) -> int:
        node = self._node()
        if node.epoch != epoch or node.leader_id != node.node_id:
            raise NotLeaderError(node.leader_id, node.epoch)
        frames = [encode_frame(*record) for record in records]
        base = self.log.end_offset
        self._step(lambda now: node.append(now, frames))
        if records and self.log.end_offset - base == len(records) and all(map(_is_decoded_form, records)):
            self._own_batches[base] = (self.log.end_offset - 1, epoch, list(records))
        return self.log.end_offset - 1

    def create_snapshot(self, end_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        """Encoded and written on a thread of its own, as Kafka's snapshot generator runs on one: at 100,000
        partitions that takes seconds, and the fetches this node answers (or sends) must not wait behind it — a
        follower not answered within its fetch timeout stands for election. The records are the caller's, taken at
        `end_offset`; only the finished file joins the log, on the loop. One at a time: asked while one is being
        written, this one is skipped (the snapshot policy asks again). Without a running loop: written at once."""
        node = self._node()
        hw = node.high_watermark or 0
        if end_offset > hw:
            raise ValueError(f"a snapshot ends at or below the high watermark {hw}, not at {end_offset}")
        snapshot = m.SnapshotId(end_offset, epoch)
        if not self.log.is_newer(snapshot):
            return
        now = self._clock()

        def write() -> int:
            data = build_snapshot([records], epoch=epoch, timestamp=now, last_contained_log_timestamp=now)
            self.log.store_snapshot_file(snapshot, data)
            return len(data)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.log.add_snapshot(snapshot, write())
            return
        if self._snapshot_write is not None and not self._snapshot_write.done():
            logger.info("%s Snapshot %s skipped: the previous one is still being written", self.prefix, snapshot)
            return
        self._snapshot_write = loop.run_in_executor(None, write)
        self._snapshot_write.add_done_callback(lambda future: self._snapshot_written(snapshot, future))

    def _snapshot_written(self, snapshot: m.SnapshotId, future: asyncio.Future) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:  # the disk failed under the metadata log: as a failed append, fatal
            logger.error("%s Writing snapshot %s failed: %s", self.prefix, snapshot, exc)
            self._stopped = True
            if self._on_fatal is not None:
                self._on_fatal(exc)
            return
        self.log.add_snapshot(snapshot, future.result())

    def leader_and_epoch(self) -> tuple[int | None, int]:
        node = self._node()
        return node.leader_id, node.epoch

    # --- requests from the other nodes -------------------------------------------------------------------------

    async def handle(self, source: int, message: m.Request) -> m.Response:
        """The answer to a quorum request from `source` (the candidate, leader or replica it names)."""
        node = self._node()
        cluster_id = getattr(message, "cluster_id", None)
        if cluster_id and self.config.cluster_id and cluster_id != self.config.cluster_id:
            logger.warning("%s Refused %s from node %d of cluster %s (this is cluster %s)", self.prefix,
                           type(message).__name__, source, cluster_id, self.config.cluster_id)
            return _error_response(message, INCONSISTENT_CLUSTER_ID)
        if isinstance(message, m.DescribeQuorumRequest):
            return node.describe_quorum(self._clock())
        if isinstance(message, m.FetchSnapshotRequest):
            return self._answer_fetch_snapshot(message)
        token = next(self._tokens)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._inbound[(source, token)] = future
        try:
            self._step(lambda now: node.handle(now, source, token, message))
            return await asyncio.wait_for(future, self.config.request_timeout_ms / 1000)
        finally:
            self._inbound.pop((source, token), None)

    def _answer_fetch_snapshot(self, request: m.FetchSnapshotRequest) -> m.FetchSnapshotResponse:
        node = self._node()
        leader = m.LeaderIdAndEpoch(node.leader_id if node.leader_id is not None else -1, node.epoch)
        if request.current_leader_epoch != node.epoch or node.leader_id != node.node_id:
            code = (m.FENCED_LEADER_EPOCH if request.current_leader_epoch < node.epoch
                    else m.UNKNOWN_LEADER_EPOCH if request.current_leader_epoch > node.epoch
                    else m.NOT_LEADER_OR_FOLLOWER)
            return m.FetchSnapshotResponse(code, request.snapshot_id, leader, -1, -1, b"")
        if request.snapshot_id not in self.log.snapshots:
            return m.FetchSnapshotResponse(int(ErrorCode.SNAPSHOT_NOT_FOUND), request.snapshot_id, leader, -1, -1,
                                           b"")
        size = self.log.snapshot_size(request.snapshot_id)
        if not 0 <= request.position <= size:
            return m.FetchSnapshotResponse(int(ErrorCode.POSITION_OUT_OF_RANGE), request.snapshot_id, leader, size,
                                           request.position, b"")
        chunk = self.log.read_snapshot_bytes(request.snapshot_id, request.position,
                                             min(request.max_bytes, SNAPSHOT_CHUNK_BYTES))
        return m.FetchSnapshotResponse(m.NONE, request.snapshot_id, leader, size, request.position, chunk)

    # --- performing a step's effects -----------------------------------------------------------------------

    def _node(self) -> RaftNode:
        if self.node is None:
            raise RuntimeError("the Raft manager is not started")
        return self.node

    def _step(self, step: Callable[[int], list[Effect]]) -> None:
        if self._stopped:
            return
        started = time.monotonic()
        try:
            effects = step(self._clock())
            self._perform(effects)
            self._after_step()
            took_ms = (time.monotonic() - started) * 1000
            if took_ms > SLOW_STEP_MS:
                logger.warning("%s A step took %.0f ms (%d effects): timers wait behind it", self.prefix, took_ms,
                               len(effects))
        except RaftStateError as exc:
            logger.error("%s %s", self.prefix, exc)
            self._stopped = True
            if self._on_fatal is not None:
                self._on_fatal(exc)
            else:
                raise

    def _perform(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, PersistQuorumState):
                quorum_state.write_file(self.log.dir, effect.state)
            elif isinstance(effect, FlushLog):
                self.log.flush(effect.end_offset)
            elif isinstance(effect, Send):
                if self._timeline_source is not None and isinstance(effect.message, m.VoteResponse):
                    timeline.emit(self._timeline_source, "vote", **{
                        "from": self.config.node_id, "to": effect.destination,
                        "epoch": effect.message.leader_epoch, "granted": effect.message.vote_granted})
                if isinstance(effect.message, m.Response):
                    future = self._inbound.get((effect.destination, effect.correlation_id))
                    if future is not None and not future.done():
                        future.set_result(effect.message)
                else:
                    self._send(effect.destination, effect.correlation_id, effect.message)
            elif isinstance(effect, Timer):
                self._arm(effect.deadline_ms)

    def _arm(self, deadline_ms: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0, deadline_ms - self._clock()) / 1000
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        node = self._node()
        self._step(lambda now: node.poll(now))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _peer(self, destination: int) -> _Peer:
        peer = self._peers.get(destination)
        if peer is None:
            host, port = self.voters[destination]
            peer = _Peer(AsyncBrokerConnection(host, port, f"raft-client-{self.config.node_id}",
                                               self.config.request_timeout_ms / 1000))
            self._peers[destination] = peer
        return peer

    def _send(self, destination: int, correlation_id: int, request: m.Request) -> None:
        if isinstance(request, m.FetchRequest) and self._snapshot_fetch is not None:
            # Held until the snapshot is loaded, then sent from the snapshot's end (the node waits for its answer).
            self._held_fetch = (destination, correlation_id, request)
            return
        if destination not in self.voters:
            return  # an observer's address is not known: it fetches from us, we never call it
        self._spawn(self._exchange(destination, correlation_id, request))

    async def _call(self, destination: int, request: m.Request) -> m.Response | None:
        api_key = wire.api_key_of(request)
        version = self.versions[api_key]
        peer = self._peer(destination)
        async with peer.lock:
            try:
                body = await peer.connection.send(api_key, version, wire.to_body(request, version))
            except (ConnectionError, OSError, ProtocolError) as exc:
                logger.debug("%s %s to node %d failed: %s", self.prefix, type(request).__name__, destination, exc)
                return None
        return wire.from_body(api_key, version, False, body)

    async def _exchange(self, destination: int, correlation_id: int, request: m.Request) -> None:
        # The lab's hold_fetchers cuts a voter off from its leader; a broker's metadata fetches (an observer's) go on:
        # there the point holds the replica fetchers only, as in ZooKeeper mode (KAFKA-1211 in a KRaft lab), and
        # hold_metadata is the one that holds them (a broker that hears nothing of what the controller decides).
        if isinstance(request, m.FetchRequest) and self.config.node_id in self.voters:
            while FAULTS.fetchers_held and not self._stopped:
                await asyncio.sleep(0.05)
        elif isinstance(request, m.FetchRequest) and FAULTS.metadata_held:
            await FAULTS.wait_while_metadata_held(lambda: self._stopped)
        response = await self._call(destination, request)
        if response is None or self._stopped:
            return
        fault = FAULTS.take_request_fault(_FAULT_NAMES[type(response)]) if FAULTS.requests else None
        if fault is not None:  # the lab's drop_next_*_response / delay_next_*_response
            if fault.ms is None:
                logger.info("%s %s from node %d dropped (lab fault point)", self.prefix, type(response).__name__,
                            destination)
                return
            await asyncio.sleep(fault.ms / 1000)
            if self._stopped:
                return
        if isinstance(response, m.FetchResponse) and response.snapshot_id is not None and response.error_code == 0:
            self._begin_snapshot_fetch(destination, response)
        node = self._node()
        self._step(lambda now: node.handle(now, destination, correlation_id, response))

    # --- FetchSnapshot, the follower's side ------------------------------------------------------------------

    def _begin_snapshot_fetch(self, leader: int, response: m.FetchResponse) -> None:
        if self._snapshot_fetch is not None:
            return
        snapshot = response.snapshot_id
        logger.info("%s Fetch offset %d is below leader %d's log start %d: fetching its snapshot %s", self.prefix,
                    self.log.end_offset, leader, response.log_start_offset, snapshot)
        self._snapshot_fetch = _SnapshotFetch(leader, response.current_leader.leader_epoch, snapshot)
        self._spawn(self._fetch_snapshot())

    async def _fetch_snapshot(self) -> None:
        fetch = self._snapshot_fetch
        try:
            while not self._stopped:
                request = m.FetchSnapshotRequest(self.config.cluster_id, self.config.node_id, SNAPSHOT_CHUNK_BYTES,
                                                 fetch.epoch, fetch.snapshot, len(fetch.data))
                response = await self._call(fetch.leader, request)
                node = self._node()
                if (response is None or response.error_code != m.NONE or node.epoch != fetch.epoch
                        or not isinstance(node.state, Follower)):
                    logger.info("%s Snapshot fetch from %d given up (%s)", self.prefix, fetch.leader,
                                "no answer" if response is None else f"error {response.error_code}")
                    return
                fetch.data += response.unaligned_records
                if len(fetch.data) >= response.size:
                    self._install_snapshot(fetch)
                    return
        finally:
            self._snapshot_fetch = None
            held, self._held_fetch = self._held_fetch, None
            if held is not None and not self._stopped:
                destination, correlation_id, request = held
                request = dataclasses.replace(request, fetch_offset=self.log.end_offset,
                                              last_fetched_epoch=self.log.last_fetched_epoch,
                                              log_start_offset=self.log.start_offset)
                self._spawn(self._exchange(destination, correlation_id, request))

    def _install_snapshot(self, fetch: _SnapshotFetch) -> None:
        data = bytes(fetch.data)
        _, records = read_snapshot(data)  # refuse a corrupt snapshot before it replaces anything
        self.log.install_snapshot(fetch.snapshot, data)
        node = self._node()
        node.high_watermark = max(node.high_watermark or 0, fetch.snapshot.end_offset)
        self._loaded_snapshot = (fetch.snapshot, records)
        self._committed = fetch.snapshot.end_offset
        logger.info("%s Loaded snapshot %s from leader %d (%d bytes, %d records)", self.prefix, fetch.snapshot,
                    fetch.leader, len(data), len(records))
        for listener in self._listeners:
            listener.handle_load_snapshot(fetch.snapshot.end_offset, fetch.snapshot.epoch, records)

    # --- what the listeners are told ------------------------------------------------------------------------

    def _after_step(self) -> None:
        node = self._node()
        if self._timeline_source is not None:
            self._report(node)
        seen = (node.leader_id, node.epoch)
        if seen != self._leader_seen:
            self._leader_seen = seen
            self._own_batches.clear()  # what is left of them is read from the log, whoever's it now is
            for listener in self._listeners:
                listener.handle_leader_change(*seen)
        self._schedule_hand_over()

    def _report(self, node: RaftNode) -> None:
        state = (node.state.name, node.epoch, node.leader_id, node.voted_id)
        if state != self._state_seen:
            self._state_seen = state
            timeline.emit(self._timeline_source, "raft_state", node=self.config.node_id, state=state[0],
                          epoch=state[1], leader=state[2], voted_for=state[3])
        hw = node.high_watermark
        if hw is not None and node.leader_id == node.node_id and hw != self._hw_seen:
            self._hw_seen = hw
            timeline.emit(self._timeline_source, "metadata_committed", offset=hw, epoch=node.epoch)

    def _schedule_hand_over(self) -> None:
        hw = self._node().high_watermark
        if hw is not None and hw > self._committed and not self._handing_over and not self._stopped:
            self._handing_over = True
            asyncio.get_running_loop().call_soon(self._hand_over_some)

    def _hand_over_some(self) -> None:
        """Hands the listeners the next committed records, HAND_OVER_BYTES of them at most, then yields the loop
        (a high watermark that jumped far would otherwise hold the node's timers behind the decoding)."""
        self._handing_over = False
        hw = self._node().high_watermark
        if self._stopped or hw is None or hw <= self._committed:
            return
        self._committed = self._hand_over(self._committed, hw, self._listeners, HAND_OVER_BYTES)
        self._schedule_hand_over()

    def _hand_over(self, start: int, end: int, listeners: list[RaftListener], max_bytes: int | None = None) -> int:
        """Committed data batches in [start, end) to `listeners`, each as the log holds it (the leader's as they
        were appended; a follower's as one Fetch brought them, whole appended batches one after another); with
        `max_bytes`, about that much of the log only. Returns the offset reached."""
        if not listeners:
            self._own_batches.clear()
            return end
        offset = max(start, self.log.start_offset)
        while offset < end:
            own = self._own_batches.get(offset)
            if own is not None and own[0] < end and self._appended_here(offset, own):
                del self._own_batches[offset]
                last, epoch, records = own
                for listener in listeners:
                    listener.handle_commit(offset, last, epoch, records)
                offset = last + 1
                if max_bytes is not None:
                    break
                continue
            batches = self.log.read_batches(offset, max_bytes or HAND_OVER_BYTES)
            for batch in batches:
                entries = [e for e in batch if e.offset < end]
                if not entries:
                    return offset
                for run in _data_runs(entries):
                    records = self._records_of(run)
                    for listener in listeners:
                        listener.handle_commit(run[0].offset, run[-1].offset, run[0].epoch, records)
                offset = entries[-1].offset + 1
            if not batches or max_bytes is not None:
                break
        for base in [b for b in self._own_batches if b < offset]:  # passed without them (read from the log)
            del self._own_batches[base]
        return offset

    def _records_of(self, run: list) -> list[MetadataRecord]:
        """A run of entries read from the log as records: where the run holds a whole batch this node appended,
        that batch's records as they were appended; the rest decoded from the log's bytes."""
        out: list[MetadataRecord] = []
        i = 0
        while i < len(run):
            entry = run[i]
            own = self._own_batches.get(entry.offset)
            j = i if own is None else i + own[0] - entry.offset
            if own is not None and own[1] == entry.epoch and j < len(run) and run[j].offset == own[0]:
                del self._own_batches[entry.offset]
                out += own[2]
                i = j + 1
            else:
                out.append(decode_frame(entry.record))
                i += 1
        return out

    def _appended_here(self, base: int, own: tuple[int, int, list[MetadataRecord]]) -> bool:
        """The log still holds the batch this node appended at `base`. Only a later epoch's leader can replace
        a leader's entries, and the batches are forgotten as soon as this node learns of any other epoch or
        leader (`_after_step`), before it can truncate; what is checked here is that they are still in the log."""
        return self.log.start_offset <= base and own[0] < self.log.end_offset and own[1] == self._node().epoch

    def _read_snapshot(self, snapshot: m.SnapshotId) -> list[MetadataRecord]:
        _, records = read_snapshot(self.log.read_snapshot_bytes(snapshot))
        return records


#: Each quorum answer's name in the lab's fault points (zkbroker/fault_points.py RESPONSES).
_FAULT_NAMES = {m.VoteResponse: "vote_response", m.BeginQuorumEpochResponse: "begin_quorum_epoch_response",
                m.FetchResponse: "fetch_response", m.EndQuorumEpochResponse: "end_quorum_epoch_response",
                m.FetchSnapshotResponse: "fetch_snapshot_response"}


def _error_response(request: m.Request, code: int) -> m.Response:
    unknown = m.LeaderIdAndEpoch(-1, -1)
    if isinstance(request, m.VoteRequest):
        return m.VoteResponse(code, -1, -1, False)
    if isinstance(request, m.BeginQuorumEpochRequest):
        return m.BeginQuorumEpochResponse(code, -1, -1)
    if isinstance(request, m.EndQuorumEpochRequest):
        return m.EndQuorumEpochResponse(code, -1, -1)
    if isinstance(request, m.FetchRequest):
        return m.FetchResponse(code, -1, -1, unknown)
    if isinstance(request, m.FetchSnapshotRequest):
        return m.FetchSnapshotResponse(code, request.snapshot_id, unknown, -1, -1, b"")
    return m.DescribeQuorumResponse(code, -1, -1, -1, (), ())


#: Each metadata record's struct type, as decode_frame makes it.
_STRUCTS = {key: schema.struct for key, schema in RECORD_SCHEMAS.items()}


def _is_decoded_form(item: MetadataRecord) -> bool:
    """A record in the form a listener would get from the log (its schema's struct, not a dict the codec also
    encodes): only then may the listener be handed the record appended instead of the log's."""
    return type(item[2]) is _STRUCTS.get((item[0], item[1]))


def _data_runs(entries: list) -> list[list]:
    """The data entries of a read, in runs of one epoch between control records: a read of a batch larger than
    the bytes asked for comes back as the entries that fit, whatever batches they were in (a LeaderChange among
    them), and a listener is handed data records only."""
    runs: list[list] = []
    for entry in entries:
        if entry.is_control:
            runs.append([])
        elif runs and runs[-1] and runs[-1][-1].epoch == entry.epoch:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    return [run for run in runs if run]
