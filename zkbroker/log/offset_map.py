"""OffsetMap: the last offset of each key in a log's dirty section (Kafka's kafka.log.SkimpyOffsetMap).

The log cleaner fills it over the dirty section, then rewrites the log keeping a message only if no later
message has its key. Its capacity is Kafka's: what the memory it is given holds in Kafka's open-addressing
table, one slot per key of a 16-byte MD5 hash and an 8-byte offset. Where we deviate from 0.8.2, on
purpose: keys are held as they are rather than as their MD5 hash (hashing each key in Python costs more
than the rest of a lookup), so two keys are never taken for one; a dict entry takes several times Kafka's
24 bytes, so the figure bounds the number of keys, not the bytes this process uses.
"""

from __future__ import annotations

_BYTES_PER_ENTRY = 16 + 8  # Kafka's slot: an MD5 hash and an offset


class OffsetMapFullError(RuntimeError):
    """A key was added to a map that has no free slot."""


class OffsetMap:
    """Key -> last offset, for at most `slots` keys: `memory // 24`, as Kafka's map of that many bytes."""

    def __init__(self, memory: int) -> None:
        self.slots = memory // _BYTES_PER_ENTRY
        self._offsets: dict[bytes, int] = {}

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` as the key's last; a later put of the same key replaces it."""
        if len(self._offsets) >= self.slots and key not in self._offsets:
            raise OffsetMapFullError("Attempt to add a new entry to a full offset map.")
        self._offsets[key] = offset

    def get(self, key: bytes) -> int:
        """The key's last offset, or -1 if the map does not hold it."""
        return self._offsets.get(key, -1)

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
