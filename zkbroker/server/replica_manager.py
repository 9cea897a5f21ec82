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
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from zkbroker.config import KafkaConfig
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
from zkbroker.zk.znodes import LeaderIsrState

log = logging.getLogger("zkbroker.server.ReplicaManager")
state_change_log = logging.getLogger("state.change.logger")

# 0.8.2's StaleLeaderEpochCode. Kafka 0.9 reused 13 for NETWORK_EXCEPTION; only our own controller reads
# LeaderAndIsr responses, so we keep 0.8.2's meaning there.
STALE_LEADER_EPOCH = 13

HW_CHECKPOINT_FILE = "replication-offset-checkpoint"



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
    def __init__(self, config: KafkaConfig, log_manager: LogManager, zk: ZkClient, bridge: LoopBridge) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.zk = zk
        self.bridge = bridge
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
            results = self._apply_leader_and_isr(request, configs)
        log.info("Broker %d handled LeaderAndIsr from controller %d epoch %d for %d partitions in %.0f ms",
                 self.broker_id, request.controller_id, request.controller_epoch, len(results),
                 (time.monotonic() - started) * 1000.0)
        return ErrorCode.NONE, results

    def _apply_leader_and_isr(self, request: Any, configs: dict[str, LogConfig]) -> list[tuple[str, int, int]]:
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
                partition = self._open_partition(tp, configs[tp.topic])
            if state.leader == self.broker_id:
                self.fetcher_manager.remove_partition(tp)
                partition.make_leader(state.leader_epoch, tuple(state.isr), tuple(state.replicas),
                                      state.zk_version, state.controller_epoch)
                role = "leader"
                counts["leader"] += 1
            else:
                leader_changed = current is None or partition.leader_id != state.leader
                partition.make_follower(state.leader, state.leader_epoch, tuple(state.isr), tuple(state.replicas),
                                        state.zk_version, state.controller_epoch)
                if leader_changed:
                    self._follow(partition, state.leader, request.live_leaders)
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

    def _follow(self, partition: Partition, leader: int, live_leaders) -> None:
        """makeFollowers, 0.8.2's way: stop fetching, truncate to our HW, fetch from the new leader."""
        tp = partition.topic_partition
        self.fetcher_manager.remove_partition(tp)
        if partition.epoch_cache is not None:
            partition.needs_epoch_truncation = True  # the fetcher asks the leader first (KIP-101)
        elif partition.log_end_offset > partition.high_watermark:
            log.info("Truncating log [%s,%d] to offset %d (its high watermark) on becoming a follower of "
                     "broker %d", *tp, partition.high_watermark, leader)
            partition.truncate_to(partition.high_watermark)
        source = next((b for b in live_leaders if b.broker_id == leader), None)
        if source is None:
            state_change_log.warning("Broker %d cannot follow broker %d for partition [%s,%d]: it is not live",
                                     self.broker_id, leader, *tp)
            return
        self.fetcher_manager.add_partition(partition, SourceBroker(source.broker_id, source.host, source.port))

    def _open_partition(self, tp: TopicPartition, config: LogConfig) -> Partition:
        log_ = self.log_manager.get_or_create_log(*tp, config)
        p = Partition(*tp, self.broker_id, log_)
        if self.leader_epoch_mode:
            p.epoch_cache = LeaderEpochCache(log_.dir)
            p.epoch_cache.truncate_from_end(log_.log_end_offset)  # recovery may have cut the log's tail
            for epoch, start_offset in log_.recovered_leader_epochs:  # and read the epochs of the batches it kept
                if epoch >= 0:
                    p.epoch_cache.assign(epoch, start_offset)
        # 0.8.2: the HW restarts from the checkpoint, never beyond the log end.
        p.high_watermark = min(self._checkpointed_hws.get(tp, 0), log_.log_end_offset)
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

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, replica_id: int) -> ReadResult:
        """Read for a consumer (replica_id -1: capped at the HW) or a follower (not capped)."""
        error, p = self.leader_partition(topic, partition)
        if p is None:
            return ReadResult(error)
        try:
            records = p.read(offset, max_bytes, from_follower=replica_id >= 0)
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

    def record_follower_fetch(self, topic: str, partition: int, replica_id: int, fetch_offset: int) -> None:
        """Once per follower Fetch request: its fetch offset is its LEO, which may advance the HW and let it
        rejoin the ISR."""
        p = self.partitions.get((topic, partition))
        if p is None or not p.is_leader or replica_id not in p.remote_leos:
            return
        p.record_follower_fetch(replica_id, fetch_offset)
        if p.caught_up_followers():
            self.bridge.loop.create_task(self._maybe_expand_isr(p))

    # ---- the ISR, kept by the leader (0.8.2's Partition.maybeShrinkIsr / maybeExpandIsr) ------------------

    async def maybe_shrink_isr(self) -> None:
        """Drop stuck or slow followers from the ISR of every partition we lead (every replica.lag.time.max.ms)."""
        lag_ms = self.config["replica.lag.time.max.ms"]
        lag_messages = self.config["replica.lag.max.messages"]
        for p in list(self.partitions.values()):
            if not p.is_leader or p.isr_update_in_flight:
                continue
            out = p.out_of_sync_replicas(lag_ms, lag_messages)
            if out:
                new_isr = tuple(r for r in p.isr if r not in out)
                log.info("Shrinking ISR for partition [%s,%d] from %s to %s", p.topic, p.partition,
                         ",".join(map(str, p.isr)), ",".join(map(str, new_isr)))
                if await self._update_isr(p, new_isr) and p.maybe_increment_high_watermark():
                    p.wake_waiters()  # fewer members to wait for: acks=-1 requests may complete

    async def _maybe_expand_isr(self, p: Partition) -> None:
        if not p.is_leader or p.isr_update_in_flight:
            return
        joining = p.caught_up_followers()
        if not joining:
            return
        new_isr = tuple(p.isr) + tuple(sorted(joining))
        log.info("Expanding ISR for partition [%s,%d] from %s to %s", p.topic, p.partition,
                 ",".join(map(str, p.isr)), ",".join(map(str, new_isr)))
        await self._update_isr(p, new_isr)

    async def _update_isr(self, p: Partition, new_isr: tuple[int, ...]) -> bool:
        """Write the new ISR to the `state` znode conditionally on our cached zkVersion, keeping the leader
        epoch and the deciding controller's epoch; on a mismatch give up, as 0.8.2 did (it never re-reads)."""
        p.isr_update_in_flight = True
        try:
            state = LeaderIsrState(self.broker_id, p.leader_epoch, p.controller_epoch, new_isr)
            path = paths.partition_state_path(p.topic, p.partition)
            version = p.zk_version
            try:
                stat = await self.bridge.wait_for(self.zk.kazoo.set_async(path, state.encode(), version))
            except BadVersionError:
                log.info("Cached zkVersion [%d] not equal to that in zookeeper, skip updating ISR", version)
                return False
            except Exception as e:
                log.warning("Could not update the ISR of [%s,%d]: %r", p.topic, p.partition, e)
                return False
            return p.apply_isr_change(new_isr, version, stat.version)
        finally:
            p.isr_update_in_flight = False

    async def shutdown(self) -> None:
        await self.fetcher_manager.shutdown()
        self.checkpoint_high_watermarks()
        for p in self.partitions.values():
            p.forget()
        self.partitions.clear()
