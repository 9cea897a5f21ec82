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

Where we deviate from 0.8.2, on purpose: a group also ends where its offsets would no longer fit the offset
index's 32-bit relative offsets (Kafka 0.9's check); 0.8.2 could write an index that wrapped around.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from zkbroker.protocol.message_set import LOG_OVERHEAD, Retained, entry_starts, iter_keys, retain_messages
from zkbroker.topic_partition import TopicPartition

from .offset_map import OffsetMap

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
    max_inflated_bytes: int | None = None,
) -> tuple[int, int]:
    """Put the key of every message in the complete entries of `chunk` into the map with its offset (a later
    message's offset replaces an earlier one's). Returns how many bytes held complete entries and how many
    messages they held. A keyless message raises KeylessMessageError naming `where` (0.8.2) unless
    `discard_keyless`."""
    starts = entry_starts(chunk)
    if not starts:
        return 0, 0
    view = memoryview(chunk)
    last = starts[-1]
    walked = last + LOG_OVERHEAD + int.from_bytes(view[last + 8 : last + 12], "big", signed=True)
    count = 0
    put = offset_map.put
    for offset, key, _ in iter_keys(view[:walked], max_inflated_bytes=max_inflated_bytes):
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
    max_inflated_bytes: int | None = None,
) -> Retained:
    """The complete entries of `chunk` with only the messages compaction keeps (see `retain_messages`)."""
    keep = retention_rule(offset_map, retain_deletes, discard_keyless=discard_keyless, where=where)
    return retain_messages(chunk, keep, max_inflated_bytes=max_inflated_bytes)


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
