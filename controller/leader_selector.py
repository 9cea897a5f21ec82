"""Leader selectors: pure functions from (assigned replicas, current state, live brokers, config) to a new
leader and ISR, as Kafka 0.8.2's PartitionLeaderSelector classes decide — minus their one flaw: 0.8.2 read
the topic config from ZooKeeper in the middle of a decision; here the caller passes it in.

Each selector returns the new (leader, ISR) with leader_epoch + 1, and the replicas that must hear of it.
"""

from __future__ import annotations

from dataclasses import dataclass


class NoReplicaOnlineError(Exception):
    """No replica may lead the partition (Kafka's NoReplicaOnlineException): it stays offline."""


@dataclass(frozen=True)
class Election:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    recipients: tuple[int, ...]
    unclean: bool = False


def new_partition_leader(assigned: tuple[int, ...], live: set[int]) -> Election:
    """New -> Online: leader = the first live replica in AR order, ISR = the live replicas, epoch 0."""
    live_assigned = tuple(r for r in assigned if r in live)
    if not live_assigned:
        raise NoReplicaOnlineError(f"No replica is alive; assigned replicas are {','.join(map(str, assigned))}, "
                                   f"live brokers are {','.join(map(str, sorted(live)))}")
    return Election(live_assigned[0], 0, live_assigned, live_assigned)


def offline_partition_leader(assigned: tuple[int, ...], isr: tuple[int, ...], leader_epoch: int, live: set[int],
                             unclean_election_enabled: bool) -> Election:
    """OfflinePartitionLeaderSelector:
    1. a live ISR member exists: leader = the first replica in AR order that is in the live ISR; ISR = live ISR;
    2. else, unclean election disabled for the topic: NoReplicaOnlineError (the partition stays offline);
    3. else: leader = the first live replica in AR, ISR = [leader] — "there's potential data loss".
    Recipients: the live assigned replicas.
    """
    live_assigned = tuple(r for r in assigned if r in live)
    live_isr = tuple(r for r in isr if r in live)
    if live_isr:
        leader = next(r for r in assigned if r in live_isr)
        return Election(leader, leader_epoch + 1, live_isr, live_assigned)
    if not unclean_election_enabled:
        raise NoReplicaOnlineError(f"No broker in ISR is alive; ISR is {','.join(map(str, isr))} and unclean "
                                   "leader election is disabled")
    if not live_assigned:
        raise NoReplicaOnlineError(f"No replica is alive; assigned replicas are {','.join(map(str, assigned))}")
    leader = live_assigned[0]
    return Election(leader, leader_epoch + 1, (leader,), live_assigned, unclean=True)
