"""Kafka's partitioner, as the Java client's DefaultPartitioner (and seed 000 §3.2) routes a record:

1. a partition given with the record is used as is (out of range: an error naming the range);
2. else a key is hashed: ``toPositive(murmur2(key)) % numPartitions``, over *all* partitions, so a key always
   lands on the same partition while the partition count stays the same;
3. else a counter goes round-robin over the *available* partitions (those with a leader), or over all of them
   when none is available.

``murmur2`` is the 32-bit MurmurHash2 with Kafka's seed (``org.apache.kafka.common.utils.Utils.murmur2``),
written from the algorithm's description; Kafka's published test vectors are in the unit tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

__all__ = ["DefaultPartitioner", "InvalidPartitionError", "murmur2", "to_positive"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """MurmurHash2 of ``data`` as a signed 32-bit int, exactly as Kafka's Java client computes it."""
    data = bytes(data)
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's Utils.toPositive: clear the sign bit (not abs(), which overflows on Integer.MIN_VALUE)."""
    return n & 0x7FFFFFFF


class InvalidPartitionError(ValueError):
    """A record named a partition the topic does not have (the caller's fault)."""


class DefaultPartitioner:
    """Chooses a record's partition. ``partitions`` are all of the topic's partition ids, ``available`` those
    with a leader. The round-robin counter starts at a random point, as Java's does, and is shared by topics."""

    def __init__(self, start: int | None = None) -> None:
        import random

        self._counter = itertools.count(random.randrange(1 << 31) if start is None else start)

    def partition(self, topic: str, key: bytes | None, partitions: Sequence[int], available: Sequence[int],
                  explicit: int | None = None) -> int:
        count = len(partitions)
        if explicit is not None:
            if not 0 <= explicit < count:
                raise InvalidPartitionError(
                    f"Invalid partition given with record: {explicit} is not in the range [0...{count - 1}] "
                    f"of topic {topic}")
            return explicit
        if count == 0:
            raise InvalidPartitionError(f"Topic {topic} has no partitions")
        if key is not None:
            return to_positive(murmur2(key)) % count
        value = next(self._counter)  # itertools.count is atomic under the GIL
        if available:
            return available[to_positive(value) % len(available)]
        return to_positive(value) % count
