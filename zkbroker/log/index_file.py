"""MappedIndex: what a segment's two index files share (Kafka's kafka.log.AbstractIndex).

A file of fixed-size entries in increasing offset order, memory-mapped: the active segment's file is
preallocated to `segment.index.bytes` (rounded down to whole entries) and trimmed to its entries when the
segment rolls or closes. An existing file is taken to be all entries, as Kafka does: a preallocated file left
by a crash fails the sanity check and is rebuilt from the log. `OffsetIndex` (`.index`, 8-byte entries) and
`TimeIndex` (`.timeindex`, 12-byte entries) say what an entry holds.
"""

from __future__ import annotations

import logging
import mmap
import os

from zkbroker.fsync import fsync_path

logger = logging.getLogger(__name__)


class MappedIndex:
    """An index file of `entry_size`-byte entries for the segment whose first offset is `base_offset`."""

    entry_size = 8  # set by each kind of index
    min_index_size = 8  # the smallest max_index_size a new file accepts

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
                if max_index_size < self.min_index_size:
                    raise ValueError(f"Invalid max index size: {max_index_size}")
                length = self._round_down(max_index_size)
                os.ftruncate(fd, length)
            self._map(fd, length)
        finally:
            os.close(fd)
        self.newly_created = newly_created
        self._entries = 0 if newly_created else length // self.entry_size
        self._entries_changed()

    def _entries_changed(self) -> None:
        """Called whenever the number of entries changes: a subclass caches its last entry here."""

    # -- state --------------------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.entry_size

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.entry_size

    def _whole_entries_on_disk(self) -> bool:
        return os.path.getsize(self.path) % self.entry_size == 0

    # -- writing ------------------------------------------------------------------------------------------

    def truncate(self) -> None:
        """Remove every entry."""
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, entries: int) -> None:
        self._entries = entries
        self._entries_changed()

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its entries (at roll and close)."""
        self.resize(self._entries * self.entry_size)

    def resize(self, new_size: int) -> None:
        """Set the file's length (rounded down to whole entries), keeping the entries it still holds."""
        length = self._round_down(new_size)
        self._unmap()
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.ftruncate(fd, length)
            self._map(fd, length)
        finally:
            os.close(fd)
        self._entries = min(self._entries, self.max_entries)
        self._entries_changed()

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

    def _round_down(self, size: int) -> int:
        return size - size % self.entry_size

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
        return f"{type(self).__name__}({self.path!r}, entries={self._entries}, max_entries={self.max_entries})"
