"""The replica state machine (Kafka 0.8.2's ReplicaStateMachine): one state per (topic, partition, broker).

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
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from controller.context import LeaderIsrAndZkVersion, TopicPartition
from controller.partition_state import encode_leadership
from zkbroker.logconfig import per_partition_level
from zkbroker.zk import paths

if TYPE_CHECKING:
    from controller.controller import KafkaController

state_change_log = logging.getLogger("state.change.logger")

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

_WRITE_ATTEMPTS = 3

StopReplicaCallback = Callable[[int, list[TopicPartition], Any], None]


def _ids(ids) -> str:
    return ",".join(map(str, ids))


class ReplicaStateMachine:
    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller
        self.states: dict[PartitionReplica, ReplicaState] = {}

    @property
    def ctx(self):
        return self.controller.context

    def initialize(self) -> None:
        live = self.ctx.live_broker_ids
        for (topic, partition), replicas in self.ctx.assignments.items():
            for r in replicas:
                self.states[(topic, partition, r)] = S.ONLINE if r in live else S.DELETION_INELIGIBLE

    def handle_state_changes(self, replicas: Iterable[PartitionReplica], target: ReplicaState,
                             stop_replica_callback: StopReplicaCallback | None = None) -> None:
        # LeaderAndIsr for replicas becoming NEW or ONLINE is gathered per partition: one batch entry each;
        # replicas going OFFLINE leave their ISRs together, after the loop (one read and batched writes).
        announce: dict[TopicPartition, list[int]] = {}
        leaving_isr: list[tuple[TopicPartition, int]] = []
        for replica in sorted(replicas):
            current = self.states.get(replica, S.NON_EXISTENT)
            topic, partition, broker_id = replica
            tp = (topic, partition)
            if current not in VALID_PREVIOUS_STATES[target]:
                state_change_log.error("Controller %d epoch %d initiated state change of replica %d for partition "
                                       "[%s,%d] from %s to %s failed: not a valid previous state",
                                       self.controller.broker_id, self.ctx.epoch, broker_id, *tp, current.value,
                                       target.value)
                continue
            if tp not in self.ctx.assignments:
                state_change_log.error("Controller %d epoch %d cannot change the state of replica %d of unknown "
                                       "partition [%s,%d]", self.controller.broker_id, self.ctx.epoch, broker_id, *tp)
                continue
            if not self._transition(replica, current, target, announce, leaving_isr, stop_replica_callback):
                continue
            if target is S.NON_EXISTENT:
                self.states.pop(replica, None)
            else:
                self.states[replica] = target
            state_change_log.debug("Controller %d epoch %d changed state of replica %d for partition [%s,%d] from %s "
                                   "to %s", self.controller.broker_id, self.ctx.epoch, broker_id, *tp, current.value,
                                   target.value)
        for tp, brokers in announce.items():
            leadership = self.ctx.leadership.get(tp)
            if leadership is not None:
                self.controller.batch.add_leader_and_isr(brokers, tp, leadership, self.ctx.assignments[tp])
        self.remove_replicas_from_isr(leaving_isr)

    def _transition(self, replica: PartitionReplica, current: ReplicaState, target: ReplicaState,
                    announce: dict[TopicPartition, list[int]], leaving_isr: list[tuple[TopicPartition, int]],
                    callback: StopReplicaCallback | None) -> bool:
        topic, partition, broker_id = replica
        tp = (topic, partition)
        batch = self.controller.batch
        if target is S.NEW:
            leadership = self.ctx.leadership.get(tp)
            if leadership is not None and leadership.leader == broker_id:
                state_change_log.error("Controller %d epoch %d cannot move replica %d of [%s,%d] to NewReplica as "
                                       "it is being requested to become leader", self.controller.broker_id,
                                       self.ctx.epoch, broker_id, *tp)
                return False
            announce.setdefault(tp, []).append(broker_id)
        elif target is S.ONLINE:
            if current is S.NEW:
                if broker_id not in self.ctx.assignments[tp]:
                    self.ctx.assignments[tp] = (*self.ctx.assignments[tp], broker_id)
            else:
                announce.setdefault(tp, []).append(broker_id)
        elif target is S.OFFLINE:
            batch.add_stop_replica([broker_id], tp, delete=False)
            if self.ctx.leadership.get(tp) is not None:
                leaving_isr.append((tp, broker_id))
        elif target is S.DELETION_STARTED:
            batch.add_stop_replica([broker_id], tp, delete=True, callback=callback)
        elif target is S.NON_EXISTENT:
            self.ctx.assignments[tp] = tuple(r for r in self.ctx.assignments[tp] if r != broker_id)
        return True

    def remove_replicas_from_isr(self, replicas: list[tuple[TopicPartition, int]]) -> None:
        """0.8.2's removeReplicaFromIsr for each (partition, broker), in order: a partition that loses two
        replicas is written twice, one after the other; different partitions are read together and written in
        batches."""
        waves: list[list[tuple[TopicPartition, int]]] = []
        seen: dict[TopicPartition, int] = {}
        for tp, broker_id in replicas:
            n = seen[tp] = seen.get(tp, -1) + 1
            if n == len(waves):
                waves.append([])
            waves[n].append((tp, broker_id))
        for wave in waves:
            self._remove_from_isr(wave)

    def _remove_from_isr(self, replicas: list[tuple[TopicPartition, int]]) -> None:
        """Drop each replica from its partition's ISR (leader -1 if it led; 0.8.2 keeps the last ISR member when
        unclean election is off), leader_epoch + 1, written conditionally on the zkVersion read (read again and
        retried on a mismatch); the other assigned replicas hear of it, unless the partition is being deleted.
        At most one replica per partition."""
        controller = self.controller
        remaining = list(replicas)
        level = per_partition_level(len(replicas))
        logged = state_change_log.isEnabledFor(level)
        removed = 0
        for _ in range(_WRITE_ATTEMPTS):
            if not remaining:
                break
            current_states = controller.read_leaderships([tp for tp, _ in remaining])
            decided = []
            for tp, broker_id in remaining:
                current = current_states[tp]
                if current is None or broker_id not in current.isr:
                    continue
                if current.controller_epoch > self.ctx.epoch:
                    state_change_log.error("Controller %d epoch %d aborted removing replica %d from the ISR of "
                                           "[%s,%d]: its state was written by a newer controller epoch %d",
                                           controller.broker_id, self.ctx.epoch, broker_id, *tp,
                                           current.controller_epoch)
                    continue
                isr = tuple(r for r in current.isr if r != broker_id)
                if not isr and not controller.unclean_election_enabled(tp[0]):
                    controller.log.log(level, "Retaining last ISR %d of partition [%s,%d] since unclean leader "
                                       "election is disabled", broker_id, *tp)
                    isr = current.isr
                leader = -1 if current.leader == broker_id else current.leader
                decided.append((tp, broker_id, LeaderIsrAndZkVersion(leader, current.leader_epoch + 1, isr,
                                                                     self.ctx.epoch, current.zk_version)))
            versions = controller.writer.set_many([
                (paths.partition_state_path(*tp), encode_leadership(state), state.zk_version)
                for tp, _, state in decided])
            remaining = []
            for (tp, broker_id, state), version in zip(decided, versions):
                if version is None:
                    remaining.append((tp, broker_id))
                    continue
                state = LeaderIsrAndZkVersion(state.leader, state.leader_epoch, state.isr, state.controller_epoch,
                                              version)
                self.ctx.leadership[tp] = state
                if not controller.deletion.is_partition_to_be_deleted(tp):
                    assigned = self.ctx.assignments[tp]
                    controller.batch.add_leader_and_isr([r for r in assigned if r != broker_id], tp, state, assigned)
                if logged:
                    state_change_log.log(level, "Controller %d epoch %d removed broker %d from the ISR of [%s,%d]: "
                                         "leader %d, ISR %s", controller.broker_id, self.ctx.epoch, broker_id, *tp,
                                         state.leader, _ids(state.isr))
                removed += 1
        if removed and level != logging.INFO:
            state_change_log.info("Controller %d epoch %d removed brokers %s from the ISRs of %d partitions",
                                  controller.broker_id, self.ctx.epoch, _ids(sorted({b for _, b in replicas})), removed)

    # ---- queries (topic deletion) ----------------------------------------------------------------------------

    def replicas_of_topic(self, topic: str) -> list[PartitionReplica]:
        return [(t, p, r) for (t, p), replicas in self.ctx.assignments.items() if t == topic for r in replicas]

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionReplica]:
        return [r for r in self.replicas_of_topic(topic) if self.states.get(r) is state]

    def are_all_replicas_deleted(self, topic: str) -> bool:
        replicas = self.replicas_of_topic(topic)
        return all(self.states.get(r) is S.DELETION_SUCCESSFUL for r in replicas)

    def any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(self.states.get(r) is state for r in self.replicas_of_topic(topic))

    def forget_topic(self, topic: str) -> None:
        for replica in [r for r in self.states if r[0] == topic]:
            del self.states[replica]
