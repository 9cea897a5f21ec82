"""The partition state machine (Kafka 0.8.2's PartitionStateMachine).

States: NEW (assigned, never led), ONLINE (has a live leader), OFFLINE (its leader died), NON_EXISTENT.
Rule: a transition is valid only from the previous states listed in VALID_PREVIOUS_STATES; anything else is
a controller bug and is refused loudly.

- NEW -> ONLINE: leader = the first live replica in AR, ISR = the live replicas, leader epoch 0; the `state`
  znode is *created* (it must not exist).
- OFFLINE/ONLINE -> ONLINE: a leader selector decides (leader_selector.py: offline by default; reassigned,
  preferred replica or controlled shutdown when the caller says so); the `state` znode is written
  conditionally on the zkVersion read, and the write is dropped if a newer controller epoch is found there
  (this controller went through a soft failure).
- -> OFFLINE and -> NON_EXISTENT: mark only.
Each leadership change queues LeaderAndIsr to the selector's recipients (and UpdateMetadata to all brokers)
in the controller's request batch.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kazoo.exceptions import NodeExistsError

from controller.context import LeaderIsrAndZkVersion, TopicPartition
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
from zkbroker.zk import paths
from zkbroker.zk.znodes import LeaderIsrState, ZnodeFormatError

if TYPE_CHECKING:
    from controller.controller import KafkaController

state_change_log = logging.getLogger("state.change.logger")


class PartitionState(enum.Enum):
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"


VALID_PREVIOUS_STATES = {
    PartitionState.NEW: {PartitionState.NON_EXISTENT},
    PartitionState.ONLINE: {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE},
    PartitionState.OFFLINE: {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE},
    PartitionState.NON_EXISTENT: {PartitionState.OFFLINE},
}

#: A leader selector as the state machine calls it: (partition, its current `state`) -> the election.
Selector = Callable[[TopicPartition, LeaderIsrAndZkVersion], Election]

_WRITE_ATTEMPTS = 3


class PartitionStateMachine:
    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller
        self.states: dict[TopicPartition, PartitionState] = {}
        self._topics_with_partitions_path: set[str] = set()

    @property
    def ctx(self):
        return self.controller.context

    def initialize(self) -> None:
        """At failover: no `state` node = NEW; a live leader = ONLINE; otherwise OFFLINE."""
        live = self.ctx.live_broker_ids
        for tp in self.ctx.assignments:
            leadership = self.ctx.leadership.get(tp)
            if leadership is None:
                self.states[tp] = PartitionState.NEW
            elif leadership.leader in live:
                self.states[tp] = PartitionState.ONLINE
            else:
                self.states[tp] = PartitionState.OFFLINE

    def trigger_online_partition_state_change(self) -> None:
        """Try to bring every NEW or OFFLINE partition online (except those of topics being deleted)."""
        deletion = self.controller.deletion
        pending = [tp for tp, s in self.states.items()
                   if s in (PartitionState.NEW, PartitionState.OFFLINE) and not deletion.is_queued(tp[0])]
        self.handle_state_changes(pending, PartitionState.ONLINE)

    def handle_state_changes(self, partitions: Iterable[TopicPartition], target: PartitionState,
                             selector: Selector | None = None) -> None:
        """Move the partitions to `target`; ONLINE from ONLINE/OFFLINE elects with `selector` (default: the
        offline selector)."""
        for tp in sorted(partitions):
            current = self.states.setdefault(tp, PartitionState.NON_EXISTENT)
            if current not in VALID_PREVIOUS_STATES[target]:
                state_change_log.error("Controller %d epoch %d initiated state change for partition [%s,%d] from "
                                       "%s to %s failed: not a valid previous state", self.controller.broker_id,
                                       self.ctx.epoch, *tp, current.value, target.value)
                continue
            if target is PartitionState.ONLINE:
                if not self._to_online(tp, current, selector or self.offline_selector):
                    continue
            if target is PartitionState.NON_EXISTENT:
                del self.states[tp]
                self._topics_with_partitions_path.discard(tp[0])
            else:
                self.states[tp] = target
            if target is not PartitionState.ONLINE:
                state_change_log.info("Controller %d epoch %d changed partition [%s,%d] state from %s to %s",
                                      self.controller.broker_id, self.ctx.epoch, *tp, current.value, target.value)

    def remove(self, tp: TopicPartition) -> None:
        self.states.pop(tp, None)
        self._topics_with_partitions_path.discard(tp[0])

    # ---- the selectors, fed from the context (the decisions themselves are pure) ----------------------------

    def offline_selector(self, tp: TopicPartition, current: LeaderIsrAndZkVersion) -> Election:
        return offline_partition_leader(self.ctx.assignments[tp], current.isr, current.leader_epoch,
                                        self.ctx.live_broker_ids, self.controller.unclean_election_enabled(tp[0]))

    def reassigned_selector(self, tp: TopicPartition, current: LeaderIsrAndZkVersion) -> Election:
        return reassigned_partition_leader(self.ctx.partitions_being_reassigned[tp], current.isr,
                                           current.leader_epoch, self.ctx.live_broker_ids)

    def preferred_selector(self, tp: TopicPartition, current: LeaderIsrAndZkVersion) -> Election:
        return preferred_replica_leader(self.ctx.assignments[tp], current.leader, current.isr, current.leader_epoch,
                                        self.ctx.live_broker_ids)

    def controlled_shutdown_selector(self, tp: TopicPartition, current: LeaderIsrAndZkVersion) -> Election:
        return controlled_shutdown_leader(self.ctx.assignments[tp], current.isr, current.leader_epoch,
                                          self.ctx.live_or_shutting_down_broker_ids,
                                          self.ctx.shutting_down_broker_ids)

    # ---- transitions to ONLINE ----------------------------------------------------------------------------

    def _to_online(self, tp: TopicPartition, current: PartitionState, selector: Selector) -> bool:
        try:
            if current is PartitionState.NEW:
                election = self._initialize_leader(tp)
            else:
                election = self._elect_leader(tp, selector)
        except LeaderElectionNotNeededError as e:
            state_change_log.info("Controller %d epoch %d left partition [%s,%d] as it is: %s",
                                  self.controller.broker_id, self.ctx.epoch, *tp, e)
            return False
        except NoReplicaOnlineError as e:
            state_change_log.error("Controller %d epoch %d initiated state change for partition [%s,%d] from %s to "
                                   "OnlinePartition failed: %s", self.controller.broker_id, self.ctx.epoch, *tp,
                                   current.value, e)
            return False
        if election is None:
            return False
        state_change_log.info("Controller %d epoch %d changed partition [%s,%d] from %s to OnlinePartition with "
                              "leader %d", self.controller.broker_id, self.ctx.epoch, *tp, current.value,
                              election.leader)
        return True

    def _initialize_leader(self, tp: TopicPartition) -> Election | None:
        replicas = self.ctx.assignments[tp]
        election = new_partition_leader(replicas, self.ctx.live_broker_ids)
        state = LeaderIsrAndZkVersion(election.leader, election.leader_epoch, election.isr, self.ctx.epoch, 0)
        try:
            self._create_state(tp, encode_leadership(state))
        except NodeExistsError:
            state_change_log.error("Controller %d epoch %d encountered error while changing partition [%s,%d]'s "
                                   "state from New to Online since LeaderAndIsr path already exists",
                                   self.controller.broker_id, self.ctx.epoch, *tp)
            return None
        self.ctx.leadership[tp] = state
        self.controller.batch.add_leader_and_isr(election.recipients, tp, state, replicas)
        return election

    def _create_state(self, tp: TopicPartition, data: bytes) -> None:
        """Create the `state` znode with its missing parents in one fenced transaction: `partitions/<p>` is
        normally new, `partitions` only for a topic's first partition (looked up once per topic)."""
        topic = tp[0]
        zk, writer = self.controller.zk, self.controller.writer
        parents = [paths.partition_path(*tp)]
        if topic not in self._topics_with_partitions_path and zk.get(paths.partitions_path(topic))[1] is None:
            parents.insert(0, paths.partitions_path(topic))
        try:
            writer.create(paths.partition_state_path(*tp), data, parents)
        except NodeExistsError:
            if zk.get(paths.partition_state_path(*tp))[1] is not None:
                raise
            # A parent is there already (left by an older controller): create what is missing.
            writer.create(paths.partition_state_path(*tp), data, [p for p in parents if zk.get(p)[1] is None])
        self._topics_with_partitions_path.add(topic)

    def _elect_leader(self, tp: TopicPartition, selector: Selector) -> Election | None:
        for _ in range(_WRITE_ATTEMPTS):
            current = self.controller.read_leadership(tp)
            if current is None:
                raise NoReplicaOnlineError("its state znode is missing or unreadable")
            if current.controller_epoch > self.ctx.epoch:
                state_change_log.error("Controller %d epoch %d aborted leader election for partition [%s,%d]: its "
                                       "state was written by a newer controller epoch %d", self.controller.broker_id,
                                       self.ctx.epoch, *tp, current.controller_epoch)
                return None
            election = selector(tp, current)
            state = LeaderIsrAndZkVersion(election.leader, election.leader_epoch, election.isr, self.ctx.epoch,
                                          current.zk_version)
            new_version = self.controller.writer.set(paths.partition_state_path(*tp), encode_leadership(state),
                                                     current.zk_version)
            if new_version is None:
                continue  # the leader changed the ISR meanwhile: read again and decide again
            if election.unclean:
                self.controller.log.warning(
                    "No broker in ISR is alive for [%s,%d]. Elect leader %d from live brokers %s. There's potential "
                    "data loss.", *tp, election.leader, ",".join(map(str, sorted(self.ctx.live_broker_ids))))
            state = LeaderIsrAndZkVersion(state.leader, state.leader_epoch, state.isr, state.controller_epoch,
                                          new_version)
            self.ctx.leadership[tp] = state
            self.controller.batch.add_leader_and_isr(election.recipients, tp, state, self.ctx.assignments[tp])
            return election
        return None


def encode_leadership(state: LeaderIsrAndZkVersion) -> bytes:
    return LeaderIsrState(state.leader, state.leader_epoch, state.controller_epoch, state.isr).encode()


def decode_leadership(data: bytes, zk_version: int, what: str) -> LeaderIsrAndZkVersion | None:
    try:
        s = LeaderIsrState.decode(data, what)
    except ZnodeFormatError as e:
        logging.getLogger("controller.KafkaController").error("Ignoring unreadable %s: %s", what, e)
        return None
    return LeaderIsrAndZkVersion(s.leader, s.leader_epoch, s.isr, s.controller_epoch, zk_version)
