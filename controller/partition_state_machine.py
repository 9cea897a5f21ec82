"""The partition state machine's driver: keeps each partition's state and carries out the decisions of
partition_state.py — `state` znodes created (NEW -> ONLINE) or written through the one leadership writer
(OFFLINE/ONLINE -> ONLINE), LeaderAndIsr queued in the event's request batch, the decisions' lines logged.

Partitions going ONLINE are decided together: their `state` znodes read at once and written in batches
(zk_writes.py), each decision still made on the zkVersion its write expects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kazoo.exceptions import NodeExistsError

from controller import partition_state as decide
from controller.channel import RequestBatch
from controller.context import ControllerContext
from controller.leader_selector import Election
from controller.leadership_writer import LeadershipWriter, encode_leadership, report_leadership
from controller.log_lines import STATE_CHANGE, emit, enabled
from controller.partition_state import PartitionState, Selector
from controller.zk_writes import FencedWriter
from zkbroker import timeline
from zkbroker.fault_points import FAULTS
from zkbroker.logconfig import per_partition_level
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient


class PartitionStateMachine:
    def __init__(self, ctx: ControllerContext, zk: ZkClient, writer: FencedWriter | None,
                 leaderships: LeadershipWriter | None, requests: Callable[[], RequestBatch],
                 unclean_election_enabled: Callable[[str], bool]) -> None:
        self.ctx = ctx
        self.zk = zk
        self.writer = writer
        self.leaderships = leaderships
        self.requests = requests
        self.unclean_election_enabled = unclean_election_enabled
        self.states: dict[TopicPartition, PartitionState] = {}
        self._topics_with_partitions_path: set[str] = set()

    def initialize(self) -> None:
        live = self.ctx.live_broker_ids
        for tp in self.ctx.assignments:
            self.states[tp] = decide.initial_state(self.ctx.leadership.get(tp), live)

    def trigger_online_partition_state_change(self, skip_topic: Callable[[str], bool]) -> None:
        """Try to bring every NEW or OFFLINE partition online (except those of topics `skip_topic` names: the
        topics being deleted)."""
        pending = [tp for tp, s in self.states.items()
                   if s in (PartitionState.NEW, PartitionState.OFFLINE) and not skip_topic(tp[0])]
        self.handle_state_changes(pending, PartitionState.ONLINE)

    def handle_state_changes(self, partitions: Iterable[TopicPartition], target: PartitionState,
                             selector: Selector = Selector.OFFLINE, force_unclean: bool = False) -> None:
        """Move the partitions to `target`; ONLINE from ONLINE/OFFLINE elects with `selector`. `force_unclean`: an
        offline election may pick a replica out of the ISR whatever the topic's config (KIP-460's unclean
        election on request)."""
        valid, refused = decide.valid_moves(self.ctx, self.states, partitions, target)
        emit(refused)
        if target is PartitionState.ONLINE:
            self._to_online(valid, selector, force_unclean)
            return
        for tp, _ in valid:
            if target is PartitionState.NON_EXISTENT:
                del self.states[tp]
                self._topics_with_partitions_path.discard(tp[0])
            else:
                self.states[tp] = target
        level = per_partition_level(len(valid))
        emit(decide.marked_lines(self.ctx, valid, target, level, enabled(STATE_CHANGE, level)))

    def remove(self, tp: TopicPartition) -> None:
        self.states.pop(tp, None)
        self._topics_with_partitions_path.discard(tp[0])

    # ---- transitions to ONLINE ----------------------------------------------------------------------------

    def _to_online(self, partitions: list[tuple[TopicPartition, PartitionState]], selector: Selector,
                   force_unclean: bool = False) -> None:
        elected = self._initialize_leaders([tp for tp, current in partitions if current is PartitionState.NEW])
        elected.update(self._elect_leaders([(tp, current) for tp, current in partitions
                                            if current is not PartitionState.NEW], selector, force_unclean))
        for tp in elected:
            self.states[tp] = PartitionState.ONLINE
        emit(decide.online_lines(self.ctx, partitions, elected,
                                 enabled(STATE_CHANGE, per_partition_level(len(elected)))))

    def _initialize_leaders(self, partitions: list[TopicPartition]) -> dict[TopicPartition, Election]:
        """NEW -> ONLINE: the `state` znodes are created (they must not exist), with their missing parents."""
        ctx = self.ctx
        decisions = {}
        for tp in partitions:
            decision = decide.new_leader(ctx, tp)
            emit(decision.lines)
            if decision.leadership is not None:
                decisions[tp] = decision
        created = self._create_states({tp: encode_leadership(d.leadership) for tp, d in decisions.items()})
        out = {}
        batch = self.requests()
        report = timeline.enabled()
        for tp, decision in decisions.items():
            if tp in created:
                ctx.leadership[tp] = decision.leadership
                if report:
                    report_leadership(f"controller:{ctx.controller_id}", tp, None, decision.leadership)
                batch.add_leader_and_isr(decision.election.recipients, tp, decision.leadership, ctx.assignments[tp])
                out[tp] = decision.election
        return out

    def _create_states(self, data: dict[TopicPartition, bytes]) -> set[TopicPartition]:
        """Create each partition's `state` znode with `partitions/<p>` (normally new) in one fenced operation
        group; `partitions` itself first, for topics that lack it (looked up once per topic). Returns the
        partitions whose node was created; an existing one is logged as 0.8.2 does."""
        if not data:
            return set()
        zk, writer = self.zk, self.writer
        topics = sorted({t for t, _ in data} - self._topics_with_partitions_path)
        found = zk.get_many([paths.partitions_path(t) for t in topics])
        missing = [t for t, (_, stat) in zip(topics, found) if stat is None]
        for result in writer.create_many([(paths.partitions_path(t), b"", ()) for t in missing]):
            if result is not None and not isinstance(result, NodeExistsError):
                raise result
        self._topics_with_partitions_path.update(topics)
        partitions = list(data)
        FAULTS.at_zookeeper_write("state_write", "before")
        results = writer.create_many([(paths.partition_state_path(*tp), data[tp], [paths.partition_path(*tp)])
                                      for tp in partitions])
        FAULTS.at_zookeeper_write("state_write", "after")
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
                emit((decide.state_exists_line(self.ctx, tp),))
            else:
                retry.append((tp, [] if found[len(clashed) + i][1] is not None else [paths.partition_path(*tp)]))
        results = writer.create_many([(paths.partition_state_path(*tp), data[tp], parents) for tp, parents in retry])
        for (tp, _), result in zip(retry, results):
            if result is None:
                created.add(tp)
            elif isinstance(result, NodeExistsError):
                emit((decide.state_exists_line(self.ctx, tp),))
            else:
                raise result
        return created

    def _elect_leaders(self, partitions: list[tuple[TopicPartition, PartitionState]],
                       selector: Selector, force_unclean: bool = False) -> dict[TopicPartition, Election]:
        """OFFLINE/ONLINE -> ONLINE, through the leadership writer (read, decide, conditional write, retry)."""
        ctx = self.ctx
        previous = dict(partitions)
        level = per_partition_level(len(partitions))
        unclean = {}
        if selector is Selector.OFFLINE:
            unclean = {t: force_unclean or self.unclean_election_enabled(t) for t in {tp[0] for tp in previous}}
        not_needed = 0

        def elect(tp: TopicPartition, current):
            nonlocal not_needed
            decision = decide.elect_leader(ctx, selector, tp, previous[tp], current, unclean.get(tp[0], False), level)
            not_needed += decision.not_needed
            return decision

        written = self.leaderships.update(previous, lambda tp: tp, elect,
                                          lambda tp, current: decide.newer_epoch_line(ctx, tp, current))
        out: dict[TopicPartition, Election] = {}
        batch = self.requests()
        for tp, (decision, state) in written.written.items():
            election = decision.election
            if election.unclean:
                emit((decide.unclean_line(ctx, tp, election),))
            ctx.leadership[tp] = state
            batch.add_leader_and_isr(election.recipients, tp, state, ctx.assignments[tp])
            out[tp] = election
        emit(decide.not_needed_lines(ctx, not_needed, level))
        return out

