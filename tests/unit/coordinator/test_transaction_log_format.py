"""`__transaction_state`'s key and value v0, byte for byte as derived from Kafka's TransactionLog schema, and
the partition of a transactional id (Utils.abs of Java's String.hashCode, modulo 50)."""

from __future__ import annotations

import struct

import pytest

from zkbroker.coordinator.transaction.log_format import (
    TransactionLogFormatError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from zkbroker.coordinator.transaction.metadata import TxnTransitMetadata
from zkbroker.coordinator.transaction.state import TransactionState as S
from zkbroker.topic_partition import TopicPartition


def string(text: str) -> bytes:
    return struct.pack(">h", len(text.encode())) + text.encode()


def test_the_key_is_version_0_and_the_transactional_id():
    assert encode_key("my-tx") == b"\x00\x00" + string("my-tx")
    assert decode_key(encode_key("my-tx")) == "my-tx"
    with pytest.raises(TransactionLogFormatError):
        decode_key(b"\x00\x01" + string("my-tx"))


def test_an_ongoing_transactions_value_byte_for_byte():
    transit = TxnTransitMetadata(4000, -1, 2, -1, 60000, S.ONGOING,
                                 frozenset({TopicPartition("out", 2), TopicPartition("out", 0),
                                            TopicPartition("__consumer_offsets", 17)}), 1_700_000_000_000,
                                 1_700_000_000_500)
    expected = (
        struct.pack(">hqhib", 0, 4000, 2, 60000, 1)  # version, producer id, epoch, timeout, status Ongoing
        + struct.pack(">i", 2)  # two topics, in name order
        + string("__consumer_offsets") + struct.pack(">ii", 1, 17)
        + string("out") + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000)  # last update, then start
    )
    assert encode_value(transit) == expected
    assert decode_value(expected) == transit


def test_an_empty_transaction_has_null_partitions_and_a_tombstone_is_none():
    transit = TxnTransitMetadata(7, -1, 0, -1, 30000, S.EMPTY, frozenset(), -1, 99)
    value = encode_value(transit)
    assert value == struct.pack(">hqhibiqq", 0, 7, 0, 30000, 0, -1, 99, -1)
    assert decode_value(value) == transit
    assert decode_value(None) is None
    with pytest.raises(ValueError):
        encode_value(TxnTransitMetadata(7, -1, 0, -1, 30000, S.EMPTY, frozenset({TopicPartition("t", 0)}), -1, 9))


@pytest.mark.parametrize("bad", [
    struct.pack(">hqhibiqq", 1, 7, 0, 30000, 0, -1, 99, -1),  # value version 1: not ours to read
    struct.pack(">hqhibiqq", 0, 7, 0, 30000, 9, -1, 99, -1),  # no state 9
    struct.pack(">hqhibiqq", 0, 7, 0, 30000, 0, -1, 99, -1) + b"\x00",  # trailing bytes
    b"\x00",
])
def test_unreadable_values_are_named_errors(bad):
    with pytest.raises(TransactionLogFormatError):
        decode_value(bad)


@pytest.mark.parametrize(("transactional_id", "partition"), [
    ("tx", 16),  # "tx".hashCode() == 3716
    ("my-transactional-id", 46),  # hashCode -959806496: negative
    ("polygenelubricants", 0),  # hashCode Integer.MIN_VALUE: Utils.abs gives 0
    ("", 0),
])
def test_the_partition_of_a_transactional_id(transactional_id, partition):
    assert partition_for(transactional_id) == partition
