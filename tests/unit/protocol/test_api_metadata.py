"""Metadata v0/v1: null vs empty topic lists, v1's rack/controller_id/is_internal."""

from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.old.metadata import MetadataRequest_v0, MetadataRequest_v1, MetadataResponse_v0, MetadataResponse_v1

from zkbroker.protocol.api import ApiKey, decode_request, decode_response, encode_request, encode_response
from zkbroker.protocol.headers import RequestHeader, parse_request_header
from zkbroker.protocol.schemas import metadata


def decode_frame(raw):
    frame = bytearray(raw[4:])
    header, offset = parse_request_header(frame)
    return header, decode_request(header, frame, offset)


def test_v0_request_all_topics_is_empty_list():
    header, request = decode_frame(encode_request(ApiKey.METADATA, 0, 1, "c", {"topics": []}))
    assert header.api_version == 0 and request.topics == []
    _, request = decode_frame(encode_request(ApiKey.METADATA, 0, 1, "c", {"topics": ["a", "b"]}))
    assert request.topics == ["a", "b"]


def test_v1_request_null_means_all_and_empty_means_none():
    _, request = decode_frame(encode_request(ApiKey.METADATA, 1, 1, "c", {"topics": None}))
    assert request.topics is None
    _, request = decode_frame(encode_request(ApiKey.METADATA, 1, 1, "c", {"topics": []}))
    assert request.topics == []


def test_requests_from_kafka_python():
    request = MetadataRequest[1](topics=None, allow_auto_topic_creation=True)
    request.with_header(correlation_id=3, client_id="kp")
    header, body = decode_frame(bytes(request.encode(header=True, framed=True)))
    assert header == RequestHeader(3, 1, 3, "kp") and body.topics is None
    assert metadata.REQUEST[0].encode({"topics": ["a", "bc"]}) == MetadataRequest_v0(
        topics=["a", "bc"]
    ).encode()
    assert metadata.REQUEST[1].encode({"topics": None}) == MetadataRequest_v1(topics=None).encode()


V0_RESPONSE = {
    "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092}, (2, "h2", 9093)],
    "topics": [
        {
            "error_code": 0,
            "topic": "t",
            "partitions": [
                {"error_code": 0, "partition": 0, "leader": 1, "replicas": [1, 2], "isr": [1]},
                {"error_code": 5, "partition": 1, "leader": -1, "replicas": [2], "isr": []},
            ],
        },
        {"error_code": 3, "topic": "missing", "partitions": []},
    ],
}

V1_RESPONSE = {
    "brokers": [(1, "127.0.0.1", 9092, None), (2, "h2", 9093, "rack-b")],
    "controller_id": 2,
    "topics": [(0, "t", False, [(0, 0, 1, [1, 2], [1, 2])]), (0, "__consumer_offsets", True, [])],
}


def test_v0_response_round_trip_and_golden():
    raw = encode_response(RequestHeader(3, 0, 8, "c"), V0_RESPONSE)
    correlation_id, body = decode_response(3, 0, raw[4:])
    assert correlation_id == 8
    assert body.topics[0].partitions[0].isr == [1]
    assert body.brokers[1].to_dict() == {"node_id": 2, "host": "h2", "port": 9093}
    golden = MetadataResponse_v0(
        brokers=[(1, "127.0.0.1", 9092), (2, "h2", 9093)],
        topics=[(0, "t", [(0, 0, 1, [1, 2], [1]), (5, 1, -1, [2], [])]), (3, "missing", [])],
    ).encode()
    assert raw[8:] == golden
    assert metadata.RESPONSE[0].encode(body) == golden


def test_v1_response_round_trip_and_golden():
    raw = encode_response(RequestHeader(3, 1, 9, "c"), V1_RESPONSE)
    _, body = decode_response(3, 1, raw[4:])
    assert body.controller_id == 2
    assert body.brokers[0].rack is None and body.brokers[1].rack == "rack-b"
    assert body.topics[1].is_internal is True
    golden = MetadataResponse_v1(
        brokers=[(1, "127.0.0.1", 9092, None), (2, "h2", 9093, "rack-b")],
        controller_id=2,
        topics=[(0, "t", False, [(0, 0, 1, [1, 2], [1, 2])]), (0, "__consumer_offsets", True, [])],
    ).encode()
    assert raw[8:] == golden
