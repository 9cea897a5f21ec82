"""ApiVersions v3 (KIP-511, the first flexible version): the requests real clients send, decoded byte for byte,
and the answer a ZooKeeper-mode Kafka 2.x broker gives, checked against kafka-python's independent encoder."""

import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tests.unit.protocol import client_frames
from zkbroker.protocol.api import (
    REQUEST_SCHEMAS,
    RESPONSE_SCHEMAS,
    advertised_versions,
    api_versions_response,
    api_versions_unsupported_response,
    decode_request,
    decode_response,
    encode_request,
)
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.headers import RequestHeader, parse_request_header
from zkbroker.protocol.schemas.api_versions import valid_client_software

RECORDED = [
    (client_frames.CONFLUENT_KAFKA, 1, "rdkafka", "confluent-kafka-python", "2.16.1-rdkafka-2.16.0"),
    (client_frames.KAFKA_PYTHON, 2, "kafka-python-3.0.12", "kafka-python", "3.0.12"),
    (client_frames.KCAT, 1, "rdkafka", "librdkafka", "2.0.2"),
]


@pytest.mark.parametrize(("frame", "correlation_id", "client_id", "name", "version"), RECORDED,
                         ids=["confluent-kafka", "kafka-python", "kcat"])
def test_recorded_client_requests_decode_byte_for_byte(frame, correlation_id, client_id, name, version):
    header, offset = parse_request_header(bytearray(frame))
    assert header == RequestHeader(18, 3, correlation_id, client_id)
    # Header v2: v1's fields, then an empty tag buffer.
    assert offset == 10 + len(client_id) + 1 and frame[offset - 1] == 0
    request = decode_request(header, bytearray(frame), offset)
    assert request.client_software_name == name and request.client_software_version == version
    assert request.unknown_tagged_fields == []
    assert valid_client_software(name, version)
    # Our client side writes exactly the same bytes.
    out = encode_request(18, 3, correlation_id, client_id,
                         {"client_software_name": name, "client_software_version": version})
    assert out == struct.pack(">i", len(frame)) + frame
    assert REQUEST_SCHEMAS[(18, 3)].encode(request) == frame[offset:]


def test_our_request_matches_kafka_pythons():
    ours = encode_request(18, 3, 9, "c", {"client_software_name": "zkbroker", "client_software_version": "1.0"})
    theirs = ApiVersionsRequest[3](client_software_name="zkbroker", client_software_version="1.0")
    theirs.with_header(correlation_id=9, client_id="c")
    assert ours == bytes(theirs.encode(header=True, framed=True))


def test_v3_answer_is_header_v0_the_table_and_no_tagged_field():
    reply = api_versions_response(RequestHeader(18, 3, 7, "c"))
    size, correlation_id = struct.unpack_from(">ii", reply)
    assert size == len(reply) - 4 and correlation_id == 7
    table = advertised_versions()
    expected = struct.pack(">h", 0) + bytes([len(table) + 1])
    for key, (low, high) in table.items():
        expected += struct.pack(">hhh", key, low, high) + b"\x00"  # each element's empty tag buffer
    expected += struct.pack(">i", 0) + b"\x00"  # throttle_time_ms, then no tagged field
    assert reply[8:] == expected  # header v0: nothing between the correlation id and the body
    decoded = ApiVersionsResponse[3].decode(reply[8:])
    assert decoded.error_code == 0 and decoded.finalized_features_epoch == -1
    assert decoded.supported_features == [] and decoded.finalized_features == []
    assert {(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys} == {
        (key, low, high) for key, (low, high) in table.items()}
    assert table[18] == (0, 3)


def test_tagged_fields_are_written_as_kafka_writes_them():
    # Not what we answer (no features, epoch -1), but what the codec writes when a caller sets them: the same bytes
    # as kafka-python's encoder, each tag only when it differs from its default.
    features = {"supported_features": [{"name": "metadata.version", "min_version": 1, "max_version": 7}],
                "finalized_features_epoch": 3,
                "finalized_features": [{"name": "metadata.version", "max_version_level": 7, "min_version_level": 1}]}
    body = {"error_code": 0, "api_keys": [(18, 0, 3)], "throttle_time_ms": 0, **features}
    ours = RESPONSE_SCHEMAS[(18, 3)].encode(body)
    theirs = ApiVersionsResponse[3](
        error_code=0, throttle_time_ms=0,
        api_keys=[ApiVersionsResponse[3].ApiVersion(api_key=18, min_version=0, max_version=3)],
        supported_features=[ApiVersionsResponse[3].SupportedFeatureKey(
            name="metadata.version", min_version=1, max_version=7)],
        finalized_features_epoch=3,
        finalized_features=[ApiVersionsResponse[3].FinalizedFeatureKey(
            name="metadata.version", max_version_level=7, min_version_level=1)])
    assert ours == bytes(theirs.encode())
    decoded, _ = RESPONSE_SCHEMAS[(18, 3)].decode(ours, 0)
    assert decoded.finalized_features_epoch == 3 and decoded.supported_features[0].name == "metadata.version"
    only_epoch = RESPONSE_SCHEMAS[(18, 3)].encode({**body, "supported_features": [], "finalized_features": []})
    assert only_epoch.endswith(b"\x01\x01\x08" + struct.pack(">q", 3))


def test_a_newer_brokers_tag_is_kept_by_our_client_side():
    # Kafka 3.4+ adds ZkMigrationReady (tag 3); our client keeps it as an unknown tag rather than failing.
    body = bytes(ApiVersionsResponse[3](error_code=0, api_keys=[], throttle_time_ms=0,
                                        zk_migration_ready=True).encode())
    correlation_id, decoded = decode_response(18, 3, struct.pack(">i", 4) + body)
    assert correlation_id == 4 and decoded.unknown_tagged_fields == [(3, b"\x01")]


@pytest.mark.parametrize(("name", "version", "valid"), [
    ("librdkafka", "2.0.2", True),
    ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0", True),
    ("a", "1", True),
    ("", "1.0", False),
    ("kafka python", "1.0", False),
    ("-kafka", "1.0", False),
    ("kafka-", "1.0", False),
    ("kafka", "1.0.", False),
    ("kafka_python", "1.0", False),
    ("kafka", "1.0+local", False),
    ("k\u00e9", "1", False),
])
def test_client_software_follows_kafkas_rule(name, version, valid):
    assert valid_client_software(name, version) is valid


def test_invalid_request_answer_has_error_42_and_no_table():
    reply = api_versions_response(RequestHeader(18, 3, 5, "c"), error_code=ErrorCode.INVALID_REQUEST)
    correlation_id, body = decode_response(18, 3, reply[4:])
    assert correlation_id == 5 and body.error_code == 42 and body.api_keys == [] and body.throttle_time_ms == 0


def test_requests_above_v3_keep_the_v0_unsupported_answer():
    reply = api_versions_unsupported_response(RequestHeader(18, 4, 6, "c"))
    correlation_id, body = decode_response(18, 0, reply[4:])
    assert correlation_id == 6 and body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert (18, 0, 3) in [tuple(k) for k in body.api_keys]
