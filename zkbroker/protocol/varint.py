"""Kafka's variable-length integers: signed ones inside a magic-2 record (KIP-98), unsigned ones in flexible
versions of the protocol (KIP-482).

A varint is a signed integer zigzag-encoded (0, -1, 1, -2, ... become 0, 1, 2, 3, ...) and then written
base 128, least significant group first, the high bit of each byte saying another follows -- protobuf's
``sint32``/``sint64``. Kafka writes int32 fields (lengths, offset deltas) as varints of at most 5 bytes and
int64 fields (the timestamp delta) as varlongs of at most 10.

An unsigned varint is the same base-128 layout without the zigzag step; flexible versions write lengths,
counts, tags and tagged-field sizes with it, never longer than 5 bytes (Kafka's readUnsignedVarint refuses a
sixth) and never above 2**32 - 1 here.

Readers are ``read_x(buf, pos) -> (value, new_pos)`` and raise :class:`VarintError` (CORRUPT_MESSAGE) for a
varint that runs past the buffer or past its width: such a record is corrupt, whoever wrote it.
"""

from __future__ import annotations

from .errors import RemoteProtocolError

__all__ = [
    "VarintError",
    "encode_unsigned_varint",
    "encode_varint",
    "read_unsigned_varint",
    "read_varint",
    "read_varlong",
    "size_of_unsigned_varint",
    "size_of_varint",
    "zigzag_decode",
    "zigzag_encode",
]

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class VarintError(RemoteProtocolError):
    """A varint that does not end within the buffer or within its width (5 bytes, 10 for a varlong)."""


def zigzag_encode(value: int) -> int:
    """Signed to unsigned, small magnitudes to small numbers: 0, -1, 1, -2 -> 0, 1, 2, 3."""
    return value << 1 if value >= 0 else ((-value) << 1) - 1


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def encode_varint(value: int) -> bytes:
    """``value`` (an int64) as a zigzag varint; int32 values take at most 5 bytes, int64 at most 10."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise OverflowError(f"{value} does not fit a varlong")
    n = zigzag_encode(value)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def size_of_varint(value: int) -> int:
    """Bytes ``encode_varint(value)`` takes."""
    return max(1, (zigzag_encode(value).bit_length() + 6) // 7)


def _read(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    end = min(len(buf), pos + max_bytes)
    at = pos
    while at < end:
        byte = buf[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7
    if at - pos >= max_bytes:
        raise VarintError(f"{what} longer than {max_bytes} bytes at byte {pos}")
    raise VarintError(f"{what} runs past the end of the data at byte {pos}")


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """The int32 varint at ``pos`` and the position after it."""
    n = len(buf)
    byte = buf[pos] if pos < n else 0x80
    if byte < 0x80:  # one byte: most lengths and deltas
        return (byte >> 1) ^ -(byte & 1), pos + 1
    if pos + 1 < n and buf[pos + 1] < 0x80:  # two: lengths below 8 KiB
        value = (byte & 0x7F) | (buf[pos + 1] << 7)
        return (value >> 1) ^ -(value & 1), pos + 2
    value, at = _read(buf, pos, 5, "varint")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise VarintError(f"varint {value} out of the int32 range at byte {pos}")
    return value, at


def read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """The int64 varint (varlong) at ``pos`` and the position after it."""
    n = len(buf)
    byte = buf[pos] if pos < n else 0x80
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    if pos + 1 < n and buf[pos + 1] < 0x80:
        value = (byte & 0x7F) | (buf[pos + 1] << 7)
        return (value >> 1) ^ -(value & 1), pos + 2
    value, at = _read(buf, pos, 10, "varlong")
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise VarintError(f"varlong {value} out of the int64 range at byte {pos}")
    return value, at


_UINT32_MAX = (1 << 32) - 1


def encode_unsigned_varint(value: int) -> bytes:
    """``value`` (0 to 2**32 - 1) as an unsigned varint of 1 to 5 bytes."""
    if not 0 <= value <= _UINT32_MAX:
        raise OverflowError(f"{value} does not fit an unsigned varint")
    if value < 0x80:  # nearly every length, count and tag
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def size_of_unsigned_varint(value: int) -> int:
    """Bytes ``encode_unsigned_varint(value)`` takes."""
    return max(1, (value.bit_length() + 6) // 7)


def read_unsigned_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it; at most 5 bytes, at most 2**32 - 1."""
    n = len(buf)
    byte = buf[pos] if pos < n else 0x80
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    at = pos + 1
    end = min(n, pos + 5)
    while at < end:
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > _UINT32_MAX:
                raise VarintError(f"unsigned varint {value} above 2**32 - 1 at byte {pos}")
            return value, at
        shift += 7
    if at - pos >= 5:
        raise VarintError(f"unsigned varint longer than 5 bytes at byte {pos}")
    raise VarintError(f"unsigned varint runs past the end of the data at byte {pos}")
