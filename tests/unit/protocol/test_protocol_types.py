import struct

import pytest

from zkbroker.protocol.errors import LocalProtocolError, RemoteProtocolError
from zkbroker.protocol.types import (
    Array,
    Boolean,
    Bytes,
    Int8,
    Int16,
    Int32,
    Int64,
    NullableArray,
    NullableBytes,
    NullableString,
    Records,
    Schema,
    String,
    UInt32,
    to_dict,
)


@pytest.mark.parametrize(
    ("wire_type", "value", "encoded"),
    [
        (Int8, -1, b"\xff"),
        (Int16, 258, b"\x01\x02"),
        (Int32, -2, b"\xff\xff\xff\xfe"),
        (Int64, 1, b"\x00" * 7 + b"\x01"),
        (UInt32, 0xFFFFFFFF, b"\xff\xff\xff\xff"),
        (Boolean, True, b"\x01"),
        (Boolean, False, b"\x00"),
        (String, "hé", b"\x00\x03h\xc3\xa9"),
        (NullableString, None, b"\xff\xff"),
        (NullableString, "", b"\x00\x00"),
        (Bytes, b"ab", b"\x00\x00\x00\x02ab"),
        (NullableBytes, None, b"\xff\xff\xff\xff"),
        (Array(Int32), [1, 2], b"\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x02"),
        (Array(String), ["a"], b"\x00\x00\x00\x01\x00\x01a"),
        (NullableArray(String), None, b"\xff\xff\xff\xff"),
        (NullableArray(String), [], b"\x00\x00\x00\x00"),
    ],
)
def test_primitives_round_trip(wire_type, value, encoded):
    assert wire_type.encode(value) == encoded
    # decode at an offset, from bytes and from a memoryview
    for buf in (b"\xaa" + encoded + b"\xbb", memoryview(b"\xaa" + encoded + b"\xbb")):
        decoded, offset = wire_type.decode(buf, 1)
        assert to_dict(decoded) == value
        assert offset == 1 + len(encoded)


def test_records_are_zero_copy_views():
    frame = bytearray(b"\x00\x00\x00\x03xyz")
    view, offset = Records.decode(memoryview(frame), 0)
    assert isinstance(view, memoryview) and offset == 7
    view[0] = ord("X")  # writable: the log assigns offsets in place
    assert frame.endswith(b"Xyz")
    assert Records.decode(b"\xff\xff\xff\xff", 0) == (None, 4)


def test_null_where_a_value_is_required_reads_as_empty_like_0_8_2():
    assert String.decode(b"\xff\xff", 0) == ("", 2)
    assert Bytes.decode(b"\xff\xff\xff\xff", 0) == (b"", 4)
    assert Array(Int32).decode(b"\xff\xff\xff\xff", 0) == ([], 4)


@pytest.mark.parametrize(
    ("wire_type", "data"),
    [
        (Int32, b"\x00\x00\x01"),
        (Boolean, b""),
        (String, b"\x00\x05abc"),
        (String, b"\xff\xfe"),
        (String, b"\x00\x02\xff\xfe"),
        (Bytes, b"\x00\x00\x00\x09abc"),
        (Bytes, b"\xff\xff\xff\xf0"),
        (Array(Int32), b"\x00\x00\x00\x02\x00\x00\x00\x01"),
        (Array(String), b"\x7f\xff\xff\xff\x00"),
        (Array(Int32), b"\x80\x00\x00\x00"),
    ],
)
def test_malformed_input_raises_remote_protocol_error(wire_type, data):
    with pytest.raises(RemoteProtocolError):
        wire_type.decode(data, 0)


SCHEMA = Schema(
    ("id", Int32),
    ("name", String),
    ("flag", Boolean),
    ("parts", Array(("p", Int32), ("offset", Int64), ("meta", NullableString))),
    ("tail", Int16),
    name="Example",
)


def test_schema_round_trip_dict_tuple_and_struct():
    value = {
        "id": 7,
        "name": "t",
        "flag": True,
        "parts": [{"p": 0, "offset": 5, "meta": None}, (1, -1, "m")],
        "tail": -3,
    }
    encoded = SCHEMA.encode(value)
    expected = (
        struct.pack(">ih", 7, 1) + b"t" + b"\x01" + struct.pack(">i", 2)
        + struct.pack(">iqh", 0, 5, -1) + struct.pack(">iqh", 1, -1, 1) + b"m"
        + struct.pack(">h", -3)
    )
    assert encoded == expected
    decoded, offset = SCHEMA.decode(encoded, 0)
    assert offset == len(encoded)
    assert decoded.id == 7 and decoded.parts[1].meta == "m"
    assert decoded.to_dict()["parts"][1] == {"p": 1, "offset": -1, "meta": "m"}
    assert SCHEMA.encode(decoded) == encoded  # structs re-encode unchanged
    assert SCHEMA.encode(tuple(decoded)) == encoded
    assert type(decoded).__name__ == "Example"


@pytest.mark.parametrize(
    "bad",
    [
        {"id": 1, "name": "t", "flag": True, "parts": []},  # missing tail
        {"id": 1, "name": "t", "flag": True, "parts": [], "tial": 0},  # misspelt
        {"id": "x", "name": "t", "flag": True, "parts": [], "tail": 0},
        {"id": 1, "name": None, "flag": True, "parts": [], "tail": 0},
        {"id": 1, "name": "t", "flag": True, "parts": [(1, 2)], "tail": 0},
        {"id": 1, "name": "t", "flag": True, "parts": None, "tail": 0},
        {"id": 2**31, "name": "t", "flag": True, "parts": [], "tail": 0},
        (1, 2),
    ],
)
def test_schema_encode_rejects_invalid_values_locally(bad):
    with pytest.raises(LocalProtocolError):
        SCHEMA.encode(bad)


def test_keys_of_other_versions_are_ignored():
    value = {"id": 1, "name": "t", "flag": True, "parts": [], "tail": 0, "controller_id": 3}
    assert SCHEMA.encode(value) == SCHEMA.encode((1, "t", True, [], 0))


def test_schema_decode_truncated():
    encoded = SCHEMA.encode((1, "t", False, [(0, 1, None)], 2))
    for cut in range(len(encoded)):
        with pytest.raises(RemoteProtocolError):
            SCHEMA.decode(encoded[:cut], 0)


def test_a_schemas_struct_is_made_on_first_use_once_and_bad_names_fail_when_declared():
    from zkbroker.protocol.types import CompactString, FlexibleSchema, TaggedField

    plain = Schema(("a", Int32), ("b", String), name="Lazy")
    flexible = FlexibleSchema(("a", Int32), tagged=(TaggedField(0, "t", CompactString, "x"),), name="LazyFlex")
    assert plain._struct is None and flexible._struct is None  # declared, not made: most versions are never used
    decoded, _ = plain.decode(plain.encode({"a": 1, "b": "s"}), 0)
    assert type(decoded) is plain.struct and plain.struct is plain.struct and decoded.to_dict() == {"a": 1, "b": "s"}
    again, _ = flexible.decode(flexible.encode({"a": 2}), 0)
    assert type(again) is flexible.struct and (again.a, again.t, again.unknown_tagged_fields) == (2, "x", [])
    assert flexible.struct(a=3).t == "x"  # the tagged fields' defaults
    for fields, name in (((("class", Int32),), "S"), ((("_hidden", Int32),), "S"), ((("a", Int32),), "not a name")):
        with pytest.raises(TypeError):
            Schema(*fields, name=name)
