"""TimeIndex: a segment's `<base offset>.timeindex` file (Kafka 0.10.1's kafka.log.TimeIndex, KIP-33; not in 0.8.2).

A sparse map from timestamps to offsets: 12-byte entries, int64 timestamp and int32 offset relative to the
segment's base offset, both increasing. Kafka's rules for when an entry is added, which the segment follows:
whenever the segment adds an offset index entry (every `index.interval.bytes`) it offers the largest timestamp
it holds so far and the offset of the message (the last offset of the batch or wrapper) that carries it, and
again when it rolls or closes; an offer becomes an entry only if its timestamp is above the last entry's. So
the last entry holds the segment's largest timestamp once it is inactive, and a log of magic-0 messages (no
timestamps) has empty time indexes. `lookup(t)`: the largest entry whose timestamp is at or below t, from
which a search for the first message at or after t walks forward.
"""

from __future__ import annotations

import logging
import os
import struct
from typing import NamedTuple

from .index_file import MappedIndex
from .offset_index import InvalidOffsetError

logger = logging.getLogger(__name__)

TIME_INDEX_SUFFIX = ".timeindex"
ENTRY_SIZE = 12
NO_TIMESTAMP = -1
_ENTRY = struct.Struct(">qi")
_INT64 = struct.Struct(">q")


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(MappedIndex):
    """The time index of the segment whose first offset is `base_offset`."""

    entry_size = ENTRY_SIZE
    min_index_size = 0  # segment.index.bytes may be below one entry: the offset index's check applies

    def _entries_changed(self) -> None:
        self.last_entry = self._read_last_entry()

    @property
    def is_full(self) -> bool:
        """Full one entry early, as Kafka's: the last slot is kept for the entry the roll adds. An index without
        entries is never full (a log of magic-0 messages, which never adds one, rolls as 0.8.2's did)."""
        return self._entries > 0 and self._entries >= self.max_entries - 1

    def _read_last_entry(self) -> TimestampOffset:
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(self._entries - 1)

    def entry(self, n: int) -> TimestampOffset:
        """The n-th entry, its offset absolute."""
        if n >= self._entries:
            raise IndexError(f"Attempt to fetch the {n}th entry from a time index of size {self._entries}.")
        timestamp, relative = _ENTRY.unpack_from(self._mm, n * ENTRY_SIZE)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The largest entry whose timestamp is at or below the target; (NO_TIMESTAMP, base offset) if none."""
        slot = self._slot_for(target_timestamp)
        return TimestampOffset(NO_TIMESTAMP, self.base_offset) if slot < 0 else self.entry(slot)

    def _slot_for(self, target_timestamp: int) -> int:
        mm, unpack = self._mm, _INT64.unpack_from
        if self._entries == 0 or unpack(mm, 0)[0] > target_timestamp:
            return -1
        lo, hi = 0, self._entries - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if unpack(mm, mid * ENTRY_SIZE)[0] <= target_timestamp:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def is_sane(self) -> bool:
        """Kafka's sanity check: whole entries, the last at or above the base offset and not older than the first."""
        if not self._whole_entries_on_disk():
            return False
        if self._entries == 0:
            return True
        last = self.last_entry
        return last.offset >= self.base_offset and last.timestamp >= self.entry(0).timestamp

    # -- writing ------------------------------------------------------------------------------------------

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Offer (largest timestamp so far, its offset): an entry only when the timestamp is above the last
        entry's. `skip_full_check` at roll, where the file was sized to hold one more entry."""
        if not skip_full_check and self.is_full:
            raise ValueError(f"Attempt to append to a full time index (size = {self._entries}).")
        last = self.last_entry
        if self._entries and offset < last.offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {self._entries} no larger than the last offset "
                f"appended ({last.offset}) to {self.path}."
            )
        if self._entries and timestamp < last.timestamp:
            raise ValueError(
                f"Attempt to append a timestamp ({timestamp}) to slot {self._entries} no larger than the last "
                f"timestamp appended ({last.timestamp}) to {self.path}."
            )
        if timestamp > last.timestamp:
            if self._entries >= self.max_entries:  # full at roll: room for the one entry the roll adds
                self.resize((self._entries + 1) * ENTRY_SIZE)
            logger.debug("Adding time index entry %d => %d to %s.", timestamp, offset, os.path.basename(self.path))
            _ENTRY.pack_into(self._mm, self._entries * ENTRY_SIZE, timestamp, offset - self.base_offset)
            self._entries += 1
            self.last_entry = TimestampOffset(timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose offset is at or above `offset`."""
        entries = self._entries
        while entries and self.entry(entries - 1).offset >= offset:
            entries -= 1
        self._truncate_to_entries(entries)
