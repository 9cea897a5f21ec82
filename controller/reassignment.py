"""Partition reassignment (Kafka 0.8.2's KafkaController.onPartitionReassignment and its two listeners).

`zkbroker reassign-partitions --execute` writes `/admin/reassign_partitions`; the controller watches it and
moves each listed partition from its original replicas (OAR) to the reassigned ones (RAR):

1. AR = OAR + RAR in ZooKeeper.  2. leader_epoch + 1 and LeaderAndIsr (with AR = OAR + RAR) to all of them.
3. RAR - OAR -> NewReplica: the new replicas start fetching from the leader.
4. Wait (data watch on the partition's `state`) until RAR is in the ISR — the leader adds them as they catch up.
5. RAR -> OnlineReplica.  6. AR = RAR in memory.  7. If the leader is not in RAR (or is dead), elect one from
   RAR (reassigned selector); else leader_epoch + 1 and LeaderAndIsr with AR = RAR.
8. OAR - RAR -> OfflineReplica (out of the ISR).  9. OAR - RAR -> NonExistentReplica (StopReplica with delete).
10. AR = RAR in ZooKeeper (the only persistent copy of OAR until now, so a controller failover resumes).
11. Remove the partition from `/admin/reassign_partitions` (the node is deleted when empty).
12. UpdateMetadata to every broker.

A partition is refused (and removed from the node, with an error in the log) when it does not exist, RAR
equals AR, RAR is empty or repeats a broker, a broker of RAR is not live, or its topic is being deleted.
New AR order during the move: OAR then RAR - OAR (0.8.2 used a set, so its order was arbitrary). An
unreadable `/admin/reassign_partitions` is logged and deleted, so that it cannot block the next
reassignment (0.8.2 ignored it and left it in place).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.context import LeaderIsrAndZkVersion, TopicPartition
from controller.partition_state import PartitionState, encode_leadership
from controller.replica_state import ReplicaState
from zkbroker.zk import paths
from zkbroker.zk.znodes import TopicAssignment, ZnodeFormatError, decode_reassignment, encode_reassignment

if TYPE_CHECKING:
    from controller.controller import KafkaController

_WRITE_ATTEMPTS = 3


class ReassignmentError(Exception):
    """This partition cannot be reassigned; the message says why."""


def _tp(tp: TopicPartition) -> str:
    return f"[{tp[0]},{tp[1]}]"


def _ids(ids) -> str:
    return ",".join(map(str, ids))


class PartitionReassigner:
    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller
        self.log = controller.log

    @property
    def ctx(self):
        return self.controller.context

    # ---- /admin/reassign_partitions --------------------------------------------------------------------------

    def read_requested(self, data: bytes | None) -> dict[TopicPartition, tuple[int, ...]] | None:
        """The node's partitions (the last entry wins for a repeated partition), or None if it is unreadable
        (then it is deleted)."""
        if data is None:
            return {}
        try:
            moves = decode_reassignment(data)
        except ZnodeFormatError as e:
            self.log.error("Ignoring unreadable %s and deleting it: %s", paths.REASSIGN_PARTITIONS, e)
            self.controller.writer.delete(paths.REASSIGN_PARTITIONS)
            return None
        return {(m.topic, m.partition): m.replicas for m in moves}

    def initialize(self, data: bytes | None) -> None:
        """At failover (initializePartitionReassignment): remember what is still to do; drop what is done."""
        requested = self.read_requested(data) or {}
        done = [tp for tp, rar in requested.items()
                if tp not in self.ctx.assignments or self.ctx.assignments[tp] == rar]
        for tp in done:
            self.remove_partition(tp)
        self.ctx.partitions_being_reassigned.update({tp: rar for tp, rar in requested.items() if tp not in done})
        self.log.info("Partitions being reassigned: %s", _tps(requested))
        self.log.info("Partitions already reassigned: %s", _tps(done))
        self.log.info("Resuming reassignment of partitions: %s", _tps(self.ctx.partitions_being_reassigned))

    def resume_all(self) -> None:
        """maybeTriggerPartitionReassignment."""
        for tp, rar in sorted(self.ctx.partitions_being_reassigned.items()):
            self.initiate(tp, rar)

    def on_reassign_partitions_changed(self, data: bytes | None) -> None:
        """PartitionsReassignedListener: start the partitions not already being reassigned."""
        requested = self.read_requested(data)
        for tp, rar in sorted((requested or {}).items()):
            if tp in self.ctx.partitions_being_reassigned:
                continue
            if self.controller.deletion.is_queued(tp[0]):
                self.log.error("Skipping reassignment of partition %s for topic %s since it is currently being "
                               "deleted", _tp(tp), tp[0])
                self.remove_partition(tp)
                continue
            self.initiate(tp, rar)

    def initiate(self, tp: TopicPartition, rar: tuple[int, ...]) -> None:
        """initiateReassignReplicasForTopicPartition."""
        try:
            assigned = self.ctx.assignments.get(tp)
            if assigned is None:
                raise ReassignmentError(f"Attempt to reassign partition {_tp(tp)} that doesn't exist")
            if not rar or len(set(rar)) != len(rar):
                raise ReassignmentError(f"The new replicas [{_ids(rar)}] for partition {_tp(tp)} are empty or repeat "
                                        "a broker")
            if assigned == rar:
                raise ReassignmentError(f"Partition {_tp(tp)} to be reassigned is already assigned to replicas "
                                        f"{_ids(rar)}. Ignoring request for partition reassignment")
            alive = [r for r in rar if r in self.ctx.live_broker_ids]
            if len(alive) != len(rar):
                raise ReassignmentError(f"Only {_ids(alive) or 'none'} replicas out of the new set of replicas "
                                        f"{_ids(rar)} for partition {_tp(tp)} to be reassigned are alive. Failing "
                                        "partition reassignment")
        except ReassignmentError as e:
            self.log.error("Error completing reassignment of partition %s: %s", _tp(tp), e)
            self.remove_partition(tp)
            return
        self.log.info("Handling reassignment of partition %s to new replicas %s", _tp(tp), _ids(rar))
        self.controller.zk.subscribe_data_changes(paths.partition_state_path(*tp), self.controller.on_isr_change)
        self.ctx.partitions_being_reassigned[tp] = rar
        self.controller.deletion.mark_ineligible({tp[0]})
        self.reassign(tp)

    def on_isr_changed(self, tp: TopicPartition) -> None:
        """ReassignedPartitionsIsrChangeListener: resume once every reassigned replica is in the ISR."""
        rar = self.ctx.partitions_being_reassigned.get(tp)
        if rar is None:
            return
        current = self.controller.read_leadership(tp)
        if current is None:
            self.log.error("Error handling reassignment of partition %s to replicas %s as its state is missing",
                           _tp(tp), _ids(rar))
            return
        caught_up = set(rar) & set(current.isr)
        if caught_up == set(rar):
            self.log.info("%d/%d replicas have caught up with the leader for partition %s being reassigned. Resuming "
                          "partition reassignment", len(caught_up), len(rar), _tp(tp))
            self.reassign(tp)
        else:
            self.log.info("%d/%d replicas have caught up with the leader for partition %s being reassigned. "
                          "Replica(s) %s still need to catch up", len(caught_up), len(rar), _tp(tp),
                          _ids(sorted(set(rar) - caught_up)))

    # ---- the 12 steps -------------------------------------------------------------------------------------------

    def reassign(self, tp: TopicPartition) -> None:
        try:
            self.on_partition_reassignment(tp)
        except ReassignmentError as e:
            self.log.error("Error completing reassignment of partition %s: %s", _tp(tp), e)
            self.remove_partition(tp)

    def on_partition_reassignment(self, tp: TopicPartition) -> None:
        rar = self.ctx.partitions_being_reassigned[tp]
        rsm = self.controller.replica_state_machine
        if not self._replicas_in_isr(tp, rar):
            oar = self.ctx.assignments[tp]
            new_replicas = [r for r in rar if r not in oar]
            all_replicas = (*oar, *new_replicas)
            self.log.info("New replicas %s for partition %s being reassigned not yet caught up with the leader",
                          _ids(rar), _tp(tp))
            self._update_assigned_replicas(tp, all_replicas)                                  # 1
            self._update_leader_epoch_and_send(tp, all_replicas, all_replicas)                # 2
            rsm.handle_state_changes([(*tp, r) for r in new_replicas], ReplicaState.NEW)      # 3
            self.log.info("Waiting for new replicas %s for partition %s being reassigned to catch up with the "
                          "leader", _ids(rar), _tp(tp))
            return
        old_replicas = [r for r in self.ctx.assignments[tp] if r not in rar]                  # 4: all caught up
        rsm.handle_state_changes([(*tp, r) for r in rar], ReplicaState.ONLINE)                # 5
        self._move_leader_if_required(tp, rar)                                                # 6, 7
        old = [(*tp, r) for r in old_replicas]
        rsm.handle_state_changes(old, ReplicaState.OFFLINE)                                   # 8
        rsm.handle_state_changes(old, ReplicaState.DELETION_STARTED)                          # 9
        rsm.handle_state_changes(old, ReplicaState.DELETION_SUCCESSFUL)
        rsm.handle_state_changes(old, ReplicaState.NON_EXISTENT)
        self._update_assigned_replicas(tp, rar)                                               # 10
        self.remove_partition(tp)                                                             # 11
        self.log.info("Removed partition %s from the list of reassigned partitions in zookeeper", _tp(tp))
        leadership = self.ctx.leadership.get(tp)                                              # 12
        if leadership is not None:
            self.controller.batch.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids,
                                                      {tp: (leadership, self.ctx.assignments[tp])})
        self.controller.deletion.resume({tp[0]})

    def _replicas_in_isr(self, tp: TopicPartition, replicas: tuple[int, ...]) -> bool:
        current = self.controller.read_leadership(tp)
        return current is not None and all(r in current.isr for r in replicas)

    def _move_leader_if_required(self, tp: TopicPartition, rar: tuple[int, ...]) -> None:
        current_leader = self.ctx.leadership[tp].leader
        old_and_new = self.ctx.assignments[tp]
        self.ctx.assignments[tp] = rar
        psm = self.controller.partition_state_machine
        if current_leader not in rar:
            self.log.info("Leader %d for partition %s being reassigned, is not in the new list of replicas %s. "
                          "Re-electing leader", current_leader, _tp(tp), _ids(rar))
            psm.handle_state_changes([tp], PartitionState.ONLINE, psm.reassigned_selector)
        elif current_leader in self.ctx.live_broker_ids:
            self.log.info("Leader %d for partition %s being reassigned, is already in the new list of replicas %s "
                          "and is alive", current_leader, _tp(tp), _ids(rar))
            self._update_leader_epoch_and_send(tp, old_and_new, rar)
        else:
            self.log.info("Leader %d for partition %s being reassigned, is already in the new list of replicas %s "
                          "but is dead", current_leader, _tp(tp), _ids(rar))
            psm.handle_state_changes([tp], PartitionState.ONLINE, psm.reassigned_selector)

    def _update_assigned_replicas(self, tp: TopicPartition, replicas: tuple[int, ...]) -> None:
        """Write the topic's assignment with this partition's new replica list (its other partitions as known)."""
        topic = tp[0]
        assignment = {p: self.ctx.assignments[(t, p)] for t, p in self.ctx.partitions_of(topic)}
        assignment[tp[1]] = tuple(replicas)
        if self.controller.writer.set(paths.topic_path(topic), TopicAssignment(assignment).encode(), -1) is None:
            raise ReassignmentError(f"Topic {topic} doesn't exist")
        self.ctx.assignments[tp] = tuple(replicas)
        self.log.info("Updated assigned replicas for partition %s being reassigned to %s", _tp(tp), _ids(replicas))

    def _update_leader_epoch_and_send(self, tp: TopicPartition, recipients, new_assigned: tuple[int, ...]) -> None:
        """updateLeaderEpochAndSendRequest: leader_epoch + 1 with leader and ISR unchanged, so the brokers
        accept the LeaderAndIsr that carries the new replica list."""
        for _ in range(_WRITE_ATTEMPTS):
            current = self.controller.read_leadership(tp)
            if current is None:
                break
            if current.controller_epoch > self.ctx.epoch:
                self.log.error("Aborting leader epoch update of partition %s: its state was written by a newer "
                               "controller epoch %d", _tp(tp), current.controller_epoch)
                return
            state = LeaderIsrAndZkVersion(current.leader, current.leader_epoch + 1, current.isr, self.ctx.epoch,
                                          current.zk_version)
            version = self.controller.writer.set(paths.partition_state_path(*tp), encode_leadership(state),
                                                 current.zk_version)
            if version is None:
                continue
            state = LeaderIsrAndZkVersion(state.leader, state.leader_epoch, state.isr, state.controller_epoch, version)
            self.ctx.leadership[tp] = state
            self.controller.batch.add_leader_and_isr(recipients, tp, state, new_assigned)
            self.log.info("Updated leader epoch for partition %s to %d", _tp(tp), state.leader_epoch)
            return
        self.log.error("Failed to send LeaderAndIsr request with new assigned replica list %s for partition %s being "
                       "reassigned", _ids(new_assigned), _tp(tp))

    def remove_partition(self, tp: TopicPartition) -> None:
        """removePartitionFromReassignedPartitions: stop watching its ISR, rewrite the node without it."""
        if tp in self.ctx.partitions_being_reassigned:
            self.controller.zk.unsubscribe(paths.partition_state_path(*tp), self.controller.on_isr_change)
        data, _ = self.controller.zk.get(paths.REASSIGN_PARTITIONS)
        try:
            remaining = [m for m in decode_reassignment(data) if (m.topic, m.partition) != tp] if data else []
        except ZnodeFormatError:
            remaining = []
        if remaining:
            self.controller.writer.upsert(paths.REASSIGN_PARTITIONS, encode_reassignment(remaining))
        else:
            self.controller.writer.delete(paths.REASSIGN_PARTITIONS)
            self.log.info("No more partitions need to be reassigned. Deleting zk path %s", paths.REASSIGN_PARTITIONS)
        self.ctx.partitions_being_reassigned.pop(tp, None)

    def stop_watching(self) -> None:
        for tp in self.ctx.partitions_being_reassigned:
            self.controller.zk.unsubscribe(paths.partition_state_path(*tp), self.controller.on_isr_change)


def _tps(partitions) -> str:
    return ", ".join(_tp(tp) for tp in sorted(partitions))

