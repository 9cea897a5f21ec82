"""`zkbroker dump-log --cluster-metadata-decoder`: a metadata log segment and a snapshot written with
protocol.metadata_records, printed in Kafka 3.7's DumpLogSegments layout (golden files; set
ZKBROKER_UPDATE_GOLDEN=1 to rewrite them)."""

import os
from pathlib import Path

from zkbroker.cli import main
from zkbroker.protocol.metadata_records import (
    LEADER_CHANGE,
    build_control_batch,
    build_metadata_batch,
    build_snapshot,
    snapshot_file_name,
)

GOLDEN = Path(__file__).parent / "golden"
TOPIC_ID = bytes(range(16))
BROKER = {"broker_id": 1, "incarnation_id": bytes(16), "broker_epoch": 7,
          "end_points": [("PLAINTEXT", "localhost", 9092, 0)], "features": [("metadata.version", 1, 19)],
          "rack": None, "fenced": True, "in_controlled_shutdown": False}
RECORDS = [
    (12, 0, {"name": "metadata.version", "feature_level": 19}),
    (0, 1, BROKER),
    (2, 0, {"name": "orders", "topic_id": TOPIC_ID}),
    (3, 0, {"partition_id": 0, "topic_id": TOPIC_ID, "replicas": [1], "isr": [1], "removing_replicas": [],
            "adding_replicas": [], "leader": 1, "leader_epoch": 0, "partition_epoch": 0}),
    (5, 0, {"partition_id": 0, "topic_id": TOPIC_ID, "isr": [1], "leader": 1}),
    (4, 0, {"resource_type": 2, "resource_name": "orders", "name": "retention.ms", "value": "1000"}),
    (8, 0, {"id": 1, "epoch": 7}),
]


def dump(capsys, *args):
    assert main(["dump-log", "--cluster-metadata-decoder", *args]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def assert_golden(name, text):
    path = GOLDEN / name
    if os.environ.get("ZKBROKER_UPDATE_GOLDEN"):
        path.write_bytes(text.encode())
    assert text.encode() == path.read_bytes()


def test_a_metadata_log_segment(tmp_path, monkeypatch, capsys):
    leader_change = {"version": 0, "leader_id": 3002, "voters": [(3001,), (3002,), (3003,)],
                     "granting_voters": [(3002,), (3003,)]}
    data = build_control_batch(LEADER_CHANGE, leader_change, base_offset=0, epoch=1, timestamp=1700000000000)
    data += build_metadata_batch(RECORDS[:3], base_offset=1, epoch=1, timestamp=1700000000100)
    data += build_metadata_batch(RECORDS[3:], base_offset=4, epoch=1, timestamp=1700000000200)
    (tmp_path / "00000000000000000000.log").write_bytes(data + b"\x00\x00\x00")  # and a torn tail
    monkeypatch.chdir(tmp_path)
    out, err = dump(capsys, "--files", "00000000000000000000.log")
    assert_golden("dump_metadata_log.txt", out)
    assert err == ""


def test_a_snapshot(tmp_path, monkeypatch, capsys):
    name = snapshot_file_name(8, 1)
    (tmp_path / name).write_bytes(build_snapshot([RECORDS[:2], RECORDS[2:4]], epoch=1, timestamp=1700000000300,
                                                 last_contained_log_timestamp=1700000000200))
    monkeypatch.chdir(tmp_path)
    out, err = dump(capsys, "--files", name)
    assert_golden("dump_metadata_snapshot.txt", out)
    assert err == ""


def test_a_record_that_does_not_decode_is_reported_and_skipped(tmp_path, monkeypatch, capsys):
    from zkbroker.protocol.record_batch import build_record_batch

    (tmp_path / "00000000000000000000.log").write_bytes(
        build_record_batch([(None, b"\x01\x63\x00")], timestamp=0, partition_leader_epoch=1))
    monkeypatch.chdir(tmp_path)
    out, _ = dump(capsys, "--files", "00000000000000000000.log")
    assert out.splitlines()[-1].endswith(
        "payload: Error at 0, skipping. unknown metadata record: api key 99 version 0")
