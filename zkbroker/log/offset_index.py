"""OffsetIndex: a segment's `<base offset>.index` file (Kafka's kafka.log.OffsetIndex).

A sparse map from offsets to positions in the segment's .log file: 8-byte entries, int32 offset relative to
the segment's base offset and int32 file position, in increasing offset order. The file is a `MappedIndex`:
preallocated for the active segment, trimmed at roll, taken whole when it exists (a preallocated file left by
a crash fails `is_sane()` and is rebuilt from the log, as in 0.8.2). `lookup` is a binary search for the
largest entry at or below the target.
"""

from __future__ import annotations

import logging
import os
import struct

from .index_file import MappedIndex

logger = logging.getLogger(__name__)

ENTRY_SIZE = 8
_ENTRY = struct.Struct(">ii")
_INT32 = struct.Struct(">i")


class InvalidOffsetError(ValueError):
    """An index entry would not be above the last one (Kafka's InvalidOffsetException)."""


class OffsetIndex(MappedIndex):
    """The offset index of the segment whose first offset is `base_offset`."""

    entry_size = ENTRY_SIZE

    def _entries_changed(self) -> None:
        self.last_offset = self._read_last_offset()

    # -- reading ------------------------------------------------------------------------------------------

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as stored: (offset relative to the base offset, file position)."""
        if n >= self._entries:
            raise IndexError(f"Attempt to fetch the {n}th entry from an index of size {self._entries}.")
        return _ENTRY.unpack_from(self._mm, n * ENTRY_SIZE)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry at or below `target_offset`; (base offset, 0) if none."""
        slot = self._slot_for(target_offset)
        if slot < 0:
            return self.base_offset, 0
        relative, position = _ENTRY.unpack_from(self._mm, slot * ENTRY_SIZE)
        return self.base_offset + relative, position

    def _slot_for(self, target_offset: int) -> int:
        """The slot of the largest entry at or below the target, or -1."""
        relative = target_offset - self.base_offset
        mm, unpack = self._mm, _INT32.unpack_from
        if self._entries == 0 or unpack(mm, 0)[0] > relative:
            return -1
        lo, hi = 0, self._entries - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            found = unpack(mm, mid * ENTRY_SIZE)[0]
            if found == relative:
                return mid
            if found < relative:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _read_last_offset(self) -> int:
        if self._entries == 0:
            return self.base_offset
        return self.base_offset + _INT32.unpack_from(self._mm, (self._entries - 1) * ENTRY_SIZE)[0]

    def is_sane(self, log_size: int) -> bool:
        """The cheap checks 0.8.2 made at load (a whole number of entries, the last one above the base
        offset), plus: the last entry points inside the log file."""
        if not self._whole_entries_on_disk():
            return False
        if self._entries == 0:
            return True
        _, position = self.entry(self._entries - 1)
        return self.last_offset > self.base_offset and 0 <= position <= log_size

    # -- writing ------------------------------------------------------------------------------------------

    def append(self, offset: int, position: int) -> None:
        """Add an entry; its offset must be above the last one."""
        if self.is_full:
            raise ValueError(f"Attempt to append to a full index (size = {self._entries}).")
        if self._entries and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to position {self._entries} no larger than the last "
                f"offset appended ({self.last_offset}) to {self.path}."
            )
        logger.debug("Adding index entry %d => %d to %s.", offset, position, os.path.basename(self.path))
        _ENTRY.pack_into(self._mm, self._entries * ENTRY_SIZE, offset - self.base_offset, position)
        self._entries += 1
        self.last_offset = offset

    def truncate_to(self, offset: int) -> None:
        """Remove the entries at or above `offset`."""
        slot = self._slot_for(offset)
        if slot < 0:
            entries = 0
        elif self.base_offset + _INT32.unpack_from(self._mm, slot * ENTRY_SIZE)[0] == offset:
            entries = slot
        else:
            entries = slot + 1
        self._truncate_to_entries(entries)

    def truncate_to_position(self, position: int) -> None:
        """Remove the entries that point at or past `position` of the log file."""
        entries = self._entries
        while entries and _ENTRY.unpack_from(self._mm, (entries - 1) * ENTRY_SIZE)[1] >= position:
            entries -= 1
        self._truncate_to_entries(entries)
