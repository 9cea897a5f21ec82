"""Request and response headers (the bytes between the frame size and the body).

Request header v1 -- every request we serve: api_key int16, api_version int16, correlation_id
int32, client_id nullable string. Two exceptions reach this broker:

* ControlledShutdown v0 (0.8.x) has a non-standard header with no client_id;
* flexible versions (KIP-482) use header v2: v1 plus tagged fields. We serve no flexible version,
  but clients open with ApiVersions v3/v4, and we must read its correlation id to answer
  UNSUPPORTED_VERSION, so the tagged fields are skipped.

Responses always use header v0 (correlation_id only); ApiVersions responses do so even at
flexible versions, so it is the only response header we ever write.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import LocalProtocolError, RemoteProtocolError
from .types import NullableString

__all__ = [
    "FIRST_FLEXIBLE_REQUEST_VERSION",
    "RequestHeader",
    "encode_request_header",
    "encode_response_header",
    "parse_request_header",
    "parse_response_header",
    "request_header_version",
]

_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_INT32 = struct.Struct(">i")

CONTROLLED_SHUTDOWN = 7

#: The first flexible (header v2) version of each request we know, from Kafka's message JSON
#: ("flexibleVersions"). All lie above what we advertise; they matter only for finding the body.
FIRST_FLEXIBLE_REQUEST_VERSION: dict[int, int] = {
    0: 9,  # Produce
    1: 12,  # Fetch
    2: 6,  # ListOffsets
    3: 9,  # Metadata
    4: 4,  # LeaderAndIsr
    5: 2,  # StopReplica
    6: 6,  # UpdateMetadata
    7: 3,  # ControlledShutdown
    8: 8,  # OffsetCommit
    9: 6,  # OffsetFetch
    10: 3,  # FindCoordinator
    18: 3,  # ApiVersions
    23: 4,  # OffsetsForLeaderEpoch
}


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The header of one request, as the broker reads it."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def request_header_version(api_key: int, api_version: int) -> int:
    """0 (ControlledShutdown v0: no client_id), 1 (standard) or 2 (flexible: tagged fields)."""
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    first_flexible = FIRST_FLEXIBLE_REQUEST_VERSION.get(api_key)
    if first_flexible is not None and api_version >= first_flexible:
        return 2
    return 1


def _read_uvarint(buf: bytes | bytearray | memoryview, offset: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 35, 7):
        try:
            byte = buf[offset]
        except IndexError:
            raise RemoteProtocolError(f"varint truncated at offset {offset}") from None
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
    raise RemoteProtocolError(f"varint longer than 5 bytes before offset {offset}")


def _skip_tagged_fields(buf: bytes | bytearray | memoryview, offset: int) -> int:
    count, offset = _read_uvarint(buf, offset)
    for _ in range(count):
        _tag, offset = _read_uvarint(buf, offset)
        size, offset = _read_uvarint(buf, offset)
        offset += size
        if offset > len(buf):
            raise RemoteProtocolError("tagged field runs past the end of the frame")
    return offset


def parse_request_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Read a request header from a frame payload; returns it and the offset of the body."""
    try:
        api_key, api_version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    except struct.error:
        raise RemoteProtocolError(f"request header truncated ({len(frame)} bytes)") from None
    header_version = request_header_version(api_key, api_version)
    if header_version == 0:
        return RequestHeader(api_key, api_version, correlation_id, None), 8
    client_id, offset = NullableString.decode(frame, 8)
    if header_version == 2:
        offset = _skip_tagged_fields(frame, offset)
    return RequestHeader(api_key, api_version, correlation_id, client_id), offset


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """The header a client writes (v0 for ControlledShutdown v0, v2 with no tags if flexible)."""
    try:
        fixed = _KEY_VERSION_CORRELATION.pack(api_key, api_version, correlation_id)
    except struct.error as exc:
        raise LocalProtocolError(f"request header: {exc}") from None
    header_version = request_header_version(api_key, api_version)
    if header_version == 0:
        return fixed
    tags = b"\x00" if header_version == 2 else b""
    return fixed + NullableString.encode(client_id) + tags


def encode_response_header(correlation_id: int) -> bytes:
    """Response header v0."""
    return _INT32.pack(correlation_id)


def parse_response_header(frame: bytes | bytearray | memoryview) -> tuple[int, int]:
    """Read response header v0; returns (correlation_id, offset of the body)."""
    try:
        return _INT32.unpack_from(frame, 0)[0], 4
    except struct.error:
        raise RemoteProtocolError("response header truncated") from None
