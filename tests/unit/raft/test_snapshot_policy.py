"""When a snapshot is due: after the configured bytes of committed records, or the interval with records waiting."""

from __future__ import annotations

from zkbroker.raft.snapshot_policy import SnapshotPolicy


def test_a_snapshot_is_due_after_max_bytes_of_committed_records():
    policy = SnapshotPolicy(max_bytes=100, max_interval_ms=0)
    assert not policy.committed(60, now=0)
    assert policy.committed(40, now=1)
    policy.taken(now=1)
    assert not policy.committed(99, now=2)


def test_a_snapshot_is_due_after_the_interval_only_with_records_waiting():
    policy = SnapshotPolicy(max_bytes=10**9, max_interval_ms=1000)
    assert not policy.committed(1, now=0)
    assert policy.committed(1, now=1000)
    policy.taken(now=1000)
    assert not policy.committed(0, now=5000)
    assert policy.committed(1, now=5001)
