"""The leader selectors decide as Kafka 0.8.2's PartitionLeaderSelector classes (reference §3)."""

from __future__ import annotations

import pytest

from controller.leader_selector import (
    LeaderElectionNotNeededError,
    NoReplicaOnlineError,
    controlled_shutdown_leader,
    new_partition_leader,
    offline_partition_leader,
    partitions_to_rebalance,
    preferred_replica_leader,
    reassigned_partition_leader,
)


def test_new_partition_leader_is_the_first_live_replica_and_isr_the_live_replicas():
    election = new_partition_leader((3, 1, 2), live={1, 2})
    assert (election.leader, election.leader_epoch, election.isr, election.recipients) == (1, 0, (1, 2), (1, 2))


def test_new_partition_without_live_replicas_stays_offline():
    with pytest.raises(NoReplicaOnlineError):
        new_partition_leader((3, 4), live={1})


def test_offline_selector_prefers_assignment_order_among_the_live_isr():
    election = offline_partition_leader((1, 2, 3), isr=(3, 2), leader_epoch=4, live={2, 3},
                                        unclean_election_enabled=False)
    assert (election.leader, election.leader_epoch, election.isr, election.unclean) == (2, 5, (3, 2), False)
    assert election.recipients == (2, 3)


def test_offline_selector_without_live_isr_and_unclean_disabled_keeps_the_partition_offline():
    with pytest.raises(NoReplicaOnlineError, match="unclean leader election is disabled"):
        offline_partition_leader((1, 2, 3), isr=(1,), leader_epoch=4, live={2, 3}, unclean_election_enabled=False)


def test_offline_selector_unclean_election_picks_the_first_live_replica_alone_in_the_isr():
    election = offline_partition_leader((1, 2, 3), isr=(1,), leader_epoch=4, live={3, 2}, unclean_election_enabled=True)
    assert (election.leader, election.isr, election.leader_epoch, election.unclean) == (2, (2,), 5, True)


def test_offline_selector_with_nothing_alive_fails_even_when_unclean():
    with pytest.raises(NoReplicaOnlineError):
        offline_partition_leader((1, 2), isr=(1,), leader_epoch=0, live=set(), unclean_election_enabled=True)


def test_reassigned_selector_picks_the_first_live_in_sync_reassigned_replica_and_keeps_the_isr():
    election = reassigned_partition_leader((4, 5, 6), isr=(1, 2, 5, 6), leader_epoch=3, live={1, 2, 5, 6})
    assert (election.leader, election.leader_epoch, election.isr) == (5, 4, (1, 2, 5, 6))
    assert election.recipients == (4, 5, 6)


def test_reassigned_selector_fails_when_no_reassigned_replica_is_in_sync():
    with pytest.raises(NoReplicaOnlineError, match="in-sync"):
        reassigned_partition_leader((4, 5), isr=(1, 4), leader_epoch=0, live={1, 5})


def test_reassigned_selector_fails_on_an_empty_reassignment():
    with pytest.raises(NoReplicaOnlineError, match="List of reassigned replicas is empty"):
        reassigned_partition_leader((), isr=(1,), leader_epoch=0, live={1})


def test_preferred_selector_moves_leadership_to_the_head_of_the_assignment():
    election = preferred_replica_leader((2, 1, 3), leader=1, isr=(1, 3, 2), leader_epoch=6, live={1, 2, 3})
    assert (election.leader, election.leader_epoch, election.isr, election.recipients) == (2, 7, (1, 3, 2), (2, 1, 3))


def test_preferred_selector_says_when_no_election_is_needed_or_possible():
    with pytest.raises(LeaderElectionNotNeededError):
        preferred_replica_leader((2, 1), leader=2, isr=(2, 1), leader_epoch=0, live={1, 2})
    with pytest.raises(NoReplicaOnlineError, match="not alive or not in the isr"):
        preferred_replica_leader((2, 1), leader=1, isr=(1,), leader_epoch=0, live={1, 2})
    with pytest.raises(NoReplicaOnlineError):
        preferred_replica_leader((2, 1), leader=1, isr=(1, 2), leader_epoch=0, live={1})


def test_controlled_shutdown_selector_takes_the_isr_head_without_the_shutting_down_brokers():
    election = controlled_shutdown_leader((1, 2, 3), isr=(1, 3, 2), leader_epoch=2, live_or_shutting_down={1, 2, 3},
                                          shutting_down={1})
    assert (election.leader, election.isr, election.leader_epoch, election.recipients) == (3, (3, 2), 3, (1, 2, 3))


def test_controlled_shutdown_selector_fails_when_only_shutting_down_brokers_are_in_sync():
    with pytest.raises(NoReplicaOnlineError, match="besides shutting down brokers 1"):
        controlled_shutdown_leader((1, 2), isr=(1,), leader_epoch=0, live_or_shutting_down={1, 2}, shutting_down={1})


def test_rebalance_moves_a_brokers_partitions_back_only_above_the_imbalance_percentage():
    assignments = {("t", p): ((1, 2) if p < 20 else (2, 1)) for p in range(40)}
    leaders = {tp: replicas[0] for tp, replicas in assignments.items()}
    leaders[("t", 0)] = 2  # broker 1 leads 19 of its 20 preferred partitions: 5 %
    assert partitions_to_rebalance(assignments, leaders, 10) == {}
    leaders[("t", 1)] = leaders[("t", 2)] = 2  # 3 of 20: 15 %
    assert partitions_to_rebalance(assignments, leaders, 10) == {1: [("t", 0), ("t", 1), ("t", 2)]}
    del leaders[("t", 3)]  # a partition without a leader counts in the total but is not moved
    assert partitions_to_rebalance(assignments, leaders, 10) == {1: [("t", 0), ("t", 1), ("t", 2)]}
