import struct

import pytest

from zkbroker.protocol.errors import RemoteProtocolError
from zkbroker.protocol.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
    request_header_version,
)


def test_header_v1_round_trip():
    raw = encode_request_header(3, 1, 42, "client-1") + b"BODY"
    header, offset = parse_request_header(raw)
    assert header == RequestHeader(3, 1, 42, "client-1")
    assert raw[offset:] == b"BODY"


def test_null_client_id():
    raw = struct.pack(">hhih", 3, 0, 5, -1) + b"B"
    header, offset = parse_request_header(raw)
    assert header.client_id is None and raw[offset:] == b"B"


def test_header_v2_skips_tagged_fields():
    # ApiVersions v3 from librdkafka: header v2 with a tagged field, then a compact body.
    raw = struct.pack(">hhih", 18, 3, 9, 7) + b"rdkafka" + b"\x01\x05\x02xy" + b"BODY"
    header, offset = parse_request_header(memoryview(raw))
    assert header == RequestHeader(18, 3, 9, "rdkafka")
    assert raw[offset:] == b"BODY"
    assert request_header_version(18, 3) == 2
    assert encode_request_header(18, 3, 9, "rdkafka") == struct.pack(">hhih", 18, 3, 9, 7) + b"rdkafka\x00"


def test_controlled_shutdown_v0_has_no_client_id():
    raw = struct.pack(">hhi", 7, 0, 11) + struct.pack(">i", 2)
    header, offset = parse_request_header(raw)
    assert header == RequestHeader(7, 0, 11, None) and offset == 8
    assert encode_request_header(7, 0, 11, "ignored") == raw[:8]
    header, offset = parse_request_header(encode_request_header(7, 1, 11, "b") + b"x")
    assert header.client_id == "b"


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00\x03\x00\x00\x00\x00",
        struct.pack(">hhih", 3, 0, 1, 5) + b"ab",
        struct.pack(">hhih", 18, 3, 1, -1) + b"\x80\x80",
        struct.pack(">hhih", 18, 3, 1, -1) + b"\x01\x00\x09ab",
        struct.pack(">hhih", 18, 3, 1, -1) + b"\xff\xff\xff\xff\xff\x01",
    ],
)
def test_malformed_headers(raw):
    with pytest.raises(RemoteProtocolError):
        parse_request_header(raw)


def test_response_header_v0():
    assert parse_response_header(encode_response_header(77) + b"x") == (77, 4)
    with pytest.raises(RemoteProtocolError):
        parse_response_header(b"\x00")
