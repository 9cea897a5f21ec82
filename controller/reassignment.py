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

Kafka 2.4's reassignments through the Admin API (KIP-455: AlterPartitionReassignments, ListPartitionReassignments)
take the same twelve steps. They are not written to `/admin/reassign_partitions`: while one runs, the topic's
znode takes version 2 with the partition's `adding_replicas` (RAR - OAR) and `removing_replicas` (OAR - RAR), which
is also what a new controller resumes them from. Cancelling one (replicas null) reassigns the partition back to
its OAR: the adding replicas are stopped and deleted, the leader moves back if it was one of them. A partition
the ZooKeeper tool is moving, or one the API is already moving, is refused with REASSIGNMENT_IN_PROGRESS (Kafka
2.4 would retarget it).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

from controller.channel import RequestBatch
from controller.context import ControllerContext, LeaderIsrAndZkVersion
from controller.deletion import TopicDeletionManager
from controller.leadership_writer import LeadershipWriter
from controller.log_lines import LogLine, controller_line, emit
from controller.partition_state import PartitionState, Selector
from controller.partition_state_machine import PartitionStateMachine
from controller.replica_state import ReplicaState
from controller.replica_state_machine import ReplicaStateMachine
from controller.zk_writes import FencedWriter
from zkbroker.protocol.errors import ErrorCode
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import TopicAssignment, ZnodeFormatError, decode_reassignment, encode_reassignment

#: The data watch on the `state` of a partition being reassigned: (path, data, stat).
IsrListener = Callable[[str, object, object], None]


class ReassignmentError(Exception):
    """This partition cannot be reassigned; the message says why."""


def _tp(tp: TopicPartition) -> str:
    return f"[{tp[0]},{tp[1]}]"


def _ids(ids) -> str:
    return ",".join(map(str, ids))


# ---- the decisions (pure) -----------------------------------------------------------------------------------


def refusal(ctx: ControllerContext, tp: TopicPartition, rar: tuple[int, ...]) -> str | None:
    """Why the partition cannot be moved to `rar` (initiateReassignReplicasForTopicPartition), or None."""
    assigned = ctx.assignments.get(tp)
    if assigned is None:
        return f"Attempt to reassign partition {_tp(tp)} that doesn't exist"
    if not rar or len(set(rar)) != len(rar):
        return f"The new replicas [{_ids(rar)}] for partition {_tp(tp)} are empty or repeat a broker"
    if assigned == rar:
        return (f"Partition {_tp(tp)} to be reassigned is already assigned to replicas {_ids(rar)}. Ignoring request "
                "for partition reassignment")
    alive = [r for r in rar if r in ctx.live_broker_ids]
    if len(alive) != len(rar):
        return (f"Only {_ids(alive) or 'none'} replicas out of the new set of replicas {_ids(rar)} for partition "
                f"{_tp(tp)} to be reassigned are alive. Failing partition reassignment")
    return None


class LeaderMove(enum.Enum):
    """Step 7: what the partition's leadership needs once RAR caught up."""

    ELECT = "elect"  # the leader is not in RAR, or is dead: the reassigned selector elects one from RAR
    BUMP_EPOCH = "bump epoch"  # the leader stays: leader_epoch + 1 so the brokers take the new AR


def leader_move(ctx: ControllerContext, tp: TopicPartition, rar: tuple[int, ...]) -> tuple[LeaderMove, LogLine]:
    leader = ctx.leadership[tp].leader
    if leader not in rar:
        return LeaderMove.ELECT, controller_line(
            ctx.controller_id, logging.INFO, "Leader %d for partition %s being reassigned, is not in the new list of "
            "replicas %s. Re-electing leader", leader, _tp(tp), _ids(rar))
    if leader in ctx.live_broker_ids:
        return LeaderMove.BUMP_EPOCH, controller_line(
            ctx.controller_id, logging.INFO, "Leader %d for partition %s being reassigned, is already in the new list "
            "of replicas %s and is alive", leader, _tp(tp), _ids(rar))
    return LeaderMove.ELECT, controller_line(
        ctx.controller_id, logging.INFO, "Leader %d for partition %s being reassigned, is already in the new list of "
        "replicas %s but is dead", leader, _tp(tp), _ids(rar))


@dataclass(frozen=True, slots=True)
class EpochBump:
    """updateLeaderEpochAndSendRequest's decision: leader and ISR unchanged, leader_epoch + 1."""

    leadership: LeaderIsrAndZkVersion
    lines: tuple[LogLine, ...] = ()


def bump_leader_epoch(ctx: ControllerContext, current: LeaderIsrAndZkVersion | None) -> EpochBump | None:
    if current is None:
        return None
    return EpochBump(LeaderIsrAndZkVersion(current.leader, current.leader_epoch + 1, current.isr, ctx.epoch,
                                           current.zk_version))


def epoch_bump_newer_epoch_line(ctx: ControllerContext, tp: TopicPartition,
                                current: LeaderIsrAndZkVersion) -> LogLine:
    return controller_line(ctx.controller_id, logging.ERROR, "Aborting leader epoch update of partition %s: its state "
                           "was written by a newer controller epoch %d", _tp(tp), current.controller_epoch)


# ---- the driver ---------------------------------------------------------------------------------------------


class PartitionReassigner:
    def __init__(self, ctx: ControllerContext, zk: ZkClient, writer: FencedWriter | None,
                 leaderships: LeadershipWriter | None, partitions: PartitionStateMachine,
                 replicas: ReplicaStateMachine, deletion: TopicDeletionManager, requests: Callable[[], RequestBatch],
                 on_isr_change: IsrListener, log: logging.LoggerAdapter) -> None:
        self.ctx = ctx
        self.zk = zk
        self.writer = writer
        self.leaderships = leaderships
        self.partitions = partitions
        self.replicas = replicas
        self.deletion = deletion
        self.requests = requests
        self.on_isr_change = on_isr_change
        self.log = log

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
            self.writer.delete(paths.REASSIGN_PARTITIONS)
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
            if self.deletion.is_queued(tp[0]):
                self.log.error("Skipping reassignment of partition %s for topic %s since it is currently being "
                               "deleted", _tp(tp), tp[0])
                self.remove_partition(tp)
                continue
            self.initiate(tp, rar)

    def initiate(self, tp: TopicPartition, rar: tuple[int, ...], api: bool = False) -> None:
        """initiateReassignReplicasForTopicPartition (`api`: asked through AlterPartitionReassignments)."""
        error = refusal(self.ctx, tp, rar)
        if error is not None:
            self.log.error("Error completing reassignment of partition %s: %s", _tp(tp), error)
            self.remove_partition(tp)
            return
        self.log.info("Handling reassignment of partition %s to new replicas %s", _tp(tp), _ids(rar))
        self.zk.subscribe_data_changes(paths.partition_state_path(*tp), self.on_isr_change)
        self.ctx.partitions_being_reassigned[tp] = rar
        self.ctx.reassignment_origins.setdefault(tp, self.ctx.assignments[tp])
        if api:
            self.ctx.api_reassignments.add(tp)
        self.deletion.mark_ineligible({tp[0]})
        self.reassign(tp)

    def on_isr_changed(self, tp: TopicPartition) -> None:
        """ReassignedPartitionsIsrChangeListener: resume once every reassigned replica is in the ISR."""
        rar = self.ctx.partitions_being_reassigned.get(tp)
        if rar is None:
            return
        current = self.leaderships.read([tp])[tp]
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
        rsm = self.replicas
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
        api = tp in self.ctx.api_reassignments
        self.ctx.api_reassignments.discard(tp)  # the node written next no longer lists it as moving
        self._update_assigned_replicas(tp, rar)                                               # 10
        self.remove_partition(tp, api)                                                        # 11
        self.log.info("Removed partition %s from the list of reassigned partitions in zookeeper", _tp(tp))
        leadership = self.ctx.leadership.get(tp)                                              # 12
        if leadership is not None:
            self.requests().add_update_metadata(self.ctx.live_or_shutting_down_broker_ids,
                                                      {tp: (leadership, self.ctx.assignments[tp])})
        self.deletion.resume({tp[0]})

    def _replicas_in_isr(self, tp: TopicPartition, replicas: tuple[int, ...]) -> bool:
        current = self.leaderships.read([tp])[tp]
        return current is not None and all(r in current.isr for r in replicas)

    def _move_leader_if_required(self, tp: TopicPartition, rar: tuple[int, ...]) -> None:
        move, line = leader_move(self.ctx, tp, rar)
        old_and_new = self.ctx.assignments[tp]
        self.ctx.assignments[tp] = rar
        emit((line,))
        if move is LeaderMove.ELECT:
            self.partitions.handle_state_changes([tp], PartitionState.ONLINE, Selector.REASSIGNED)
        else:
            self._update_leader_epoch_and_send(tp, old_and_new, rar)

    def _update_assigned_replicas(self, tp: TopicPartition, replicas: tuple[int, ...]) -> None:
        """Write the topic's assignment with this partition's new replica list (its other partitions as known)."""
        topic = tp[0]
        assignment = {p: self.ctx.assignments[(t, p)] for t, p in self.ctx.partitions_of(topic)}
        assignment[tp[1]] = tuple(replicas)
        adding, removing = {}, {}
        for moving in self.ctx.api_reassignments:  # version 2 while the API moves some of its partitions
            if moving[0] == topic:
                oar, rar = self.ctx.reassignment_origins[moving], self.ctx.partitions_being_reassigned[moving]
                adding[moving[1]] = tuple(r for r in rar if r not in oar)
                removing[moving[1]] = tuple(r for r in oar if r not in rar)
        znode = TopicAssignment(assignment, {p: r for p, r in adding.items() if r},
                                {p: r for p, r in removing.items() if r})
        if self.writer.set(paths.topic_path(topic), znode.encode(), -1) is None:
            raise ReassignmentError(f"Topic {topic} doesn't exist")
        self.ctx.assignments[tp] = tuple(replicas)
        self.log.info("Updated assigned replicas for partition %s being reassigned to %s", _tp(tp), _ids(replicas))

    def _update_leader_epoch_and_send(self, tp: TopicPartition, recipients, new_assigned: tuple[int, ...]) -> None:
        """updateLeaderEpochAndSendRequest: leader_epoch + 1 with leader and ISR unchanged, so the brokers
        accept the LeaderAndIsr that carries the new replica list."""
        written = self.leaderships.update([tp], lambda key: key,
                                          lambda key, current: bump_leader_epoch(self.ctx, current),
                                          lambda key, current: epoch_bump_newer_epoch_line(self.ctx, key, current))
        if tp in written.newer_epoch:
            return
        if tp not in written.written:
            self.log.error("Failed to send LeaderAndIsr request with new assigned replica list %s for partition %s "
                           "being reassigned", _ids(new_assigned), _tp(tp))
            return
        state = written.written[tp][1]
        self.ctx.leadership[tp] = state
        self.requests().add_leader_and_isr(recipients, tp, state, new_assigned)
        self.log.info("Updated leader epoch for partition %s to %d", _tp(tp), state.leader_epoch)

    def remove_partition(self, tp: TopicPartition, api: bool | None = None) -> None:
        """removePartitionFromReassignedPartitions: stop watching its ISR, rewrite the node without it (an API
        reassignment has no entry in the node)."""
        if tp in self.ctx.partitions_being_reassigned:
            self.zk.unsubscribe(paths.partition_state_path(*tp), self.on_isr_change)
        self.ctx.reassignment_origins.pop(tp, None)
        if api is None:
            api = tp in self.ctx.api_reassignments
        self.ctx.api_reassignments.discard(tp)
        if api:
            self.ctx.partitions_being_reassigned.pop(tp, None)
            return
        data, _ = self.zk.get(paths.REASSIGN_PARTITIONS)
        try:
            remaining = [m for m in decode_reassignment(data) if (m.topic, m.partition) != tp] if data else []
        except ZnodeFormatError:
            remaining = []
        if remaining:
            self.writer.upsert(paths.REASSIGN_PARTITIONS, encode_reassignment(remaining))
        else:
            self.writer.delete(paths.REASSIGN_PARTITIONS)
            self.log.info("No more partitions need to be reassigned. Deleting zk path %s", paths.REASSIGN_PARTITIONS)
        self.ctx.partitions_being_reassigned.pop(tp, None)

    # ---- the Admin API (KIP-455) --------------------------------------------------------------------------------

    def initialize_api(self, topics: dict[str, TopicAssignment]) -> None:
        """At failover: the API reassignments a previous controller left running, from the topics' version 2
        znodes (OAR = the replicas less those being added; RAR = less those being removed)."""
        for topic, znode in sorted(topics.items()):
            for partition in sorted(set(znode.adding) | set(znode.removing)):
                tp = (topic, partition)
                full = znode.partitions.get(partition)
                if full is None or tp in self.ctx.partitions_being_reassigned:
                    continue
                adding, removing = znode.adding.get(partition, ()), znode.removing.get(partition, ())
                self.ctx.partitions_being_reassigned[tp] = tuple(r for r in full if r not in removing)
                self.ctx.reassignment_origins[tp] = tuple(r for r in full if r not in adding)
                self.ctx.api_reassignments.add(tp)
                self.zk.subscribe_data_changes(paths.partition_state_path(*tp), self.on_isr_change)
                self.log.info("Resuming the Admin API's reassignment of partition %s to %s", _tp(tp),
                              _ids(self.ctx.partitions_being_reassigned[tp]))

    def alter(self, moves: dict[TopicPartition, tuple[int, ...] | None]) -> dict[TopicPartition,
                                                                                 tuple[int, str | None]]:
        """AlterPartitionReassignments: start each move (or cancel it, for None); each partition's error code
        and message, as Kafka's controller answers them (the move itself completes later)."""
        out: dict[TopicPartition, tuple[int, str | None]] = {}
        for tp, target in moves.items():
            being = tp in self.ctx.partitions_being_reassigned
            if tp not in self.ctx.assignments or self.deletion.is_queued(tp[0]):
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif target is None:
                if tp not in self.ctx.api_reassignments:
                    out[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                               f"The reassignment of partition {tp[0]}-{tp[1]} was started through ZooKeeper"
                               if being else f"No reassignment is in progress for partition {tp[0]}-{tp[1]}")
                else:
                    origin = self.ctx.reassignment_origins[tp]
                    self.log.info("Cancelling reassignment of partition %s: back to replicas %s", _tp(tp),
                                  _ids(origin))
                    self.ctx.partitions_being_reassigned[tp] = origin
                    out[tp] = (ErrorCode.NONE, None)
                    self.reassign(tp)
            elif being:
                out[tp] = (ErrorCode.REASSIGNMENT_IN_PROGRESS,
                           f"A reassignment of partition {tp[0]}-{tp[1]} is already in progress")
            elif not target or len(set(target)) != len(target):
                out[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The proposed assignment [{_ids(target)}] is empty or repeats a broker")
            elif any(r not in self.ctx.live_broker_ids for r in target):
                out[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"Replica assignment has brokers that are not alive. Replica list: {_ids(target)}, live "
                           f"broker list: {_ids(sorted(self.ctx.live_broker_ids))}")
            else:
                out[tp] = (ErrorCode.NONE, None)
                if self.ctx.assignments[tp] != target:  # the same replicas: nothing to move, as Kafka answers
                    self.initiate(tp, target, api=True)
        return out

    def listing(self, partitions: list[TopicPartition] | None) -> dict[TopicPartition, tuple[tuple[int, ...], ...]]:
        """ListPartitionReassignments: (replicas, adding, removing) of each partition being reassigned, however
        it was asked for (None: all of them)."""
        wanted = self.ctx.partitions_being_reassigned if partitions is None else partitions
        out = {}
        for tp in sorted(wanted):
            rar = self.ctx.partitions_being_reassigned.get(tp)
            if rar is None:
                continue
            oar = self.ctx.reassignment_origins.get(tp, self.ctx.assignments.get(tp, ()))
            out[tp] = (self.ctx.assignments.get(tp, ()), tuple(r for r in rar if r not in oar),
                       tuple(r for r in oar if r not in rar))
        return out

    def stop_watching(self) -> None:
        for tp in self.ctx.partitions_being_reassigned:
            self.zk.unsubscribe(paths.partition_state_path(*tp), self.on_isr_change)


def _tps(partitions) -> str:
    return ", ".join(_tp(tp) for tp in sorted(partitions))

