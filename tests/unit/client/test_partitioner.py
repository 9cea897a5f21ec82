"""Kafka's partitioner: murmur2 against Kafka's published vectors (UtilsTest.testMurmur2) and kafka-python's
port, and the three routing rules of seed 000 §3.2."""

from __future__ import annotations

import os

import pytest

from zkbroker.client.partitioner import DefaultPartitioner, InvalidPartitionError, murmur2, to_positive

# org.apache.kafka.common.utils.UtilsTest.testMurmur2
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize("data, expected", KAFKA_VECTORS)
def test_murmur2_matches_kafkas_published_vectors(data, expected):
    assert murmur2(data) == expected


def test_murmur2_matches_kafka_pythons_port_for_every_tail_length():
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

    for length in range(0, 70):
        data = os.urandom(length)
        theirs = kafka_python_murmur2(data)
        assert murmur2(data) == (theirs - 2**32 if theirs >= 2**31 else theirs)


def test_to_positive_clears_the_sign_bit():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_keyed_records_go_where_the_java_client_sends_them():
    partitioner = DefaultPartitioner()
    for key, hashed in KAFKA_VECTORS:
        assert partitioner.partition("t", key, list(range(6)), [0, 1], None) == to_positive(hashed) % 6


def test_an_explicit_partition_wins_and_out_of_range_is_refused():
    partitioner = DefaultPartitioner()
    assert partitioner.partition("t", b"k", [0, 1, 2], [0, 1, 2], 2) == 2
    with pytest.raises(InvalidPartitionError, match=r"Invalid partition given with record: 3 is not in the range "
                                                    r"\[0\.\.\.2\]"):
        partitioner.partition("t", None, [0, 1, 2], [0, 1, 2], 3)
    with pytest.raises(InvalidPartitionError):
        partitioner.partition("t", None, [0, 1, 2], [0, 1, 2], -1)


def test_null_keys_go_round_robin_over_available_partitions_only():
    partitioner = DefaultPartitioner(start=0)
    chosen = [partitioner.partition("t", None, [0, 1, 2, 3], [1, 3], None) for _ in range(6)]
    assert chosen == [1, 3, 1, 3, 1, 3]


def test_null_keys_use_every_partition_when_none_is_available():
    partitioner = DefaultPartitioner(start=0)
    assert [partitioner.partition("t", None, [0, 1, 2], [], None) for _ in range(4)] == [0, 1, 2, 0]
