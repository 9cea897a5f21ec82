"""Cleaner: compacts one log (Kafka 0.8.2's kafka.log.Cleaner, with Kafka 2.x's record batches and
transactions): the file work around `compaction.py`'s decisions.

`clean(log, first_dirty_offset)`:
1. Build the offset map: read the dirty segments, from the first dirty offset up to the active segment
   (which is never cleaned) or the segment holding the first offset of an open transaction, whole segments
   at a time while the map has room for them; the map's end offset is the base offset of the first segment
   left out. The keys of aborted transactions' batches (the `.txnindex` files say which) stay out of it.
2. Compute the delete horizon from the last clean segment's modification time.
3. Group every segment below the map's end (the clean section too: it is rewritten with the new map) by
   size, and clean each group into one new segment: read its segments chunk by chunk
   (log.cleaner.io.buffer.size shared by the threads, half to read; doubled up to message.max.bytes for a
   larger message), keep what `compaction.clean_chunk` keeps (record batches first decided whole by
   `compaction.batch_retention_rule`), and append that to `<base>.log.cleaned` with
   an index entry every index.interval.bytes, as appends to a live segment get, and the `.txnindex` entries of
   the ABORT markers kept to `<base>.txnindex.cleaned`. Compressed sets are opened,
   and those that lose messages are recompressed with their codec. Offsets are kept, so a compacted log has
   gaps. The cleaned segment takes the last modification time of its group's last segment (the delete
   horizon of later cleanings goes by it), is flushed, and `Log.replace_segments` swaps it in.
4. Return the end offset: the caller checkpoints it as the new first dirty offset.

The segments are read through descriptors duplicated from theirs, so a truncation or a deletion of the log
meanwhile cannot close them under the cleaner; such a change makes the swap refuse (SegmentsChangedError),
and the cleaning ends with the `.cleaned` files deleted (CleaningAbortedError). `check_done` is called at
every chunk to stop early (shutdown, or the log's cleaning aborted).

`phase(name)` is called at the points where a crash leaves different files behind: "offset-map-built",
"cleaned-partial" (the first chunk of a group appended to its `.cleaned` files), "cleaned-written" (a group's
`.cleaned` files complete and flushed), then the swap's own "swap-renamed", "old-segments-renamed" and
"swapped" (see Log.replace_segments). LogCleaner adds "checkpointed". The lab fault point hold_cleaner_at
(zkbroker/fault_points.py, CLEANER_PHASES) stops a broker's cleaner there; see log_cleaner.py.
"""

from __future__ import annotations

import datetime
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from zkbroker.config import KafkaConfig
from zkbroker.protocol.message_set import LOG_OVERHEAD, inflation_bound

from . import compaction
from .compaction import CleanedTransactions, LastRecord, SegmentSpan
from .log import Log, SegmentsChangedError
from .offset_map import OffsetMap
from .segment import CLEANED_SUFFIX, Clock, LogSegment

logger = logging.getLogger(__name__)

Phase = Callable[[str], None]

# The cleaner shares the interpreter with the broker's event loop. A thread that never lets go of it hands
# it over only when another has waited a switch interval (5 ms), and the loop lets go at every system call,
# so each of the loop's system calls may cost it that wait. Letting go (sleep(0)) after each piece of this
# size gives the loop a chance at the interpreter far more often, for a few percent of the cleaner's time.
_PIECE = 32 * 1024


class CleaningAbortedError(Exception):
    """The cleaning of a log stopped before it finished (Kafka's LogCleaningAbortedException); the log is as
    it was, except for groups already swapped in."""


@dataclass(frozen=True)
class CleanerConfig:
    """The log cleaner's settings (Kafka's CleanerConfig), from the broker's log.cleaner.* keys."""

    enable_cleaner: bool = False
    num_threads: int = 1
    dedupe_buffer_size: int = 500 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_message_size: int = 1_000_012
    max_io_bytes_per_second: float = float("inf")
    backoff_ms: int = 15_000
    discard_keyless: bool = False

    @classmethod
    def from_broker(cls, config: KafkaConfig) -> CleanerConfig:
        return cls(
            enable_cleaner=config["log.cleaner.enable"],
            num_threads=config["log.cleaner.threads"],
            dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
            dedupe_buffer_load_factor=config["log.cleaner.io.buffer.load.factor"],
            io_buffer_size=config["log.cleaner.io.buffer.size"],
            max_message_size=config["message.max.bytes"],
            max_io_bytes_per_second=config["log.cleaner.io.max.bytes.per.second"],
            backoff_ms=config["log.cleaner.backoff.ms"],
            discard_keyless=config["log.cleaner.keyless.messages"] == "discard",
        )


class Throttler:
    """Keeps the bytes read plus written under a rate (Kafka's Throttler): every 300 ms of work, if the rate
    since the last check was above it, sleep until it is not. `sleep` may return early (a shutdown)."""

    CHECK_INTERVAL_S = 0.3

    def __init__(self, rate_per_second: float, sleep: Callable[[float], object] = time.sleep) -> None:
        self.rate = rate_per_second
        self._sleep = sleep
        self._period_start = time.monotonic()
        self._observed = 0.0

    def maybe_throttle(self, observed: float) -> None:
        if self.rate == float("inf") or self.rate >= 1.7e308:
            return
        self._observed += observed
        elapsed = time.monotonic() - self._period_start
        if elapsed < self.CHECK_INTERVAL_S:
            return
        if self._observed / elapsed > self.rate:
            self._sleep(self._observed / self.rate - elapsed)
        self._period_start = time.monotonic()
        self._observed = 0.0


@dataclass
class CleanerStats:
    """What one cleaning read and wrote (Kafka's CleanerStats), for its summary line."""

    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    start_s: float = 0.0
    map_done_s: float = 0.0
    end_s: float = 0.0

    def summary(self, log_name: str, map_utilization: float, end_offset: int) -> str:
        map_s = self.map_done_s - self.start_s
        clean_s = self.end_s - self.map_done_s
        total_s = max(self.end_s - self.start_s, 1e-9)
        mb = 1024 * 1024
        return (
            f"Log cleaner finished cleaning log {log_name} up to offset {end_offset}:\n"
            f"\t{(self.map_bytes_read + self.bytes_read) / mb:,.1f} MB of log processed in {total_s:,.1f} "
            f"seconds ({(self.map_bytes_read + self.bytes_read) / mb / total_s:,.1f} MB/sec).\n"
            f"\tIndexed {self.map_bytes_read / mb:,.1f} MB in {map_s:.1f} seconds "
            f"({self.map_messages_read:,} messages, {100 * map_utilization:.1f}% of the offset map used).\n"
            f"\tCleaned {self.bytes_read / mb:,.1f} MB in {clean_s:.1f} seconds "
            f"({self.messages_read:,} messages read, {self.messages_written:,} kept).\n"
            f"\tStart size: {self.bytes_read / mb:,.1f} MB ({self.messages_read:,} messages)\n"
            f"\tEnd size: {self.bytes_written / mb:,.1f} MB ({self.messages_written:,} messages)\n"
            f"\t{100 * (1 - self.bytes_written / self.bytes_read) if self.bytes_read else 0.0:.1f}% size "
            f"reduction ({100 * (1 - self.messages_written / self.messages_read) if self.messages_read else 0.0:.1f}"
            f"% fewer messages)"
        )


def _no_phase(name: str) -> None:
    """Phases are reported to nobody."""


class Cleaner:
    """Cleans logs one at a time with its own offset map (one per cleaner thread)."""

    def __init__(
        self,
        cleaner_id: int,
        config: CleanerConfig,
        *,
        clock: Clock,
        check_done: Callable[[Log], None] = lambda log: None,
        throttler: Throttler | None = None,
        phase: Phase = _no_phase,
    ) -> None:
        self.id = cleaner_id
        threads = max(config.num_threads, 1)
        self.offset_map = OffsetMap(min(config.dedupe_buffer_size // threads, 2**31 - 1))
        self.max_map_entries = int(self.offset_map.slots * config.dedupe_buffer_load_factor)
        self.io_buffer_size = max(config.io_buffer_size // threads // 2, LOG_OVERHEAD)
        self.max_io_buffer_size = config.max_message_size + LOG_OVERHEAD
        self.discard_keyless = config.discard_keyless
        self.throttler = throttler or Throttler(config.max_io_bytes_per_second)
        self._clock = clock
        self._check_done = check_done
        self._phase = phase
        self.stats = CleanerStats()
        self._modified: dict[int, int] = {}  # base offset -> last modified (ms) of the segments being cleaned

    # -- one log ------------------------------------------------------------------------------------------

    def clean(self, log: Log, first_dirty_offset: int) -> int:
        """Compact `log` from its start up to as much of the dirty section as the offset map holds; returns
        the offset the dirty section now starts at."""
        self.stats = CleanerStats(start_s=time.monotonic())
        logger.info("Beginning cleaning of log %s.", log.name)
        self._check_done(log)
        with log.lock:
            truncations = log.segment_truncations
            segments = log.segments
            if not segments:  # deleted
                raise CleaningAbortedError(f"Log {log.name} was deleted.")
            upper_bound = compaction.first_uncleanable_offset(
                [s.base_offset for s in segments], log.active_segment.base_offset,
                log.producer_state.earliest_unstable_offset(),
            )
            last_records = {pid: LastRecord(*last) for pid, last in log.producer_state.last_records().items()}
            self._modified = {segment.base_offset: segment.last_modified for segment in segments}
        if upper_bound <= first_dirty_offset:  # a transaction open since the clean section: nothing to clean yet
            logger.info("Log %s has nothing to clean below its first unstable offset.", log.name)
            return first_dirty_offset
        logger.info("Building offset map for %s...", log.name)
        end_offset = self.build_offset_map(log, segments, first_dirty_offset, upper_bound)
        self.stats.map_done_s = time.monotonic()
        self._phase("offset-map-built")
        clean_segments = [s for s in segments if s.base_offset < first_dirty_offset]
        horizon = compaction.delete_horizon_ms(
            self._modified[clean_segments[-1].base_offset] if clean_segments else None,
            log.config.delete_retention_ms,
        )
        logger.info("Cleaning log %s (discarding tombstones prior to %s)...", log.name, _date(horizon))
        below_end = [s for s in segments if s.base_offset < end_offset]
        # one walk through the transactions for every group, in offset order: a transaction may span groups
        transactions = CleanedTransactions(self._aborted_transactions(log, segments[0].base_offset, end_offset))
        for group in self._groups(below_end, end_offset, log):
            self.clean_segments(log, group, horizon, truncations, transactions, last_records)
        self.stats.end_s = time.monotonic()
        logger.info("%s", self.stats.summary(log.name, self.offset_map.utilization, end_offset))
        return end_offset

    def build_offset_map(self, log: Log, segments: list[LogSegment], start: int, end: int) -> int:
        """Fill the offset map from the segments between `start` and `end` (the first dirty offset and the
        active segment's base), whole segments while the map has room for them. Returns the base offset of
        the first segment left out (`end` if none). 0.8.2 returned the last indexed offset plus one, which
        is the same offset where the dirty section has no gaps."""
        self.offset_map.clear()
        dirty = [(i, s) for i, s in enumerate(segments) if start <= s.base_offset < end]
        transactions = CleanedTransactions(self._aborted_transactions(log, start, end))
        for i, segment in dirty:
            self._check_done(log)
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else end
            # at most this many messages: the map may take the segment only if it has room for them all
            messages = next_base - segment.base_offset
            if messages > self.max_map_entries:
                raise ValueError(
                    f"requirement failed: {messages} messages in segment "
                    f"{log.name}/{os.path.basename(segment.log_path)} but offset map can fit only "
                    f"{self.max_map_entries}. You can increase log.cleaner.dedupe.buffer.size or decrease "
                    "log.cleaner.threads"
                )
            if self.offset_map.size + messages > self.max_map_entries:
                return segment.base_offset
            self._index_segment(log, segment, transactions)
        return end

    @staticmethod
    def _aborted_transactions(log: Log, start: int, end: int) -> list:
        with log.lock:
            return log.collect_aborted_transactions(start, end)

    def _index_segment(self, log: Log, segment: LogSegment, transactions: CleanedTransactions) -> None:
        where = f"log segment {segment.log_path}"
        bound = inflation_bound(log.config.max_message_bytes)

        def index(chunk: memoryview) -> int:
            walked, messages = compaction.index_keys(
                chunk, self.offset_map, discard_keyless=self.discard_keyless, where=where, max_inflated_bytes=bound,
                transactions=transactions,
            )
            self.stats.map_bytes_read += walked
            self.stats.map_messages_read += messages
            return walked

        self._read_segment(log, segment, index)

    def _groups(self, segments: list[LogSegment], end_offset: int, log: Log) -> list[list[LogSegment]]:
        spans = [
            SegmentSpan(s.base_offset, s.size, s.index.size_in_bytes,
                        segments[i + 1].base_offset if i + 1 < len(segments) else end_offset)
            for i, s in enumerate(segments)
        ]
        by_base = {s.base_offset: s for s in segments}
        groups = compaction.group_segments_by_size(spans, log.config.segment_bytes, log.config.segment_index_bytes)
        return [[by_base[base] for base in group] for group in groups]

    # -- one group ----------------------------------------------------------------------------------------

    def clean_segments(
        self,
        log: Log,
        group: list[LogSegment],
        delete_horizon_ms: int,
        truncations: int,
        transactions: CleanedTransactions | None = None,
        last_records: dict[int, LastRecord] | None = None,
    ) -> None:
        """Clean `group` into one segment and swap it in. `transactions` has walked the log up to the group;
        `last_records` are the producers whose last batch keeps its header (see compaction)."""
        transactions = transactions if transactions is not None else CleanedTransactions()
        last_records = last_records or {}
        base = group[0].base_offset
        try:
            for leftover in (group[0].log_path + CLEANED_SUFFIX, group[0].index.path + CLEANED_SUFFIX):
                if os.path.exists(leftover):
                    os.remove(leftover)
            cleaned = LogSegment(
                log.dir, base, index_interval_bytes=log.config.index_interval_bytes,
                max_index_size=log.config.segment_index_bytes, clock=self._clock, suffix=CLEANED_SUFFIX,
            )
        except FileNotFoundError as e:  # the log's directory is gone: the log was deleted
            raise CleaningAbortedError(f"Log {log.name} was deleted: {e}") from e
        try:
            for old in group:
                modified = self._modified[old.base_offset]
                retain_deletes = modified > delete_horizon_ms
                logger.info(
                    "Cleaning segment %d in log %s (last modified %s) into %d, %s deletes.",
                    old.base_offset, log.name, _date(modified), base, "retaining" if retain_deletes else "discarding",
                )
                rule = compaction.batch_retention_rule(transactions, last_records, retain_deletes)
                self.clean_into(log, old, cleaned, retain_deletes, rule)
            for txn in transactions.retained_aborted:  # the ABORT markers kept are in this group
                cleaned.txn_index.append(txn)
            transactions.retained_aborted.clear()
            cleaned.index.trim_to_valid_size()
            cleaned.flush()
            cleaned.set_last_modified(self._modified[group[-1].base_offset])
        except BaseException:
            cleaned.delete()
            raise
        self._phase("cleaned-written")
        try:
            log.replace_segments(cleaned, group, truncations=truncations, phase=self._phase)
        except SegmentsChangedError as e:
            cleaned.delete()
            raise CleaningAbortedError(str(e)) from e
        # any other error may come after the swap was committed: its files stay for the next load to finish

    def clean_into(
        self, log: Log, source: LogSegment, dest: LogSegment, retain_deletes: bool,
        batch_retention: compaction.BatchCheck | None = None,
    ) -> None:
        """Append to `dest` what compaction keeps of `source`, in pieces of about index.interval.bytes so that
        the index gets its usual density; `batch_retention` decides record batches whole first."""
        where = f"log segment {source.log_path}"
        bound = inflation_bound(log.config.max_message_bytes)
        interval = max(dest.index_interval_bytes, 1)

        def clean(chunk: memoryview) -> int:
            retained = compaction.clean_chunk(
                chunk, self.offset_map, retain_deletes, discard_keyless=self.discard_keyless, where=where,
                max_inflated_bytes=bound, batch_retention=batch_retention,
            )
            records, entries = memoryview(retained.records), retained.entries
            first = 0
            while first < len(entries):
                start = entries[first][0]
                last = first + 1
                while last < len(entries) and entries[last][0] - start < interval:
                    last += 1
                stop = entries[last][0] if last < len(entries) else len(records)
                was_empty = dest.size == 0
                dest.append(entries[first][1], records[start:stop])
                if was_empty:
                    self._phase("cleaned-partial")
                first = last
            self.stats.bytes_read += retained.walked
            self.stats.bytes_written += len(records)
            self.stats.messages_read += retained.kept + retained.dropped
            self.stats.messages_written += retained.kept
            self.throttler.maybe_throttle(retained.walked + len(records))
            return retained.walked

        self._read_segment(log, source, clean)

    def _read_segment(self, log: Log, segment: LogSegment, process: Callable[[memoryview], int]) -> None:
        """Hand `segment`'s bytes to `process`; `process` returns how many bytes held complete entries, and the
        next piece starts after them. The file is read a buffer at a time (doubled, up to message.max.bytes
        plus the entry overhead, while one entry does not fit), and each buffer handed over in pieces of
        about _PIECE bytes, the interpreter let go between them (see _PIECE)."""
        self._check_done(log)
        try:
            fd = os.dup(segment.file.fileno())
        except (ValueError, OSError) as e:  # closed by a truncation or deletion since the segments were read
            raise CleaningAbortedError(f"Segment {segment.log_path} went away: {e}") from e
        try:
            size = segment.size
            position = 0
            buffer_size = self.io_buffer_size
            while position < size:
                self._check_done(log)
                chunk = memoryview(os.pread(fd, min(buffer_size, size - position), position))
                if not chunk:
                    raise CleaningAbortedError(f"Segment {segment.log_path} shrank while it was cleaned.")
                walked = 0
                while walked < len(chunk):
                    done = process(chunk[walked : walked + _PIECE]) or process(chunk[walked:])
                    if not done:
                        break  # the rest is the start of an entry the next read completes
                    walked += done
                    time.sleep(0)
                if walked:
                    position += walked
                    buffer_size = self.io_buffer_size
                elif buffer_size < self.max_io_buffer_size and len(chunk) == buffer_size:
                    buffer_size = min(buffer_size * 2, self.max_io_buffer_size)
                else:
                    raise ValueError(
                        f"This log contains a message larger than maximum allowable size of "
                        f"{self.max_io_buffer_size - LOG_OVERHEAD}, or a torn entry at byte {position} of "
                        f"{segment.log_path}."
                    )
        finally:
            os.close(fd)


def _date(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%a %b %d %H:%M:%S %Y")
