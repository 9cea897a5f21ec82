"""The replica state machine's driver: keeps each replica's state and carries out the decisions of
replica_state.py — requests queued in the event's batch, ISR removals written through the one leadership
writer, the decisions' lines logged."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from controller import replica_state as decide
from controller.channel import RequestBatch, StopReplicaCallback
from controller.context import ControllerContext
from controller.leadership_writer import LeadershipWriter
from controller.log_lines import STATE_CHANGE, emit, enabled
from controller.replica_state import PartitionReplica, ReplicaState
from zkbroker.logconfig import per_partition_level
from zkbroker.topic_partition import TopicPartition


class ReplicaStateMachine:
    def __init__(self, ctx: ControllerContext, leaderships: LeadershipWriter | None,
                 requests: Callable[[], RequestBatch], unclean_election_enabled: Callable[[str], bool],
                 is_partition_to_be_deleted: Callable[[TopicPartition], bool]) -> None:
        self.ctx = ctx
        self.leaderships = leaderships
        self.requests = requests
        self.unclean_election_enabled = unclean_election_enabled
        self.is_partition_to_be_deleted = is_partition_to_be_deleted
        self.states: dict[PartitionReplica, ReplicaState] = {}

    def initialize(self) -> None:
        live = self.ctx.live_broker_ids
        for (topic, partition), replicas in self.ctx.assignments.items():
            for r in replicas:
                self.states[(topic, partition, r)] = decide.initial_state(live, r)

    def handle_state_changes(self, replicas: Iterable[PartitionReplica], target: ReplicaState,
                             stop_replica_callback: StopReplicaCallback | None = None) -> None:
        # LeaderAndIsr for replicas becoming NEW or ONLINE is gathered per partition: one batch entry each;
        # replicas going OFFLINE leave their ISRs together, after the loop (one read and batched writes).
        ctx = self.ctx
        batch = self.requests()
        logged = enabled(STATE_CHANGE, logging.DEBUG)
        announce: dict[TopicPartition, list[int]] = {}
        leaving_isr: list[tuple[TopicPartition, int]] = []
        for replica in sorted(replicas):
            current = self.states.get(replica, ReplicaState.NON_EXISTENT)
            effects = decide.move(ctx, replica, current, target)
            emit(effects.lines)
            if not effects.accepted:
                continue
            topic, partition, broker_id = replica
            tp = (topic, partition)
            if effects.announce:
                announce.setdefault(tp, []).append(broker_id)
            if effects.stop_replica is not None:
                batch.add_stop_replica([broker_id], tp, delete=effects.stop_replica,
                                       callback=stop_replica_callback if effects.stop_replica else None)
            if effects.leave_isr:
                leaving_isr.append((tp, broker_id))
            if effects.assigned is not None:
                ctx.assignments[tp] = effects.assigned
            if target is ReplicaState.NON_EXISTENT:
                self.states.pop(replica, None)
            else:
                self.states[replica] = target
            if logged:
                emit((decide.moved_line(ctx, replica, current, target),))
        for tp, brokers in announce.items():
            leadership = ctx.leadership.get(tp)
            if leadership is not None:
                batch.add_leader_and_isr(brokers, tp, leadership, ctx.assignments[tp])
        self.remove_replicas_from_isr(leaving_isr)

    def remove_replicas_from_isr(self, replicas: list[tuple[TopicPartition, int]]) -> None:
        """Each (partition, broker) out of its ISR, in order (decide.isr_waves); different partitions are read
        together and written in batches. The other assigned replicas hear of it, unless the partition is being
        deleted."""
        for wave in decide.isr_waves(replicas):
            self._remove_from_isr(wave)

    def _remove_from_isr(self, replicas: list[tuple[TopicPartition, int]]) -> None:
        ctx = self.ctx
        level = per_partition_level(len(replicas))
        unclean = {t: self.unclean_election_enabled(t) for t in {tp[0] for tp, _ in replicas}}
        written = self.leaderships.update(
            replicas, lambda key: key[0],
            lambda key, current: decide.remove_from_isr(ctx, *key, current, unclean[key[0][0]], level),
            lambda key, current: decide.isr_newer_epoch_line(ctx, *key, current))
        batch = self.requests()
        logged = enabled(STATE_CHANGE, level)
        for (tp, broker_id), (_, state) in written.written.items():
            ctx.leadership[tp] = state
            if not self.is_partition_to_be_deleted(tp):
                assigned = ctx.assignments[tp]
                batch.add_leader_and_isr([r for r in assigned if r != broker_id], tp, state, assigned)
            if logged:
                emit((decide.removed_from_isr_line(ctx, tp, broker_id, state, level),))
        emit(decide.removed_from_isrs_summary(ctx, [b for _, b in replicas], len(written.written), level))

    # ---- queries (topic deletion) ----------------------------------------------------------------------------

    def replicas_of_topic(self, topic: str) -> list[PartitionReplica]:
        return [(t, p, r) for (t, p), replicas in self.ctx.assignments.items() if t == topic for r in replicas]

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionReplica]:
        return [r for r in self.replicas_of_topic(topic) if self.states.get(r) is state]

    def any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(self.states.get(r) is state for r in self.replicas_of_topic(topic))

    def forget_topic(self, topic: str) -> None:
        for replica in [r for r in self.states if r[0] == topic]:
            del self.states[replica]
