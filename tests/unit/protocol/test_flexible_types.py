"""KIP-482's primitives: unsigned varints, compact strings/bytes/arrays, tag buffers and flexible structs --
known encodings, round trips, and the errors hostile lengths, counts and tags get."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkbroker.protocol.errors import LocalProtocolError, RemoteProtocolError
from zkbroker.protocol.types import (
    MAX_TAGGED_FIELDS,
    Array,
    CompactArray,
    CompactBytes,
    CompactNullableArray,
    CompactNullableBytes,
    CompactNullableString,
    CompactRecords,
    CompactString,
    FlexibleSchema,
    Float64,
    Int16,
    Int32,
    Int64,
    Schema,
    String,
    TaggedField,
    UInt16,
    UnsignedVarint,
    Uuid,
    skip_tagged_fields,
    to_dict,
)
from zkbroker.protocol.varint import VarintError, encode_unsigned_varint, read_unsigned_varint, size_of_unsigned_varint

# Known encodings (protobuf's uint32, which Kafka's ByteUtils.writeUnsignedVarint writes).
KNOWN_UVARINTS = [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (16383, "ff7f"),
                  (16384, "808001"), (2**31 - 1, "ffffffff07"), (2**32 - 1, "ffffffff0f")]


@pytest.mark.parametrize(("value", "hex_"), KNOWN_UVARINTS)
def test_unsigned_varint_known_encodings(value, hex_):
    assert encode_unsigned_varint(value).hex() == hex_
    assert size_of_unsigned_varint(value) == len(hex_) // 2
    assert read_unsigned_varint(b"\xaa" + bytes.fromhex(hex_), 1) == (value, 1 + len(hex_) // 2)
    assert UnsignedVarint.decode(memoryview(bytes.fromhex(hex_)), 0) == (value, len(hex_) // 2)


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trips(value):
    data = encode_unsigned_varint(value)
    assert read_unsigned_varint(data, 0) == (value, len(data)) and len(data) <= 5


@pytest.mark.parametrize("raw", [b"", b"\x80", b"\xff\xff\xff\xff", b"\x80\x80\x80\x80\x80\x01",
                                 b"\xff\xff\xff\xff\x10"])
def test_unsigned_varint_too_long_truncated_or_too_large(raw):
    # A sixth byte is refused before it is read (Kafka: "Varint is too long"); 5 bytes may not pass 2**32 - 1.
    with pytest.raises(VarintError):
        read_unsigned_varint(raw, 0)


def test_unsigned_varint_refuses_what_it_cannot_write():
    for bad in (-1, 2**32):
        with pytest.raises(OverflowError):
            encode_unsigned_varint(bad)
    with pytest.raises(LocalProtocolError):
        UnsignedVarint.encode(-1)


@pytest.mark.parametrize(
    ("wire_type", "value", "encoded"),
    [
        (CompactString, "", b"\x01"),
        (CompactString, "hé", b"\x04h\xc3\xa9"),
        (CompactNullableString, None, b"\x00"),
        (CompactNullableString, "a", b"\x02a"),
        (CompactBytes, b"", b"\x01"),
        (CompactBytes, b"ab", b"\x03ab"),
        (CompactNullableBytes, None, b"\x00"),
        (CompactRecords, None, b"\x00"),
        (CompactArray(Int32), [1, 2], b"\x03\x00\x00\x00\x01\x00\x00\x00\x02"),
        (CompactArray(Int32), [], b"\x01"),
        (CompactArray(CompactString), ["a", ""], b"\x03\x02a\x01"),
        (CompactNullableArray(CompactString), None, b"\x00"),
        (CompactArray(("k", Int16)), [{"k": 7, "unknown_tagged_fields": []}], b"\x02\x00\x07\x00"),
        (Uuid, bytes(range(16)), bytes(range(16))),
        (UInt16, 65535, b"\xff\xff"),
        (Float64, 1.5, struct.pack(">d", 1.5)),
        (CompactString, "x" * 200, b"\xc9\x01" + b"x" * 200),
    ],
)
def test_compact_primitives_round_trip(wire_type, value, encoded):
    assert wire_type.encode(value) == encoded
    for buf in (b"\xaa" + encoded + b"\xbb", memoryview(b"\xaa" + encoded + b"\xbb")):
        decoded, offset = wire_type.decode(buf, 1)
        assert to_dict(decoded) == value
        assert offset == 1 + len(encoded)


def test_compact_records_are_zero_copy_views():
    frame = bytearray(b"\x04xyz")
    view, offset = CompactRecords.decode(memoryview(frame), 0)
    assert isinstance(view, memoryview) and offset == 4 and bytes(view) == b"xyz"


@pytest.mark.parametrize(
    ("wire_type", "raw"),
    [
        (CompactString, b"\x00"),  # null where Kafka's schema says non-nullable
        (CompactBytes, b"\x00"),
        (CompactArray(Int32), b"\x00"),
        (CompactString, b"\x05abc"),  # a length beyond the frame
        (CompactBytes, b"\xff\xff\xff\xff\x0fab"),
        (CompactArray(CompactString), b"\xff\xff\xff\xff\x0f\x01"),  # a count far beyond the frame
        (CompactArray(Int32), b"\x03\x00\x00\x00\x01"),
        (CompactString, b"\x03\xff\xfe"),  # invalid UTF-8
        (CompactString, b"\x80\x80\x80\x80\x80\x01a"),  # a varint longer than five bytes
        (Uuid, b"\x00" * 15),
    ],
)
def test_hostile_compact_values(wire_type, raw):
    with pytest.raises(RemoteProtocolError):
        wire_type.decode(memoryview(raw), 0)


def test_compact_values_we_cannot_write():
    for wire_type, value in ((CompactString, None), (CompactBytes, None), (CompactArray(Int32), None),
                             (CompactString, "x" * 40000), (CompactBytes, "text"), (Uuid, b"short")):
        with pytest.raises(LocalProtocolError):
            wire_type.encode(value)


# ---- flexible structs and tag buffers ---------------------------------------------------------------------------

POINT = FlexibleSchema(
    ("x", Int32),
    ("name", CompactString),
    tagged=(
        TaggedField(1, "epoch", Int64, -1),
        TaggedField(0, "labels", CompactArray(("label", CompactString)), []),
    ),
    name="Point",
)


def test_flexible_struct_writes_an_empty_tag_buffer_when_every_tag_has_its_default():
    assert POINT.encode({"x": 1, "name": "a"}) == b"\x00\x00\x00\x01\x02a\x00"
    point, offset = POINT.decode(b"\x00\x00\x00\x01\x02a\x00", 0)
    assert offset == 7
    assert point.to_dict() == {"x": 1, "name": "a", "labels": [], "epoch": -1, "unknown_tagged_fields": []}
    assert POINT.encode(point) == b"\x00\x00\x00\x01\x02a\x00"


def test_known_tags_are_written_in_tag_order_only_when_they_differ_from_their_default():
    data = POINT.encode({"x": 1, "name": "a", "epoch": 5, "labels": [{"label": "b"}]})
    body = b"\x00\x00\x00\x01\x02a"
    labels = b"\x02\x02b\x00"  # one element: its string and its own empty tag buffer
    assert data == body + b"\x02" + b"\x00\x04" + labels + b"\x01\x08" + struct.pack(">q", 5)
    point, _ = POINT.decode(data, 0)
    assert point.epoch == 5 and point.labels[0].label == "b"
    assert POINT.encode(point) == data
    # A value equal to the default (an empty tuple for an empty list) is not written.
    assert POINT.encode({"x": 1, "name": "a", "epoch": -1, "labels": ()}) == body + b"\x00"


def test_unknown_tags_are_kept_and_written_back_in_tag_order():
    body = b"\x00\x00\x00\x01\x02a"
    raw = body + b"\x03" + b"\x01\x08" + struct.pack(">q", 9) + b"\x05\x02hi" + b"\x90\x4e\x00"
    point, offset = POINT.decode(raw, 0)
    assert offset == len(raw)
    assert point.epoch == 9 and point.unknown_tagged_fields == [(5, b"hi"), (10000, b"")]
    assert POINT.encode(point) == raw
    assert skip_tagged_fields(raw, len(body)) == len(raw)


@pytest.mark.parametrize(
    ("tags", "malformed_for_anyone"),
    [
        (b"\x02\x05\x00\x05\x00", True),  # a tag repeated
        (b"\x02\x05\x00\x03\x00", True),  # out of order
        (b"\x01\x05\x09ab", True),  # a size beyond the frame
        (b"\x90\x4e" + b"\x00" * 100, True),  # 10,000 tagged fields declared, far fewer bytes
        (b"\x80\x80\x80\x80\x80\x01", True),  # a count varint longer than five bytes
        # Only a reader that knows tag 1 (an int64) can tell these sizes are wrong:
        (b"\x01\x01\x09" + b"\x00" * 9, False),  # the value is shorter than its size
        (b"\x01\x01\x04\x00\x00\x00\x00", False),  # the value runs past its size
    ],
)
def test_hostile_tag_buffers(tags, malformed_for_anyone):
    with pytest.raises(RemoteProtocolError):
        POINT.decode(b"\x00\x00\x00\x01\x02a" + tags, 0)
    if malformed_for_anyone:
        with pytest.raises(RemoteProtocolError):
            skip_tagged_fields(tags, 0)


def test_more_tagged_fields_than_the_bound_are_refused_even_when_present():
    count = MAX_TAGGED_FIELDS + 1
    tags = encode_unsigned_varint(count) + b"".join(encode_unsigned_varint(t) + b"\x00" for t in range(count))
    with pytest.raises(RemoteProtocolError, match="tagged fields"):
        skip_tagged_fields(tags, 0)
    ok = encode_unsigned_varint(MAX_TAGGED_FIELDS) + b"".join(
        encode_unsigned_varint(t) + b"\x00" for t in range(MAX_TAGGED_FIELDS))
    assert skip_tagged_fields(ok, 0) == len(ok)


def test_nested_structs_and_array_elements_carry_their_own_tag_buffers():
    inner = FlexibleSchema(("v", Int16), tagged=(TaggedField(0, "note", CompactNullableString, None),))
    outer = FlexibleSchema(("items", CompactArray(inner)), ("single", inner), name="Outer")
    value = {"items": [{"v": 1}, {"v": 2, "note": "n"}], "single": {"v": 3}}
    data = outer.encode(value)
    assert data == (b"\x03" + b"\x00\x01\x00" + b"\x00\x02\x01\x00\x02\x02n" + b"\x00\x03\x00" + b"\x00")
    decoded, _ = outer.decode(data, 0)
    assert decoded.items[1].note == "n" and decoded.items[0].note is None and decoded.single.v == 3
    assert outer.encode(decoded) == data


@given(st.lists(st.text(max_size=5), max_size=4), st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1))
def test_flexible_structs_round_trip(labels, epoch, x):
    value = {"x": x, "name": "n", "epoch": epoch, "labels": [{"label": label} for label in labels]}
    data = POINT.encode(value)
    decoded, offset = POINT.decode(memoryview(data), 0)
    assert offset == len(data)
    assert decoded.epoch == epoch and [e.label for e in decoded.labels] == labels
    assert POINT.encode(decoded) == data


def test_a_struct_of_one_world_refuses_a_field_of_the_other():
    with pytest.raises(TypeError):
        FlexibleSchema(("name", String))
    with pytest.raises(TypeError):
        FlexibleSchema(("items", Array(Int32)))
    with pytest.raises(TypeError):
        Schema(("name", CompactString))
    with pytest.raises(TypeError):
        Schema(("inner", FlexibleSchema(("v", Int16))))
    with pytest.raises(TypeError):
        CompactArray(Schema(("v", Int16)))
    with pytest.raises(TypeError):
        Array(FlexibleSchema(("v", Int16)))
    with pytest.raises(TypeError):
        FlexibleSchema(("v", Int16), tagged=((0, "a", Int16, 0), (0, "b", Int16, 0)))
    with pytest.raises(TypeError):
        FlexibleSchema(("v", Int16), tagged=((0, "v", Int16, 0),))


def test_encoding_errors_name_the_field():
    with pytest.raises(LocalProtocolError, match="name"):
        POINT.encode({"x": 1})
    with pytest.raises(LocalProtocolError, match="epoch"):
        POINT.encode({"x": 1, "name": "a", "epoch": "soon"})
    with pytest.raises(LocalProtocolError, match="not an unknown tag"):
        POINT.encode({"x": 1, "name": "a", "unknown_tagged_fields": [(1, b"")]})
    assert POINT.encode((1, "a")) == POINT.encode({"x": 1, "name": "a"})
