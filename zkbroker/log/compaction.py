"""What log compaction keeps: the decisions of Kafka 0.8.2's log cleaner (kafka.log.Cleaner and
LogCleanerManager), over bytes and numbers only -- no files, no threads, no clock. `cleaner.py` does the
reading and writing around them.

A compacted log is the *clean* section, already compacted, from the log start to the first dirty offset
(each log directory's `cleaner-offset-checkpoint` keeps it per partition), then the *dirty* section up to
the active segment, which the cleaner never touches.

- Which log: the one with the highest cleanable ratio, dirty bytes / (clean + dirty bytes), among the
  compacted logs whose ratio is above their min.cleanable.dirty.ratio (`LogToClean`).
- The offset map: the last offset of each key in the dirty section (`index_keys`).
- What stays (`retention_rule`): a message unless a later one has its key, and a tombstone (a null value)
  unless its segment was last modified before the *delete horizon*: the last modification of the last
  clean segment, less delete.retention.ms (`delete_horizon_ms`). A tombstone therefore survives at least
  delete.retention.ms after it was cleaned, so that a consumer reading the log from the start meanwhile
  still sees the delete.
- How the segments below the end of the offset map are rewritten: in groups of consecutive segments whose
  sizes add up to less than segment.bytes and whose index sizes add up to less than segment.index.bytes,
  each group into one segment (`group_segments_by_size`).
- A message without a key, in 0.8.2, fails the cleaner's `require(message.hasKey)`, which ends the cleaner
  thread (KAFKA-1755); `discard_keyless` is 0.9's answer, dropping such messages (see LogCleaner).

Record batches (magic 2) and transactions, as Kafka 2.x's cleaner (kafka.log.Cleaner, CleanedTransactionMetadata):
- A batch is rewritten record by record and keeps its header: base offset, last offset (so the producer's last
  sequence stays), producer id, epoch and base sequence (record_batch.rebuild_batch). A batch left without
  records goes -- unless it is the last data batch of a producer the log still knows, or, for a producer whose
  last entry is a marker, that marker of its current epoch: then its empty header stays
  (record_batch.build_empty_batch), so that a rebuilt producer state keeps its epoch and sequence
  (`batch_retention_rule`, `LastRecord`).
- The cleaner never passes the first unstable offset: it stops at the segment holding the first offset of a
  transaction still open (`first_uncleanable_offset`).
- `CleanedTransactions` follows the transactions through the log in offset order, from the aborted
  transactions of the `.txnindex` files: a batch of an aborted transaction puts no key in the offset map and
  goes whole; an ABORT marker stays while any batch of its transaction was met in this cleaning (and its
  `.txnindex` entry moves to the cleaned segment), a COMMIT marker while any of its batches was; a marker
  whose transaction has nothing left goes once its segment is past the delete horizon, as tombstones do
  (delete.retention.ms: a reader meanwhile still sees it). An empty control batch goes as soon as it is met.
  Control records are never keys of the map, and never judged as keyed data.

Where we deviate from 0.8.2, on purpose:
- Compressed sets are compacted: opened, and rewritten with their survivors in their codec, as from Kafka
  0.9 (KAFKA-1374). 0.8.2's documentation listed compressed topics among compaction's limitations.
- A group also ends where its offsets would no longer fit the offset index's 32-bit relative offsets (Kafka
  0.9's check); 0.8.2 could write an index that wrapped around.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from zkbroker.protocol.message_set import (
    DELETE,
    DELETE_EMPTY,
    LOG_OVERHEAD,
    RETAIN_EMPTY,
    BatchCheck,
    Retained,
    entry_starts,
    iter_keys,
    retain_messages,
)
from zkbroker.protocol.record_batch import BatchHeader, ControlRecordType, EndTxnMarker
from zkbroker.topic_partition import TopicPartition

from .offset_map import OffsetMap
from .transaction_index import AbortedTxn

_INT32_MAX = 2**31 - 1


class KeylessMessageError(ValueError):
    """A compacted log holds a message without a key: 0.8.2's `require` failure, which stopped its cleaner."""


@dataclass(frozen=True)
class LogToClean:
    """A compacted log's two sections, in bytes: clean (below the first dirty offset) and dirty (from it up
    to the active segment)."""

    topic_partition: TopicPartition
    first_dirty_offset: int
    clean_bytes: int
    dirty_bytes: int

    @classmethod
    def of(
        cls,
        topic_partition: TopicPartition,
        segments: Sequence[tuple[int, int]],
        first_dirty_offset: int,
        active_base_offset: int,
    ) -> LogToClean:
        """From the (base offset, size) of every segment, oldest first."""
        clean = sum(size for base, size in segments if base < first_dirty_offset)
        dirty = sum(size for base, size in segments if first_dirty_offset <= base < active_base_offset)
        return cls(topic_partition, first_dirty_offset, clean, dirty)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.dirty_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.dirty_bytes / self.total_bytes if self.total_bytes else 0.0


def filthiest(candidates: Sequence[tuple[LogToClean, float]]) -> LogToClean | None:
    """The log to clean next: of (log, its min.cleanable.dirty.ratio) pairs, the non-empty log with the highest
    cleanable ratio above its minimum; None if no log qualifies."""
    eligible = [log for log, min_ratio in candidates if log.total_bytes > 0 and log.cleanable_ratio > min_ratio]
    return max(eligible, key=lambda log: log.cleanable_ratio, default=None)


def delete_horizon_ms(last_clean_segment_modified_ms: int | None, delete_retention_ms: int) -> int:
    """Tombstones in segments last modified at or before this time go; with no clean segment yet, none do."""
    if last_clean_segment_modified_ms is None:
        return 0
    return last_clean_segment_modified_ms - delete_retention_ms


def _keyless(offset: int, where: str) -> KeylessMessageError:
    return KeylessMessageError(
        f"requirement failed: message at offset {offset} in {where} has no key, and the log is compacted"
    )


def index_keys(
    chunk: bytes | memoryview, offset_map: OffsetMap, *, discard_keyless: bool, where: str,
    max_inflated_bytes: int | None = None, transactions: CleanedTransactions | None = None,
) -> tuple[int, int]:
    """Put the key of every message in the complete entries of `chunk` into the map with its offset (a later
    message's offset replaces an earlier one's). Returns how many bytes held complete entries and how many
    messages they held. A keyless message raises KeylessMessageError naming `where` (0.8.2) unless
    `discard_keyless`. With `transactions`, the batches of aborted transactions put no key in the map."""
    starts = entry_starts(chunk)
    if not starts:
        return 0, 0
    view = memoryview(chunk)
    last = starts[-1]
    walked = last + LOG_OVERHEAD + int.from_bytes(view[last + 8 : last + 12], "big", signed=True)
    count = 0
    put = offset_map.put
    has_keys = None if transactions is None else transactions.batch_has_keys
    for offset, key, _ in iter_keys(view[:walked], max_inflated_bytes=max_inflated_bytes, batch_has_keys=has_keys):
        if key is not None:
            put(key, offset)
        elif not discard_keyless:
            raise _keyless(offset, where)
        count += 1
    return walked, count


def retention_rule(
    offset_map: OffsetMap, retain_deletes: bool, *, discard_keyless: bool, where: str
) -> Callable[[int, bytes | None, bool], bool]:
    """Whether compaction keeps the message (offset, key, value is null): not if a later message has its key,
    nor if it is a tombstone and deletes are no longer retained in its segment. A keyless message raises
    KeylessMessageError naming `where` (0.8.2), or goes with `discard_keyless`."""
    get = offset_map.get

    def keep(offset: int, key: bytes | None, null: bool) -> bool:
        if key is None:
            if discard_keyless:
                return False
            raise _keyless(offset, where)
        if offset < get(key):  # redundant: a later message has the key
            return False
        return retain_deletes or not null

    return keep


def clean_chunk(
    chunk: bytes | memoryview, offset_map: OffsetMap, retain_deletes: bool, *, discard_keyless: bool, where: str,
    max_inflated_bytes: int | None = None, batch_retention: BatchCheck | None = None,
) -> Retained:
    """The complete entries of `chunk` with only the messages compaction keeps (see `retain_messages`);
    `batch_retention` decides record batches as a whole first (see `batch_retention_rule`)."""
    keep = retention_rule(offset_map, retain_deletes, discard_keyless=discard_keyless, where=where)
    return retain_messages(chunk, keep, max_inflated_bytes=max_inflated_bytes, batch_retention=batch_retention)


# -- transactions -------------------------------------------------------------------------------------------


class LastRecord(NamedTuple):
    """What the cleaner must keep of a producer the log still knows (Kafka's LastRecord): the last offset of its
    last data batch (None when its last entry is a marker), and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


class CleanedTransactions:
    """The transactions met while walking a log in offset order (Kafka's CleanedTransactionMetadata), from the
    aborted transactions of its `.txnindex` files that end at or after where the walk starts. Stateful: show it
    every batch once, in order. `retained_aborted` collects the index entries of the ABORT markers kept, for the
    cleaned segment's `.txnindex` (the caller takes them after each segment group)."""

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._aborted: list[tuple[int, int, AbortedTxn]] = []  # (first offset, order, txn): a min-heap
        self._seen: set[tuple[int, int]] = set()
        self._ongoing_committed: set[int] = set()
        # producer id -> [its aborted transaction, last offset of its last batch met (None: none yet)]
        self._ongoing_aborted: dict[int, list] = {}
        self.retained_aborted: list[AbortedTxn] = []
        self.add_aborted(aborted)

    def add_aborted(self, aborted: Iterable[AbortedTxn]) -> None:
        for txn in aborted:
            if (txn.producer_id, txn.first_offset) not in self._seen:
                self._seen.add((txn.producer_id, txn.first_offset))
                heapq.heappush(self._aborted, (txn.first_offset, len(self._seen), txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            txn = heapq.heappop(self._aborted)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, [txn, None])

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch met: True if it belongs to an aborted transaction (it may go whole)."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(header.producer_id)
        if aborted is not None:
            aborted[1] = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, marker: EndTxnMarker | None) -> bool:
        """A control batch met: True if nothing of its transaction was met in this walk (it may go, its delete
        horizon permitting). An ABORT marker kept has its index entry added to `retained_aborted`."""
        self._consume_aborted_up_to(header.last_offset)
        if marker is None:
            return True  # an empty control batch: an earlier cleaning removed its transaction
        pid = header.producer_id
        if marker.control_type == ControlRecordType.ABORT:
            aborted = self._ongoing_aborted.pop(pid, None)
            if aborted is not None and aborted[1] is not None:
                self.retained_aborted.append(aborted[0])
                return False
            return True
        if marker.control_type == ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def batch_has_keys(self, header: BatchHeader, marker: EndTxnMarker | None) -> bool:
        """For the offset map (message_set.iter_keys): whether the batch's keys count -- not an aborted one's."""
        if header.is_control:
            self.on_control_batch(header, marker)
            return False
        return not self.on_batch(header)


def batch_retention_rule(
    transactions: CleanedTransactions, last_records: Mapping[int, LastRecord], retain_markers: bool
) -> BatchCheck:
    """What the cleaner does with each record batch of a segment (Kafka's logCleanerFilter.checkBatchRetention),
    as message_set.retain_messages asks: `(retention, discard_records)`. A batch of an aborted transaction, and a
    marker with nothing of its transaction left (unless `retain_markers`: its segment is within the delete
    horizon), go; the last data batch of a producer in `last_records` (or its last marker, when it has no data
    batch left in its epoch) keeps at least its header; any other batch keeps what the offset map keeps."""

    def decide(header: BatchHeader, marker: EndTxnMarker | None) -> tuple[str, bool]:
        if header.is_control:
            discard = transactions.on_control_batch(header, marker) and not retain_markers
        else:
            discard = transactions.on_batch(header)
        last = last_records.get(header.producer_id) if header.producer_id >= 0 else None
        if last is not None and (
            header.last_offset == last.last_data_offset
            if last.last_data_offset is not None
            else header.is_control and header.producer_epoch == last.producer_epoch
        ):
            return RETAIN_EMPTY, discard
        return (DELETE if discard else DELETE_EMPTY), discard

    return decide


def first_uncleanable_offset(segment_bases: Sequence[int], active_base: int, first_unstable: int | None) -> int:
    """Where the cleanable part of a log ends (Kafka's firstUncleanableDirtyOffset, in whole segments): the
    active segment's base, or the base of the segment holding the first unstable offset (the first offset of a
    transaction not yet complete) if that is lower -- the cleaner must not decide on records whose transaction
    may still abort."""
    if first_unstable is None or first_unstable >= active_base:
        return active_base
    at = bisect.bisect_right(segment_bases, first_unstable) - 1
    return segment_bases[max(at, 0)]


class SegmentSpan(NamedTuple):
    """What grouping needs of a segment: its base offset, .log size, index size in bytes, and the offset
    above its last possible one (the next segment's base offset)."""

    base_offset: int
    size: int
    index_size: int
    end_offset: int


def group_segments_by_size(segments: Sequence[SegmentSpan], max_size: int, max_index_size: int) -> list[list[int]]:
    """Split consecutive segments into groups, each to become one cleaned segment: a group takes the next
    segment while its total size stays below `max_size` (segment.bytes), its index sizes below
    `max_index_size` (segment.index.bytes), and its offsets within reach of 32-bit relative offsets.
    Returns the base offsets of each group's segments."""
    groups: list[list[int]] = []
    i = 0
    while i < len(segments):
        first = segments[i]
        group = [first.base_offset]
        log_size, index_size = first.size, first.index_size
        i += 1
        while (
            i < len(segments)
            and log_size + segments[i].size < max_size
            and index_size + segments[i].index_size < max_index_size
            and segments[i].end_offset - 1 - first.base_offset <= _INT32_MAX
        ):
            group.append(segments[i].base_offset)
            log_size += segments[i].size
            index_size += segments[i].index_size
            i += 1
        groups.append(group)
    return groups
