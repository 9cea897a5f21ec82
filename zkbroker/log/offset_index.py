"""OffsetIndex: a segment's `<base offset>.index` file (Kafka's kafka.log.OffsetIndex).

A sparse map from offsets to positions in the segment's .log file: 8-byte entries, int32 offset relative to
the segment's base offset and int32 file position, in increasing offset order. The file of the active
segment is preallocated to `segment.index.bytes` (rounded down to a multiple of 8) and memory-mapped; it
is trimmed to its entries when the segment rolls or closes. An existing file is taken to be all entries,
as 0.8.2 did: a preallocated file left by a crash fails `is_sane()` and is rebuilt from the log.
`lookup` is a binary search for the largest entry at or below the target.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct

from zkbroker.fsync import fsync_path

logger = logging.getLogger(__name__)

ENTRY_SIZE = 8
_ENTRY = struct.Struct(">ii")
_INT32 = struct.Struct(">i")


class InvalidOffsetError(ValueError):
    """An index entry would not be above the last one (Kafka's InvalidOffsetException)."""


class OffsetIndex:
    """The offset index of the segment whose first offset is `base_offset`."""

    def __init__(self, path: str, base_offset: int, max_index_size: int = -1) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._mm: mmap.mmap | None = None
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            newly_created = True
        except FileExistsError:
            fd = os.open(path, os.O_RDWR)
            newly_created = False
        try:
            length = os.fstat(fd).st_size
            if newly_created:
                if max_index_size < ENTRY_SIZE:
                    raise ValueError(f"Invalid max index size: {max_index_size}")
                length = _round_down(max_index_size)
                os.ftruncate(fd, length)
            self._map(fd, length)
        finally:
            os.close(fd)
        self._entries = 0 if newly_created else length // ENTRY_SIZE
        self.last_offset = self._read_last_offset()

    # -- reading ------------------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * ENTRY_SIZE

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
        if os.path.getsize(self.path) % ENTRY_SIZE:
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

    def truncate(self) -> None:
        """Remove every entry."""
        self._truncate_to_entries(0)

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

    def _truncate_to_entries(self, entries: int) -> None:
        self._entries = entries
        self.last_offset = self._read_last_offset()

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its entries (at roll and close)."""
        self.resize(self._entries * ENTRY_SIZE)

    def resize(self, new_size: int) -> None:
        """Set the file's length (rounded down to a multiple of 8), keeping the entries it still holds."""
        length = _round_down(new_size)
        self._unmap()
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.ftruncate(fd, length)
            self._map(fd, length)
        finally:
            os.close(fd)
        self._entries = min(self._entries, self.max_entries)

    def flush(self) -> None:
        """fsync the file: that writes the pages dirtied through any mapping of it, and its length."""
        try:
            fsync_path(self.path)
        except FileNotFoundError:  # renamed for deletion meanwhile
            pass

    def close(self) -> None:
        self.trim_to_valid_size()
        self._unmap()

    def release(self) -> None:
        """Unmap the file without trimming it (a segment renamed for deletion)."""
        self._unmap()

    def rename(self, path: str) -> None:
        os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self._unmap()
        logger.info("Deleting index %s", os.path.abspath(self.path))
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    # -- the mapping --------------------------------------------------------------------------------------

    def _map(self, fd: int, length: int) -> None:
        self._length = length
        # mmap cannot map an empty file; an index with no room and no entries needs no mapping.
        self._mm = mmap.mmap(fd, length) if length else None

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._length = 0

    def __repr__(self) -> str:
        return f"OffsetIndex({self.path!r}, entries={self._entries}, max_entries={self.max_entries})"


def _round_down(size: int) -> int:
    return size - size % ENTRY_SIZE
