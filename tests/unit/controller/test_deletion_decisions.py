"""Topic deletion's decisions (controller/deletion.py), driven directly."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from controller.deletion import Progress, progress, split_for_deletion, stop_replica_errors
from controller.replica_state import ReplicaState

S = ReplicaState


@pytest.mark.parametrize("states, expected", [
    ([S.DELETION_SUCCESSFUL, S.DELETION_SUCCESSFUL], Progress.COMPLETE),
    ([], Progress.COMPLETE),
    ([S.DELETION_SUCCESSFUL, S.DELETION_STARTED, S.DELETION_INELIGIBLE], Progress.IN_PROGRESS),
    ([S.DELETION_SUCCESSFUL, S.DELETION_INELIGIBLE], Progress.FAILED),
    ([S.ONLINE, S.OFFLINE, None], Progress.WAITING),
])
def test_progress_of_a_topics_deletion_from_its_replicas_states(states, expected):
    assert progress(states) is expected


def test_replicas_on_dead_brokers_wait_and_deleted_ones_are_not_deleted_again():
    replicas = [("t", 0, 1), ("t", 0, 2), ("t", 0, 3)]
    assert split_for_deletion(replicas, {1, 2}, {("t", 0, 1)}) == ([("t", 0, 3)], [("t", 0, 2)])


def test_a_stop_replica_answer_fails_its_erring_partitions_or_all_on_a_request_error():
    ok = SimpleNamespace(topic="t", partition=0, error_code=0)
    bad = SimpleNamespace(topic="t", partition=1, error_code=3)
    assert stop_replica_errors([("t", 0), ("t", 1)], SimpleNamespace(error_code=0, partitions=[ok, bad])) == {("t", 1)}
    assert stop_replica_errors([("t", 0), ("t", 1)], SimpleNamespace(error_code=1, partitions=[])) == {("t", 0),
                                                                                                     ("t", 1)}
