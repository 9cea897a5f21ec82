"""The replica state machine's decisions (Kafka 0.8.2's ReplicaStateMachine), without I/O: one state per
(topic, partition, broker).

Rule: a transition is valid only from the previous states listed in VALID_PREVIOUS_STATES; anything else is
a controller bug and is refused loudly (the replica keeps its state).

- NON_EXISTENT -> NEW: LeaderAndIsr with the current leadership to the new replica (refused if it would be
  the leader); nothing when the partition has no leader yet.
- NEW -> ONLINE: add the replica to AR (in memory).
- ONLINE/OFFLINE/DELETION_INELIGIBLE -> ONLINE: LeaderAndIsr with the current leadership, if there is one.
- NEW/ONLINE/OFFLINE/DELETION_INELIGIBLE -> OFFLINE: StopReplica (delete=false) to the replica; then remove
  it from the ISR (leader -1 if it led; 0.8.2 keeps the last ISR member when unclean election is off),
  leader_epoch + 1, conditional `state` write, LeaderAndIsr to the other assigned replicas (not for
  partitions being deleted).
- OFFLINE -> DELETION_STARTED: StopReplica (delete=true), whose answer moves the replica on (deletion.py).
- DELETION_STARTED -> DELETION_SUCCESSFUL: mark only.
- -> DELETION_INELIGIBLE: mark only: the replica cannot be deleted now (its broker is down, or its
  StopReplica failed). 0.8.2 allowed it only from DELETION_STARTED and logged assertion errors for replicas
  whose broker died before deletion started; here any state short of deletion's end may go there.
- DELETION_SUCCESSFUL -> NON_EXISTENT: remove the replica from AR (in memory).

Replica states live only in the controller; they are rebuilt at failover: a replica on a live broker is
ONLINE, one on a dead broker DELETION_INELIGIBLE (as 0.8.2's initializeReplicaState).

Every function here is pure; replica_state_machine.py carries the decisions out.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

from controller.context import ControllerContext, LeaderIsrAndZkVersion
from controller.leader_selector import isr_without
from controller.log_lines import STATE_CHANGE, LogLine, controller_line
from zkbroker.topic_partition import TopicPartition

#: (topic, partition, broker id): Kafka's PartitionAndReplica.
PartitionReplica = tuple[str, int, int]


class ReplicaState(enum.Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"

    # Looked up in the tables once per replica of a decision (tens of thousands): members are singletons, so
    # the identity hash, in C, is right and several times faster than Enum's.
    __hash__ = object.__hash__


S = ReplicaState
VALID_PREVIOUS_STATES = {
    S.NEW: {S.NON_EXISTENT},
    S.ONLINE: {S.NEW, S.ONLINE, S.OFFLINE, S.DELETION_INELIGIBLE},
    S.OFFLINE: {S.NEW, S.ONLINE, S.OFFLINE, S.DELETION_INELIGIBLE},
    S.DELETION_STARTED: {S.OFFLINE},
    S.DELETION_SUCCESSFUL: {S.DELETION_STARTED},
    S.DELETION_INELIGIBLE: {S.NEW, S.ONLINE, S.OFFLINE, S.DELETION_STARTED, S.DELETION_INELIGIBLE},
    S.NON_EXISTENT: {S.DELETION_SUCCESSFUL},
}


@dataclass(frozen=True, slots=True)
class ReplicaMove:
    """What one replica's transition asks for: refused (`accepted` False), or accepted with its effects —
    LeaderAndIsr with the partition's current leadership (`announce`), StopReplica (`stop_replica`: its
    delete flag), leaving the ISR (`leave_isr`), the partition's new AR in memory (`assigned`)."""

    accepted: bool = True
    announce: bool = False
    stop_replica: bool | None = None
    leave_isr: bool = False
    assigned: tuple[int, ...] | None = None
    lines: tuple[LogLine, ...] = ()


def _ids(ids) -> str:
    return ",".join(map(str, ids))


_ANNOUNCE = ReplicaMove(announce=True)
_MARK_ONLY = ReplicaMove()


def _to_new(ctx: ControllerContext, tp: TopicPartition, broker_id: int, current: ReplicaState) -> ReplicaMove:
    leadership = ctx.leadership.get(tp)
    if leadership is not None and leadership.leader == broker_id:
        return ReplicaMove(False, lines=(LogLine(STATE_CHANGE, logging.ERROR, "Controller %d epoch %d cannot move "
                                                 "replica %d of [%s,%d] to NewReplica as it is being requested to "
                                                 "become leader", (ctx.controller_id, ctx.epoch, broker_id, *tp)),))
    return _ANNOUNCE


def _to_online(ctx: ControllerContext, tp: TopicPartition, broker_id: int, current: ReplicaState) -> ReplicaMove:
    if current is not S.NEW:
        return _ANNOUNCE
    assigned = ctx.assignments[tp]
    return _MARK_ONLY if broker_id in assigned else ReplicaMove(assigned=(*assigned, broker_id))


_STOP = ReplicaMove(stop_replica=False)
_STOP_AND_LEAVE_ISR = ReplicaMove(stop_replica=False, leave_isr=True)
_STOP_AND_DELETE = ReplicaMove(stop_replica=True)


def _to_offline(ctx: ControllerContext, tp: TopicPartition, broker_id: int, current: ReplicaState) -> ReplicaMove:
    return _STOP if ctx.leadership.get(tp) is None else _STOP_AND_LEAVE_ISR


def _to_non_existent(ctx: ControllerContext, tp: TopicPartition, broker_id: int,
                     current: ReplicaState) -> ReplicaMove:
    return ReplicaMove(assigned=tuple(r for r in ctx.assignments[tp] if r != broker_id))


#: The effects of reaching each state (the rule above says from where).
_EFFECTS: dict[ReplicaState, Callable[[ControllerContext, TopicPartition, int, ReplicaState], ReplicaMove]] = {
    S.NEW: _to_new,
    S.ONLINE: _to_online,
    S.OFFLINE: _to_offline,
    S.DELETION_STARTED: lambda ctx, tp, broker_id, current: _STOP_AND_DELETE,
    S.DELETION_SUCCESSFUL: lambda ctx, tp, broker_id, current: _MARK_ONLY,
    S.DELETION_INELIGIBLE: lambda ctx, tp, broker_id, current: _MARK_ONLY,
    S.NON_EXISTENT: _to_non_existent,
}


def initial_state(live_broker_ids: set[int], broker_id: int) -> ReplicaState:
    """At failover: a replica on a live broker is ONLINE, one on a dead broker DELETION_INELIGIBLE."""
    return S.ONLINE if broker_id in live_broker_ids else S.DELETION_INELIGIBLE


def move(ctx: ControllerContext, replica: PartitionReplica, current: ReplicaState,
         target: ReplicaState) -> ReplicaMove:
    """One replica's transition from `current` to `target`: refused, or accepted with its effects."""
    topic, partition, broker_id = replica
    tp = (topic, partition)
    if current not in VALID_PREVIOUS_STATES[target]:
        return ReplicaMove(False, lines=(LogLine(STATE_CHANGE, logging.ERROR, "Controller %d epoch %d initiated "
                                                 "state change of replica %d for partition [%s,%d] from %s to %s "
                                                 "failed: not a valid previous state",
                                                 (ctx.controller_id, ctx.epoch, broker_id, *tp, current.value,
                                                  target.value)),))
    if tp not in ctx.assignments:
        return ReplicaMove(False, lines=(LogLine(STATE_CHANGE, logging.ERROR, "Controller %d epoch %d cannot change "
                                                 "the state of replica %d of unknown partition [%s,%d]",
                                                 (ctx.controller_id, ctx.epoch, broker_id, *tp)),))
    return _EFFECTS[target](ctx, tp, broker_id, current)


def moved_line(ctx: ControllerContext, replica: PartitionReplica, current: ReplicaState,
               target: ReplicaState) -> LogLine:
    topic, partition, broker_id = replica
    return LogLine(STATE_CHANGE, logging.DEBUG, "Controller %d epoch %d changed state of replica %d for partition "
                   "[%s,%d] from %s to %s", (ctx.controller_id, ctx.epoch, broker_id, topic, partition,
                                             current.value, target.value))


@dataclass(frozen=True, slots=True)
class IsrShrink:
    """A replica leaving its partition's ISR: the leadership to write, and the lines said on deciding."""

    leadership: LeaderIsrAndZkVersion
    lines: tuple[LogLine, ...] = ()


def remove_from_isr(ctx: ControllerContext, tp: TopicPartition, broker_id: int,
                    current: LeaderIsrAndZkVersion | None, unclean_allowed: bool, level: int) -> IsrShrink | None:
    """0.8.2's removeReplicaFromIsr on the `state` read: drop the replica from the ISR (leader -1 if it led;
    the last ISR member stays when unclean election is off), leader_epoch + 1; None if it is not in the ISR."""
    if current is None or broker_id not in current.isr:
        return None
    isr = isr_without(current.isr, broker_id, keep_last=not unclean_allowed)
    lines = ()
    if isr == current.isr:
        lines = (controller_line(ctx.controller_id, level, "Retaining last ISR %d of partition [%s,%d] since unclean "
                                 "leader election is disabled", broker_id, *tp),)
    leader = -1 if current.leader == broker_id else current.leader
    return IsrShrink(LeaderIsrAndZkVersion(leader, current.leader_epoch + 1, isr, ctx.epoch, current.zk_version),
                     lines)


def isr_newer_epoch_line(ctx: ControllerContext, tp: TopicPartition, broker_id: int,
                         current: LeaderIsrAndZkVersion) -> LogLine:
    return LogLine(STATE_CHANGE, logging.ERROR, "Controller %d epoch %d aborted removing replica %d from the ISR of "
                   "[%s,%d]: its state was written by a newer controller epoch %d",
                   (ctx.controller_id, ctx.epoch, broker_id, *tp, current.controller_epoch))


def removed_from_isr_line(ctx: ControllerContext, tp: TopicPartition, broker_id: int,
                          state: LeaderIsrAndZkVersion, level: int) -> LogLine:
    return LogLine(STATE_CHANGE, level, "Controller %d epoch %d removed broker %d from the ISR of [%s,%d]: leader "
                   "%d, ISR %s", (ctx.controller_id, ctx.epoch, broker_id, *tp, state.leader, _ids(state.isr)))


def removed_from_isrs_summary(ctx: ControllerContext, brokers: list[int], removed: int, level: int) -> list[LogLine]:
    if not removed or level == logging.INFO:
        return []
    return [LogLine(STATE_CHANGE, logging.INFO, "Controller %d epoch %d removed brokers %s from the ISRs of %d "
                    "partitions", (ctx.controller_id, ctx.epoch, _ids(sorted(set(brokers))), removed))]


def isr_waves(replicas: list[tuple[TopicPartition, int]]) -> list[list[tuple[TopicPartition, int]]]:
    """0.8.2 removes each (partition, broker) in order: a partition that loses two replicas is written twice,
    one after the other. Wave n holds each partition's n-th removal, so a wave has one per partition."""
    waves: list[list[tuple[TopicPartition, int]]] = []
    seen: dict[TopicPartition, int] = {}
    for tp, broker_id in replicas:
        n = seen[tp] = seen.get(tp, -1) + 1
        if n == len(waves):
            waves.append([])
        waves[n].append((tp, broker_id))
    return waves
