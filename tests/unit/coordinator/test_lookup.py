"""Coordinator lookup: Java's String.hashCode and Kafka's Utils.abs, checked against values printed by a JVM
(OpenJDK 17: `s.hashCode()` and `(h == Integer.MIN_VALUE) ? 0 : Math.abs(h)`, modulo 50)."""

from __future__ import annotations

import pytest

from zkbroker.coordinator.lookup import java_string_hash, kafka_abs, partition_for

JAVA = [
    ("", 0, 0),
    ("a", 97, 47),
    ("my-group", -1906497762, 12),
    ("console-consumer-12345", 158455506, 6),
    ("polygenelubricants", -2147483648, 0),
    ("g\u00e9nial", -1127603320, 20),
    ("\U0001F600grp", 1276929186, 36),  # a surrogate pair: two UTF-16 code units
    ("test-group-0", 2060176935, 35),
    ("Aa", 2112, 12),
    ("BB", 2112, 12),
]


@pytest.mark.parametrize(("group", "hash_code", "partition"), JAVA)
def test_hash_and_partition_match_the_jvm(group, hash_code, partition):
    assert java_string_hash(group) == hash_code
    assert partition_for(group, 50) == partition


def test_utils_abs_maps_integer_min_value_to_zero_not_to_a_mask():
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5  # Scala 0.8's `n & 0x7fffffff` would give 2147483643
