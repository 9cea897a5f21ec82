"""`__consumer_offsets` keys and values in Kafka's layouts: known bytes, round trips, and older versions read."""

from __future__ import annotations

import struct

import pytest

from zkbroker.coordinator.record_formats import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from zkbroker.protocol.errors import RemoteProtocolError


def test_offset_key_is_version_1_group_topic_partition():
    assert encode_offset_key(OffsetKey("g", "t", 3)) == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(encode_offset_key(OffsetKey("g", "t", 3))) == OffsetKey("g", "t", 3)


def test_group_key_is_version_2_group():
    assert encode_group_key(GroupKey("grp")) == b"\x00\x02\x00\x03grp"
    assert decode_key(b"\x00\x02\x00\x03grp") == GroupKey("grp")


def test_0_8_2_offset_key_version_0_reads():
    assert decode_key(b"\x00\x00\x00\x01g\x00\x01t\x00\x00\x00\x00") == OffsetKey("g", "t", 0)


def test_offset_value_v1_round_trip_and_layout():
    value = OffsetValue(42, "meta", 1000, 2000)
    data = encode_offset_value(value)
    assert data == struct.pack(">hqh4sqq", 1, 42, 4, b"meta", 1000, 2000)
    assert decode_offset_value(data) == value


def test_offset_values_v0_and_v3_read():
    assert decode_offset_value(struct.pack(">hqhq", 0, 7, 0, 99)) == OffsetValue(7, "", 99, -1)
    assert decode_offset_value(struct.pack(">hqihq", 3, 7, 5, 0, 99)) == OffsetValue(7, "", 99, -1, 5)


def test_offset_value_without_expire_timestamp_is_v3_with_the_leader_epoch():
    value = OffsetValue(42, "meta", 1000, -1, 6)
    data = encode_offset_value(value)
    assert data == struct.pack(">hqih4sq", 3, 42, 6, 4, b"meta", 1000)  # Kafka 2.1's OffsetCommitValue v3
    assert decode_offset_value(data) == value
    # v1 has no room for an epoch: a value with an expire timestamp loses it
    assert decode_offset_value(encode_offset_value(OffsetValue(42, "", 1000, 2000, 6))) == OffsetValue(42, "", 1000,
                                                                                                       2000, -1)


def test_group_value_v1_round_trip():
    member = MemberRecord("m-1", "client", "/127.0.0.1", 300000, 10000, b"sub", b"assign")
    value = GroupValue("consumer", 4, "range", "m-1", (member,))
    data = encode_group_value(value)
    assert data[:2] == b"\x00\x01"
    assert decode_group_value(data) == value


def test_empty_group_value_has_null_protocol_and_leader():
    value = GroupValue("consumer", 5, None, None, ())
    assert decode_group_value(encode_group_value(value)) == value


def test_unknown_versions_are_refused():
    with pytest.raises(RemoteProtocolError):
        decode_key(b"\x00\x09\x00\x01g")
    with pytest.raises(RemoteProtocolError):
        decode_offset_value(b"\x00\x09")


def test_consumer_protocol_assignment_and_subscription_as_kafka_python_writes_them():
    from kafka.protocol.old import consumer_protocol as theirs_protocol

    from zkbroker.coordinator.consumer_protocol import (
        decode_assignment,
        decode_subscription,
        encode_assignment,
        encode_subscription,
    )

    theirs = theirs_protocol.ConsumerProtocolMemberAssignment_v0(0, [("t", [0, 2]), ("u", [1])], b"").encode()
    assert decode_assignment(theirs) == [("t", 0), ("t", 2), ("u", 1)]
    assert decode_assignment(encode_assignment([("t", 0), ("t", 2)])) == [("t", 0), ("t", 2)]
    assert decode_assignment(b"") == []
    subscription = theirs_protocol.ConsumerProtocolMemberMetadata_v0(0, ["t", "u"], b"").encode()
    assert decode_subscription(subscription) == ["t", "u"]
    assert decode_subscription(encode_subscription(["x"])) == ["x"]


@pytest.mark.parametrize("group", ["g", "gr\u00fcppe", ""])
def test_packed_offset_records_equal_the_schemas(group):
    from zkbroker.coordinator import record_formats as rf

    key, value = OffsetKey(group, "topic-\u00e9", 7), OffsetValue(2**40, "m\u00e9ta", 1700000000000, 1700086400000)
    assert encode_offset_key(key) == b"\x00\x01" + rf._OFFSET_KEY.encode(key)
    assert encode_offset_value(value) == b"\x00\x01" + rf._OFFSET_VALUES[1].encode(value)
    with_epoch = OffsetValue(2**40, "m\u00e9ta", 1700000000000, -1, 3)
    assert encode_offset_value(with_epoch) == b"\x00\x03" + rf._OFFSET_VALUES[3].encode(with_epoch)
