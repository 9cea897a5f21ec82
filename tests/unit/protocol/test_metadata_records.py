"""The metadata log's formats: ApiMessageAndVersion frames of Kafka 3.7's metadata records, the quorum's
control records in control batches, and snapshots (.checkpoint), with bytes written out by hand from the
schemas (metadata/*.json, LeaderChangeMessage.json, SnapshotHeaderRecord.json, SnapshotFooterRecord.json)."""

import struct

import pytest

from zkbroker.protocol.errors import RemoteProtocolError
from zkbroker.protocol.metadata_records import (
    LEADER_CHANGE,
    RECORD_NAMES,
    RECORD_SCHEMAS,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    ControlRecord,
    build_control_batch,
    build_snapshot,
    decode_frame,
    encode_frame,
    iter_metadata_log,
    parse_snapshot_file_name,
    read_snapshot,
    snapshot_file_name,
)
from zkbroker.protocol.record_batch import CONTROL, read_header

TOPIC_ID = bytes(range(16))


def test_fence_broker_record_frame_bytes():
    data = encode_frame(7, 0, {"id": 1, "epoch": 42})
    assert data == b"\x01\x07\x00" + struct.pack(">iq", 1, 42) + b"\x00"  # frame 1, api key 7, version 0, body
    assert decode_frame(data)[:2] == (7, 0)
    assert decode_frame(data)[2].epoch == 42


def test_topic_record_frame_bytes():
    data = encode_frame(2, 0, {"name": "t", "topic_id": TOPIC_ID})
    assert data == b"\x01\x02\x00" + b"\x02t" + TOPIC_ID + b"\x00"


def test_partition_change_record_writes_only_tags_that_differ():
    data = encode_frame(5, 0, {"partition_id": 0, "topic_id": TOPIC_ID, "isr": [1, 2], "leader": 2})
    expected = (b"\x01\x05\x00" + struct.pack(">i", 0) + TOPIC_ID
                + b"\x02"  # two tags: Isr (0) and Leader (1); the others stay at their defaults
                + b"\x00\x09" + b"\x03" + struct.pack(">ii", 1, 2)
                + b"\x01\x04" + struct.pack(">i", 2))
    assert data == expected
    _, _, record = decode_frame(data)
    assert (record.isr, record.leader, record.replicas, record.leader_recovery_state) == ([1, 2], 2, None, -1)


def test_every_record_schema_round_trips_from_its_defaults():
    assert {RECORD_NAMES[k] for k, _ in RECORD_SCHEMAS} >= {
        "RegisterBrokerRecord", "UnregisterBrokerRecord", "TopicRecord", "PartitionRecord", "PartitionChangeRecord",
        "FenceBrokerRecord", "UnfenceBrokerRecord", "RemoveTopicRecord", "ConfigRecord", "FeatureLevelRecord",
        "ProducerIdsRecord", "BrokerRegistrationChangeRecord", "NoOpRecord", "RegisterControllerRecord",
        "ZkMigrationStateRecord", "ClientQuotaRecord", "AccessControlEntryRecord", "UserScramCredentialRecord"}
    assert len(RECORD_NAMES) == 25  # every record type of Kafka 3.7's metadata/src/main/resources/common/metadata
    samples = {"Int32": 3, "Int64": 4, "Int16": 1, "Int8": 1, "UInt16": 9092, "Boolean": True, "Uuid": TOPIC_ID,
               "CompactString": "x", "CompactNullableString": None, "Float64": 1.5, "CompactBytes": b"k"}
    for (key, version), schema in RECORD_SCHEMAS.items():
        value = {name: samples.get(repr(t), []) for name, t in schema.fields}
        data = encode_frame(key, version, value)
        assert encode_frame(key, version, decode_frame(data)[2]) == data


def test_frame_version_other_than_1_is_refused():
    with pytest.raises(RemoteProtocolError):
        decode_frame(b"\x00\x14\x00\x00")


def test_leader_change_control_batch():
    value = {"version": 0, "leader_id": 3002, "voters": [(3001,), (3002,)], "granting_voters": [(3002,)]}
    batch = build_control_batch(LEADER_CHANGE, value, base_offset=5, epoch=2, timestamp=1000)
    header = read_header(batch, 0)
    assert header.attributes & CONTROL and header.partition_leader_epoch == 2 and header.base_offset == 5
    (offset, epoch, record), = iter_metadata_log(batch)
    assert (offset, epoch, record.type, record.value.leader_id) == (5, 2, LEADER_CHANGE, 3002)
    # key: version 0, type 2; value: LeaderChangeMessage v0 with no frame
    expected_value = (struct.pack(">hi", 0, 3002) + b"\x03" + struct.pack(">i", 3001) + b"\x00"
                      + struct.pack(">i", 3002) + b"\x00" + b"\x02" + struct.pack(">i", 3002) + b"\x00" + b"\x00")
    assert struct.pack(">hh", 0, 2) in batch and batch.endswith(expected_value + b"\x00")  # last: header count 0


def test_snapshot_file_name():
    assert snapshot_file_name(120, 3) == "00000000000000000120-0000000003.checkpoint"
    assert parse_snapshot_file_name("00000000000000000120-0000000003.checkpoint") == (120, 3)
    assert parse_snapshot_file_name("00000000000000000120.log") is None


def test_snapshot_layout_header_records_footer():
    records = [(2, 0, {"name": "t", "topic_id": TOPIC_ID}), (12, 0, {"name": "metadata.version", "feature_level": 19})]
    data = build_snapshot([records], epoch=3, timestamp=1000, last_contained_log_timestamp=999)
    entries = list(iter_metadata_log(data))
    assert [offset for offset, _, _ in entries] == [0, 1, 2, 3]
    assert {epoch for _, epoch, _ in entries} == {3}
    assert entries[0][2].type == SNAPSHOT_HEADER and entries[-1][2].type == SNAPSHOT_FOOTER
    header, decoded = read_snapshot(data)
    assert header.last_contained_log_timestamp == 999
    assert [(k, v, r.name) for k, v, r in decoded] == [(2, 0, "t"), (12, 0, "metadata.version")]
    first = read_header(data, 0)
    assert first.is_control and first.record_count == 1


def test_snapshot_without_footer_is_refused():
    data = build_snapshot([], epoch=1, timestamp=0, last_contained_log_timestamp=0)
    header_batch = data[: read_header(data, 0).size]
    with pytest.raises(RemoteProtocolError, match="SnapshotFooter"):
        read_snapshot(header_batch)
    assert isinstance(list(iter_metadata_log(header_batch))[0][2], ControlRecord)


def test_client_quota_and_acl_record_bytes():
    quota = encode_frame(14, 0, {"entity": [("client-id", None)], "key": "producer_byte_rate", "value": 1024.0,
                                 "remove": False})
    assert quota == (b"\x01\x0e\x00" + b"\x02" + b"\x0aclient-id" + b"\x00" + b"\x00"  # entity: type, null name
                     + b"\x13producer_byte_rate" + struct.pack(">d", 1024.0) + b"\x00" + b"\x00")
    acl = encode_frame(18, 0, {"id": TOPIC_ID, "resource_type": 2, "resource_name": "t", "pattern_type": 3,
                               "principal": "User:a", "host": "*", "operation": 3, "permission_type": 3})
    assert acl == (b"\x01\x12\x00" + TOPIC_ID + b"\x02" + b"\x02t" + b"\x03" + b"\x07User:a" + b"\x02*"
                   + b"\x03\x03" + b"\x00")


# --- the hot records' hand-built codec: byte for byte the schemas' ---------------------------------------------

def _schema_frame(api_key: int, version: int, rec) -> bytes:
    return bytes((1, api_key, version)) + RECORD_SCHEMAS[(api_key, version)].encode(rec)


def _schema_decode(frame: bytes):
    rec, end = RECORD_SCHEMAS[(frame[1], frame[2])].decode(memoryview(frame), 3)
    assert end == len(frame)
    return rec


def _random_records(seed: int = 7, count: int = 400):
    import random

    from zkbroker.metadata.partition import partition_change
    from zkbroker.metadata.records import PARTITION, record

    rng = random.Random(seed)

    def ints(low=0):
        return [rng.randrange(-1, 2**31 - 1) if rng.random() < 0.1 else rng.randrange(0, 10)
                for _ in range(rng.choice((low, 1, 2, 3, 5, 30)))]

    for _ in range(count):
        topic_id = rng.randbytes(16)
        partition = rng.choice((0, 1, 2**31 - 1, rng.randrange(100_000)))
        yield partition_change(topic_id, partition, isr=rng.choice((None, tuple(ints()))),
                               leader=rng.choice((-2, -1, 0, 3, 2**31 - 1, -2**31)),
                               replicas=rng.choice((None, tuple(ints()))),
                               leader_recovery_state=rng.choice((-1, 0, 1)))
        yield record(PARTITION, partition_id=partition, topic_id=topic_id, replicas=ints(), isr=ints(),
                     removing_replicas=ints(), adding_replicas=ints(), leader=rng.randrange(-1, 5),
                     leader_epoch=rng.randrange(0, 2**31 - 1), partition_epoch=rng.randrange(0, 5),
                     leader_recovery_state=rng.choice((0, 0, 1)))


def test_partition_and_partition_change_records_encode_and_decode_as_their_schemas_do():
    from zkbroker.protocol import metadata_records

    seen = set()
    for api_key, version, rec in _random_records():
        frame = encode_frame(api_key, version, rec)
        assert frame == _schema_frame(api_key, version, rec)
        assert metadata_records._FAST_ENCODERS[(api_key, version)](rec) == frame  # the hand-built path took it
        decoded = decode_frame(frame)
        assert decoded == (api_key, version, _schema_decode(frame))
        assert metadata_records._FAST_DECODERS[(api_key, version)](frame, 3, len(frame)) is not None
        seen.add((api_key, decoded[2].isr is None if api_key == 5 else len(decoded[2].replicas)))
    assert len(seen) > 6  # nulls, empty and long arrays, both records


def test_what_the_hand_built_path_does_not_take_goes_through_the_schema_with_its_errors():
    from zkbroker.metadata.partition import partition_change
    from zkbroker.protocol import metadata_records
    from zkbroker.protocol.errors import LocalProtocolError

    fast = metadata_records._FAST_ENCODERS[(5, 0)]
    many = partition_change(TOPIC_ID, 1, isr=tuple(range(40)))  # 40 replicas: a two-byte tagged size
    unknown = partition_change(TOPIC_ID, 1, leader=3)[2]._replace(unknown_tagged_fields=[(9, b"x")])
    for rec in (many[2], unknown, {"partition_id": 1, "topic_id": TOPIC_ID, "leader": 3}):
        assert fast(rec) is None
        frame = encode_frame(5, 0, rec)
        assert frame == _schema_frame(5, 0, rec)
        assert decode_frame(frame) == (5, 0, _schema_decode(frame))
    out_of_range = partition_change(TOPIC_ID, 1, leader=2**31)
    with pytest.raises(LocalProtocolError, match="leader"):
        encode_frame(*out_of_range)
    with pytest.raises(LocalProtocolError, match="16 bytes"):
        encode_frame(*partition_change(b"short", 1, leader=1))


def test_malformed_hot_frames_get_the_schema_path_errors():
    from zkbroker.metadata.partition import partition_change

    frame = encode_frame(*partition_change(TOPIC_ID, 1, isr=(1, 2), leader=1))  # tags 0 and 1
    with pytest.raises(RemoteProtocolError):
        decode_frame(frame[:-2])  # truncated
    with pytest.raises(RemoteProtocolError, match="after the record"):
        decode_frame(frame + b"\x00")
    swapped = frame[:24] + frame[-6:] + frame[24:-6]  # tag 1 (its 6 bytes) before tag 0
    assert len(swapped) == len(frame)
    with pytest.raises(RemoteProtocolError, match="out of order"):
        decode_frame(swapped)
