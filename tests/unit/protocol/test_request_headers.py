import struct

import pytest

from zkbroker.protocol.errors import RemoteProtocolError
from zkbroker.protocol.headers import (
    FIRST_FLEXIBLE_VERSION,
    RequestHeader,
    encode_request_header,
    encode_response_header,
    is_flexible,
    parse_request_header,
    parse_response_header,
    request_header_version,
    response_header_version,
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


def test_response_header_v1_is_the_correlation_id_and_an_empty_tag_buffer():
    assert encode_response_header(77, 1) == struct.pack(">i", 77) + b"\x00"
    assert parse_response_header(encode_response_header(77, 1) + b"x", 1) == (77, 5)
    # a v1 header with a tag we do not know: skipped
    assert parse_response_header(struct.pack(">i", 5) + b"\x01\x03\x01z" + b"x", 1) == (5, 8)
    with pytest.raises(RemoteProtocolError):
        parse_response_header(struct.pack(">i", 5) + b"\x02\x03\x00\x03\x00", 1)  # a tag repeated


def test_header_versions_follow_the_first_flexible_version():
    assert request_header_version(3, 8) == 1 and request_header_version(3, 9) == 2
    assert response_header_version(3, 8) == 0 and response_header_version(3, 9) == 1
    assert request_header_version(60, 0) == 2 and response_header_version(60, 0) == 1  # DescribeCluster
    assert not is_flexible(17, 1) and request_header_version(17, 1) == 1  # SaslHandshake: never flexible
    assert request_header_version(7, 0) == 0 and request_header_version(7, 3) == 2


def test_api_versions_response_header_is_v0_at_every_version():
    assert request_header_version(18, 3) == 2 and request_header_version(18, 4) == 2
    assert all(response_header_version(18, version) == 0 for version in range(10))


def test_the_table_holds_kafkas_first_flexible_versions():
    # Spot checks against Kafka's message JSON (flexibleVersions).
    assert FIRST_FLEXIBLE_VERSION[0] == 9 and FIRST_FLEXIBLE_VERSION[1] == 12 and FIRST_FLEXIBLE_VERSION[18] == 3
    assert FIRST_FLEXIBLE_VERSION[19] == 5 and FIRST_FLEXIBLE_VERSION[32] == 4 and FIRST_FLEXIBLE_VERSION[22] == 2
    assert 17 not in FIRST_FLEXIBLE_VERSION and 47 not in FIRST_FLEXIBLE_VERSION


@pytest.mark.parametrize(
    "tags",
    [
        b"\x02\x01\x00\x01\x00",  # a tag repeated
        b"\x90\x4e\x00\x00",  # ten thousand tagged fields declared
        b"\x01\x00\xff\xff\xff\xff\x0f",  # a size far beyond the frame
    ],
)
def test_hostile_request_header_v2_tag_buffers(tags):
    with pytest.raises(RemoteProtocolError):
        parse_request_header(struct.pack(">hhih", 18, 3, 1, 1) + b"c" + tags + b"\x00" * 4)
