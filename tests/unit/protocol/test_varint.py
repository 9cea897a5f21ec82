"""Kafka's zigzag varints: known encodings, round trips over the whole int32/int64 range, and the
errors a truncated or overlong varint gets."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.varint import (
    VarintError,
    encode_varint,
    read_varint,
    read_varlong,
    size_of_varint,
    zigzag_decode,
    zigzag_encode,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

# Known encodings (protobuf's sint32/sint64, which Kafka's ByteUtils writes).
KNOWN = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (300, "d804"),
    (-300, "d704"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
    (2**63 - 1, "feffffffffffffffff01"),
    (-(2**63), "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "encoded"), KNOWN)
def test_known_encodings(value, encoded):
    assert encode_varint(value).hex() == encoded
    assert size_of_varint(value) == len(encoded) // 2
    reader = read_varint if -(2**31) <= value < 2**31 else read_varlong
    assert reader(bytes.fromhex(encoded) + b"\xaa", 0) == (value, len(encoded) // 2)


@given(INT64)
def test_zigzag_is_a_bijection_onto_small_unsigned_numbers(value):
    encoded = zigzag_encode(value)
    assert encoded >= 0 and zigzag_decode(encoded) == value
    assert encoded == 2 * abs(value) - (value < 0)


@given(INT32, st.binary(max_size=4))
def test_int32_round_trip_at_any_position(value, prefix):
    data = prefix + encode_varint(value) + b"\x00"
    assert read_varint(data, len(prefix)) == (value, len(data) - 1)
    assert len(encode_varint(value)) == size_of_varint(value) <= 5


@given(INT64)
def test_int64_round_trip(value):
    data = encode_varint(value)
    assert read_varlong(memoryview(data), 0) == (value, len(data))
    assert len(data) == size_of_varint(value) <= 10


@given(INT32)
def test_a_truncated_varint_is_corrupt(value):
    data = encode_varint(value)
    for cut in range(len(data)):
        with pytest.raises(VarintError) as raised:
            read_varint(data[:cut], 0)
        assert raised.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_overlong_varints_are_corrupt():
    with pytest.raises(VarintError, match="longer than 5 bytes"):
        read_varint(b"\x80\x80\x80\x80\x80\x00", 0)
    with pytest.raises(VarintError, match="longer than 10 bytes"):
        read_varlong(b"\x80" * 10 + b"\x00", 0)
    with pytest.raises(VarintError, match="int32 range"):
        read_varint(b"\xff\xff\xff\xff\x7f", 0)  # five bytes, but 35 bits


def test_encoding_refuses_values_beyond_int64():
    with pytest.raises(OverflowError):
        encode_varint(2**63)
