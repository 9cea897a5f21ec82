"""Which `__consumer_offsets` partition, and so which broker, coordinates a group (DESIGN §12).

Kafka's GroupMetadataManager.partitionFor: `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`, with
Java's String.hashCode (over UTF-16 code units, 32-bit overflow) and the Java client's Utils.abs, which maps
Integer.MIN_VALUE to 0 (Scala 0.8's `n & 0x7fffffff` would not: the two differ for every negative hash).
The coordinator is the leader of that partition.
"""

from __future__ import annotations

_INT32_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a signed 32-bit int."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """org.apache.kafka.common.utils.Utils.abs: Math.abs, except that Integer.MIN_VALUE maps to 0."""
    return 0 if n == _INT32_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The partition of `__consumer_offsets` that holds `group_id`'s offsets and whose leader coordinates it."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions
