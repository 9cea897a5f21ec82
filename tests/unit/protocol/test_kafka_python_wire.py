"""The exact requests kafka-python 3.0.12 sends at run time (its JSON-schema classes, at the
versions wire-protocol.md observed) decode with our codec, and our responses decode with its
response classes."""

from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from zkbroker.protocol.api import decode_request, encode_response, expects_response
from zkbroker.protocol.fetch_response import encode_fetch_response, join_pieces
from zkbroker.protocol.frame import FrameDecoder
from zkbroker.protocol.headers import RequestHeader, parse_request_header
from zkbroker.protocol.message_set import build_message_set, iter_messages

RECORDS = build_message_set([(b"k", b"v", 1000), (None, b"w", 1001)], magic=1)


def receive(request, correlation_id=9):
    request.with_header(correlation_id=correlation_id, client_id="kafka-python-3.0.12")
    decoder = FrameDecoder()
    decoder.receive_data(bytes(request.encode(header=True, framed=True)))
    frame = decoder.next_frame()
    header, offset = parse_request_header(frame)
    assert header.correlation_id == correlation_id and header.client_id == "kafka-python-3.0.12"
    return header, decode_request(header, frame, offset)


def test_produce_v2_and_response():
    Topic = ProduceRequest.TopicProduceData
    request = ProduceRequest[2](
        acks=-1,
        timeout_ms=30000,
        topic_data=[Topic(name="t", partition_data=[Topic.PartitionProduceData(index=3, records=RECORDS)])],
    )
    header, body = receive(request)
    assert (header.api_key, header.api_version, body.acks, body.timeout_ms) == (0, 2, -1, 30000)
    partition = body.topics[0].partitions[0]
    assert partition.partition == 3 and bytes(partition.records) == RECORDS
    assert expects_response(0, body)
    for version in (0, 1, 2):
        response = {"topics": [("t", [{"partition": 3, "error_code": 0, "base_offset": 41,
                                       "log_append_time": -1}])], "throttle_time_ms": 0}
        raw = encode_response(RequestHeader(0, version, 9, "c"), response)
        parsed = ProduceResponse.decode(raw[4:], version=version, header=True)
        assert parsed.responses[0].partition_responses[0].base_offset == 41


def test_acks_zero_expects_no_response():
    Topic = ProduceRequest.TopicProduceData
    request = ProduceRequest[0](acks=0, timeout_ms=1, topic_data=[Topic(name="t", partition_data=[])])
    _, body = receive(request)
    assert not expects_response(0, body)


def test_fetch_v3_v0_and_zero_copy_response():
    Topic = FetchRequest.FetchTopic
    for version in (0, 3):
        request = FetchRequest[version](
            replica_id=-1,
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=52428800,
            topics=[Topic(topic="t", partitions=[Topic.FetchPartition(partition=0, fetch_offset=5,
                                                                        partition_max_bytes=1048576)])],
        )
        header, body = receive(request)
        assert header.api_version == version
        assert body.topics[0].partitions[0].fetch_offset == 5
        assert body.topics[0].partitions[0].max_bytes == 1048576
        if version == 3:
            assert body.max_bytes == 52428800
        # Cut the records mid-message, as a max_bytes limit does: the client must cope.
        torn = RECORDS[:-3]
        pieces = encode_fetch_response(9, version, [("t", [(0, 0, 10, memoryview(torn))])])
        parsed = FetchResponse.decode(join_pieces(pieces)[4:], version=version, header=True)
        partition = parsed.responses[0].partitions[0]
        assert partition.high_watermark == 10 and bytes(partition.records) == torn
        assert [m.value for m in iter_messages(partition.records)] == [b"v"]


def test_list_offsets_v0_and_v1():
    Topic = ListOffsetsRequest.ListOffsetsTopic
    for version in (0, 1):
        request = ListOffsetsRequest[version](
            replica_id=-1,
            topics=[Topic(name="t", partitions=[Topic.ListOffsetsPartition(partition_index=0, timestamp=-2,
                                                                             max_num_offsets=1)])],
        )
        _, body = receive(request)
        assert body.topics[0].partitions[0].timestamp == -2
    raw = encode_response(RequestHeader(2, 0, 9, "c"), {"topics": [("t", [(0, 0, [42])])]})
    parsed = ListOffsetsResponse.decode(raw[4:], version=0, header=True)
    assert parsed.topics[0].partitions[0].old_style_offsets == [42]
    raw = encode_response(RequestHeader(2, 1, 9, "c"), {"topics": [("t", [(0, 0, -1, 42)])]})
    parsed = ListOffsetsResponse.decode(raw[4:], version=1, header=True)
    assert parsed.topics[0].partitions[0].offset == 42


def test_offset_commit_v0_to_v2():
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    for version in (0, 1, 2):
        request = OffsetCommitRequest[version](
            group_id="g",
            generation_id_or_member_epoch=-1,
            member_id="",
            retention_time_ms=-1,
            topics=[Topic(name="t", partitions=[Topic.OffsetCommitRequestPartition(
                partition_index=1, committed_offset=77, commit_timestamp=-1, committed_metadata="")])],
        )
        _, body = receive(request)
        assert body.group_id == "g"
        assert (body.topics[0].partitions[0].offset, body.topics[0].partitions[0].metadata) == (77, "")
        raw = encode_response(RequestHeader(8, version, 9, "c"), {"topics": [("t", [(1, 0)])]})
        parsed = OffsetCommitResponse.decode(raw[4:], version=version, header=True)
        assert parsed.topics[0].partitions[0].error_code == 0


def test_offset_fetch_v1_and_find_coordinator_v0():
    request = OffsetFetchRequest[1](
        group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])]
    )
    _, body = receive(request)
    assert body.topics[0].partitions == [0, 1]
    raw = encode_response(RequestHeader(9, 1, 9, "c"), {"topics": [("t", [(0, -1, "", 0), (1, 5, None, 0)])]})
    parsed = OffsetFetchResponse.decode(raw[4:], version=1, header=True)
    assert [p.committed_offset for p in parsed.topics[0].partitions] == [-1, 5]

    _, body = receive(FindCoordinatorRequest[0](key="g"))
    assert body.group_id == "g"
    raw = encode_response(RequestHeader(10, 0, 9, "c"),
                          {"error_code": 0, "node_id": 2, "host": "127.0.0.1", "port": 9093})
    parsed = FindCoordinatorResponse.decode(raw[4:], version=0, header=True)
    assert (parsed.node_id, parsed.host, parsed.port) == (2, "127.0.0.1", 9093)
