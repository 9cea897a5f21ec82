"""Log: one partition's log, the directory `<log.dir>/<topic>-<partition>` of segments (Kafka's kafka.log.Log).

Appends go to the last (active) segment, which rolls when the next message set would take it past
`segment.bytes`, when it is non-empty and older than `segment.ms` (less a random jitter), or when one of its
indexes is full. Reads return a file range within one segment. Retention deletes whole segments, oldest first,
by age (the largest timestamp of a segment's messages, or its .log file's mtime when they have none: magic 0,
as 0.8.2) and by the log's total size; when every segment would go, the log rolls
first so that an empty active segment remains. Deleted segments are renamed `.deleted` and removed
`file.delete.delay.ms` later, so ranges already handed to the network stay readable.

A compacted log's closed segments are rewritten by the log cleaner (log_cleaner.py), which swaps each
cleaned segment in for the segments it replaces with `replace_segments`; offsets keep their values, so such
a log has gaps, which reads step over.

On open, files left by interrupted operations are cleaned up (an interrupted swap is completed or
discarded: see `replace_segments`); then, unless the log directory holds the
`.kafka_cleanshutdown` marker, every segment from the recovery point on is re-validated and cut at the
first torn or corrupt message, and the segments after it are deleted. Segments whose index is missing or
fails its sanity check get their index rebuilt either way.

Where we deviate from 0.8.2, on purpose:
- A read from an offset above `max_offset` (a consumer ahead of the high watermark) returns an empty range;
  0.8.2 raised IllegalArgumentException, which reached the client as an unknown error.
- A negative `retention.ms` means no time limit (as from 0.9); 0.8.2 deleted every segment.
- Recovery also cuts at an entry whose offset is not above the previous one (offsets lie outside the CRC);
  0.8.2 noticed that only when the index refused the entry, and then emptied the whole segment.
- The recovery point is capped at the log end offset.
- Truncating inside a compressed set also drops the index entry that pointed at the cut set; 0.8.2 kept it,
  and after a restart took the segment for empty (its next offset came out as the base offset).
- A follower's (assign_offsets=False) message sizes are not checked against max.message.bytes again: the
  leader checked them against the same topic setting.
- A flush never moves the recovery point past the log end offset. 0.8.2's flush after a roll, scheduled
  with the roll's offset, could run after a truncation below that offset and vouch for data not yet written.
- Segments after a truncation's target, or after the segment where recovery found corruption, are deleted
  newest first, and recovery cuts the corrupt segment only after them, so that a crash in between leaves a
  valid prefix of the log; 0.8.2 deleted them oldest first (after cutting), and a crash in between left a
  hole in the offsets that the next recovery kept. (Both found by bench/crash_torture.py.)

Beyond 0.8.2, as later Kafka: the time index (`.timeindex`) beside each offset index and ListOffsets by
timestamp from it (Kafka 0.10.1); message.timestamp.type=LogAppendTime stamps appended messages with the
broker's time; the leader writes its epoch into each record batch (Kafka 0.11) and recovery reports the
epochs of the batches it kept (`recovered_leader_epochs`), for the leader-epoch cache.

Transactions (Kafka 0.11-2.x, KIP-98): the producer state tracks each producer's open transaction; an appended
end-transaction marker (a control batch, only `append(..., coordinator=True)` may write one) completes it, and
an aborted one goes into the active segment's `.txnindex` with the LSO of that moment. `last_stable_offset(hw)`
is where read_committed reads stop, `collect_aborted_transactions` what such a read answers beside the records.
Recovery rebuilds the transaction index of each recovered segment that holds control batches, replaying the
producer state up to it.

Threads: call a Log from one thread; `flush` and the scheduled tasks may run on another (they work on a
snapshot of the segments taken under the log's lock), and so does the log cleaner, which reads the segments
under the lock and swaps them with `replace_segments`, in steps that readers without the lock can meet.
Background work (the flush after a roll, the delayed delete of a segment) goes through the
`schedule(name, task, delay_ms)` callable the owner passes; without one it runs at once.

Sending a range: os.sendfile (or os.pread) with the range's explicit position, as the network layer does.
Never read through the file object's own position: appends move it, and concurrent fetches share it
(asyncio's loop.sendfile *fallback*, used by loops without native sendfile, does exactly that).
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from zkbroker.fsync import fsync_path
from zkbroker.protocol import message_set
from zkbroker.protocol.conversion import convert_for_write, needs_conversion
from zkbroker.protocol.errors import OffsetOutOfRangeError, RecordListTooLargeError
from zkbroker.protocol.fetch_response import FileRange
from zkbroker.protocol.message_set import LOG_OVERHEAD, AppendInfo
from zkbroker.topic_partition import TopicPartition

from .fetch_data import UNKNOWN_OFFSET_METADATA, FetchDataInfo, LogOffsetMetadata
from .log_config import LogConfig
from .producer_state import CompletedTxn, ProducerStateManager
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    Clock,
    LogSegment,
    index_filename,
    last_offset_in_file,
    log_filename,
    time_index_filename,
)
from .time_index import TIME_INDEX_SUFFIX, TimestampOffset
from .transaction_index import TXN_INDEX_SUFFIX, AbortedTxn, transaction_index_filename

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LATEST_TIME = -1  # ListOffsets: the log end offset
EARLIEST_TIME = -2  # ListOffsets: the log start offset

Schedule = Callable[[str, Callable[[], object], int], None]  # (task name, task, delay in ms)


class OutOfOrderOffsetsError(ValueError):
    """A replica's message set does not continue the log: its offsets decrease or start below the log end."""


class SegmentsChangedError(RuntimeError):
    """The segments a cleaned segment was to replace changed meanwhile (a truncation, the log's deletion):
    nothing was swapped."""


def _no_phase(name: str) -> None:
    """The default `phase` of `replace_segments`: nothing to report to."""


def system_clock() -> int:
    return time.time_ns() // 1_000_000


def run_now(name: str, task: Callable[[], object], delay_ms: int) -> None:
    """The schedule used when none is given: every task runs at once."""
    task()


def parse_topic_partition_name(name: str) -> TopicPartition:
    """`my-topic-3` -> ("my-topic", 3)."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"Log directory name {name!r} is not of the form topic-partition")
    return TopicPartition(topic, int(partition))


class Log:
    """The log of one partition, in `directory` (created if absent)."""

    def __init__(
        self,
        directory: str,
        config: LogConfig | Mapping[str, Any] | None = None,
        recovery_point: int = 0,
        *,
        clock: Clock = system_clock,
        schedule: Schedule = run_now,
        rng: random.Random | None = None,
        log_start_offset: int = 0,
    ) -> None:
        self.dir = directory
        self.name = os.path.basename(os.path.normpath(directory))
        self.topic, self.partition = parse_topic_partition_name(self.name)
        self.config = LogConfig.of(config)
        self.recovery_point = recovery_point
        self._clock = clock
        self._schedule = schedule
        self._rng = rng
        self._lock = threading.RLock()
        self._bases: list[int] = []  # segment base offsets, ascending
        self._segments: dict[int, LogSegment] = {}
        # Bases `replace_segments` took out of _bases while their _segments entries stay for readers that
        # looked up _bases before; the owner thread's next change of the segments drops them.
        self._stale_bases: set[int] = set()
        self._retired: dict[int, LogSegment] = {}  # renamed .deleted, waiting for their delayed delete
        self._last_flushed = clock()
        self._truncations = 0  # counts truncations, so that a concurrent flush does not vouch for new data
        self._segment_truncations = 0  # those that reached below the active segment
        self._deleted = False
        # Called with this log, under its lock, after a truncation that reached below the active segment: the
        # log cleaner must drop a cleaning of those segments, and its checkpoint must not stay above data that
        # is gone (LogManager sets it when the cleaner runs).
        self.on_truncate: Callable[[Log], None] | None = None
        #: (partition leader epoch, base offset) of the record batches recovery kept, for the leader-epoch cache
        self.recovered_leader_epochs: list[tuple[int, int]] = []
        self.producer_state = ProducerStateManager(directory)
        # Whether a segment ever held an aborted transaction: read_committed fetches of logs that never did (most
        # of them) skip the search of the transaction indexes.
        self.has_aborted_transactions = False
        self._load_segments()
        self.has_aborted_transactions = any(segment.txn_index.entries for segment in self.segments)
        self._next_offset = self.active_segment.next_offset()
        self.recovery_point = min(self.recovery_point, self._next_offset)
        # DeleteRecords (KIP-107) moves the log start offset into a segment; below the first segment's base it
        # means nothing, and a checkpoint above the log end (records truncated since) is capped there.
        self._log_start_offset = min(max(log_start_offset, self._bases[0]), self._next_offset)
        self._load_producer_state()
        logger.info("Completed load of log %s with log end offset %d", self.name, self._next_offset)

    # -- the segments -------------------------------------------------------------------------------------

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first."""
        return [self._segments[base] for base in self._bases]

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[self._bases[-1]]

    @property
    def number_of_segments(self) -> int:
        return len(self._bases)

    def segments_between(self, start: int, end: int) -> list[LogSegment]:
        """The segments holding offsets from `start` (the one containing it) up to `end` (exclusive)."""
        with self._lock:
            first = max(bisect.bisect_right(self._bases, start) - 1, 0)
            last = bisect.bisect_left(self._bases, end)
            return [self._segments[base] for base in self._bases[first:last]]

    @property
    def size(self) -> int:
        """Bytes in all segments."""
        return sum(segment.size for segment in self.segments)

    @property
    def log_start_offset(self) -> int:
        """The first offset a reader may fetch: the first segment's base, or above it once DeleteRecords moved
        it (Kafka 0.11's logStartOffset); retention that deletes segments moves it along."""
        return max(self._log_start_offset, self._bases[0])

    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        """DeleteRecords on a leader, or a follower learning its leader's log start from Fetch: the records
        below `new_start` are no longer readable, and the segments wholly below it are deleted. The start never
        moves back, nor past the log end. True when it moved."""
        with self._lock:
            new_start = min(new_start, self._next_offset)
            if new_start <= self.log_start_offset:
                return False
            logger.info("Incrementing log start offset of partition %s to %d", self.name, new_start)
            self._log_start_offset = new_start
            bases = self._bases

            def wholly_below(segment: LogSegment) -> bool:
                i = bases.index(segment.base_offset)
                return i + 1 < len(bases) and bases[i + 1] <= new_start
            self.delete_segments_while(wholly_below)
            self.producer_state.truncate_head(self.log_start_offset)
            return True

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended message gets (LEO)."""
        return self._next_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        active = self.active_segment
        return LogOffsetMetadata(self._next_offset, active.base_offset, active.size)

    @property
    def unflushed_messages(self) -> int:
        return self._next_offset - self.recovery_point

    @property
    def last_flush_time(self) -> int:
        return self._last_flushed

    @property
    def segment_truncations(self) -> int:
        """How many truncations since the log was opened reached below the active segment (changing segments
        the log cleaner may be reading)."""
        return self._segment_truncations

    @property
    def lock(self) -> threading.RLock:
        """Held while the segments change; hold it to read them from another thread than the owner's."""
        return self._lock

    # -- appending ----------------------------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
        coordinator: bool = False,
    ) -> AppendInfo:
        """Validate a message set and append it with one write, rolling first if needed.

        With `assign_offsets` (a produce request) the messages are numbered from the log end offset, in place
        when `records` is writable, record batches get the leader's `leader_epoch`, and with
        message.timestamp.type=LogAppendTime messages get the broker's time. Without (a follower copying its
        leader) the offsets must continue the log.
        A torn last message is dropped. Returns `AppendInfo`: first_offset (the log end offset before the
        append), last_offset, count, shallow_count, valid_bytes, codec and the records written. An empty set
        appends nothing. `coordinator`: the set holds the transaction coordinator's markers (WriteTxnMarkers),
        the only control batches a leader appends.

        Raises `InvalidMessageError` (its `error_code` is CORRUPT_MESSAGE or MESSAGE_TOO_LARGE; nothing is
        written), `ConversionError` for what message.format.version cannot hold, `ProducerStateError` for an
        idempotent producer's batch out of sequence or epoch, `RecordListTooLargeError` for a set larger than
        segment.bytes, `OutOfOrderOffsetsError` for a replica set that does not continue the log, and OSError
        when the disk fails. An idempotent producer's retry of a batch the log has returns the offsets it was
        written at (count 0) and writes nothing.
        """
        with self._lock:
            log_end = self._next_offset
            if assign_offsets:
                to_magic = self.config.message_format_magic
                if to_magic is not None and needs_conversion(records, to_magic):
                    records = bytearray(convert_for_write(records, to_magic))  # message.format.version
                info = message_set.assign_offsets(
                    records,
                    log_end,
                    max_message_bytes=self.config.max_message_bytes - LOG_OVERHEAD,
                    max_inflated_bytes=message_set.inflation_bound(self.config.max_message_bytes),
                    leader_epoch=leader_epoch,
                    log_append_time=self._clock() if self.config.log_append_time else None,
                    allow_control=coordinator,
                )
                if info.shallow_count == 0:
                    return info
                if info.batches:
                    duplicate = self.producer_state.check(info.batches)
                    if duplicate is not None:
                        # an idempotent producer's retry of a batch we have: its offsets, nothing written
                        logger.debug("Duplicate batch of sequences %d-%d in %s, at offsets %d-%d",
                                     duplicate.first_seq, duplicate.last_seq, self.name, duplicate.first_offset,
                                     duplicate.last_offset)
                        return dataclasses.replace(info, records=b"", first_offset=duplicate.first_offset,
                                                   last_offset=duplicate.last_offset, count=0, shallow_count=0,
                                                   valid_bytes=0, batches=())
            else:
                info = message_set.analyze(records)
                if info.shallow_count == 0:
                    return info
                if not info.offsets_monotonic or info.first_offset < log_end:
                    raise OutOfOrderOffsetsError(
                        f"Out of order offsets found in the message set for {self.name}: offsets "
                        f"{info.first_offset} to {info.last_offset} (monotonic: {info.offsets_monotonic}), "
                        f"log end offset {log_end}"
                    )
                info = dataclasses.replace(info, first_offset=log_end)
            size = memoryview(info.records).nbytes
            if size > self.config.segment_bytes:
                raise RecordListTooLargeError(
                    f"Message set size is {size} bytes which exceeds the maximum configured segment size of "
                    f"{self.config.segment_bytes}."
                )
            segment = self._maybe_roll(size)
            segment.append(info.first_offset, info.records, info.max_timestamp, info.offset_of_max_timestamp)
            self._next_offset = info.last_offset + 1
            if info.batches:
                completed = self.producer_state.update(info.batches)
                if completed:
                    self._complete_transactions(segment, completed)
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()
        return info

    def _complete_transactions(self, segment: LogSegment, completed: list[CompletedTxn]) -> None:
        """Transactions whose markers were just appended to `segment`: an aborted one is indexed there with the
        LSO it leaves (Kafka's updateTxnIndex), then each stops being open."""
        state = self.producer_state
        for txn in completed:
            if txn.is_aborted:
                segment.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                                    state.last_stable_offset_after(txn)))
                self.has_aborted_transactions = True
            state.complete_txn(txn)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO (Kafka 0.11): below the first offset of every transaction not yet complete below
        `high_watermark`, and never above it."""
        return self.producer_state.last_stable_offset(high_watermark)

    def on_high_watermark(self, high_watermark: int) -> None:
        """The partition's high watermark moved up (Kafka's onHighWatermarkIncremented): transactions whose markers
        it passed are stable, for the log cleaner's bound too (which has no high watermark of its own)."""
        with self._lock:
            self.producer_state.first_unstable_offset(high_watermark)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset), for a read_committed fetch:
        from the transaction indexes of the segment holding `start_offset` and the later ones, until an entry's
        LSO shows that none further can (Kafka's collectAbortedTransactions)."""
        found: list[AbortedTxn] = []
        if not self.has_aborted_transactions:
            return found
        for segment in self.segments_between(start_offset, 2**63):
            txns, complete = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            found += txns
            if complete:
                break
        return found

    def _maybe_roll(self, messages_size: int) -> LogSegment:
        segment = self.active_segment
        age = self._clock() - segment.created
        if (
            segment.size > self.config.segment_bytes - messages_size
            or (segment.size > 0 and age > self.config.segment_ms - segment.roll_jitter_ms)
            or segment.index.is_full
            or segment.time_index.is_full
        ):
            logger.debug(
                "Rolling new log segment in %s (log_size = %d/%d, index_size = %d/%d, age_ms = %d/%d).",
                self.name, segment.size, self.config.segment_bytes, segment.index.entries,
                segment.index.max_entries, age, self.config.segment_ms - segment.roll_jitter_ms,
            )
            return self.roll()
        return segment

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset; the old one's index is trimmed and flushed later."""
        start = time.monotonic()
        with self._lock:
            new_offset = self._next_offset
            if new_offset in self._segments:
                raise RuntimeError(
                    f"Trying to roll a new log segment for {self.name} with start offset {new_offset} "
                    "while it already exists."
                )
            for path in (log_filename(self.dir, new_offset), index_filename(self.dir, new_offset),
                         time_index_filename(self.dir, new_offset), transaction_index_filename(self.dir, new_offset)):
                if os.path.exists(path):
                    logger.warning("Newly rolled segment file %s already exists; deleting it first", path)
                    os.remove(path)
            self.active_segment.on_become_inactive()
            segment = self._new_segment(new_offset)
            self._add_segment(segment)
            if self.producer_state.producers:  # logs without idempotent producers get no snapshot files
                self.producer_state.take_snapshot(new_offset)
        self._schedule("flush-log", lambda: self.flush(new_offset), 0)
        logger.info("Rolled new log segment for '%s' in %.0f ms.", self.name, (time.monotonic() - start) * 1000)
        return segment

    # -- reading ------------------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> FetchDataInfo:
        """The file range of the messages from `offset`: at most `max_bytes` (the range may end inside a
        message), within one segment, and ending before the first message at or above `max_offset` (the high
        watermark for a consumer; None for a follower). The range is empty at the log end offset, and when
        `offset` is at or above `max_offset`.

        Raises `OffsetOutOfRangeError` for an offset below the log start offset or above the log end offset.
        """
        log_end = self._next_offset
        if offset == log_end:
            active = self.active_segment
            return FetchDataInfo(self.log_end_offset_metadata, FileRange(active.file, active.size, 0))
        bases = self._bases
        first = bisect.bisect_right(bases, offset) - 1
        if offset > log_end or first < 0 or offset < self._log_start_offset:
            raise OffsetOutOfRangeError(
                f"Request for offset {offset} but we only have log segments in the range {self.log_start_offset} "
                f"to {log_end}."
            )
        if max_offset is not None and max_offset <= offset:
            max_offset, max_bytes = None, 0
        for i in range(first, len(bases)):
            # A segment's offsets all lie below the next segment's base (the active one's below the log end):
            # a max_offset at or above that cuts nothing, and the segment need not look for it.
            segment_end = bases[i + 1] if i + 1 < len(bases) else log_end
            cap = max_offset if max_offset is not None and max_offset < segment_end else None
            info = self._segments[bases[i]].read(offset, cap, max_bytes)
            if info is not None:
                return info
        # offsets at or above `offset` were all deleted from under the read: nothing to send
        active = self.active_segment
        return FetchDataInfo(self.log_end_offset_metadata, FileRange(active.file, active.size, 0))

    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where `offset` lies, or UNKNOWN_OFFSET_METADATA if outside the log."""
        try:
            return self.read(offset, 1).fetch_offset
        except OffsetOutOfRangeError:
            return UNKNOWN_OFFSET_METADATA

    def offsets_before(self, timestamp: int, max_num_offsets: int = 1) -> list[int]:
        """ListOffsets v0 as 0.8.2 answered it: up to `max_num_offsets` offsets, largest first.

        Each segment stands for (base offset, .log mtime) and a non-empty active segment adds (log end offset,
        now). LATEST_TIME (-1) starts from the last pair, EARLIEST_TIME (-2) from the first, any other
        timestamp from the last pair whose time is at or before it; the offsets of that pair and the ones
        before it are returned.
        """
        segments = self.segments
        pairs = [(segment.base_offset, segment.last_modified) for segment in segments]
        pairs[0] = (self.log_start_offset, pairs[0][1])  # DeleteRecords may have moved it into the segment
        if segments[-1].size > 0:
            pairs.append((self._next_offset, self._clock()))
        if timestamp == LATEST_TIME:
            start = len(pairs) - 1
        elif timestamp == EARLIEST_TIME:
            start = 0
        else:
            start = len(pairs) - 1
            while start >= 0 and pairs[start][1] > timestamp:
                start -= 1
        count = min(max_num_offsets, start + 1)
        return sorted((pairs[start - j][0] for j in range(count)), reverse=True)

    def format_of(self, records: FileRange) -> tuple[int, bool]:
        """(highest magic, holds zstd) of the segment a read's range lies in: whether an old Fetch version
        needs the range converted, or refused (zstd), without reading it when the segment has neither."""
        for segment in self.segments:
            if segment.file is records.file:
                return segment.format
        return 2, True  # deleted meanwhile: assume the worst, the caller looks at the bytes

    def leader_epoch_at(self, offset: int) -> int:
        """The partition leader epoch of the record batch holding `offset` (ListOffsets v4 answers it, as Kafka's
        log does from the batch it found); -1 for a message of magic 0 or 1, or an offset outside the log."""
        if not self.log_start_offset <= offset < self._next_offset:
            return -1
        segments = self.segments_between(offset, offset + 1)
        found = segments[0].translate_offset(offset) if segments else None
        if found is None:
            return -1
        head = os.pread(segments[0].file.fileno(), 17, found[1])
        return int.from_bytes(head[12:16], "big", signed=True) if len(head) == 17 and head[16] == 2 else -1

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """ListOffsets v1 and later for a timestamp (Kafka 0.10.1's fetchOffsetsByTimestamp): the first message
        whose timestamp is at or after it -- (its timestamp, its offset) -- searched in the first segment whose
        largest timestamp reaches it; None if there is none (and in logs of magic-0 messages, which carry no
        timestamps)."""
        for segment in self.segments:
            if segment.largest_timestamp >= timestamp:
                return segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
        return None

    def offset_before(self, timestamp: int) -> int | None:
        """The one offset ListOffsets v1 answers: log end for -1, log start for -2, otherwise the base offset
        of the last segment last written at or before `timestamp` (None if every segment is newer)."""
        offsets = self.offsets_before(timestamp, 1)
        return offsets[0] if offsets else None

    # -- retention ----------------------------------------------------------------------------------------

    def delete_old_segments(self) -> int:
        """Apply retention (a compacted topic keeps everything): segments older than retention.ms, then the
        oldest segments while the log stays at or above retention.bytes without them. Returns the number
        deleted."""
        if self.config.compact:
            return 0
        return self._delete_retention_ms_breached() + self._delete_retention_size_breached()

    def _delete_retention_ms_breached(self) -> int:
        retention_ms = self.config.retention_ms
        if retention_ms < 0:
            return 0
        now = self._clock()
        return self.delete_segments_while(lambda segment: now - segment.largest_timestamp > retention_ms)

    def _delete_retention_size_breached(self) -> int:
        retention = self.config.retention_bytes
        size = self.size
        if retention < 0 or size < retention:
            return 0
        excess = size - retention

        def should_delete(segment: LogSegment) -> bool:
            nonlocal excess
            if excess - segment.size >= 0:
                excess -= segment.size
                return True
            return False

        return self.delete_segments_while(should_delete)

    def delete_segments_while(self, predicate: Callable[[LogSegment], bool]) -> int:
        """Delete segments from the oldest on while `predicate` holds, never an empty active segment; if
        every segment goes, roll first so the log keeps one. Returns the number deleted."""
        with self._lock:
            active = self.active_segment
            deletable = []
            for segment in self.segments:
                if not (predicate(segment) and (segment is not active or segment.size > 0)):
                    break
                deletable.append(segment)
            if deletable:
                if len(deletable) == len(self._bases):
                    self.roll()
                for segment in deletable:
                    self._delete_segment(segment)
                # producers whose batches went with the segments are forgotten, as are older snapshots
                self.producer_state.truncate_head(self.log_start_offset)
                self.producer_state.delete_snapshots(lambda offset: offset < self.log_start_offset)
        return len(deletable)

    # -- flushing -----------------------------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync the segments holding offsets below `offset` (default: the log end offset) that may not be on
        disk yet, and advance the recovery point to `offset`."""
        with self._lock:
            # capped: a flush scheduled at a roll may run after a truncation below the roll's offset
            offset = self._next_offset if offset is None else min(offset, self._next_offset)
            if offset <= self.recovery_point:
                return
            truncations = self._truncations
        logger.debug(
            "Flushing log '%s' up to offset %d, last flushed: %d current time: %d unflushed = %d",
            self.name, offset, self._last_flushed, self._clock(), self.unflushed_messages,
        )
        for segment in self.segments_between(self.recovery_point, offset):
            segment.flush()
        with self._lock:
            # a truncation meanwhile (this may run on another thread) may have put other data below `offset`
            if offset > self.recovery_point and truncations == self._truncations:
                self.recovery_point = offset
                self._last_flushed = self._clock()

    # -- truncation ---------------------------------------------------------------------------------------

    def truncate_to(self, target_offset: int) -> None:
        """Remove the messages at or above `target_offset` (a follower cutting back to its high watermark)."""
        logger.info("Truncating log %s to offset %d.", self.name, target_offset)
        if target_offset < 0:
            raise ValueError(f"Cannot truncate to a negative offset ({target_offset}).")
        if target_offset > self._next_offset:
            logger.info(
                "Truncating %s to %d has no effect as the largest offset in the log is %d.",
                self.name, target_offset, self._next_offset - 1,
            )
            return
        with self._lock:
            if self.log_start_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return
            below_active = target_offset < self.active_segment.base_offset
            for segment in reversed(self.segments):  # newest first: a crash in between leaves a prefix
                if segment.base_offset > target_offset:
                    self._delete_segment(segment)
            self.active_segment.truncate_to(target_offset)
            self._truncations += 1
            self._next_offset = target_offset
            self.recovery_point = min(target_offset, self.recovery_point)
            self._load_producer_state()
            if below_active:
                self._segments_truncated()

    def _segments_truncated(self) -> None:
        self._segment_truncations += 1
        if self.on_truncate is not None:
            self.on_truncate(self)

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start the log empty at `new_offset`."""
        logger.debug("Truncate and start log '%s' to %d", self.name, new_offset)
        with self._lock:
            for segment in self.segments:
                self._delete_segment(segment)
            self._add_segment(self._new_segment(new_offset))
            self._truncations += 1
            self._next_offset = new_offset
            self._log_start_offset = new_offset
            self.recovery_point = min(new_offset, self.recovery_point)
            self.producer_state.clear()
            self.producer_state.delete_snapshots(lambda offset: True)
            self._segments_truncated()

    # -- closing and deleting -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close every segment (flush and trim); segments awaiting their delayed delete keep their .deleted
        files, which the next load removes."""
        logger.debug("Closing log %s", self.name)
        with self._lock:
            if self.producer_state.producers:
                self.producer_state.take_snapshot(self._next_offset)  # the next load need not replay
            for segment in self.segments:
                segment.close()
            for segment in self._retired.values():
                segment.close_files()
            self._retired.clear()

    def delete(self) -> None:
        """Remove the whole log directory at once (the partition is deleted)."""
        with self._lock:
            self._deleted = True
            for segment in [*self.segments, *self._retired.values()]:
                segment.delete()
            self._segments.clear()
            self._bases.clear()
            self._retired.clear()
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- the log cleaner's swap ---------------------------------------------------------------------------

    def replace_segments(
        self,
        cleaned: LogSegment,
        old: list[LogSegment],
        *,
        truncations: int,
        phase: Callable[[str], None] = _no_phase,
    ) -> None:
        """Swap `cleaned`, a segment written by the log cleaner under `.cleaned` names with the base offset of
        old[0], in for the consecutive segments `old` (Kafka's Log.replaceSegments). In three renames, each a
        point a crash may stop at and the next load finishes from:

        1. `.cleaned` -> `.swap`: from here on the cleaned segment is committed (`_remove_temporary_files`
           completes the swap; before it, the `.cleaned` files are simply deleted);
        2. the old segments -> `.deleted` (their files go file.delete.delay.ms later, so reads under way end);
        3. `.swap` -> the plain names.

        `phase` is called with "swap-renamed", "old-segments-renamed" and "swapped" after each (where the lab's
        fault point hold_cleaner_at can stop a broker; it runs under the log's lock). Readers on the owner thread
        need no lock: old[0]'s entry is replaced in one step, and the later bases leave `_bases` in one assignment.

        Raises SegmentsChangedError, having renamed nothing, when the log was truncated below its active
        segment since `truncations` (its `segment_truncations`) was read, was deleted, or no longer has exactly
        `old` below its active segment at those offsets.
        """
        with self._lock:
            if (
                self._deleted
                or truncations != self._segment_truncations
                or any(self._segments.get(segment.base_offset) is not segment for segment in old)
                or any(segment.base_offset in self._stale_bases for segment in old)
                or self.active_segment in old
            ):
                raise SegmentsChangedError(f"The segments of log {self.name} changed while they were cleaned.")
            if cleaned.base_offset != old[0].base_offset:
                raise ValueError(f"A cleaned segment at {cleaned.base_offset} cannot replace one at "
                                 f"{old[0].base_offset}.")
            cleaned.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            fsync_path(self.dir)
            phase("swap-renamed")
            for segment in old:
                self._retire(segment)
            phase("old-segments-renamed")
            cleaned.change_file_suffixes(SWAP_SUFFIX, "")
            fsync_path(self.dir)
            self._segments[cleaned.base_offset] = cleaned
            later = {segment.base_offset for segment in old[1:]}
            if later:
                self._bases = [base for base in self._bases if base not in later]
                self._stale_bases |= later
            phase("swapped")

    # -- internals ----------------------------------------------------------------------------------------

    def _load_producer_state(self) -> None:
        """The idempotent producers as of the log end (Kafka's loadProducerState): snapshots above the end are
        deleted, the latest at or below it is loaded, and the record batch headers after it are replayed. Without
        one, the last two segments are replayed (Kafka's rule for logs with no snapshot: no full scan)."""
        end = self._next_offset
        state = self.producer_state
        state.remove_temporary_files()
        state.delete_snapshots(lambda offset: offset > end)
        start = self._load_snapshot_at_or_below(state, end)
        if start is None:
            start = self._bases[-2] if len(self._bases) > 1 else self._bases[0]
        self._replay(state, start, end)
        state.truncate_head(self.log_start_offset)

    @staticmethod
    def _load_snapshot_at_or_below(state: ProducerStateManager, offset: int) -> int | None:
        """Load the latest readable snapshot at or below `offset` into `state` (cleared first); its offset."""
        state.clear()
        for snapshot in reversed(state.snapshot_offsets()):
            if snapshot <= offset and state.load_snapshot(snapshot):
                return snapshot
        return None

    def _replay(self, state: ProducerStateManager, start: int, end: int) -> None:
        """Apply the batches in [start, end) to `state`; the transactions they complete were indexed when
        their markers were appended."""
        for segment in self.segments_between(start, end):
            for txn in state.update(b for b in segment.record_batches(start) if b.last_offset < end):
                state.complete_txn(txn)

    def _rebuild_transaction_index(self, segment: LogSegment) -> None:
        """Recovery: the aborted transactions whose markers `segment` holds, found by replaying the producer
        state up to the segment (from a snapshot, or the log start) and then through it (Kafka's recoverSegment
        with its own ProducerStateManager)."""
        state = ProducerStateManager(self.dir)
        start = self._load_snapshot_at_or_below(state, segment.base_offset)
        self._replay(state, self._bases[0] if start is None else start, segment.base_offset)
        segment.txn_index.reset()
        for batch in segment.record_batches(segment.base_offset):
            completed = state.update([batch])
            if completed:
                self._complete_transactions(segment, completed)

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            roll_jitter_ms=self.config.random_segment_jitter(self._rng),
            clock=self._clock,
        )

    def _add_segment(self, segment: LogSegment) -> None:
        self._drop_stale_bases()
        if segment.base_offset not in self._segments:
            bisect.insort(self._bases, segment.base_offset)
        self._segments[segment.base_offset] = segment

    def _remove_segment(self, segment: LogSegment) -> None:
        self._drop_stale_bases()
        del self._segments[segment.base_offset]
        self._bases.remove(segment.base_offset)

    def _drop_stale_bases(self) -> None:
        for base in self._stale_bases:
            del self._segments[base]
        self._stale_bases.clear()

    def _delete_segment(self, segment: LogSegment) -> None:
        """Take a segment out of the log, rename its files .deleted and delete them after file.delete.delay.ms,
        so that reads already under way can finish."""
        self._remove_segment(segment)
        self._retire(segment)

    def _retire(self, segment: LogSegment) -> None:
        """Rename a segment's files .deleted and delete them after file.delete.delay.ms."""
        logger.info("Scheduling log segment %d for log %s for deletion.", segment.base_offset, self.name)
        segment.change_file_suffixes("", DELETED_SUFFIX)
        key = id(segment)
        self._retired[key] = segment

        def delete() -> None:
            logger.info("Deleting segment %d from log %s.", segment.base_offset, self.name)
            with self._lock:
                self._retired.pop(key, None)
            segment.delete()

        self._schedule("delete-file", delete, self.config.file_delete_delay_ms)

    def _has_clean_shutdown_file(self) -> bool:
        return os.path.exists(os.path.join(os.path.dirname(os.path.abspath(self.dir)), CLEAN_SHUTDOWN_FILE))

    # -- loading and recovery -----------------------------------------------------------------------------

    def _load_segments(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        self._remove_temporary_files()
        needs_index: list[LogSegment] = []
        for name in sorted(os.listdir(self.dir)):
            path = os.path.join(self.dir, name)
            if not os.path.isfile(path):
                continue
            if name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
                suffix = next(x for x in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) if name.endswith(x))
                if not os.path.exists(path[: -len(suffix)] + LOG_SUFFIX):
                    logger.warning("Found an orphaned index file, %s, with no corresponding log file.", path)
                    os.remove(path)
            elif name.endswith(LOG_SUFFIX):
                stem = name[: -len(LOG_SUFFIX)]
                if not stem.isdigit():
                    logger.warning("Ignoring %s in log %s: not a segment file name.", name, self.name)
                    continue
                base = int(stem)
                had_index = os.path.exists(index_filename(self.dir, base))
                segment = self._new_segment(base)
                if not had_index:
                    logger.error(
                        "Could not find index file corresponding to log file %s, rebuilding index...",
                        os.path.abspath(segment.log_path),
                    )
                    needs_index.append(segment)
                elif not segment.index.is_sane(segment.size):
                    logger.warning("Found a corrupt index file %s, rebuilding index...", segment.index.path)
                    needs_index.append(segment)
                elif not segment.time_index.is_sane():
                    logger.warning("Found a corrupt time index file %s, rebuilding index...", segment.time_index.path)
                    needs_index.append(segment)
                elif segment.time_index.newly_created:
                    # written before time indexes (Kafka 0.10.0's upgrade rule): an empty one, and the largest
                    # timestamp found by a walk of the segment when first asked for
                    segment.time_index.resize(0)
                self._add_segment(segment)
        if not self._bases:
            self._add_segment(self._new_segment(0))
            return
        recovering = self._segments_to_recover()
        for segment in needs_index:
            if segment not in recovering:
                segment.recover(self.config.max_message_bytes)
                if segment.holds_control_batches:
                    self._rebuild_transaction_index(segment)
        self._recover(recovering)
        self.active_segment.index.resize(self.config.segment_index_bytes)
        self.active_segment.time_index.resize(self.config.segment_index_bytes)

    def _remove_temporary_files(self) -> None:
        """Delete .deleted and .cleaned files; finish a swap a crash interrupted."""
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if not os.path.isfile(path):
                continue
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)):
                os.remove(path)
            elif name.endswith(SWAP_SUFFIX):
                base_path = path[: -len(SWAP_SUFFIX)]
                if base_path.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
                    os.remove(path)
                elif base_path.endswith(LOG_SUFFIX):
                    self._complete_swap(path, base_path)

    def _complete_swap(self, swap_path: str, log_path: str) -> None:
        """A cleaned segment was committed (renamed .swap) but not yet swapped in: delete the old segments whose
        offsets it holds, then rename it over the first of them; its indexes are rebuilt. Safe to repeat if a
        crash stops this too: the .swap stays until the old segments are gone.

        0.8.2 only renamed the .swap, leaving the later segments of its group in place, so the log held their
        offsets twice (fixed by KAFKA-2118 in 0.9, whose way this is)."""
        stem = os.path.basename(log_path)[: -len(LOG_SUFFIX)]
        base = int(stem) if stem.isdigit() else None
        last = last_offset_in_file(swap_path)
        for name in os.listdir(self.dir):
            other = name[: -len(LOG_SUFFIX)] if name.endswith(LOG_SUFFIX) else None
            if base is None or last is None or other is None or not other.isdigit():
                continue
            if base < int(other) <= last:
                logger.info("Deleting segment %s of log %s: the interrupted swap of %s holds its offsets.",
                            name, self.name, os.path.basename(swap_path))
                for path in (os.path.join(self.dir, name), os.path.join(self.dir, other + INDEX_SUFFIX),
                             os.path.join(self.dir, other + TIME_INDEX_SUFFIX),
                             os.path.join(self.dir, other + TXN_INDEX_SUFFIX)):
                    if os.path.exists(path):
                        os.remove(path)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            index = log_path[: -len(LOG_SUFFIX)] + suffix
            if os.path.exists(index):
                os.remove(index)
        os.rename(swap_path, log_path)
        logger.info("Found log file %s from interrupted swap operation, repairing.", swap_path)

    def _segments_to_recover(self) -> list[LogSegment]:
        if self._has_clean_shutdown_file():
            return []
        return self.segments_between(self.recovery_point, 2**63)

    def _recover(self, segments: list[LogSegment]) -> None:
        if not segments:
            # a clean shutdown flushed everything
            self.recovery_point = self.active_segment.next_offset()
            return
        for i, segment in enumerate(segments):
            logger.info("Recovering unflushed segment %d in log %s.", segment.base_offset, self.name)
            later = segments[i + 1 :]

            def drop_later(later: list[LogSegment] = later) -> None:
                # before the corrupt segment is cut, newest first: a crash in between leaves a valid prefix
                for dropped in reversed(later):
                    self._delete_segment(dropped)

            truncated = segment.recover(self.config.max_message_bytes, self.recovered_leader_epochs,
                                        before_cut=drop_later)
            if segment.holds_control_batches:
                self._rebuild_transaction_index(segment)
            if truncated > 0:
                logger.warning(
                    "Corruption found in segment %d of log %s, truncating to offset %d: %d bytes cut%s.",
                    segment.base_offset, self.name, segment.next_offset(), truncated,
                    _describe_deleted(later),
                )
                return

    def __repr__(self) -> str:
        return f"Log({self.dir})"


def _describe_deleted(segments: Iterable[LogSegment]) -> str:
    segments = list(segments)
    if not segments:
        return ""
    total = sum(segment.size for segment in segments)
    bases = ", ".join(str(segment.base_offset) for segment in segments)
    return f", and deleting the {len(segments)} later segments ({total} bytes) starting at offsets {bases}"

