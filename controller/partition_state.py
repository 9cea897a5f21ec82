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
from zkbroker.logconfig import per_partition_level
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
        offline selector). Partitions going ONLINE are decided together: their `state` znodes read at once and
        written in batches (zk_writes.py), each decision still made on the zkVersion its write expects."""
        valid: list[tuple[TopicPartition, PartitionState]] = []
        for tp in sorted(partitions):
            current = self.states.setdefault(tp, PartitionState.NON_EXISTENT)
            if current not in VALID_PREVIOUS_STATES[target]:
                state_change_log.error("Controller %d epoch %d initiated state change for partition [%s,%d] from "
                                       "%s to %s failed: not a valid previous state", self.controller.broker_id,
                                       self.ctx.epoch, *tp, current.value, target.value)
                continue
            valid.append((tp, current))
        if target is PartitionState.ONLINE:
            for tp in self._to_online(valid, selector or self.offline_selector):
                self.states[tp] = PartitionState.ONLINE
            return
        level = per_partition_level(len(valid))
        for tp, current in valid:
            if target is PartitionState.NON_EXISTENT:
                del self.states[tp]
                self._topics_with_partitions_path.discard(tp[0])
            else:
                self.states[tp] = target
            state_change_log.log(level, "Controller %d epoch %d changed partition [%s,%d] state from %s to %s",
                                 self.controller.broker_id, self.ctx.epoch, *tp, current.value, target.value)
        if level != logging.INFO:
            state_change_log.info("Controller %d epoch %d changed the state of %d partitions to %s",
                                  self.controller.broker_id, self.ctx.epoch, len(valid), target.value)

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

    def _to_online(self, partitions: list[tuple[TopicPartition, PartitionState]],
                   selector: Selector) -> list[TopicPartition]:
        """The partitions that went online (NEW: initial leader; else: elected by `selector`)."""
        elected = self._initialize_leaders([tp for tp, current in partitions if current is PartitionState.NEW])
        elected.update(self._elect_leaders([(tp, current) for tp, current in partitions
                                            if current is not PartitionState.NEW], selector))
        online = []
        level = per_partition_level(len(elected))
        for tp, current in partitions:
            election = elected.get(tp)
            if election is not None:
                state_change_log.log(level, "Controller %d epoch %d changed partition [%s,%d] from %s to "
                                     "OnlinePartition with leader %d", self.controller.broker_id, self.ctx.epoch, *tp,
                                     current.value, election.leader)
                online.append(tp)
        if level != logging.INFO:
            leaders: dict[int, int] = {}
            for election in elected.values():
                leaders[election.leader] = leaders.get(election.leader, 0) + 1
            state_change_log.info("Controller %d epoch %d changed %d partitions to OnlinePartition; new leaders: %s",
                                  self.controller.broker_id, self.ctx.epoch, len(online),
                                  ", ".join(f"broker {b}: {n}" for b, n in sorted(leaders.items())))
        return online

    def _failed(self, tp: TopicPartition, current: PartitionState, error: Exception) -> None:
        state_change_log.error("Controller %d epoch %d initiated state change for partition [%s,%d] from %s to "
                               "OnlinePartition failed: %s", self.controller.broker_id, self.ctx.epoch, *tp,
                               current.value, error)

    def _initialize_leaders(self, partitions: list[TopicPartition]) -> dict[TopicPartition, Election]:
        """NEW -> ONLINE: the `state` znodes are created (they must not exist), with their missing parents."""
        ctx = self.ctx
        elections: dict[TopicPartition, Election] = {}
        for tp in partitions:
            try:
                elections[tp] = new_partition_leader(ctx.assignments[tp], ctx.live_broker_ids)
            except NoReplicaOnlineError as e:
                self._failed(tp, PartitionState.NEW, e)
        states = {tp: LeaderIsrAndZkVersion(e.leader, e.leader_epoch, e.isr, ctx.epoch, 0)
                  for tp, e in elections.items()}
        created = self._create_states({tp: encode_leadership(state) for tp, state in states.items()})
        out = {}
        for tp, election in elections.items():
            if tp in created:
                ctx.leadership[tp] = states[tp]
                self.controller.batch.add_leader_and_isr(election.recipients, tp, states[tp], ctx.assignments[tp])
                out[tp] = election
        return out

    def _create_states(self, data: dict[TopicPartition, bytes]) -> set[TopicPartition]:
        """Create each partition's `state` znode with `partitions/<p>` (normally new) in one fenced operation
        group; `partitions` itself first, for topics that lack it (looked up once per topic). Returns the
        partitions whose node was created; an existing one is logged as 0.8.2 does."""
        if not data:
            return set()
        zk, writer = self.controller.zk, self.controller.writer
        topics = sorted({t for t, _ in data} - self._topics_with_partitions_path)
        found = zk.get_many([paths.partitions_path(t) for t in topics])
        missing = [t for t, (_, stat) in zip(topics, found) if stat is None]
        for result in writer.create_many([(paths.partitions_path(t), b"", ()) for t in missing]):
            if result is not None and not isinstance(result, NodeExistsError):
                raise result
        self._topics_with_partitions_path.update(topics)
        partitions = list(data)
        results = writer.create_many([(paths.partition_state_path(*tp), data[tp], [paths.partition_path(*tp)])
                                      for tp in partitions])
        created = {tp for tp, result in zip(partitions, results) if result is None}
        clashed = [tp for tp, result in zip(partitions, results) if isinstance(result, NodeExistsError)]
        for result in results:
            if result is not None and not isinstance(result, NodeExistsError):
                raise result
        if not clashed:
            return created
        # The state is there already (an error), or only its parent is (left by an older controller, which
        # created the parents and the state separately): create what is missing.
        found = zk.get_many([paths.partition_state_path(*tp) for tp in clashed]
                            + [paths.partition_path(*tp) for tp in clashed])
        retry = []
        for i, tp in enumerate(clashed):
            if found[i][1] is not None:
                self._state_exists(tp)
            else:
                retry.append((tp, [] if found[len(clashed) + i][1] is not None else [paths.partition_path(*tp)]))
        results = writer.create_many([(paths.partition_state_path(*tp), data[tp], parents) for tp, parents in retry])
        for (tp, _), result in zip(retry, results):
            if result is None:
                created.add(tp)
            elif isinstance(result, NodeExistsError):
                self._state_exists(tp)
            else:
                raise result
        return created

    def _state_exists(self, tp: TopicPartition) -> None:
        state_change_log.error("Controller %d epoch %d encountered error while changing partition [%s,%d]'s state "
                               "from New to Online since LeaderAndIsr path already exists", self.controller.broker_id,
                               self.ctx.epoch, *tp)

    def _elect_leaders(self, partitions: list[tuple[TopicPartition, PartitionState]],
                       selector: Selector) -> dict[TopicPartition, Election]:
        """OFFLINE/ONLINE -> ONLINE: read the `state`s, decide, write each conditionally on the zkVersion read;
        a partition whose write meets another version (its leader changed the ISR meanwhile) is read and decided
        again, up to _WRITE_ATTEMPTS times."""
        ctx = self.ctx
        previous = dict(partitions)
        remaining = [tp for tp, _ in partitions]
        out: dict[TopicPartition, Election] = {}
        level = per_partition_level(len(partitions))
        not_needed = 0
        for _ in range(_WRITE_ATTEMPTS):
            if not remaining:
                break
            decided = []
            for tp, current in self.controller.read_leaderships(remaining).items():
                try:
                    if current is None:
                        raise NoReplicaOnlineError("its state znode is missing or unreadable")
                    if current.controller_epoch > ctx.epoch:
                        state_change_log.error("Controller %d epoch %d aborted leader election for partition "
                                               "[%s,%d]: its state was written by a newer controller epoch %d",
                                               self.controller.broker_id, ctx.epoch, *tp, current.controller_epoch)
                        continue
                    election = selector(tp, current)
                except LeaderElectionNotNeededError as e:
                    state_change_log.log(level, "Controller %d epoch %d left partition [%s,%d] as it is: %s",
                                         self.controller.broker_id, ctx.epoch, *tp, e)
                    not_needed += 1
                    continue
                except NoReplicaOnlineError as e:
                    self._failed(tp, previous[tp], e)
                    continue
                decided.append((tp, election, LeaderIsrAndZkVersion(election.leader, election.leader_epoch,
                                                                    election.isr, ctx.epoch, current.zk_version)))
            versions = self.controller.writer.set_many([
                (paths.partition_state_path(*tp), encode_leadership(state), state.zk_version)
                for tp, _, state in decided])
            remaining = []
            for (tp, election, state), version in zip(decided, versions):
                if version is None:
                    remaining.append(tp)
                    continue
                if election.unclean:
                    self.controller.log.warning(
                        "No broker in ISR is alive for [%s,%d]. Elect leader %d from live brokers %s. There's "
                        "potential data loss.", *tp, election.leader, ",".join(map(str, sorted(ctx.live_broker_ids))))
                state = LeaderIsrAndZkVersion(state.leader, state.leader_epoch, state.isr, state.controller_epoch,
                                              version)
                ctx.leadership[tp] = state
                self.controller.batch.add_leader_and_isr(election.recipients, tp, state, ctx.assignments[tp])
                out[tp] = election
        if not_needed and level != logging.INFO:
            state_change_log.info("Controller %d epoch %d left %d partitions as they are: their preferred replica "
                                  "leads already", self.controller.broker_id, ctx.epoch, not_needed)
        return out


def encode_leadership(state: LeaderIsrAndZkVersion) -> bytes:
    return LeaderIsrState(state.leader, state.leader_epoch, state.controller_epoch, state.isr).encode()


def decode_leadership(data: bytes, zk_version: int, what: str) -> LeaderIsrAndZkVersion | None:
    try:
        s = LeaderIsrState.decode(data, what)
    except ZnodeFormatError as e:
        logging.getLogger("controller.KafkaController").error("Ignoring unreadable %s: %s", what, e)
        return None
    return LeaderIsrAndZkVersion(s.leader, s.leader_epoch, s.isr, s.controller_epoch, zk_version)
