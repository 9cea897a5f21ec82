"""ApiVersions, the registry and the server/client entry points (wire-protocol.md §3, gotcha 2)."""

import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.old.api_versions import ApiVersionsResponse_v0, ApiVersionsResponse_v2

from zkbroker.protocol.api import (
    REQUEST_SCHEMAS,
    RESPONSE_SCHEMAS,
    SUPPORTED_VERSIONS,
    ApiKey,
    advertised_versions,
    api_versions_response,
    api_versions_unsupported_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from zkbroker.protocol.errors import ErrorCode, RemoteProtocolError
from zkbroker.protocol.frame import FrameDecoder
from zkbroker.protocol.headers import RequestHeader, parse_request_header

# Kafka 2.1's maxima for the record-batch and group APIs (DESIGN sections 12 and 14), 0.8.2's others as section 3
# has them.
DESIGN_TABLE = {
    0: (0, 7),
    1: (0, 10),
    2: (0, 4),
    3: (0, 7),
    4: (0, 0),
    5: (0, 0),
    6: (0, 0),
    7: (0, 1),
    8: (0, 6),  # DESIGN §12: the group coordinator, at Kafka 2.1's maxima like the rest (KIP-896)
    9: (0, 7),  # DESIGN §18: v7's require_stable (KIP-447)
    10: (0, 2),
    11: (0, 3),
    12: (0, 2),
    13: (0, 2),
    14: (0, 2),
    15: (0, 2),
    16: (0, 2),
    18: (0, 3),  # DESIGN §16: v3, the first flexible version (KIP-511)
    22: (0, 4),  # DESIGN §18, transactions: Kafka 2.8's versions (KIP-360's epoch bump is v3)
    24: (0, 3),
    25: (0, 3),
    26: (0, 3),
    27: (0, 1),
    28: (0, 3),
    61: (0, 0),  # KIP-664's DescribeProducers, DescribeTransactions, ListTransactions (Kafka 3.0)
    65: (0, 0),
    66: (0, 0),
    23: (0, 2),
    # DESIGN §16, the Admin API (docs/admin-api.md)
    19: (0, 6),
    20: (0, 5),
    32: (0, 4),
    33: (0, 2),
    37: (0, 3),
    44: (0, 1),
    35: (0, 2),
    21: (0, 2),
    42: (0, 2),
    43: (0, 2),
    45: (0, 0),
    46: (0, 0),
    47: (0, 0),
    60: (0, 1),
    # DESIGN §19, security: SaslHandshake and SaslAuthenticate (their non-flexible versions)
    17: (0, 1),
    36: (0, 1),
    29: (0, 1),
    30: (0, 1),
    31: (0, 1),
    48: (0, 0),
    49: (0, 0),
    50: (0, 0),
    51: (0, 0),
}


def test_advertised_table_is_design_sections_3_and_12():
    assert SUPPORTED_VERSIONS == DESIGN_TABLE
    assert advertised_versions() == DESIGN_TABLE
    assert list(advertised_versions()) == sorted(DESIGN_TABLE)


def test_every_advertised_version_has_both_schemas():
    for key, (low, high) in advertised_versions().items():
        for version in range(low, high + 1):
            assert (key, version) in REQUEST_SCHEMAS, (key, version)
            assert (key, version) in RESPONSE_SCHEMAS, (key, version)


def frames(data):
    decoder = FrameDecoder()
    decoder.receive_data(data)
    return decoder.next_frame()


def test_unsupported_api_versions_from_kafka_python_gets_v0_error_35():
    request = ApiVersionsRequest[4](client_software_name="kafka-python", client_software_version="3")
    request.with_header(correlation_id=17, client_id="kp")
    frame = frames(bytes(request.encode(header=True, framed=True)))
    header, _ = parse_request_header(frame)
    assert header == RequestHeader(18, 4, 17, "kp")
    with pytest.raises(RemoteProtocolError) as info:
        decode_request(header, frame, 0)
    assert info.value.error_code == ErrorCode.UNSUPPORTED_VERSION

    reply = api_versions_unsupported_response(header)
    size, correlation_id, error_code = struct.unpack_from(">iih", reply)
    assert (size, correlation_id, error_code) == (len(reply) - 4, 17, 35)
    # kafka-python's own parser (it always reads an error reply as v0).
    parsed = ApiVersionsResponse.decode(reply[4:], version=4, header=True)
    assert parsed.error_code == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in parsed.api_keys} == DESIGN_TABLE
    # And kafka-python's legacy v0 encoder agrees byte for byte.
    golden = ApiVersionsResponse_v0(
        error_code=35, api_keys=[(k, lo, hi) for k, (lo, hi) in sorted(DESIGN_TABLE.items())]
    ).encode()
    assert reply[8:] == golden


def test_supported_api_versions_reply_matches_kafka_python():
    for version in (0, 1, 2):
        header = RequestHeader(18, version, 5, "c")
        reply = api_versions_response(header)
        assert struct.unpack_from(">i", reply, 4)[0] == 5
        _, body = decode_response(18, version, reply[4:])
        assert body.error_code == 0
        assert {k: (lo, hi) for k, lo, hi in body.api_keys} == DESIGN_TABLE
        if version:
            assert body.throttle_time_ms == 0
    golden = ApiVersionsResponse_v2(
        error_code=0,
        api_keys=[(k, lo, hi) for k, (lo, hi) in sorted(DESIGN_TABLE.items())],
        throttle_time_ms=0,
    ).encode()
    assert api_versions_response(RequestHeader(18, 2, 5, "c"))[8:] == golden


def test_request_round_trip_through_the_server_entry_points():
    raw = encode_request(ApiKey.API_VERSIONS, 2, 99, "me", {})
    frame = frames(raw)
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(18, 2, 99, "me")
    assert decode_request(header, frame, offset).to_dict() == {}
    out = encode_response(header, {"error_code": 0, "api_keys": [(0, 0, 2)], "throttle_time_ms": 3})
    correlation_id, body = decode_response(18, 2, frames(out))
    assert correlation_id == 99
    assert body.to_dict() == {
        "error_code": 0,
        "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 2}],
        "throttle_time_ms": 3,
    }


def test_unknown_api_key_is_a_remote_error_with_code_35():
    header = RequestHeader(99, 0, 1, None)
    with pytest.raises(RemoteProtocolError) as info:
        decode_request(header, b"\x00" * 20, 8)
    assert info.value.error_code == 35


def test_every_registered_schema_is_flexible_exactly_where_kafka_is():
    from zkbroker.protocol.headers import is_flexible

    for registry in (REQUEST_SCHEMAS, RESPONSE_SCHEMAS):
        for (key, version), schema in registry.items():
            assert schema.flexible == is_flexible(key, version), (key, version)


def test_registering_a_schema_of_the_wrong_world_fails():
    from zkbroker.protocol import api
    from zkbroker.protocol.types import Schema

    with pytest.raises(TypeError, match="FlexibleSchema"):
        api._check_flexibility({(18, 3): Schema(name="NotFlexible")}, "request")
