"""OffsetMap: the last offset of each key in a log's dirty section (Kafka's kafka.log.SkimpyOffsetMap).

The log cleaner fills it over the dirty section, then rewrites the log keeping a message only if no later
message has its key. As in Kafka, a key is stored as its MD5 hash (16 bytes; two keys with one hash are
taken for one key, a risk Kafka accepts) and the map's capacity is what the memory it is given would hold
in Kafka's open-addressing table: one slot per 16-byte hash plus an 8-byte offset. A Python dict entry
takes several times that, so the figure bounds the number of keys, not the bytes this process uses.
"""

from __future__ import annotations

import hashlib

HASH_SIZE = 16  # an MD5 digest
_BYTES_PER_ENTRY = HASH_SIZE + 8  # the hash and the offset


class OffsetMapFullError(RuntimeError):
    """A key was added to a map that has no free slot."""


class OffsetMap:
    """Key -> last offset, for at most `slots` keys: `memory // 24`, as Kafka's map of that many bytes."""

    def __init__(self, memory: int) -> None:
        self.slots = memory // _BYTES_PER_ENTRY
        self._offsets: dict[bytes, int] = {}

    @staticmethod
    def _hash(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` as the key's last; a later put of the same key replaces it."""
        digest = self._hash(key)
        if digest not in self._offsets and len(self._offsets) >= self.slots:
            raise OffsetMapFullError("Attempt to add a new entry to a full offset map.")
        self._offsets[digest] = offset

    def get(self, key: bytes) -> int:
        """The key's last offset, or -1 if the map does not hold it."""
        return self._offsets.get(self._hash(key), -1)

    def clear(self) -> None:
        self._offsets.clear()

    @property
    def size(self) -> int:
        """Keys held."""
        return len(self._offsets)

    @property
    def utilization(self) -> float:
        """Share of the slots in use."""
        return len(self._offsets) / self.slots if self.slots else 0.0
