"""The client side of a connection without sockets: requests numbered and waited for, responses cut from
any split of the byte stream, and every broker mistake a RemoteProtocolError, every one of ours a
LocalProtocolError."""

import struct

import pytest

from zkbroker.protocol.api import ApiKey, decode_request, encode_response, request_schema
from zkbroker.protocol.client_codec import ClientCodec
from zkbroker.protocol.errors import LocalProtocolError, RemoteProtocolError
from zkbroker.protocol.headers import RequestHeader, parse_request_header

METADATA_REQUEST = {"topics": ["t"]}
METADATA_ANSWER = {"brokers": [{"node_id": 1, "host": "h", "port": 9092}],
                   "topics": [{"error_code": 0, "topic": "t", "partitions": []}]}


def produce_request(acks: int) -> dict:
    return {"acks": acks, "timeout_ms": 1000,
            "topics": [{"topic": "t", "partitions": [{"partition": 0, "records": b"x" * 40}]}]}


def produced_answer(base_offset: int) -> dict:
    return {"topics": [{"topic": "t", "partitions": [{"partition": 0, "error_code": 0, "base_offset": base_offset}]}]}


def as_broker_reads(frame: bytes) -> tuple[RequestHeader, object]:
    """The request as the broker decodes it (frame without its size prefix checked against its size)."""
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    header, offset = parse_request_header(frame[4:])
    return header, decode_request(header, frame[4:], offset)


def answer(api_key: int, api_version: int, correlation_id: int, body: dict) -> bytes:
    return encode_response(RequestHeader(api_key, api_version, correlation_id, "broker"), body)


def test_requests_carry_the_client_id_and_consecutive_correlation_ids():
    codec = ClientCodec("me")
    first = as_broker_reads(codec.send(ApiKey.METADATA, 0, METADATA_REQUEST))
    second = as_broker_reads(codec.send(ApiKey.METADATA, 0, METADATA_REQUEST))
    assert [h.correlation_id for h, _ in (first, second)] == [1, 2]
    assert first[0] == RequestHeader(ApiKey.METADATA, 0, 1, "me")
    assert first[1].topics == ["t"]
    assert codec.in_flight == 2


def test_a_response_split_byte_by_byte_comes_out_once_whole():
    codec = ClientCodec("me")
    codec.send(ApiKey.METADATA, 0, METADATA_REQUEST, context="ctx")
    stream = answer(ApiKey.METADATA, 0, 1, METADATA_ANSWER)
    for i in range(len(stream) - 1):
        codec.receive_data(stream[i : i + 1])
        assert codec.next_response() is None
    codec.receive_data(stream[-1:])
    response = codec.next_response()
    assert (response.correlation_id, response.api_key, response.api_version, response.context) == (
        1, ApiKey.METADATA, 0, "ctx")
    assert response.body.brokers[0].host == "h"
    assert response.body.topics[0].topic == "t"
    assert codec.in_flight == 0
    assert codec.next_response() is None


def test_several_responses_in_one_chunk_answer_their_requests_in_order():
    codec = ClientCodec("me")
    codec.send(ApiKey.PRODUCE, 0, produce_request(acks=1), context="a")
    codec.send(ApiKey.METADATA, 0, METADATA_REQUEST, context="b")
    codec.send(ApiKey.PRODUCE, 0, produce_request(acks=-1), context="c")
    codec.receive_data(answer(ApiKey.PRODUCE, 0, 1, produced_answer(10))
                       + answer(ApiKey.METADATA, 0, 2, METADATA_ANSWER)
                       + answer(ApiKey.PRODUCE, 0, 3, produced_answer(20)))
    responses = [codec.next_response() for _ in range(3)]
    assert [r.context for r in responses] == ["a", "b", "c"]
    assert [r.correlation_id for r in responses] == [1, 2, 3]
    assert responses[0].body.topics[0].partitions[0].base_offset == 10
    assert responses[1].body.brokers[0].port == 9092
    assert responses[2].body.topics[0].partitions[0].base_offset == 20
    assert codec.next_response() is None
    assert codec.in_flight == 0


def test_received_into_the_codecs_own_buffer_a_large_response_comes_out_whole():
    codec = ClientCodec("me")
    codec.send(ApiKey.METADATA, 0, METADATA_REQUEST)
    topics = [{"error_code": 0, "topic": f"topic-{i:05d}", "partitions": []} for i in range(5000)]
    stream = memoryview(answer(ApiKey.METADATA, 0, 1, {"brokers": [], "topics": topics}))
    assert len(stream) > 64 * 1024
    while (response := codec.next_response()) is None:
        target = codec.get_buffer()
        n = min(len(target), 1000, len(stream))
        target[:n] = stream[:n]
        codec.buffer_updated(n)
        stream = stream[n:]
    assert [t.topic for t in response.body.topics] == [t["topic"] for t in topics]


def test_a_wrong_correlation_id_is_the_brokers_fault_and_ends_the_connection():
    codec = ClientCodec("me")
    codec.send(ApiKey.METADATA, 0, METADATA_REQUEST, context="waiting")
    codec.receive_data(answer(ApiKey.METADATA, 0, 7, METADATA_ANSWER))
    with pytest.raises(RemoteProtocolError, match="correlation id 7 does not match the request's 1"):
        codec.next_response()
    codec.receive_data(answer(ApiKey.METADATA, 0, 1, METADATA_ANSWER))
    with pytest.raises(RemoteProtocolError, match="correlation id 7"):
        codec.next_response()
    assert codec.abandon() == ["waiting"]
    assert codec.in_flight == 0


def test_a_response_to_no_request_is_the_brokers_fault():
    codec = ClientCodec("me")
    codec.receive_data(answer(ApiKey.METADATA, 0, 1, METADATA_ANSWER))
    with pytest.raises(RemoteProtocolError, match="no request waiting"):
        codec.next_response()


def test_a_truncated_response_body_is_the_brokers_fault():
    codec = ClientCodec("me")
    codec.send(ApiKey.METADATA, 0, METADATA_REQUEST, context="waiting")
    whole = answer(ApiKey.METADATA, 0, 1, METADATA_ANSWER)[4:]
    codec.receive_data(struct.pack(">i", len(whole) - 3) + whole[:-3])
    with pytest.raises(RemoteProtocolError):
        codec.next_response()
    assert codec.abandon() == ["waiting"]


@pytest.mark.parametrize("size", [-1, -(2**31), 101])
def test_negative_and_oversized_frame_sizes_fail_on_the_prefix(size):
    codec = ClientCodec("me", max_response_bytes=100)
    codec.send(ApiKey.METADATA, 0, METADATA_REQUEST)
    with pytest.raises(RemoteProtocolError, match="frame"):
        codec.receive_data(struct.pack(">i", size))


def test_produce_with_acks_0_waits_for_no_response():
    codec = ClientCodec("me")
    header, body = as_broker_reads(codec.send(ApiKey.PRODUCE, 0, produce_request(acks=0), context="fire"))
    assert (header.api_key, header.correlation_id, body.acks) == (ApiKey.PRODUCE, 1, 0)
    assert codec.in_flight == 0
    codec.send(ApiKey.PRODUCE, 0, produce_request(acks=1), context="answered")
    assert codec.in_flight == 1
    codec.receive_data(answer(ApiKey.PRODUCE, 0, 2, produced_answer(5)))
    assert codec.next_response().context == "answered"


def test_a_request_we_cannot_encode_is_our_fault_and_changes_nothing():
    codec = ClientCodec("me")
    with pytest.raises(LocalProtocolError):
        codec.send(ApiKey.METADATA, 99, METADATA_REQUEST)
    with pytest.raises(LocalProtocolError):
        codec.send(ApiKey.METADATA, 0, {"topics": [7]})
    with pytest.raises(LocalProtocolError):
        codec.send_encoded(ApiKey.METADATA, 99, b"")
    assert codec.in_flight == 0
    header, _ = as_broker_reads(codec.send(ApiKey.METADATA, 0, METADATA_REQUEST))
    assert header.correlation_id == 1


def test_a_body_encoded_once_goes_out_behind_its_own_header_on_each_connection():
    body = request_schema(ApiKey.STOP_REPLICA, 0).encode(
        {"controller_id": 1, "controller_epoch": 2, "delete_partitions": False,
         "partitions": [{"topic": "t", "partition": 0}]})
    first, second = ClientCodec("controller-1"), ClientCodec("controller-1")
    second.send(ApiKey.METADATA, 0, METADATA_REQUEST)
    for codec, correlation_id in ((first, 1), (second, 2)):
        header, request = as_broker_reads(codec.send_encoded(ApiKey.STOP_REPLICA, 0, body, context="stop") + body)
        assert (header.correlation_id, header.client_id) == (correlation_id, "controller-1")
        assert request.partitions[0].topic == "t"
    first.receive_data(answer(ApiKey.STOP_REPLICA, 0, 1, {"error_code": 0, "partitions": []}))
    response = first.next_response()
    assert (response.context, response.body.error_code) == ("stop", 0)


def test_oldest_context_and_abandon_follow_the_order_of_sending():
    codec = ClientCodec("me")
    for name in ("a", "b", "c"):
        codec.send(ApiKey.METADATA, 0, METADATA_REQUEST, context=name)
    assert codec.oldest_context() == "a"
    codec.receive_data(answer(ApiKey.METADATA, 0, 1, METADATA_ANSWER))
    assert codec.next_response().context == "a"
    assert codec.oldest_context() == "b"
    assert codec.abandon() == ["b", "c"]
    assert codec.in_flight == 0
