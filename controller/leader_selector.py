"""Leader selectors: pure functions from (assigned replicas, current state, live brokers, config) to a new
leader and ISR, as Kafka 0.8.2's PartitionLeaderSelector classes decide — minus their one flaw: 0.8.2 read
the topic config from ZooKeeper in the middle of a decision; here the caller passes it in.

The four selectors of 0.8.2 — offline, reassigned, preferred replica, controlled shutdown — plus the
choice for a new partition and the ISR shrink when a replica leaves. The quorum controller (controller/quorum/)
elects with the same functions: one rule, two modes. Each selector returns the new (leader, ISR) with
leader_epoch + 1, and the replicas that must hear of it. `partitions_to_rebalance` is the auto-rebalance's
imbalance check, pure as well.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from zkbroker.topic_partition import TopicPartition


class NoReplicaOnlineError(Exception):
    """No replica may lead the partition (Kafka's NoReplicaOnlineException and StateChangeFailedException):
    the partition keeps its current leadership."""


class LeaderElectionNotNeededError(Exception):
    """The preferred replica already leads (Kafka's LeaderElectionNotNeededException)."""


def _ids(ids) -> str:
    return ",".join(map(str, ids))


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


def isr_without(isr: tuple[int, ...], broker_id: int, keep_last: bool) -> tuple[int, ...]:
    """The ISR once `broker_id` leaves it (its broker died, was fenced or shuts down). The last member stays
    when `keep_last`: an empty ISR would forget who has every committed message. ZooKeeper mode keeps it when
    unclean election is off (0.8.2's removeReplicaFromIsr); KRaft mode always does (Kafka 3.7's
    PartitionChangeBuilder leaves the ISR as it is rather than write an empty one)."""
    shrunk = tuple(r for r in isr if r != broker_id)
    return isr if not shrunk and keep_last else shrunk


def reassigned_partition_leader(reassigned: tuple[int, ...], isr: tuple[int, ...], leader_epoch: int,
                                live: set[int]) -> Election:
    """ReassignedPartitionLeaderSelector: leader = the first reassigned replica (RAR order) that is live and
    in the ISR; ISR unchanged; recipients = the reassigned replicas."""
    candidates = [r for r in reassigned if r in live and r in isr]
    if not candidates:
        if not reassigned:
            raise NoReplicaOnlineError("List of reassigned replicas is empty")
        raise NoReplicaOnlineError(f"None of the reassigned replicas {_ids(reassigned)} are in-sync with the leader; "
                                   f"ISR is {_ids(isr)}")
    return Election(candidates[0], leader_epoch + 1, tuple(isr), tuple(reassigned))


def preferred_replica_leader(assigned: tuple[int, ...], leader: int, isr: tuple[int, ...], leader_epoch: int,
                             live: set[int]) -> Election:
    """PreferredReplicaPartitionLeaderSelector: leader = AR's head (the preferred replica) if it is live and in
    the ISR; ISR unchanged; recipients = AR. LeaderElectionNotNeededError if it already leads."""
    preferred = assigned[0]
    if leader == preferred:
        raise LeaderElectionNotNeededError(f"Preferred replica {preferred} is already the current leader")
    if preferred not in live or preferred not in isr:
        raise NoReplicaOnlineError(f"Preferred replica {preferred} is either not alive or not in the isr; "
                                   f"leader is {leader}, ISR is {_ids(isr)}")
    return Election(preferred, leader_epoch + 1, tuple(isr), tuple(assigned))


def controlled_shutdown_leader(assigned: tuple[int, ...], isr: tuple[int, ...], leader_epoch: int,
                               live_or_shutting_down: set[int], shutting_down: set[int]) -> Election:
    """ControlledShutdownLeaderSelector: ISR' = ISR minus the shutting-down brokers, leader = ISR' head (ISR
    order, as 0.8.2); recipients = the assigned replicas that are live or shutting down (the one leaving must
    hear that it is now a follower)."""
    new_isr = tuple(r for r in isr if r not in shutting_down)
    if not new_isr:
        raise NoReplicaOnlineError(f"No other replicas in ISR {_ids(isr)} besides shutting down brokers "
                                   f"{_ids(sorted(shutting_down))}")
    recipients = tuple(r for r in assigned if r in live_or_shutting_down)
    return Election(new_isr[0], leader_epoch + 1, new_isr, recipients)


def partitions_to_rebalance(assignments: Mapping[TopicPartition, tuple[int, ...]],
                            leaders: Mapping[TopicPartition, int],
                            imbalance_percentage: int) -> dict[int, list[TopicPartition]]:
    """The auto-rebalance's check (checkAndTriggerPartitionRebalance): group partitions by preferred replica
    (AR head); a broker whose share of partitions led by someone else exceeds
    `leader.imbalance.per.broker.percentage` gets those partitions back. Partitions without a known leader
    count in the total but are not moved. Returns {preferred broker: partitions to move back to it}."""
    by_preferred: dict[int, list[TopicPartition]] = {}
    for tp, replicas in assignments.items():
        if replicas:
            by_preferred.setdefault(replicas[0], []).append(tp)
    out: dict[int, list[TopicPartition]] = {}
    for broker, partitions in by_preferred.items():
        not_led = sorted(tp for tp in partitions if tp in leaders and leaders[tp] != broker)
        if len(not_led) / len(partitions) > imbalance_percentage / 100:
            out[broker] = not_led
    return out
