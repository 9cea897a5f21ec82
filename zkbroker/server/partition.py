"""Partition: one topic-partition as this broker sees it (Kafka's cluster.Partition).

Holds what the controller last told us (leader, leader epoch, ISR, replicas, the `state` node's zkVersion,
the controller epoch) and, as leader, the high watermark: the offset below which every ISR member has
the messages, so consumers may read them. HW = min LEO over the ISR and never moves backwards. Followers'
LEOs arrive with their replica fetches (the replication issue); a single-replica partition's HW is its LEO.

As leader it owns the append rules, as 0.8.2's appendMessagesToLeader and checkEnoughReplicasReachOffset:
the min.insync.replicas check before an acks=-1 append, the append itself (the log assigns the offsets), the
HW move after it, and the answer an acks=-1 produce waits for. It also answers the reads a leader serves
(consumers up to the HW, followers to the log end) and ListOffsets.

The last stable offset (Kafka 0.11) is the HW held back by the first transaction not yet complete below it; a
read_committed consumer reads up to it. A follower computes its own the same way, from its own producer state
and the HW its leader sent it, as Kafka's followers do.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from zkbroker import timeline
from zkbroker.log.leader_epoch import LeaderEpochCache
from zkbroker.log.log import EARLIEST_TIME, LATEST_TIME, Log, OutOfOrderOffsetsError
from zkbroker.protocol import message_set
from zkbroker.protocol.errors import ErrorCode, NotEnoughReplicasError, OffsetOutOfRangeError, PolicyViolationError
from zkbroker.protocol.fetch_response import FileRange
from zkbroker.protocol.message_set import AppendInfo
from zkbroker.protocol.record_batch import ControlRecordType, EndTxnMarker, build_end_txn_marker_batch
from zkbroker.topic_partition import TopicPartition


@dataclass
class Partition:
    topic: str
    partition: int
    local_broker_id: int
    log: Log
    leader_id: int = -1
    leader_epoch: int = -1
    controller_epoch: int = -1
    zk_version: int = 0
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    high_watermark: int = 0
    # The log end offset of each follower, from its fetches; -1 until it has fetched since we became leader.
    remote_leos: dict[int, int] = field(default_factory=dict)
    # When each follower last fetched (monotonic seconds): 0.8.2's "stuck follower" clock.
    remote_fetch_times: dict[int, float] = field(default_factory=dict)
    # replica.lag.rule=caught-up-time (KIP-16): when each follower was last caught up to our log end (Kafka's
    # lastCaughtUpTimeMs), and our log end at its last fetch (reaching that end later proves it was caught up
    # as of that fetch: under steady writes a healthy follower is never at the very end when it asks).
    remote_caught_up_times: dict[int, float] = field(default_factory=dict)
    remote_fetch_leader_leos: dict[int, int] = field(default_factory=dict)
    # Each follower's log start offset, from its Fetch (v5+); -1 until known. The low watermark is their least.
    remote_log_starts: dict[int, int] = field(default_factory=dict)
    # An ISR change being written to ZooKeeper by this leader; one at a time.
    isr_update_in_flight: bool = False
    # replication.truncation=leader-epoch only: the leader-epoch-checkpoint, and whether this follower must
    # still ask its leader where to truncate before it fetches.
    epoch_cache: LeaderEpochCache | None = None
    needs_epoch_truncation: bool = False
    # Fetch and produce requests waiting for this partition to grow (woken on every append and HW change).
    _waiters: list[asyncio.Future] = field(default_factory=list)
    # In a lab: this broker's timeline source ("broker:2"), and the HW last reported there (report_hw_move).
    timeline_source: str | None = None
    hw_reported: int = -1

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset(self.high_watermark)

    def make_leader(self, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...],
                    zk_version: int, controller_epoch: int) -> None:
        self.leader_id = self.local_broker_id
        self._set_state(leader_epoch, isr, replicas, zk_version, controller_epoch)
        self.needs_epoch_truncation = False
        if self.epoch_cache is not None:
            self.epoch_cache.assign(leader_epoch, self.log_end_offset)
        self.remote_leos = {r: -1 for r in replicas if r != self.local_broker_id}
        now = time.monotonic()
        self.remote_fetch_times = {r: now for r in self.remote_leos}
        self.remote_caught_up_times = {r: now for r in self.remote_leos}  # each gets a full lag time to show
        self.remote_fetch_leader_leos = {}
        self.remote_log_starts = {r: -1 for r in self.remote_leos}
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self.maybe_increment_high_watermark()
        # Waiting acks=-1 produces must look again: the HW may have moved, or the ISR shrunk below
        # min.insync.replicas (NOT_ENOUGH_REPLICAS_AFTER_APPEND); otherwise they sit out their whole timeout.
        self.wake_waiters()

    def make_follower(self, leader_id: int, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...],
                      zk_version: int, controller_epoch: int) -> None:
        self.leader_id = leader_id
        self._set_state(leader_epoch, isr, replicas, zk_version, controller_epoch)
        self.remote_leos = {}
        self.wake_waiters()  # fetches waiting on us as leader must now answer NOT_LEADER_FOR_PARTITION

    def _set_state(self, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...], zk_version: int,
                   controller_epoch: int) -> None:
        self.leader_epoch = leader_epoch
        self.isr = tuple(isr)
        self.replicas = tuple(replicas)
        self.zk_version = zk_version
        self.controller_epoch = controller_epoch

    def truncate_to(self, offset: int, reason: str) -> None:
        """Truncate the log (a follower's), keeping the HW and the epoch history within it; `reason` goes to the
        lab's timeline."""
        before = self.log_end_offset
        self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        if self.epoch_cache is not None:
            self.epoch_cache.truncate_from_end(self.log_end_offset)
        self._report_truncation(before, reason)

    def truncate_fully_and_start_at(self, offset: int, reason: str) -> None:
        before = self.log_end_offset
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        if self.epoch_cache is not None:
            self.epoch_cache.clear()
        self._report_truncation(before, reason)

    def _report_truncation(self, before: int, reason: str) -> None:
        if self.timeline_source is not None:
            timeline.emit(self.timeline_source, "truncated", topic=self.topic, partition=self.partition,
                          **{"from": before, "to": self.log_end_offset}, reason=reason, hw=self.high_watermark,
                          leader=self.leader_id, leader_epoch=self.leader_epoch)

    def report_hw_move(self) -> None:
        """In a lab: a `hw_moved` event if the HW differs from the one last reported (the broker samples its
        partitions a few times a second rather than report every produce)."""
        if self.high_watermark != self.hw_reported:
            previous, self.hw_reported = self.hw_reported, self.high_watermark
            timeline.emit(self.timeline_source or f"broker:{self.local_broker_id}", "hw_moved", topic=self.topic,
                          partition=self.partition, **{"from": previous, "to": self.high_watermark},
                          role="leader" if self.is_leader else "follower")

    def append_as_follower(self, records) -> None:
        """Append messages fetched from the leader (offsets already assigned). Record batches carry the epoch of
        the leader that wrote them (Kafka 0.11's cache learns from them); messages of magic 0 and 1 are
        attributed to the epoch of the leader we follow."""
        start = self.log_end_offset
        try:
            info = self.log.append(records, assign_offsets=False)
        except OutOfOrderOffsetsError:
            # DeleteRecords put the leader's log start inside a batch, and this empty log (its end at its start)
            # fetched from there: the batch begins below it. As Kafka (UnexpectedAppendOffsetException), the log
            # starts afresh at the batch's first offset; the leader's log start, in the same Fetch answer, then
            # hides the records below it again.
            first, last = _offsets_of(records)
            if not (start == self.log.log_start_offset and first < start <= last):
                raise
            self.truncate_fully_and_start_at(first, f"the first batch fetched begins at {first}, below the log "
                                                    f"start {start} DeleteRecords set")
            start = first
            info = self.log.append(records, assign_offsets=False)
        if self.epoch_cache is not None and self.log_end_offset > start:
            self._learn_epochs(info, start, self.leader_epoch)

    def _learn_epochs(self, info: AppendInfo, start: int, epoch: int) -> None:
        if not info.batches or info.batches[0].base_offset != start:
            self.epoch_cache.assign(epoch, start)  # a set that starts with messages of magic 0 or 1
        for batch in info.batches:
            if batch.partition_leader_epoch >= 0:
                self.epoch_cache.assign(batch.partition_leader_epoch, batch.base_offset)

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now: float | None = None) -> None:
        """A follower's fetch offset is its log end offset (0.8.2's updateLeaderHWAndMaybeExpandIsr, first half).
        Not so when it lies outside our log: the fetch gets OFFSET_OUT_OF_RANGE, and 0.8.2 recorded the log end
        as unknown (-1). A follower past our end (after an unclean election) holds other records there, so it
        must neither count towards an acks=-1 write nor rejoin the ISR on the strength of that offset.
        `now`: monotonic seconds (the clock's reading unless given)."""
        now = time.monotonic() if now is None else now
        if not self.log.log_start_offset <= fetch_offset <= self.log.log_end_offset:
            fetch_offset = -1
        leo = self.log_end_offset
        if fetch_offset >= leo:
            self.remote_caught_up_times[replica_id] = now
        elif fetch_offset >= self.remote_fetch_leader_leos.get(replica_id, leo + 1):
            previous = self.remote_fetch_times.get(replica_id, now)
            self.remote_caught_up_times[replica_id] = max(self.remote_caught_up_times.get(replica_id, 0.0), previous)
        self.remote_fetch_leader_leos[replica_id] = leo
        self.remote_leos[replica_id] = fetch_offset
        self.remote_fetch_times[replica_id] = now
        if self.maybe_increment_high_watermark():
            self.wake_waiters()

    def record_follower_log_start(self, replica_id: int, log_start_offset: int) -> None:
        """A follower's log start offset, as its Fetch reports it: it moves the low watermark DeleteRecords
        waits for (it wakes the waiters when it does)."""
        if replica_id in self.remote_log_starts and self.remote_log_starts[replica_id] != log_start_offset:
            self.remote_log_starts[replica_id] = log_start_offset
            self.wake_waiters()

    @property
    def low_watermark(self) -> int:
        """The least log start offset of the leader and the in-sync followers that reported one (Kafka's
        lowWatermarkIfLeader, which takes every live follower; a follower out of the ISR learns the new start
        when it fetches again, and a dead one when it returns)."""
        starts = [start for r, start in self.remote_log_starts.items() if r in self.isr and start >= 0]
        return min([self.log.log_start_offset, *starts])

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords (KIP-107): move the log start offset to `offset` (-1: the high watermark). The error
        code: OFFSET_OUT_OF_RANGE past the HW (or a negative offset other than -1), POLICY_VIOLATION for a
        compacted topic, whose offsets are keys' history rather than a position."""
        if self.log.config.compact:
            raise PolicyViolationError(f"Records of partition {self.topic}-{self.partition} can not be deleted "
                                       "while it is a compacted topic")
        target = self.high_watermark if offset == -1 else offset
        if target < 0 or target > self.high_watermark:
            raise OffsetOutOfRangeError(f"Cannot increment the log start offset to {target} of partition "
                                        f"{self.topic}-{self.partition} since it is larger than the high "
                                        f"watermark {self.high_watermark}")
        if self.log.maybe_increment_log_start_offset(target):
            self.wake_waiters()
        return self.low_watermark

    def out_of_sync_replicas(self, lag_time_ms: int, lag_max_messages: int, caught_up_time: bool = False,
                             now: float | None = None) -> dict[int, str]:
        """The followers in the ISR that are out of sync, each with the reason in words.

        0.8.2's getOutOfSyncReplicas (the default): stuck (no fetch for lag_time_ms) or slow (more than
        lag_max_messages behind the leader's log end, whenever the check runs: right after a burst of more
        messages than that, a healthy follower is slow). With `caught_up_time` (replica.lag.rule=caught-up-time,
        KIP-16): not caught up to the leader's log end at any time within the last lag_time_ms; the message
        count plays no part. `now`: monotonic seconds (the clock's reading unless given)."""
        now = time.monotonic() if now is None else now
        lag_s = lag_time_ms / 1000.0
        leo = self.log_end_offset
        out: dict[int, str] = {}
        for r in self.isr:
            if r == self.local_broker_id:
                continue
            if caught_up_time:
                behind_s = now - self.remote_caught_up_times.get(r, now)
                if behind_s > lag_s:
                    out[r] = (f"not caught up to the log end for {behind_s:.1f} s "
                              f"(replica.lag.time.max.ms {lag_time_ms})")
                continue
            silent_s = now - self.remote_fetch_times.get(r, now)
            behind = leo - self.remote_leos.get(r, -1)
            if silent_s > lag_s:
                out[r] = f"stuck: no fetch for {silent_s:.1f} s (replica.lag.time.max.ms {lag_time_ms})"
            elif self.remote_leos.get(r, -1) >= 0 and behind > lag_max_messages:
                out[r] = f"slow: {behind} messages behind the log end (replica.lag.max.messages {lag_max_messages})"
        return out

    def apply_isr_change(self, isr: tuple[int, ...], written_against: int, new_version: int) -> bool:
        """Adopt an ISR this leader wrote to the `state` znode conditionally on zkVersion `written_against`
        (now `new_version`); False if a LeaderAndIsr arrived while the write was in flight. That request carries
        a newer state (the controller wrote it after our write, on top of it): keeping ours would leave the
        leader believing an ISR ZooKeeper no longer holds, with a zkVersion every later ISR write fails on."""
        if not self.is_leader or self.zk_version != written_against:
            return False
        self.isr = tuple(isr)
        self.zk_version = new_version
        return True

    def may_rejoin_isr(self, replica_id: int) -> bool:
        """Whether a follower outside the ISR has reached the high watermark, so it may rejoin (asked for the
        follower that just fetched only, as 0.8.2's maybeExpandIsr(replicaId) did)."""
        return (replica_id != self.local_broker_id and replica_id in self.replicas and replica_id not in self.isr
                and self.remote_leos.get(replica_id, -1) >= self.high_watermark)

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the ISR (ours included); it only moves forward. True when it moved."""
        leos = [self.log_end_offset]
        leos += [self.remote_leos.get(r, -1) for r in self.isr if r != self.local_broker_id]
        new_hw = min(leos)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self.log.on_high_watermark(new_hw)
            return True
        return False

    def append_messages_to_leader(self, records: bytes | bytearray | memoryview, required_acks: int) -> AppendInfo:
        """A produce request's message set, appended as leader (0.8.2's appendMessagesToLeader): the log numbers
        the messages from its end; then the HW moves if the ISR allows, and waiting requests look again.

        Raises NotEnoughReplicasError when `required_acks` is -1 and the ISR is smaller than the topic's
        min.insync.replicas, and whatever `Log.append` raises for a set it refuses; either way nothing is
        written."""
        if required_acks == -1:
            min_isr = self.log.config.min_insync_replicas
            if len(self.isr) < min_isr:
                raise NotEnoughReplicasError(f"Number of insync replicas for partition [{self.topic},{self.partition}] "
                                             f"is [{len(self.isr)}], below required minimum [{min_isr}]")
        info = self.log.append(records, leader_epoch=self.leader_epoch)
        self.maybe_increment_high_watermark()
        self.wake_waiters()
        return info

    def append_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                          now_ms: int) -> AppendInfo:
        """WriteTxnMarkers on the leader (the transaction coordinator's request): the end-transaction marker of a
        producer's transaction appended as a control batch, with the leader's epoch (Kafka's appendRecords with
        origin Coordinator; the request waits for acks=-1 like a produce). Raises ProducerStateError for a marker
        from an older producer epoch (INVALID_PRODUCER_EPOCH) or coordinator epoch
        (TRANSACTION_COORDINATOR_FENCED), and what `append_messages_to_leader` raises."""
        marker = EndTxnMarker(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, coordinator_epoch)
        batch = build_end_txn_marker_batch(marker, producer_id=producer_id, producer_epoch=producer_epoch,
                                           timestamp=now_ms)
        info = self.log.append(bytearray(batch), leader_epoch=self.leader_epoch, coordinator=True)
        self.maybe_increment_high_watermark()
        self.wake_waiters()
        return info

    def check_enough_replicas_reach_offset(self, required_offset: int) -> int | None:
        """The answer to an acks=-1 produce whose messages end before `required_offset` (0.8.2's
        checkEnoughReplicasReachOffset); None while it must wait (the HW is below that offset).

        NONE once every ISR member has the messages; NOT_ENOUGH_REPLICAS_AFTER_APPEND if by then the ISR has
        shrunk below min.insync.replicas (as in 0.8.2, the messages stay in the log). REQUEST_TIMED_OUT at once
        if this broker no longer leads the partition, so the client can go elsewhere: 0.8.2 answered
        NOT_LEADER_FOR_PARTITION, which clients read as "not written" and resend, but the messages are in our
        log and may survive on the new leader (a duplicate); REQUEST_TIMED_OUT says what is true: written,
        outcome unknown."""
        if not self.is_leader:
            return ErrorCode.REQUEST_TIMED_OUT
        if self.high_watermark < required_offset:
            return None
        if len(self.isr) < self.log.config.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def read(self, offset: int, max_bytes: int, from_follower: bool, read_committed: bool = False) -> FileRange:
        """The messages from `offset` a leader serves: up to the HW for a consumer (the LSO for a read_committed
        one), to the log end for a follower. Raises OffsetOutOfRangeError for an offset outside the log."""
        if from_follower:
            cap = None
        else:
            cap = self.last_stable_offset if read_committed else self.high_watermark
        return self.log.read(offset, max_bytes, cap).records

    def aborted_transactions(self, offset: int, records: FileRange | None) -> list[tuple[int, int]]:
        """What a read_committed fetch from `offset` answers beside `records`: (producer id, first offset) of each
        aborted transaction overlapping them. The upper bound is the LSO, or the base of the next segment when
        the range ends before it (a read stays in one segment), as Kafka bounds it by the fetched segment."""
        if records is None or not records.size or not self.log.has_aborted_transactions:
            return []
        upper = self.last_stable_offset
        later = self.log.segments_between(offset, upper)
        if len(later) > 1:
            upper = later[1].base_offset
        return [(txn.producer_id, txn.first_offset) for txn in self.log.collect_aborted_transactions(offset, upper)]

    def fetchable_end(self, from_follower: bool, read_committed: bool = False) -> int:
        """The end of what a reader may see: the log end for a follower, the LSO for a read_committed consumer,
        else the HW."""
        if from_follower:
            return self.log_end_offset
        return self.last_stable_offset if read_committed else self.high_watermark

    def offset_for_timestamp(self, timestamp: int, from_follower: bool, read_committed: bool = False) -> int:
        """ListOffsets on the leader: the log start for EARLIEST_TIME; otherwise at most the end a reader may see
        (the HW for a consumer, as 0.8.2 filtered offsets above it, the LSO for a read_committed one (ListOffsets
        v2+); the log end for a follower): that end for
        LATEST_TIME, else the base offset of the last segment written at or before `timestamp`."""
        if timestamp == EARLIEST_TIME:
            return self.log.log_start_offset
        limit = self.fetchable_end(from_follower, read_committed)
        if timestamp == LATEST_TIME:
            return limit
        offset = self.log.offset_before(timestamp)
        return limit if offset is None else min(offset, limit)

    def forget(self) -> None:
        """This broker no longer holds the partition (its log deleted, or the broker shutting down): forget who
        leads it, as 0.8.2's Partition.delete does, and wake waiting requests, which then answer at once."""
        self.leader_id = -1
        self.wake_waiters()

    def waiter(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        future = loop.create_future()
        self._waiters.append(future)
        return future

    def wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)


def _offsets_of(records) -> tuple[int, int]:
    """The first and last offsets of a fetched message set (what a follower's append refused)."""
    info = message_set.analyze(records)
    return info.first_offset, info.last_offset
