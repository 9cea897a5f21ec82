"""The quorum's messages on the wire: every message round-trips dataclass -> bytes -> dataclass at every
version it has, and a few encodings are checked byte for byte against Kafka 3.7's message JSON by hand."""

import collections
import dataclasses
import struct

import pytest

from tests.unit.raft.simulation import REQUESTS as SIMULATED_REQUESTS
from tests.unit.raft.simulation import Simulation, random_schedule
from zkbroker.protocol.api import (
    REQUEST_SCHEMAS,
    RESPONSE_SCHEMAS,
    ApiKey,
    advertised_versions,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from zkbroker.protocol.headers import RequestHeader, parse_request_header
from zkbroker.protocol.metadata_records import METADATA_TOPIC_ID
from zkbroker.raft import messages as m
from zkbroker.raft.wire import KAFKA_37_VERSIONS, api_key_of, from_body, quorum_versions, to_body

TOPIC = b"__cluster_metadata"

REQUESTS = [
    m.VoteRequest("fMCL8kv1SWm87L_Md-I2hg", 5, 3001, 4, 10),
    m.BeginQuorumEpochRequest("c", 3002, 6),
    m.EndQuorumEpochRequest(None, 3002, 6, (3001, 3003)),
    m.FetchRequest("c", 3001, 500, 6, 42, 5, 0, 1048576),
    m.FetchRequest("c", 1, 500, 6, 0, -1, -1, 8388608),
    m.DescribeQuorumRequest(),
    m.FetchSnapshotRequest("c", 3003, 1 << 20, 6, m.SnapshotId(100, 5), 4096),
]
ENTRIES = (
    m.LogEntry(7, 6, m.LeaderChangeMessage(3002, (3001, 3002, 3003), (3002, 3003))),
    m.LogEntry(8, 6, b"\x01\x14\x00\x00"),
)
RESPONSES = [
    m.VoteResponse(0, -1, 5, True),
    m.VoteResponse(74, 3002, 6, False),
    m.BeginQuorumEpochResponse(0, 3002, 6),
    m.EndQuorumEpochResponse(6, 3002, 6),
    m.FetchResponse(0, 9, 0, m.LeaderIdAndEpoch(3002, 6), records=ENTRIES),
    m.FetchResponse(0, 5, 0, m.LeaderIdAndEpoch(3002, 6), diverging_epoch=m.EpochEndOffset(4, 12)),
    m.FetchResponse(0, 5, 0, m.LeaderIdAndEpoch(3002, 6), snapshot_id=m.SnapshotId(100, 5)),
    m.FetchResponse(6, -1, -1, m.LeaderIdAndEpoch(-1, 7)),
    m.DescribeQuorumResponse(0, 3002, 6, 10, (m.ReplicaState(3002, 10, 1700, 1700), m.ReplicaState(3001, 9)),
                             (m.ReplicaState(1, 10, 1650, 1650),)),
    m.FetchSnapshotResponse(0, m.SnapshotId(100, 5), m.LeaderIdAndEpoch(3002, 6), 8192, 4096, b"\x00" * 30),
]


def _versions(message):
    key = api_key_of(message)
    if key == ApiKey.FETCH:
        return range(12, 18)
    return sorted(v for k, v in REQUEST_SCHEMAS if k == key)


@pytest.mark.parametrize("message", REQUESTS + RESPONSES, ids=lambda msg: type(msg).__name__)
def test_round_trip_is_the_identity(message):
    is_request = message in REQUESTS
    key = api_key_of(message)
    for version in _versions(message):
        schema = (REQUEST_SCHEMAS if is_request else RESPONSE_SCHEMAS)[(key, version)]
        data = schema.encode(to_body(message, version))
        body, end = schema.decode(memoryview(data), 0)
        assert end == len(data)
        back = from_body(key, version, is_request, body)
        if isinstance(message, m.DescribeQuorumResponse) and version == 0:  # v0 has no timestamps
            assert back == m.DescribeQuorumResponse(
                0, 3002, 6, 10, (m.ReplicaState(3002, 10), m.ReplicaState(3001, 9)), (m.ReplicaState(1, 10),))
        else:
            assert back == message, version


def test_vote_request_v0_bytes():
    data = REQUEST_SCHEMAS[(52, 0)].encode(to_body(m.VoteRequest("c", 5, 3001, 4, 10), 0))
    expected = (b"\x02c"  # ClusterId: compact nullable string, length + 1
                + b"\x02" + b"\x13" + TOPIC  # one topic, its name
                + b"\x02" + struct.pack(">iiiiq", 0, 5, 3001, 4, 10) + b"\x00"  # one partition, its tag buffer
                + b"\x00"  # the topic's tag buffer
                + b"\x00")  # the body's
    assert data == expected


def test_begin_quorum_epoch_v0_is_not_flexible():
    data = REQUEST_SCHEMAS[(53, 0)].encode(to_body(m.BeginQuorumEpochRequest(None, 3002, 6), 0))
    expected = (b"\xff\xff"  # null ClusterId: int16 -1
                + struct.pack(">i", 1) + struct.pack(">h", 18) + TOPIC
                + struct.pack(">i", 1) + struct.pack(">iii", 0, 3002, 6))
    assert data == expected


def test_fetch_v16_request_bytes_carry_cluster_id_and_replica_state_as_tags():
    message = m.FetchRequest("abc", 3001, 500, 6, 42, 5, 0, 1048576)
    data = REQUEST_SCHEMAS[(1, 16)].encode(to_body(message, 16))
    expected = (struct.pack(">iiibii", 500, 0, 8 << 20, 0, 0, -1)  # MaxWaitMs .. SessionEpoch (no ReplicaId)
                + b"\x02" + METADATA_TOPIC_ID  # one topic, by id
                + b"\x02" + struct.pack(">iiqiqi", 0, 6, 42, 5, 0, 1048576) + b"\x00"  # its partition
                + b"\x00"  # the topic's tag buffer
                + b"\x01"  # ForgottenTopicsData: empty
                + b"\x01"  # RackId: ""
                + b"\x02"  # two tagged fields
                + b"\x00\x04" + b"\x04abc"  # tag 0 ClusterId, 4 bytes
                + b"\x01\x0d" + struct.pack(">iq", 3001, -1) + b"\x00")  # tag 1 ReplicaState, 13 bytes
    assert data == expected
    frame = encode_request(ApiKey.FETCH, 16, 9, "raft-client-3001", to_body(message, 16))
    header, offset = parse_request_header(memoryview(frame)[4:])
    assert from_body(1, 16, True, decode_request(header, memoryview(frame)[4:], offset)) == message


def test_fetch_v12_response_writes_only_the_tags_that_differ_from_their_defaults():
    message = m.FetchResponse(0, 5, 0, m.LeaderIdAndEpoch(3002, 6), diverging_epoch=m.EpochEndOffset(4, 12))
    data = RESPONSE_SCHEMAS[(1, 12)].encode(to_body(message, 12))
    expected = (struct.pack(">ihi", 0, 0, 0)  # ThrottleTimeMs, ErrorCode, SessionId
                + b"\x02" + b"\x13" + TOPIC
                + b"\x02" + struct.pack(">ihqqq", 0, 0, 5, -1, 0)  # Partition .. LogStartOffset
                + b"\x00"  # AbortedTransactions: null
                + struct.pack(">i", -1)  # PreferredReadReplica
                + b"\x01"  # Records: empty
                + b"\x02"  # two tags: DivergingEpoch and CurrentLeader; SnapshotId stays at its default
                + b"\x00\x0d" + struct.pack(">iq", 4, 12) + b"\x00"
                + b"\x01\x09" + struct.pack(">ii", 3002, 6) + b"\x00"
                + b"\x00"  # the topic's tag buffer
                + b"\x00")  # the body's
    assert data == expected


def test_fetch_snapshot_request_bytes():
    message = m.FetchSnapshotRequest(None, 3003, 1024, 6, m.SnapshotId(100, 5), 0)
    data = REQUEST_SCHEMAS[(59, 0)].encode(to_body(message, 0))
    expected = (struct.pack(">ii", 3003, 1024)
                + b"\x02\x13" + TOPIC
                + b"\x02" + struct.pack(">iiqi", 0, 6, 100, 5) + b"\x00" + struct.pack(">q", 0) + b"\x00"
                + b"\x00"
                + b"\x00")  # null ClusterId is tag 0's default: not written
    assert data == expected


def test_quorum_apis_are_registered_at_kafka_37_versions_and_not_advertised():
    for key, version in KAFKA_37_VERSIONS.items():
        assert (key, version) in REQUEST_SCHEMAS and (key, version) in RESPONSE_SCHEMAS
    advertised = advertised_versions()
    for key in (52, 53, 54, 55, 59):
        assert key not in advertised
    assert advertised[ApiKey.FETCH] == (0, 10)


def test_inconsistent_voter_set_is_kafkas_94():
    assert m.INCONSISTENT_VOTER_SET == 94


def through_the_wire(message, correlation_id, is_request, versions=KAFKA_37_VERSIONS):
    """``message`` as a whole frame at Kafka 3.7's version (or ``versions``'), and back."""
    key = api_key_of(message)
    version = versions[key]
    if is_request:
        frame = memoryview(encode_request(key, version, correlation_id, "raft-client", to_body(message, version)))[4:]
        header, offset = parse_request_header(frame)
        assert (header.api_key, header.api_version, header.correlation_id) == (key, version, correlation_id)
        return from_body(key, version, True, decode_request(header, frame, offset))
    frame = encode_response(RequestHeader(key, version, correlation_id, None), to_body(message, version))
    got_id, body = decode_response(key, version, memoryview(frame)[4:])
    assert got_id == correlation_id
    return from_body(key, version, False, body)


class WireSimulation(Simulation):
    """The simulation with every message sent as bytes: what arrives is what the wire decodes."""

    sent: collections.Counter = collections.Counter()
    versions = KAFKA_37_VERSIONS

    def _send(self, src, send):
        message = through_the_wire(send.message, send.correlation_id, isinstance(send.message, SIMULATED_REQUESTS),
                                   self.versions)
        assert message == send.message
        self.sent[type(message).__name__] += 1
        super()._send(src, type(send)(send.destination, send.correlation_id, message))


def test_every_message_of_simulated_schedules_survives_the_wire():
    WireSimulation.sent = collections.Counter()
    for seed in range(20):
        # Pre-Vote is Vote v2's PreVote field (Kafka 4.0), beyond the 3.7 versions
        sim = WireSimulation(dataclasses.replace(random_schedule(seed), pre_vote=False))
        sim.check_liveness(sim.run())
    kinds = set(WireSimulation.sent)
    assert {"VoteRequest", "VoteResponse", "BeginQuorumEpochRequest", "FetchRequest", "FetchResponse"} <= kinds


def test_kafka_pythons_classes_generated_from_kafkas_json_read_our_fetch_and_describe_quorum():
    """kafka-python generates Fetch and DescribeQuorum from Kafka's message JSON (not the other quorum APIs):
    it decodes our bytes to the fields we meant and writes the same bytes back."""
    from kafka.protocol.admin.cluster import DescribeQuorumResponse
    from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse

    request = m.FetchRequest("abc", 3001, 500, 6, 42, 5, -1, 1048576)
    response = m.FetchResponse(0, 5, 0, m.LeaderIdAndEpoch(3002, 6), diverging_epoch=m.EpochEndOffset(4, 12),
                               records=ENTRIES)
    for version in range(12, 17):
        ours = REQUEST_SCHEMAS[(1, version)].encode(to_body(request, version))
        theirs = FetchRequest.decode(ours, version=version)
        assert theirs.encode() == ours
        assert theirs.cluster_id == "abc"
        assert (theirs.replica_state.replica_id if version >= 15 else theirs.replica_id) == 3001
        part = theirs.topics[0].partitions[0]
        assert (part.current_leader_epoch, part.fetch_offset, part.last_fetched_epoch) == (6, 42, 5)

        ours = RESPONSE_SCHEMAS[(1, version)].encode(to_body(response, version))
        theirs = FetchResponse.decode(ours, version=version)
        assert theirs.encode() == ours
        part = theirs.responses[0].partitions[0]
        assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (4, 12)
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (3002, 6)
        assert bytes(part.records) == to_body(response, version)["topics"][0]["partitions"][0]["records"]
    describe = RESPONSES[-2]
    for version in (0, 1):
        ours = RESPONSE_SCHEMAS[(55, version)].encode(to_body(describe, version))
        theirs = DescribeQuorumResponse.decode(ours, version=version)
        assert theirs.encode() == ours
        voters = theirs.topics[0].partitions[0].current_voters
        assert [(v.replica_id, v.log_end_offset) for v in voters] == [(3002, 10), (3001, 9)]


def test_a_compressed_batch_in_a_fetch_answer_reads_as_its_entries():
    from zkbroker.protocol.compression import CODEC_GZIP
    from zkbroker.protocol.record_batch import build_record_batch

    records = build_record_batch([(None, b"a"), (None, b"b")], codec=CODEC_GZIP, base_offset=3, timestamp=0,
                                 partition_leader_epoch=2)
    body = to_body(m.FetchResponse(0, 5, 0, m.LeaderIdAndEpoch(1, 2)), 16)
    body["topics"][0]["partitions"][0]["records"] = records
    data = RESPONSE_SCHEMAS[(1, 16)].encode(body)
    decoded, _ = RESPONSE_SCHEMAS[(1, 16)].decode(memoryview(data), 0)
    assert from_body(1, 16, False, decoded).records == (m.LogEntry(3, 2, b"a"), m.LogEntry(4, 2, b"b"))


@pytest.mark.parametrize("error", [104, 42])  # INCONSISTENT_CLUSTER_ID, INVALID_REQUEST
def test_a_request_wide_error_is_answered_at_the_top_with_no_partition(error):
    answers = [m.VoteResponse(error, -1, -1, False), m.BeginQuorumEpochResponse(error, -1, -1),
               m.EndQuorumEpochResponse(error, -1, -1), m.FetchResponse(error, -1, -1, m.LeaderIdAndEpoch(-1, -1)),
               m.DescribeQuorumResponse(error, -1, -1, -1, (), ()),
               m.FetchSnapshotResponse(error, m.SnapshotId(-1, -1), m.LeaderIdAndEpoch(-1, -1), -1, -1, b"")]
    for message in answers:
        key = api_key_of(message)
        version = KAFKA_37_VERSIONS[key]
        body, _ = RESPONSE_SCHEMAS[(key, version)].decode(
            memoryview(RESPONSE_SCHEMAS[(key, version)].encode(to_body(message, version))), 0)
        assert (body.error_code, body.topics) == (error, [])
        assert from_body(key, version, False, body) == message


# --- the later fixes' versions: Vote v1/v2, BeginQuorumEpoch v1, Fetch v17 (KIP-853, KIP-996) ---------------

DIR_A, DIR_B = "AAECAwQFBgcICQoLDA0ODw", "8PHy8_T19vf4-fr7_P3-_w"  # Uuids 00 01 .. 0f and f0 f1 .. ff


def test_the_switches_choose_the_versions_that_carry_their_fields():
    assert quorum_versions() == KAFKA_37_VERSIONS
    assert quorum_versions(pre_vote=True)[ApiKey.VOTE] == 2
    assert quorum_versions(directory_ids=True) == {**KAFKA_37_VERSIONS, ApiKey.VOTE: 1,
                                                   ApiKey.BEGIN_QUORUM_EPOCH: 1, ApiKey.FETCH: 17}
    assert quorum_versions(True, True)[ApiKey.VOTE] == 2


def test_vote_v2_request_bytes_as_kafkas_json_lays_them_out():
    message = m.VoteRequest("c", 5, 3001, 4, 10, True, DIR_A, 3002, DIR_B)
    data = REQUEST_SCHEMAS[(52, 2)].encode(to_body(message, 2))
    expected = (b"\x02c"  # ClusterId
                + struct.pack(">i", 3002)  # VoterId (v1+)
                + b"\x02" + b"\x13" + TOPIC
                + b"\x02" + struct.pack(">iii", 0, 5, 3001)  # PartitionIndex, CandidateEpoch, CandidateId
                + bytes(range(16)) + bytes(range(0xf0, 0x100))  # CandidateDirectoryId, VoterDirectoryId (v1+)
                + struct.pack(">iq", 4, 10)  # LastOffsetEpoch, LastOffset
                + b"\x01"  # PreVote (v2+)
                + b"\x00" + b"\x00" + b"\x00")  # the partition's, topic's and body's tag buffers
    assert data == expected
    body, _ = REQUEST_SCHEMAS[(52, 2)].decode(memoryview(data), 0)
    assert from_body(52, 2, True, body) == message
    v1 = dataclasses.replace(message, pre_vote=False)
    body, _ = REQUEST_SCHEMAS[(52, 1)].decode(memoryview(REQUEST_SCHEMAS[(52, 1)].encode(to_body(v1, 1))), 0)
    assert from_body(52, 1, True, body) == v1


def test_a_pre_vote_cannot_be_sent_at_a_version_without_the_field():
    with pytest.raises(Exception, match="PreVote"):
        to_body(m.VoteRequest("c", 5, 3001, 4, 10, pre_vote=True), 1)


def test_vote_v1_response_is_v0s_with_an_empty_tag_buffer():
    response = m.VoteResponse(0, 3002, 6, True)
    assert (RESPONSE_SCHEMAS[(52, 1)].encode(to_body(response, 1))
            == RESPONSE_SCHEMAS[(52, 0)].encode(to_body(response, 0)))


def test_begin_quorum_epoch_v1_is_flexible_with_the_voter_key_and_leader_endpoints():
    message = m.BeginQuorumEpochRequest(None, 3002, 6, 3001, DIR_A)
    data = REQUEST_SCHEMAS[(53, 1)].encode(to_body(message, 1))
    expected = (b"\x00"  # null ClusterId, compact
                + struct.pack(">i", 3001)  # VoterId
                + b"\x02\x13" + TOPIC
                + b"\x02" + struct.pack(">i", 0) + bytes(range(16)) + struct.pack(">ii", 3002, 6) + b"\x00"
                + b"\x00"  # the topic's tag buffer
                + b"\x01"  # LeaderEndpoints: empty
                + b"\x00")
    assert data == expected
    body, _ = REQUEST_SCHEMAS[(53, 1)].decode(memoryview(data), 0)
    assert from_body(53, 1, True, body) == message
    answer = m.BeginQuorumEpochResponse(0, 3002, 6)
    data = RESPONSE_SCHEMAS[(53, 1)].encode(to_body(answer, 1))
    assert data == (struct.pack(">h", 0) + b"\x02\x13" + TOPIC + b"\x02" + struct.pack(">ihii", 0, 0, 3002, 6)
                    + b"\x00\x00\x00")
    body, _ = RESPONSE_SCHEMAS[(53, 1)].decode(memoryview(data), 0)
    assert from_body(53, 1, False, body) == answer


def test_fetch_v17_carries_the_replica_directory_id_as_the_partitions_tag_0():
    message = m.FetchRequest("abc", 3001, 500, 6, 42, 5, 0, 1048576, DIR_A)
    data = REQUEST_SCHEMAS[(1, 17)].encode(to_body(message, 17))
    partition = (struct.pack(">iiqiqi", 0, 6, 42, 5, 0, 1048576)
                 + b"\x01" + b"\x00\x10" + bytes(range(16)))  # one tag: 0, 16 bytes
    assert partition in data
    body, _ = REQUEST_SCHEMAS[(1, 17)].decode(memoryview(data), 0)
    assert from_body(1, 17, True, body) == message
    no_directory = dataclasses.replace(message, replica_directory_id=None)
    assert (REQUEST_SCHEMAS[(1, 17)].encode(to_body(no_directory, 17))
            == REQUEST_SCHEMAS[(1, 16)].encode(to_body(no_directory, 16)))  # the zero Uuid is not written


def test_every_message_of_simulated_schedules_with_both_fixes_survives_the_later_versions():
    class LaterWire(WireSimulation):
        versions = quorum_versions(pre_vote=True, directory_ids=True)

    LaterWire.sent = collections.Counter()
    for seed in range(10):
        sim = LaterWire(dataclasses.replace(random_schedule(seed), pre_vote=True, directory_ids=True))
        sim.check_liveness(sim.run())
    assert {"VoteRequest", "BeginQuorumEpochRequest", "FetchRequest"} <= set(LaterWire.sent)
