"""ReplicaManager: the partitions this broker holds, as the controller assigns them (Kafka's ReplicaManager).

The controller drives it with LeaderAndIsr (become leader or follower) and StopReplica (close, and delete
with `delete_partitions`); clients append to leaders and read from them. Fencing, as 0.8.2:
- a request whose controller epoch is older than the newest we have seen is refused whole
  (STALE_CONTROLLER_EPOCH): it comes from a controller that has been replaced;
- a LeaderAndIsr entry applies only when its leader epoch is strictly newer than ours, and only if this
  broker is among the partition's replicas.

Everything here runs on the broker's asyncio loop; ZooKeeper is read through the bridge, never blocking.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from zkbroker import timeline
from zkbroker.config import KafkaConfig
from zkbroker.fault_points import FAULTS
from zkbroker.gc_pause import gc_paused
from zkbroker.log.checkpoint import OffsetCheckpoint
from zkbroker.log.leader_epoch import UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from zkbroker.log.log import OffsetOutOfRangeError
from zkbroker.log.log_config import LogConfig, topic_log_config
from zkbroker.log.manager import LogManager
from zkbroker.logconfig import per_partition_level
from zkbroker.protocol.errors import BrokerResponseError, ErrorCode, ProtocolError
from zkbroker.protocol.fetch_response import FileRange
from zkbroker.protocol.message_set import AppendInfo
from zkbroker.server.bridge import LoopBridge
from zkbroker.server.partition import Partition
from zkbroker.server.replica_fetcher import ReplicaFetcherManager, SourceBroker
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import EntityConfig, LeaderIsrState

log = logging.getLogger("zkbroker.server.ReplicaManager")
state_change_log = logging.getLogger("state.change.logger")

# 0.8.2's StaleLeaderEpochCode. Kafka 0.9 reused 13 for NETWORK_EXCEPTION; only our own controller reads
# LeaderAndIsr responses, so we keep 0.8.2's meaning there.
STALE_LEADER_EPOCH = 13

HW_CHECKPOINT_FILE = "replication-offset-checkpoint"
# A LeaderAndIsr request with more partition states than this goes to the lab's timeline as one summary event
# (a controller failover with thousands of partitions would otherwise drown every other line).
TIMELINE_STATES_PER_REQUEST = 64



class AppendResult:
    __slots__ = ("error_code", "base_offset", "info", "partition")

    def __init__(self, error_code: int, base_offset: int = -1, info: AppendInfo | None = None,
                 partition: Partition | None = None) -> None:
        self.error_code = error_code
        self.base_offset = base_offset
        self.info = info
        self.partition = partition


class ReadResult:
    __slots__ = ("error_code", "high_watermark", "records", "partition")

    def __init__(self, error_code: int, high_watermark: int = -1, records: FileRange | None = None,
                 partition: Partition | None = None) -> None:
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.records = records
        self.partition = partition


class ReplicaManager:
    def __init__(self, config: KafkaConfig, log_manager: LogManager, zk: ZkClient | None, bridge: LoopBridge, *,
                 topic_overrides: Callable[[str], dict[str, str]] | None = None,
                 alter_partition: Callable[[Partition, tuple[int, ...]], Awaitable[int | None]] | None = None
                 ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.zk = zk
        self.bridge = bridge
        # KRaft mode (server/broker_server.py): topic overrides come from the metadata image, and an ISR change
        # goes to the controller as AlterPartition (its answer: the new partition epoch, or None if refused)
        # instead of a conditional write of the `state` znode. None: ZooKeeper mode.
        self.topic_overrides = topic_overrides
        self.alter_partition = alter_partition
        self.controller_epoch = 0
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetcher_manager = ReplicaFetcherManager(config)
        self.leader_epoch_mode = config["replication.truncation"] == "leader-epoch"
        self._hw_checkpoints = {d: OffsetCheckpoint(os.path.join(d, HW_CHECKPOINT_FILE))
                                for d in log_manager.log_dirs}
        self._checkpointed_hws: dict[TopicPartition, int] = {}
        for checkpoint in self._hw_checkpoints.values():
            self._checkpointed_hws.update(checkpoint.read())
        self._hw_write_lock = threading.Lock()
        self._hw_snapshots = 0  # HW snapshots taken, and the last one written: see high_watermarks_writer
        self._hw_snapshot_written = 0
        self.timeline_source = f"broker:{self.broker_id}" if timeline.enabled() else None  # None outside a lab

    # ---- controller requests -------------------------------------------------------------------------------

    def _stale_controller(self, kind: str, request: Any) -> bool:
        if request.controller_epoch < self.controller_epoch:
            state_change_log.warning(
                "Broker %d ignoring %s request from controller %d since its controller epoch %d is old. "
                "Latest known controller epoch is %d", self.broker_id, kind, request.controller_id,
                request.controller_epoch, self.controller_epoch)
            return True
        self.controller_epoch = request.controller_epoch
        return False

    async def become_leader_or_follower(self, request: Any) -> tuple[int, list[tuple[str, int, int]]]:
        """Apply a LeaderAndIsr request; returns (error code, per-partition error codes)."""
        if self._stale_controller("LeaderAndIsr", request):
            return ErrorCode.STALE_CONTROLLER_EPOCH, []
        started = time.monotonic()
        # The configs of the topics we open partitions of, read once per topic and all at once (again for
        # any topic that another request made new meanwhile); then the request applies in one step of the
        # event loop, without yielding.
        configs: dict[str, LogConfig] = {}
        while missing := {s.topic for s in request.partition_states
                          if (s.topic, s.partition) not in self.partitions and self.broker_id in s.replicas
                          and s.topic not in configs}:
            configs.update(await self._topic_configs(missing))
            # A newer controller's request may have been applied while we waited for ZooKeeper.
            if self._stale_controller("LeaderAndIsr", request):
                return ErrorCode.STALE_CONTROLLER_EPOCH, []
        with gc_paused():
            results, unsynced = self._apply_leader_and_isr(request, configs)
        if unsynced:  # the leader-epoch checkpoints this request rewrote, fsynced off the loop (leader_epoch.py);
            # nothing waits for them: a KRaft broker that awaited 3,333 fsyncs here at load reported its image
            # applied, and was unfenced, about 10 s later
            asyncio.get_running_loop().run_in_executor(None, _sync_epoch_checkpoints, unsynced)
        if self.timeline_source is not None:
            self._report_leader_and_isr(request, results)
        log.info("Broker %d handled LeaderAndIsr from controller %d epoch %d for %d partitions in %.0f ms",
                 self.broker_id, request.controller_id, request.controller_epoch, len(results),
                 (time.monotonic() - started) * 1000.0)
        return ErrorCode.NONE, results

    def _apply_leader_and_isr(self, request: Any, configs: dict[str, LogConfig]
                              ) -> tuple[list[tuple[str, int, int]], list[LeaderEpochCache]]:
        """The request applied; its per-partition results, and the epoch caches it wrote without an fsync."""
        deferred: list[LeaderEpochCache] = []
        try:
            return self._apply_partition_states(request, configs, deferred), [c for c in deferred if c.unsynced]
        finally:
            for cache in deferred:  # writes from appends and truncations later fsync at once, as before
                cache.defer_sync = False

    def _apply_partition_states(self, request: Any, configs: dict[str, LogConfig],
                                deferred: list[LeaderEpochCache]) -> list[tuple[str, int, int]]:
        few = per_partition_level(len(request.partition_states)) == logging.INFO
        info, warning = (logging.INFO, logging.WARNING) if few else (logging.DEBUG, logging.DEBUG)
        counts = {"stale": 0, "not a replica": 0, "leader": 0, "follower": 0}
        results = []
        for state in request.partition_states:
            tp = TopicPartition(state.topic, state.partition)
            current = self.partitions.get(tp)
            if current is not None and state.leader_epoch <= current.leader_epoch:
                state_change_log.log(
                    warning, "Broker %d ignoring LeaderAndIsr request from controller %d epoch %d for partition "
                    "[%s,%d] since its associated leader epoch %d is old. Current leader epoch is %d", self.broker_id,
                    request.controller_id, request.controller_epoch, *tp, state.leader_epoch, current.leader_epoch)
                results.append((*tp, STALE_LEADER_EPOCH))
                counts["stale"] += 1
                continue
            if self.broker_id not in state.replicas:
                state_change_log.log(
                    warning, "Broker %d ignoring LeaderAndIsr request from controller %d epoch %d for partition "
                    "[%s,%d] as itself is not in assigned replica list %s", self.broker_id, request.controller_id,
                    request.controller_epoch, *tp, ",".join(map(str, state.replicas)))
                results.append((*tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                counts["not a replica"] += 1
                continue
            partition = current
            if partition is None:
                partition = self._open_partition(tp, configs[tp.topic], defer_sync=True)
            if partition.epoch_cache is not None:
                partition.epoch_cache.defer_sync = True
                deferred.append(partition.epoch_cache)
            if state.leader == self.broker_id:
                self.fetcher_manager.remove_partition(tp)
                partition.make_leader(state.leader_epoch, tuple(state.isr), tuple(state.replicas),
                                      state.zk_version, state.controller_epoch)
                role = "leader"
                counts["leader"] += 1
            else:
                source = next((b for b in request.live_leaders if b.broker_id == state.leader), None)
                if source is None and state.leader < 0:
                    # KRaft mode's metadata names partitions without a leader (their whole ISR fenced or shut
                    # down): we stop leading or fetching, a follower of nobody until the controller elects one.
                    self.fetcher_manager.remove_partition(tp)
                    partition.make_follower(state.leader, state.leader_epoch, tuple(state.isr),
                                            tuple(state.replicas), state.zk_version, state.controller_epoch)
                    role = "follower without a leader"
                    counts["follower"] += 1
                elif source is None:
                    # 0.8.2's makeFollowers: a leader the request does not list as live is an error for this
                    # partition, which is left as it was (its replica created), so that the next LeaderAndIsr
                    # naming that leader, once live, still starts the fetcher.
                    state_change_log.error(
                        "Broker %d received LeaderAndIsr request from controller %d epoch %d for partition [%s,%d] "
                        "but cannot become follower since the new leader %d is unavailable", self.broker_id,
                        request.controller_id, request.controller_epoch, *tp, state.leader)
                    results.append((*tp, ErrorCode.NONE))
                    continue
                else:
                    leader_changed = current is None or partition.leader_id != state.leader
                    partition.make_follower(state.leader, state.leader_epoch, tuple(state.isr),
                                            tuple(state.replicas), state.zk_version, state.controller_epoch)
                    if leader_changed:
                        self._follow(partition, source)
                    role = f"follower of broker {state.leader}"
                    counts["follower"] += 1
            state_change_log.log(
                info, "Broker %d became %s for partition [%s,%d] with leader epoch %d, ISR %s, per LeaderAndIsr from "
                "controller %d epoch %d", self.broker_id, role, *tp, state.leader_epoch,
                ",".join(map(str, state.isr)), request.controller_id, request.controller_epoch)
            results.append((*tp, ErrorCode.NONE))
        if not few:
            if counts["stale"] or counts["not a replica"]:
                state_change_log.warning(
                    "Broker %d ignoring LeaderAndIsr request from controller %d epoch %d for %d partitions since "
                    "their leader epochs are not newer than ours, and for %d as it is not among their replicas",
                    self.broker_id, request.controller_id, request.controller_epoch, counts["stale"],
                    counts["not a replica"])
            state_change_log.info("Broker %d became leader for %d partitions and follower for %d per LeaderAndIsr "
                                  "from controller %d epoch %d", self.broker_id, counts["leader"], counts["follower"],
                                  request.controller_id, request.controller_epoch)
        return results

    def _report_leader_and_isr(self, request: Any, results: list[tuple[str, int, int]]) -> None:
        """The lab's timeline: each partition state this request applied (one summary for a large request)."""
        applied = {(t, p) for t, p, error in results if error == ErrorCode.NONE}
        states = [s for s in request.partition_states if (s.topic, s.partition) in applied]
        common = {"broker": self.broker_id, "controller": request.controller_id,
                  "controller_epoch": request.controller_epoch}
        if len(states) > TIMELINE_STATES_PER_REQUEST:
            timeline.emit(self.timeline_source, "leader_and_isr_applied", **common, count=len(states),
                          leading=sum(1 for s in states if s.leader == self.broker_id),
                          ignored=len(results) - len(states))
            return
        for s in states:
            timeline.emit(self.timeline_source, "leader_and_isr_applied", topic=s.topic, partition=s.partition,
                          leader=s.leader, leader_epoch=s.leader_epoch, isr=list(s.isr), zk_version=s.zk_version,
                          **common)

    def _follow(self, partition: Partition, source) -> None:
        """makeFollowers, 0.8.2's way: stop fetching, truncate to our HW, fetch from the new leader (`source`,
        one of the request's live leaders)."""
        tp = partition.topic_partition
        self.fetcher_manager.remove_partition(tp)
        if partition.epoch_cache is not None:
            partition.needs_epoch_truncation = True  # the fetcher asks the leader first (KIP-101)
        elif partition.log_end_offset > partition.high_watermark:
            log.info("Truncating log [%s,%d] to offset %d (its high watermark) on becoming a follower of "
                     "broker %d", *tp, partition.high_watermark, source.broker_id)
            partition.truncate_to(partition.high_watermark, "high-watermark truncation on becoming a follower")
        self.fetcher_manager.add_partition(partition, SourceBroker(source.broker_id, source.host, source.port))

    def _open_partition(self, tp: TopicPartition, config: LogConfig, defer_sync: bool = False) -> Partition:
        log_ = self.log_manager.get_or_create_log(*tp, config)
        p = Partition(*tp, self.broker_id, log_, timeline_source=self.timeline_source)
        if self.leader_epoch_mode:
            p.epoch_cache = LeaderEpochCache(log_.dir, defer_sync=defer_sync)
            p.epoch_cache.truncate_from_end(log_.log_end_offset)  # recovery may have cut the log's tail
            for epoch, start_offset in log_.recovered_leader_epochs:  # and read the epochs of the batches it kept
                if epoch >= 0:
                    p.epoch_cache.assign(epoch, start_offset)
        # 0.8.2: the HW restarts from the checkpoint, never beyond the log end.
        p.high_watermark = min(self._checkpointed_hws.get(tp, 0), log_.log_end_offset)
        p.hw_reported = p.high_watermark
        self.partitions[tp] = p
        return p

    def checkpoint_high_watermarks(self) -> None:
        """Write each log directory's replication-offset-checkpoint now (at shutdown; every
        replica.high.watermark.checkpoint.interval.ms the broker runs `high_watermarks_writer` off the loop)."""
        self.high_watermarks_writer()()

    def high_watermarks_writer(self) -> Callable[[], None]:
        """Snapshot every partition's HW now, on the loop, and return the write of that snapshot, for any thread:
        a checkpoint write fsyncs the file and its directory, and on the loop it stalled every connection for as
        long as the disk took. A snapshot older than one already written is dropped, so a periodic write that
        finishes late cannot undo the one at shutdown."""
        self._hw_snapshots += 1
        snapshot = self._hw_snapshots
        by_dir: dict[str, dict[TopicPartition, int]] = {d: {} for d in self._hw_checkpoints}
        for tp, p in list(self.partitions.items()):
            by_dir.setdefault(os.path.dirname(p.log.dir), {})[tp] = p.high_watermark

        def write() -> None:
            with self._hw_write_lock:
                if snapshot < self._hw_snapshot_written:
                    return
                for d, hws in by_dir.items():
                    checkpoint = self._hw_checkpoints.get(d)
                    if checkpoint is not None:
                        checkpoint.write(hws)
                self._hw_snapshot_written = snapshot
        return write

    async def _topic_configs(self, topics: set[str]) -> dict[str, LogConfig]:
        """Each topic's settings (with its `/config/topics/<t>` overrides), the reads pipelined."""
        ordered = sorted(topics)
        znodes = await asyncio.gather(*(self._topic_config_znode(t) for t in ordered))
        return {t: topic_log_config(self.config, t, znode) for t, znode in zip(ordered, znodes)}

    async def _topic_config_znode(self, topic: str) -> bytes | None:
        if self.topic_overrides is not None:
            overrides = self.topic_overrides(topic)
            return EntityConfig(overrides).encode() if overrides else None
        try:
            data, _ = await self.bridge.wait_for(self.zk.kazoo.get_async(paths.topic_config_path(topic)))
        except NoNodeError:
            return None
        return data

    def stop_replicas(self, request: Any) -> tuple[int, list[tuple[str, int, int]]]:
        """Apply a StopReplica request: forget the partitions; delete their logs when asked to."""
        if self._stale_controller("StopReplica", request):
            return ErrorCode.STALE_CONTROLLER_EPOCH, []
        level = per_partition_level(len(request.partitions))
        with gc_paused():
            results = [self._stop_replica(entry.topic, entry.partition, request, level) for entry in request.partitions]
        if level != logging.INFO:
            state_change_log.info("Broker %d stopped %d replicas%s per StopReplica from controller %d epoch %d",
                                  self.broker_id, len(results), " and deleted their logs" if request.delete_partitions
                                  else "", request.controller_id, request.controller_epoch)
        return ErrorCode.NONE, results

    def _stop_replica(self, topic: str, partition_id: int, request: Any, level: int) -> tuple[str, int, int]:
        tp = TopicPartition(topic, partition_id)
        self.fetcher_manager.remove_partition(tp)
        # 0.8.2 forgets the partition only when deleting it; a stopped replica keeps its HW, so the checkpoint at
        # shutdown still holds it.
        if request.delete_partitions:
            partition = self.partitions.pop(tp, None)
            if partition is not None:
                partition.forget()
            self.log_manager.delete_log(*tp)
        elif (partition := self.partitions.get(tp)) is not None:
            partition.wake_waiters()
        state_change_log.log(level, "Broker %d stopped replica [%s,%d]%s per StopReplica from controller %d epoch %d",
                             self.broker_id, *tp, " and deleted its log" if request.delete_partitions else "",
                             request.controller_id, request.controller_epoch)
        return (*tp, ErrorCode.NONE)

    # ---- client requests ----------------------------------------------------------------------------------

    def leader_partition(self, topic: str, partition: int) -> tuple[int, Partition | None]:
        p = self.partitions.get((topic, partition))
        if p is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        if not p.is_leader:
            return ErrorCode.NOT_LEADER_FOR_PARTITION, None
        return ErrorCode.NONE, p

    def append_to_leader(self, topic: str, partition: int, records: Any, acks: int = 1) -> AppendResult:
        error, p = self.leader_partition(topic, partition)
        if p is None:
            return AppendResult(error)
        if records is None:
            return AppendResult(ErrorCode.NONE, p.log_end_offset, None, p)
        try:
            info = p.append_messages_to_leader(records, acks)
        except ProtocolError as e:
            log.warning("Rejected a message set for [%s,%d]: %s", topic, partition, e)
            return AppendResult(e.error_code, partition=p)
        except BrokerResponseError as e:
            log.warning("Rejected a message set for [%s,%d]: %s", topic, partition, e)
            return AppendResult(e.errno, partition=p)
        return AppendResult(ErrorCode.NONE, info.first_offset, info, p)

    async def append_and_wait(self, topic: str, partition: int, records: bytes, required_acks: int,
                              timeout_ms: int) -> int:
        """Append as leader and, with acks=-1, wait until the ISR has the records (the broker's own writes, such
        as the group coordinator's to `__consumer_offsets`; Kafka's replicaManager.appendMessages with a
        callback). The error code: NONE, the append's, or REQUEST_TIMED_OUT after `timeout_ms`."""
        result = self.append_to_leader(topic, partition, records, required_acks)
        if result.error_code != ErrorCode.NONE or required_acks != -1 or result.info is None:
            return result.error_code
        p, required_offset = result.partition, result.info.last_offset + 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000.0
        while (answer := p.check_enough_replicas_reach_offset(required_offset)) is None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            waiter = p.waiter(loop)
            await asyncio.wait([waiter], timeout=remaining)
            waiter.cancel()
        return answer

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, replica_id: int,
             read_committed: bool = False) -> ReadResult:
        """Read for a consumer (replica_id -1: capped at the HW, or the LSO when `read_committed`) or a follower
        (not capped)."""
        error, p = self.leader_partition(topic, partition)
        if p is None:
            return ReadResult(error)
        try:
            records = p.read(offset, max_bytes, from_follower=replica_id >= 0, read_committed=read_committed)
        except OffsetOutOfRangeError:
            return ReadResult(ErrorCode.OFFSET_OUT_OF_RANGE, p.high_watermark, None, p)
        return ReadResult(ErrorCode.NONE, p.high_watermark, records, p)

    def end_offset_for_epoch(self, topic: str, partition: int, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch on the leader: (error code, end offset of `epoch` in our log)."""
        error, p = self.leader_partition(topic, partition)
        if p is None:
            return error, UNDEFINED_EPOCH_OFFSET
        if p.epoch_cache is None:
            return ErrorCode.NONE, UNDEFINED_EPOCH_OFFSET
        return ErrorCode.NONE, p.epoch_cache.end_offset_for(epoch, p.log_end_offset)

    async def delete_records(self, offsets: dict[TopicPartition, int], timeout_ms: int) -> dict[TopicPartition,
                                                                                                   tuple[int, int]]:
        """DeleteRecords (KIP-107) on the leader: move each log start offset, then wait until every in-sync
        follower has learnt it from its next Fetch (Kafka's DelayedDeleteRecords), or the timeout. Each
        partition's (low watermark, error code); REQUEST_TIMED_OUT for those still waiting."""
        results: dict[TopicPartition, tuple[int, int]] = {}
        waiting: dict[TopicPartition, tuple[Partition, int]] = {}
        for tp, offset in offsets.items():
            error, p = self.leader_partition(*tp)
            if p is None:
                results[tp] = (-1, error)
                continue
            try:
                low = p.delete_records_on_leader(offset)
            except BrokerResponseError as e:
                log.info("Refused to delete records of [%s,%d] below offset %d: %s", *tp, offset, e)
                results[tp] = (-1, e.errno)
                continue
            required = p.log.log_start_offset
            log.info("Deleted records of [%s,%d] below offset %d (low watermark %d)", *tp, required, low)
            results[tp] = (low, ErrorCode.NONE)
            if low < required:
                waiting[tp] = (p, required)
        loop = asyncio.get_running_loop()
        if offsets:
            await loop.run_in_executor(None, self.log_manager.checkpoint_log_start_offsets)
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        while waiting:
            for tp, (p, required) in list(waiting.items()):
                if not p.is_leader:
                    results[tp] = (-1, ErrorCode.NOT_LEADER_FOR_PARTITION)
                elif (low := p.low_watermark) >= required:
                    results[tp] = (low, ErrorCode.NONE)
                else:
                    continue
                del waiting[tp]
            remaining = deadline - loop.time()
            if not waiting or remaining <= 0:
                break
            waiters = [p.waiter(loop) for p, _ in waiting.values()]
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            for future in waiters:
                future.cancel()
        for tp, (p, _) in waiting.items():
            results[tp] = (p.low_watermark, ErrorCode.REQUEST_TIMED_OUT)
        return results

    def record_follower_fetch(self, topic: str, partition: int, replica_id: int, fetch_offset: int,
                              log_start_offset: int = -1) -> None:
        """Once per follower Fetch request: its fetch offset is its LEO, which may advance the HW and let that
        follower (and only that one: another's LEO is only as fresh as its own last fetch) rejoin the ISR. From
        Fetch v5 it also names its log start offset, which moves the low watermark (DeleteRecords)."""
        p = self.partitions.get((topic, partition))
        if p is None or not p.is_leader or replica_id not in p.remote_leos:
            return
        if log_start_offset >= 0:
            p.record_follower_log_start(replica_id, log_start_offset)
        p.record_follower_fetch(replica_id, fetch_offset)
        if p.may_rejoin_isr(replica_id):
            self.bridge.loop.create_task(self._maybe_expand_isr(p, replica_id))

    # ---- the ISR, kept by the leader (0.8.2's Partition.maybeShrinkIsr / maybeExpandIsr) ------------------

    async def maybe_shrink_isr(self) -> None:
        """Drop out-of-sync followers from the ISR of every partition we lead, by replica.lag.rule (every
        replica.lag.check.interval.ms, by default replica.lag.time.max.ms)."""
        lag_ms = self.config["replica.lag.time.max.ms"]
        lag_messages = self.config["replica.lag.max.messages"]
        caught_up_time = self.config["replica.lag.rule"] == "caught-up-time"
        for p in list(self.partitions.values()):
            if not p.is_leader or p.isr_update_in_flight:
                continue
            out = p.out_of_sync_replicas(lag_ms, lag_messages, caught_up_time)
            if out:
                for replica, reason in sorted(out.items()):  # 0.8.2 said "Stuck replicas"/"Slow replicas" (debug)
                    log.info("Replica %d of partition [%s,%d] is out of sync: %s", replica, p.topic, p.partition,
                             reason)
                new_isr = tuple(r for r in p.isr if r not in out)
                log.info("Shrinking ISR for partition [%s,%d] from %s to %s", p.topic, p.partition,
                         ",".join(map(str, p.isr)), ",".join(map(str, new_isr)))
                if await self._update_isr(p, new_isr) and p.maybe_increment_high_watermark():
                    p.wake_waiters()  # fewer members to wait for: acks=-1 requests may complete

    async def _maybe_expand_isr(self, p: Partition, replica_id: int) -> None:
        """0.8.2's maybeExpandIsr(replicaId): the follower that fetched rejoins once it has reached the HW."""
        if not p.is_leader or p.isr_update_in_flight or not p.may_rejoin_isr(replica_id):
            return
        new_isr = tuple(p.isr) + (replica_id,)
        log.info("Expanding ISR for partition [%s,%d] from %s to %s", p.topic, p.partition,
                 ",".join(map(str, p.isr)), ",".join(map(str, new_isr)))
        await self._update_isr(p, new_isr)

    async def _update_isr(self, p: Partition, new_isr: tuple[int, ...]) -> bool:
        """Write the new ISR to the `state` znode conditionally on our cached zkVersion, keeping the leader
        epoch and the deciding controller's epoch; on a mismatch give up, as 0.8.2 did (it never re-reads)."""
        p.isr_update_in_flight = True
        if self.alter_partition is not None:
            try:
                return await self._alter_partition(p, new_isr)
            finally:
                p.isr_update_in_flight = False
        try:
            state = LeaderIsrState(self.broker_id, p.leader_epoch, p.controller_epoch, new_isr)
            path = paths.partition_state_path(p.topic, p.partition)
            version = p.zk_version
            FAULTS.at_zookeeper_write("isr_update", "before")
            try:
                stat = await self.bridge.wait_for(self.zk.kazoo.set_async(path, state.encode(), version))
                FAULTS.at_zookeeper_write("isr_update", "after")
            except BadVersionError:
                log.info("Cached zkVersion [%d] not equal to that in zookeeper, skip updating ISR", version)
                return False
            except Exception as e:
                log.warning("Could not update the ISR of [%s,%d]: %r", p.topic, p.partition, e)
                return False
            old_isr = p.isr
            adopted = p.apply_isr_change(new_isr, version, stat.version)
            if adopted and self.timeline_source is not None:
                timeline.emit(self.timeline_source, "isr_changed", topic=p.topic, partition=p.partition,
                              broker=self.broker_id, isr=list(new_isr), **{"from": list(old_isr)},
                              leader_epoch=p.leader_epoch, zk_version=stat.version)
            return adopted
        finally:
            p.isr_update_in_flight = False

    async def _alter_partition(self, p: Partition, new_isr: tuple[int, ...]) -> bool:
        """KRaft mode: the ISR change asked of the controller (AlterPartition, KIP-497), adopted once accepted."""
        version = p.zk_version
        old_isr = p.isr
        new_epoch = await self.alter_partition(p, new_isr)
        if new_epoch is None:
            return False
        adopted = p.apply_isr_change(new_isr, version, new_epoch)
        if adopted and self.timeline_source is not None:
            timeline.emit(self.timeline_source, "isr_changed", topic=p.topic, partition=p.partition,
                          broker=self.broker_id, isr=list(new_isr), **{"from": list(old_isr)},
                          leader_epoch=p.leader_epoch, zk_version=new_epoch)
        return adopted

    def update_partition_epochs(self, updates: dict) -> None:
        """KRaft mode: partitions whose leader and leader epoch stay but whose ISR (or replicas) and partition
        epoch changed (metadata_publisher.IsrUpdate), e.g. the controller took a fenced follower out of the ISR
        or accepted our AlterPartition. A leader's HW may move with a smaller ISR."""
        for tp, update in updates.items():
            p = self.partitions.get(tp)
            if p is None or update.partition_epoch < p.zk_version:
                continue
            p.isr, p.replicas, p.zk_version = tuple(update.isr), tuple(update.replicas), update.partition_epoch
            if p.is_leader and p.maybe_increment_high_watermark():
                p.wake_waiters()

    def report_high_watermarks(self) -> None:
        """In a lab, a few times a second: a `hw_moved` event for each partition whose HW moved since the last
        report (sampled: a HW may move with every produce)."""
        for p in list(self.partitions.values()):
            if p.high_watermark != p.hw_reported:
                p.report_hw_move()

    async def shutdown(self) -> None:
        await self.fetcher_manager.shutdown()
        self.checkpoint_high_watermarks()
        for p in self.partitions.values():
            p.forget()
        self.partitions.clear()


def _sync_epoch_checkpoints(caches: list[LeaderEpochCache]) -> None:
    for cache in caches:
        try:
            cache.sync()
        except OSError:
            log.exception("Could not fsync the leader epoch checkpoint %s", cache.path)
