"""metadata-quorum describe's two outputs against golden files, byte for byte as Kafka 3.7's MetadataQuorumCommand
prints them (labels padded to column 24; the replication table's cells padded to their column and each followed
by a tab, Leader then Followers then Observers). Set ZKBROKER_UPDATE_GOLDEN=1 to rewrite the golden files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zkbroker.raft.messages import DescribeQuorumResponse, ReplicaState
from zkbroker.tools.common import ToolError
from zkbroker.tools.metadata_quorum import format_replication, format_status

GOLDEN = Path(__file__).parent / "golden"

QUORUM = DescribeQuorumResponse(
    error_code=0, leader_id=3002, leader_epoch=2, high_watermark=10,
    current_voters=(ReplicaState(3001, 10, 1700000000100, 1700000000100),
                    ReplicaState(3002, 10, 1700000000500, 1700000000500),
                    ReplicaState(3003, 7, 1700000000200, 1699999999000)),
    observers=(ReplicaState(1, 10, 1700000000400, 1700000000400), ReplicaState(2, -1, -1, -1)))


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("ZKBROKER_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_describe_status_prints_kafkas_labels_padded_to_column_24():
    assert_golden("metadata_quorum_status.txt", format_status("fMCL8kv1SWm87L_Md-I2hg", QUORUM) + "\n")


def test_describe_replication_prints_kafkas_table_leader_first():
    assert_golden("metadata_quorum_replication.txt", format_replication(QUORUM))


def test_human_readable_replication_counts_milliseconds_ago():
    lines = format_replication(QUORUM, now_ms=1700000001000).splitlines()
    assert lines[1].split("\t")[3].strip() == "500 ms ago"
    assert lines[-1].split("\t")[3].strip() == "-1"


def test_a_leader_alone_lags_nothing():
    alone = DescribeQuorumResponse(0, 1, 1, 5, (ReplicaState(1, 5, 10, 10),), ())
    assert "MaxFollowerLag:         0\nMaxFollowerLagTimeMs:   0\n" in format_status("x", alone)


def test_a_leader_missing_from_the_voters_is_refused_in_a_sentence():
    with pytest.raises(ToolError, match="not among the voters"):
        format_status("x", DescribeQuorumResponse(0, 9, 1, 5, (ReplicaState(1, 5, 10, 10),), ()))
