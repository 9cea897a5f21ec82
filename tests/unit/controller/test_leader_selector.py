"""The leader selectors decide as Kafka 0.8.2's PartitionLeaderSelector classes (reference §3)."""

from __future__ import annotations

import pytest

from controller.leader_selector import NoReplicaOnlineError, new_partition_leader, offline_partition_leader


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
