"""The partition state machine's decisions (Kafka 0.8.2's PartitionStateMachine), without I/O.

States: NEW (assigned, never led), ONLINE (has a live leader), OFFLINE (its leader died), NON_EXISTENT.
Rule: a transition is valid only from the previous states listed in VALID_PREVIOUS_STATES; anything else is
a controller bug and is refused loudly (the partition keeps its state).

- NEW -> ONLINE: leader = the first live replica in AR, ISR = the live replicas, leader epoch 0; the `state`
  znode is *created* (it must not exist).
- OFFLINE/ONLINE -> ONLINE: a leader selector decides (leader_selector.py: offline by default; reassigned,
  preferred replica or controlled shutdown when the caller says so); the `state` znode is written
  conditionally on the zkVersion read, and not at all if a newer controller epoch wrote it
  (leadership_writer.py).
- -> OFFLINE and -> NON_EXISTENT: mark only.
Each leadership change sends LeaderAndIsr to the selector's recipients (and UpdateMetadata to all brokers).

Every function here is pure: (context, the partitions' states, the `state` read) -> (leadership to write,
who must hear of it, log lines). partition_state_machine.py carries the decisions out.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from controller.context import ControllerContext, LeaderIsrAndZkVersion
from controller.leader_selector import (
    Election,
    LeaderElectionNotNeededError,
    NoReplicaOnlineError,
    controlled_shutdown_leader,
    new_partition_leader,
    offline_partition_leader,
    preferred_replica_leader,
    reassigned_partition_leader,
)
from controller.log_lines import STATE_CHANGE, LogLine, controller_line
from zkbroker.logconfig import per_partition_level
from zkbroker.topic_partition import TopicPartition


class PartitionState(enum.Enum):
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"

    # Looked up in the tables once per partition of a decision: members are singletons, so the identity
    # hash, in C, is right and several times faster than Enum's.
    __hash__ = object.__hash__


VALID_PREVIOUS_STATES = {
    PartitionState.NEW: {PartitionState.NON_EXISTENT},
    PartitionState.ONLINE: {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE},
    PartitionState.OFFLINE: {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE},
    PartitionState.NON_EXISTENT: {PartitionState.OFFLINE},
}


class Selector(enum.Enum):
    """Who elects a leader for an OFFLINE/ONLINE -> ONLINE move (0.8.2's PartitionLeaderSelector classes)."""

    OFFLINE = "offline"
    REASSIGNED = "reassigned"
    PREFERRED_REPLICA = "preferred replica"
    CONTROLLED_SHUTDOWN = "controlled shutdown"


# Each selector fed from the context: (context, partition, its `state`, unclean election allowed) -> election.
_SELECTORS: dict[Selector, Callable[[ControllerContext, TopicPartition, LeaderIsrAndZkVersion, bool], Election]] = {
    Selector.OFFLINE: lambda ctx, tp, current, unclean: offline_partition_leader(
        ctx.assignments[tp], current.isr, current.leader_epoch, ctx.live_broker_ids, unclean),
    Selector.REASSIGNED: lambda ctx, tp, current, unclean: reassigned_partition_leader(
        ctx.partitions_being_reassigned[tp], current.isr, current.leader_epoch, ctx.live_broker_ids),
    Selector.PREFERRED_REPLICA: lambda ctx, tp, current, unclean: preferred_replica_leader(
        ctx.assignments[tp], current.leader, current.isr, current.leader_epoch, ctx.live_broker_ids),
    Selector.CONTROLLED_SHUTDOWN: lambda ctx, tp, current, unclean: controlled_shutdown_leader(
        ctx.assignments[tp], current.isr, current.leader_epoch, ctx.live_or_shutting_down_broker_ids,
        ctx.shutting_down_broker_ids),
}


@dataclass(frozen=True, slots=True)
class LeaderDecision:
    """A decision about one partition going ONLINE: the leadership to write and who hears of it (`election`),
    or nothing to write (`leadership` None) and why, in `lines`. `not_needed`: the preferred replica leads."""

    election: Election | None = None
    leadership: LeaderIsrAndZkVersion | None = None
    lines: tuple[LogLine, ...] = ()
    not_needed: bool = False


def initial_state(leadership: LeaderIsrAndZkVersion | None, live_broker_ids: set[int]) -> PartitionState:
    """At failover: no `state` node = NEW; a live leader = ONLINE; otherwise OFFLINE."""
    if leadership is None:
        return PartitionState.NEW
    return PartitionState.ONLINE if leadership.leader in live_broker_ids else PartitionState.OFFLINE


def valid_moves(ctx: ControllerContext, states: Mapping[TopicPartition, PartitionState],
                partitions: Iterable[TopicPartition], target: PartitionState
                ) -> tuple[list[tuple[TopicPartition, PartitionState]], list[LogLine]]:
    """The partitions (sorted) that may move to `target`, with their current state; a line for each refused."""
    valid, refused = [], []
    for tp in sorted(partitions):
        current = states.get(tp, PartitionState.NON_EXISTENT)
        if current in VALID_PREVIOUS_STATES[target]:
            valid.append((tp, current))
        else:
            refused.append(LogLine(STATE_CHANGE, logging.ERROR, "Controller %d epoch %d initiated state change for "
                                   "partition [%s,%d] from %s to %s failed: not a valid previous state",
                                   (ctx.controller_id, ctx.epoch, *tp, current.value, target.value)))
    return valid, refused


def marked_lines(ctx: ControllerContext, moved: list[tuple[TopicPartition, PartitionState]],
                 target: PartitionState, level: int, per_partition: bool = True) -> list[LogLine]:
    """-> OFFLINE / NON_EXISTENT: one line per partition (at `level`; none unless `per_partition`), and a
    summary when that level is not INFO."""
    lines = [LogLine(STATE_CHANGE, level, "Controller %d epoch %d changed partition [%s,%d] state from %s to %s",
                     (ctx.controller_id, ctx.epoch, *tp, current.value, target.value))
             for tp, current in moved if per_partition]
    if level != logging.INFO:
        lines.append(LogLine(STATE_CHANGE, logging.INFO, "Controller %d epoch %d changed the state of %d partitions "
                             "to %s", (ctx.controller_id, ctx.epoch, len(moved), target.value)))
    return lines


def _failed(ctx: ControllerContext, tp: TopicPartition, current: PartitionState, error: Exception) -> LogLine:
    return LogLine(STATE_CHANGE, logging.ERROR, "Controller %d epoch %d initiated state change for partition "
                   "[%s,%d] from %s to OnlinePartition failed: %s", (ctx.controller_id, ctx.epoch, *tp,
                                                                     current.value, error))


def new_leader(ctx: ControllerContext, tp: TopicPartition) -> LeaderDecision:
    """NEW -> ONLINE: the first leadership, to be created at zkVersion 0."""
    try:
        election = new_partition_leader(ctx.assignments[tp], ctx.live_broker_ids)
    except NoReplicaOnlineError as e:
        return LeaderDecision(lines=(_failed(ctx, tp, PartitionState.NEW, e),))
    return LeaderDecision(election, LeaderIsrAndZkVersion(election.leader, election.leader_epoch, election.isr,
                                                          ctx.epoch, 0))


def state_exists_line(ctx: ControllerContext, tp: TopicPartition) -> LogLine:
    return LogLine(STATE_CHANGE, logging.ERROR, "Controller %d epoch %d encountered error while changing partition "
                   "[%s,%d]'s state from New to Online since LeaderAndIsr path already exists",
                   (ctx.controller_id, ctx.epoch, *tp))


def elect_leader(ctx: ControllerContext, selector: Selector, tp: TopicPartition, previous: PartitionState,
                 current: LeaderIsrAndZkVersion | None, unclean_allowed: bool, level: int) -> LeaderDecision:
    """OFFLINE/ONLINE -> ONLINE: the selector's election on the `state` read, to be written conditionally on
    its zkVersion; none when no replica may lead (the partition keeps its leadership) or none is needed."""
    try:
        if current is None:
            raise NoReplicaOnlineError("its state znode is missing or unreadable")
        election = _SELECTORS[selector](ctx, tp, current, unclean_allowed)
    except LeaderElectionNotNeededError as e:
        return LeaderDecision(lines=(LogLine(STATE_CHANGE, level, "Controller %d epoch %d left partition [%s,%d] as "
                                             "it is: %s", (ctx.controller_id, ctx.epoch, *tp, e)),), not_needed=True)
    except NoReplicaOnlineError as e:
        return LeaderDecision(lines=(_failed(ctx, tp, previous, e),))
    return LeaderDecision(election, LeaderIsrAndZkVersion(election.leader, election.leader_epoch, election.isr,
                                                          ctx.epoch, current.zk_version))


def newer_epoch_line(ctx: ControllerContext, tp: TopicPartition, current: LeaderIsrAndZkVersion) -> LogLine:
    return LogLine(STATE_CHANGE, logging.ERROR, "Controller %d epoch %d aborted leader election for partition "
                   "[%s,%d]: its state was written by a newer controller epoch %d",
                   (ctx.controller_id, ctx.epoch, *tp, current.controller_epoch))


def unclean_line(ctx: ControllerContext, tp: TopicPartition, election: Election) -> LogLine:
    """Said once an unclean election is written: the new leader may lack messages the ISR had."""
    return controller_line(ctx.controller_id, logging.WARNING, "No broker in ISR is alive for [%s,%d]. Elect leader "
                           "%d from live brokers %s. There's potential data loss.", *tp, election.leader,
                           ",".join(map(str, sorted(ctx.live_broker_ids))))


def online_lines(ctx: ControllerContext, moved: list[tuple[TopicPartition, PartitionState]],
                 elected: Mapping[TopicPartition, Election], per_partition: bool = True) -> list[LogLine]:
    """-> ONLINE: a line per partition that got its leader (at per_partition_level; none unless
    `per_partition`), and a summary when that level is not INFO."""
    level = per_partition_level(len(elected))
    lines = [LogLine(STATE_CHANGE, level, "Controller %d epoch %d changed partition [%s,%d] from %s to "
                     "OnlinePartition with leader %d", (ctx.controller_id, ctx.epoch, *tp, current.value,
                                                        elected[tp].leader))
             for tp, current in moved if per_partition and tp in elected]
    if level != logging.INFO:
        leaders: dict[int, int] = {}
        for election in elected.values():
            leaders[election.leader] = leaders.get(election.leader, 0) + 1
        lines.append(LogLine(STATE_CHANGE, logging.INFO, "Controller %d epoch %d changed %d partitions to "
                             "OnlinePartition; new leaders: %s",
                             (ctx.controller_id, ctx.epoch, sum(tp in elected for tp, _ in moved),
                              ", ".join(f"broker {b}: {n}" for b, n in sorted(leaders.items())))))
    return lines


def not_needed_lines(ctx: ControllerContext, not_needed: int, level: int) -> list[LogLine]:
    if not not_needed or level == logging.INFO:
        return []
    return [LogLine(STATE_CHANGE, logging.INFO, "Controller %d epoch %d left %d partitions as they are: their "
                    "preferred replica leads already", (ctx.controller_id, ctx.epoch, not_needed))]
