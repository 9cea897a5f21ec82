"""The quorum checker on voters' logs written in the metadata log's own format (batches as the driver writes
them, read back from a log dir), and on hand-made logs for each way an invariant can break."""

from __future__ import annotations

import pytest

from zkbroker.lab.quorum_checker import DIVERGED, LOST, ONE_LEADER, check_quorum, read_voter_log, voter_log
from zkbroker.protocol.errors import RemoteProtocolError
from zkbroker.protocol.metadata_records import (
    LEADER_CHANGE,
    METADATA_TOPIC,
    build_control_batch,
    build_metadata_batch,
    snapshot_file_name,
)

FEATURE_LEVEL = 12  # FeatureLevelRecord's api key


def leader_change(leader: int, offset: int, epoch: int) -> bytes:
    value = {"version": 0, "leader_id": leader, "voters": [{"voter_id": v} for v in (1, 2, 3)],
             "granting_voters": [{"voter_id": v} for v in (1, 2, 3)]}
    return build_control_batch(LEADER_CHANGE, value, base_offset=offset, epoch=epoch, timestamp=0)


def feature(level: int, offset: int, epoch: int) -> bytes:
    record = (FEATURE_LEVEL, 0, {"name": "metadata.version", "feature_level": level})
    return build_metadata_batch([record], base_offset=offset, epoch=epoch, timestamp=0)


def write_log(tmp_path, node: int, batches: list[bytes], snapshot_end: int = 0):
    directory = tmp_path / f"node{node}"
    partition = directory / f"{METADATA_TOPIC}-0"
    partition.mkdir(parents=True)
    (partition / f"{snapshot_end:020d}.log").write_bytes(b"".join(batches))
    if snapshot_end:
        (partition / snapshot_file_name(snapshot_end, 1)).write_bytes(b"")
    return directory


def healthy(tmp_path, hw=3):
    common = [leader_change(1, 0, 1), feature(7, 1, 1), feature(8, 2, 1)]
    return [read_voter_log(n, write_log(tmp_path, n, common), high_watermark=hw) for n in (1, 2, 3)]


def test_logs_read_from_disk_that_agree_are_ok_and_name_each_epochs_leader(tmp_path):
    voters = healthy(tmp_path)
    assert voters[0].leaders == {1: 1} and sorted(voters[0].entries) == [0, 1, 2]
    report = check_quorum(voters, [{"kind": "metadata_committed", "offset": 3, "epoch": 1}])
    assert report.ok and report.committed_end == 3


def test_two_leaders_in_one_epoch_from_the_logs_or_the_timeline_are_a_violation(tmp_path):
    one = voter_log(1, [(0, 1, "x")], high_watermark=None)
    two = read_voter_log(2, write_log(tmp_path, 2, [leader_change(2, 0, 1)]))
    report = check_quorum([one, two], [{"kind": "raft_state", "node": 3, "state": "leader", "epoch": 1, "ts": 5}])
    (violation,) = report.violations
    assert violation.invariant == ONE_LEADER and "epoch 1" in violation.detail
    assert "2 (LeaderChange in node 2's log)" in violation.detail and "3 (the timeline at 5)" in violation.detail


def test_a_committed_offset_held_differently_by_two_voters_diverges(tmp_path):
    one = read_voter_log(1, write_log(tmp_path, 1, [leader_change(1, 0, 1), feature(7, 1, 1)]), high_watermark=2)
    two = read_voter_log(2, write_log(tmp_path, 2, [leader_change(1, 0, 1), feature(9, 1, 1)]))
    three = read_voter_log(3, write_log(tmp_path, 3, [leader_change(1, 0, 1)]))
    (violation,) = check_quorum([one, two, three]).violations
    assert violation.invariant == DIVERGED and violation.detail.startswith("committed offset 1 differs")


def test_uncommitted_entries_may_differ(tmp_path):
    one = read_voter_log(1, write_log(tmp_path, 1, [leader_change(1, 0, 1), feature(7, 1, 1)]), high_watermark=1)
    two = read_voter_log(2, write_log(tmp_path, 2, [leader_change(1, 0, 1), feature(9, 1, 1)]))
    assert check_quorum([one, two, voter_log(3, [])]).ok


def test_a_committed_record_held_by_fewer_than_a_majority_is_lost():
    leader = voter_log(1, [(0, 1, "a"), (1, 1, "b")], high_watermark=1)
    others = [voter_log(2, [(0, 1, "a")]), voter_log(3, [])]
    report = check_quorum([leader, *others], [{"kind": "metadata_committed", "offset": 2, "epoch": 1}])
    (violation,) = report.violations
    assert violation.invariant == LOST
    assert violation.detail == "committed offset 1 in epoch 1 is held by 1 of 3 voters ([1]), fewer than a majority"


def test_a_committed_offset_held_in_another_epoch_counts_as_lost():
    voters = [voter_log(n, [(0, 2, "a")]) for n in (1, 2, 3)]
    (violation,) = check_quorum(voters, [{"kind": "metadata_committed", "offset": 1, "epoch": 1}]).violations
    assert violation.invariant == LOST and "in epoch 1" in violation.detail


def test_an_offset_committed_in_one_epoch_then_in_another_is_a_loss_though_every_voter_agrees_now():
    """A voter that lost its disk votes a stale voter in; the new leader commits its own record at the offset the
    old leader had committed, and the old leader, back, truncates to it: the logs agree, the timeline does not."""
    voters = [voter_log(n, [(0, 1, "a"), (1, 5, "new")], high_watermark=2) for n in (1, 2, 3)]
    events = [{"kind": "metadata_committed", "offset": 2, "epoch": 1},
              {"kind": "metadata_committed", "offset": 2, "epoch": 5}]
    (violation,) = check_quorum(voters, events).violations
    assert violation.invariant == LOST and violation.detail.startswith("committed offset 1 in epoch 1 is held by 0")


def test_offsets_covered_by_a_snapshot_are_held_not_compared(tmp_path):
    snapshotted = read_voter_log(1, write_log(tmp_path, 1, [feature(8, 2, 1)], snapshot_end=2), high_watermark=3)
    assert snapshotted.snapshot_end == 2 and snapshotted.holds(0) and snapshotted.holds(1)
    others = [read_voter_log(n, write_log(tmp_path, n, [leader_change(1, 0, 1), feature(7, 1, 1), feature(8, 2, 1)]))
              for n in (2, 3)]
    assert check_quorum([snapshotted, *others]).ok


def test_a_torn_segment_tail_keeps_the_batches_before_it(tmp_path):
    directory = write_log(tmp_path, 1, [leader_change(1, 0, 1), feature(7, 1, 1)])
    segment = next((directory / f"{METADATA_TOPIC}-0").glob("*.log"))
    segment.write_bytes(segment.read_bytes() + feature(8, 2, 1)[:20])
    assert sorted(read_voter_log(1, directory).entries) == [0, 1]


def test_a_corrupt_segment_before_the_last_is_reported_not_skipped(tmp_path):
    directory = write_log(tmp_path, 1, [leader_change(1, 0, 1)[:30]])
    partition = directory / f"{METADATA_TOPIC}-0"
    (partition / f"{1:020d}.log").write_bytes(feature(7, 1, 1))
    with pytest.raises(RemoteProtocolError, match="node 1's metadata log segment .* is corrupt"):
        read_voter_log(1, directory)
