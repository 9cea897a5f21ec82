"""KafkaController: the controller of a zkbroker cluster, driven by one event queue.

Kafka 0.8's controller mixed ZooKeeper callbacks, a lock and sender threads, and raced (fixed in Kafka
0.11 by a single event queue, KAFKA-5028). Here ZooKeeper callbacks (and the answers of the brokers, and
the ControlledShutdown requests) only enqueue events; one thread takes them in order and is the only one
that reads or changes the ControllerContext. Each event's decisions collect their requests in one batch,
sent to the brokers when the event is done, LeaderAndIsr first, then UpdateMetadata, then StopReplica.

Becoming controller follows Kafka 0.8.2's onControllerFailover order: increment the epoch (conditionally),
register the watches, load the context (with pending preferred elections, reassignments and deletions),
start the channel manager, replicas and partitions online, resume reassignments and preferred elections,
UpdateMetadata to every broker, start the leader-rebalance timer and the topic deletion.

What it reacts to, as 0.8.2's listeners:
- `/brokers/ids` children: onBrokerStartup / onBrokerFailure;
- `/brokers/topics` children: onNewTopicCreation; each `/brokers/topics/<t>`'s data: new partitions
  (AddPartitionsListener);
- `/admin/delete_topics` children (only with `delete.topic.enable`): deletion.py;
- `/admin/reassign_partitions` data, and the `state` of partitions being reassigned: reassignment.py;
- `/admin/preferred_replica_election` data, and a timer for `auto.leader.rebalance.enable`;
- ControlledShutdown requests (shutdownBroker);
- `/config/changes` children: reload the per-topic overrides the controller uses
  (`unclean.leader.election.enable`; 0.8.2 read `/config/topics/<t>` at each election instead).

Beyond 0.8.2: every controller write is fenced by the controller epoch (zk_writes.py), and a controller
that may have been frozen (SIGSTOP, a long pause) re-checks its ZooKeeper session before acting on
anything, so a resumed zombie learns it lost before it can act.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from controller.channel import ControllerChannelManager, EventTiming, RequestBatch
from controller.context import ControllerContext
from controller.deletion import TopicDeletionManager
from controller.election import ControllerMovedError, ZookeeperLeaderElector
from controller.events import (
    AlterReassignments,
    AutoLeaderRebalance,
    BrokerChange,
    ControlledShutdown,
    ControllerEvent,
    DeleteTopicsChange,
    Elect,
    ListReassignments,
    PreferredReplicaElectionChange,
    ReassignedPartitionIsrChange,
    ReassignPartitionsChange,
    SessionExpired,
    Shutdown,
    StopReplicaAnswer,
    TopicChange,
    TopicConfigChange,
    TopicDataChange,
    UncleanElection,
)
from controller.leader_selector import partitions_to_rebalance
from controller.leadership_writer import LeadershipWriter, read_leaderships
from controller.partition_state import PartitionState, Selector
from controller.partition_state_machine import PartitionStateMachine
from controller.reassignment import PartitionReassigner
from controller.replica_state import ReplicaState
from controller.replica_state_machine import ReplicaStateMachine
from controller.zk_writes import FencedWriter
from zkbroker import timeline
from zkbroker.client.security import inter_broker_security
from zkbroker.config import KafkaConfig
from zkbroker.fault_points import FAULTS
from zkbroker.gc_pause import gc_paused
from zkbroker.log.log_config import topic_log_config
from zkbroker.logconfig import per_partition_level
from zkbroker.protocol.errors import ErrorCode
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk import paths
from zkbroker.zk.broker_ids import read_broker_registrations
from zkbroker.zk.client import SessionListener, ZkClient
from zkbroker.zk.znodes import (
    BrokerRegistration,
    TopicAssignment,
    ZnodeFormatError,
    decode_config_change,
    decode_preferred_election,
)

# 0.8.2's first leader-imbalance check comes 5 s after failover, then every interval.
REBALANCE_FIRST_CHECK_S = 5.0


class _Prefixed(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"{self.extra['prefix']}{msg}", kwargs


def _ids(ids) -> str:
    return ",".join(str(i) for i in sorted(ids))


def _tps(partitions) -> str:
    return ", ".join(f"[{t},{p}]" for t, p in sorted(partitions))


class _Ticker(threading.Thread):
    """Calls `fire` after `first_s`, then every `every_s`, until stopped (0.8.2's partition-rebalance thread)."""

    def __init__(self, name: str, first_s: float, every_s: float, fire: Callable[[], None]) -> None:
        super().__init__(name=name, daemon=True)
        self.first_s, self.every_s, self.fire = first_s, every_s, fire
        self._stopped = threading.Event()

    def run(self) -> None:
        delay = self.first_s
        while not self._stopped.wait(delay):
            self.fire()
            delay = self.every_s

    def stop(self) -> None:
        self._stopped.set()


class KafkaController(SessionListener):
    def __init__(self, zk: ZkClient, config: KafkaConfig) -> None:
        self.zk = zk
        self.config = config
        self.broker_id = config.broker_id
        self.log = _Prefixed(logging.getLogger("controller.KafkaController"),
                             {"prefix": f"[Controller {self.broker_id}]: "})
        self.elector = ZookeeperLeaderElector(zk, self.broker_id)
        self.timeline_source = f"controller:{self.broker_id}"
        self.channel: ControllerChannelManager | None = None
        self.batch: RequestBatch | None = None
        self.writer: FencedWriter | None = None
        self._take_context(ControllerContext(controller_id=self.broker_id))
        self.active = False
        self._active_session: int | None = None
        self._rebalance_timer: _Ticker | None = None
        self._closing = threading.Event()  # set by shutdown: stop holding for an unreachable ZooKeeper
        self._last_config_change = -1
        self._moving_topics: dict[str, TopicAssignment] = {}  # read at failover: API reassignments to resume
        self._queue: queue.Queue[ControllerEvent] = queue.Queue()
        self._held_event: ControllerEvent | None = None  # taken from the queue, waiting out a lab hold
        self._thread = threading.Thread(target=self._run, name=f"controller-{self.broker_id}", daemon=True)
        self.state_change_log = logging.getLogger("state.change.logger")
        self._handlers: dict[type, Callable[[Any], Any]] = {
            BrokerChange: self._on_broker_change,
            TopicChange: self._on_topic_change,
            TopicDataChange: self._on_topic_data_change,
            DeleteTopicsChange: self._on_delete_topics_change,
            ReassignPartitionsChange: self._on_reassign_partitions_change,
            ReassignedPartitionIsrChange: lambda e: self.reassigner.on_isr_changed(e.tp),
            PreferredReplicaElectionChange: self._on_preferred_replica_election_change,
            TopicConfigChange: self._on_topic_config_change,
            AutoLeaderRebalance: self._check_and_trigger_partition_rebalance,
            StopReplicaAnswer: self._on_stop_replica_answer,
            ControlledShutdown: self._on_controlled_shutdown,
            UncleanElection: self._on_unclean_election,
            AlterReassignments: lambda e: e.reply(self.reassigner.alter(e.moves)),
            ListReassignments: lambda e: e.reply(self.reassigner.listing(e.partitions)),
        }

    def _take_context(self, context: ControllerContext) -> None:
        """A new context (at failover, at resignation) and the state machines, reassigner and deletion manager
        that work on it, each given what it needs: the context, the fenced writer and the event's batch."""
        self.context = context
        leaderships = None
        if self.writer is not None:
            leaderships = LeadershipWriter(functools.partial(read_leaderships, self.zk), self.writer.set_many,
                                           context.epoch, self.timeline_source)

        def requests() -> RequestBatch:
            return self.batch

        self.partition_state_machine = PartitionStateMachine(context, self.zk, self.writer, leaderships, requests,
                                                             self.unclean_election_enabled)
        self.replica_state_machine = ReplicaStateMachine(context, leaderships, requests,
                                                         self.unclean_election_enabled,
                                                         lambda tp: self.deletion.is_partition_to_be_deleted(tp))
        self.deletion = TopicDeletionManager(context, self.partition_state_machine, self.replica_state_machine,
                                             self.writer, requests, self.stop_watching_topic,
                                             self.stop_replica_callback)
        self.reassigner = PartitionReassigner(context, self.zk, self.writer, leaderships,
                                              self.partition_state_machine, self.replica_state_machine,
                                              self.deletion, requests, self.on_isr_change, self.log)

    # ---- lifecycle (any thread) ----------------------------------------------------------------------------

    def startup(self) -> None:
        self.log.info("Controller starting up")
        self.zk.subscribe_state_changes(self)
        self.zk.subscribe_data_changes(paths.CONTROLLER, self._on_controller_node)
        self._thread.start()
        self._queue.put(Elect())

    def shutdown(self, timeout_s: float = 10.0) -> None:
        if not self._thread.is_alive():
            return
        self._closing.set()
        self._queue.put(Shutdown())
        self._thread.join(timeout_s)
        self.log.info("Controller shutdown complete")

    def is_active(self) -> bool:
        return self.active

    def lab_state(self) -> dict | None:
        """What this controller knows, for the lab's `state` query (zkbroker/control_protocol.py); None when it is not
        the controller. Called from another thread: each collection is copied in one C-level step (atomic under
        the GIL), so a copy is never torn, though two copies may straddle one event."""
        ctx = self.context
        if not self.active:
            return None
        leadership = dict(ctx.leadership)
        assignments = dict(ctx.assignments)
        return {"epoch": ctx.epoch, "epoch_zk_version": ctx.epoch_zk_version,
                "live_brokers": sorted(list(ctx.live_brokers)),
                "shutting_down": sorted(set(ctx.shutting_down_broker_ids)),
                "queue_held": FAULTS.controller_held,
                "queued_events": self._queue.qsize() + (self._held_event is not None),
                "partitions": [{"topic": tp[0], "partition": tp[1], "leader": s.leader, "leader_epoch": s.leader_epoch,
                                "isr": list(s.isr), "replicas": list(assignments.get(tp, ())),
                                "zk_version": s.zk_version, "controller_epoch": s.controller_epoch}
                               for tp, s in sorted(leadership.items())]}

    def shutdown_broker(self, broker_id: int, reply: Callable[[int, list[TopicPartition]], None]) -> None:
        """A ControlledShutdown request (from the network thread): `reply(error code, partitions the broker
        still leads)` is called later, on the event thread, once leadership has been moved."""
        self._queue.put(ControlledShutdown(broker_id, reply))

    def elect_unclean(self, partitions: Iterable[TopicPartition],
                      reply: Callable[[dict[TopicPartition, int]], None]) -> None:
        """ElectLeaders UNCLEAN (from the network thread): `reply({partition: error code})` is called later, on
        the event thread."""
        self._queue.put(UncleanElection(tuple(partitions), reply))

    def alter_reassignments(self, moves: dict[TopicPartition, tuple[int, ...] | None],
                            reply: Callable[[dict], None]) -> None:
        """AlterPartitionReassignments (from the network thread); `reply` comes on the event thread."""
        self._queue.put(AlterReassignments(moves, reply))

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None, reply: Callable[[dict], None]) -> None:
        """ListPartitionReassignments (from the network thread); `reply` comes on the event thread."""
        self._queue.put(ListReassignments(None if partitions is None else tuple(partitions), reply))

    # ---- ZooKeeper callbacks (ZkClient event thread) and broker answers (sender threads): enqueue only ------

    def _on_controller_node(self, path: str, data, stat) -> None:
        self._queue.put(Elect())

    def _on_broker_ids(self, path: str, children) -> None:
        self._queue.put(BrokerChange())

    def _on_topics(self, path: str, children) -> None:
        self._queue.put(TopicChange())

    def _on_topic_data(self, path: str, data, stat) -> None:
        self._queue.put(TopicDataChange(path.rsplit("/", 1)[1]))

    def _on_delete_topics(self, path: str, children) -> None:
        self._queue.put(DeleteTopicsChange())

    def _on_reassign_partitions(self, path: str, data, stat) -> None:
        self._queue.put(ReassignPartitionsChange())

    def on_isr_change(self, path: str, data, stat) -> None:
        parts = path.split("/")  # /brokers/topics/<t>/partitions/<p>/state
        self._queue.put(ReassignedPartitionIsrChange((parts[-4], int(parts[-2]))))

    def _on_preferred_election(self, path: str, data, stat) -> None:
        self._queue.put(PreferredReplicaElectionChange())

    def _on_config_changes(self, path: str, children) -> None:
        self._queue.put(TopicConfigChange())

    def on_stop_replica_answer(self, epoch: int, broker_id: int, partitions: list[TopicPartition],
                               response: Any) -> None:
        self._queue.put(StopReplicaAnswer(epoch, broker_id, tuple(partitions), response))

    def handle_session_expired(self) -> None:
        self._queue.put(SessionExpired())

    def handle_new_session(self) -> None:
        self._queue.put(Elect())

    # ---- the event thread ---------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if not isinstance(event, Shutdown) and FAULTS.controller_held:
                # The lab's fault point hold_controller_queue: this event (and those behind it) wait.
                self.log.info("Lab fault point: the event queue is held; %s waits", type(event).__name__)
                self._held_event = event
                FAULTS.wait_while_controller_held(self._closing)
                self._held_event = None
            if isinstance(event, Shutdown):
                self._on_controller_resignation()
                self._refuse_pending_shutdowns()
                return
            try:
                self._process(event)
            except ControllerMovedError as e:
                self.log.info("%s", e)
                if self.active:  # (_still_controller resigns, and elects again, by itself)
                    self.log.info("Broker %d resigns as the controller and competes again", self.broker_id)
                    self._on_controller_resignation()
                    self._queue.put(Elect())
            except Exception:
                self.log.exception("Error processing %s", type(event).__name__)
            finally:
                if isinstance(event, ControlledShutdown):
                    event.answer(ErrorCode.UNKNOWN)  # no-op if answered; else: 0.8.2's ControllerMovedException

    def _refuse_pending_shutdowns(self) -> None:
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(event, ControlledShutdown):
                event.answer(ErrorCode.UNKNOWN)

    def _process(self, event: ControllerEvent) -> None:
        if isinstance(event, Elect):
            self._elect()
            return
        if isinstance(event, SessionExpired):
            if self.active:
                self.log.info("ZooKeeper session expired; resigning as the controller")
                self._on_controller_resignation()
            return
        if not self._still_controller():
            return
        timing = EventTiming(type(event).__name__, time.monotonic(), self.log)
        writes = self.writer.writes
        with gc_paused():
            self.batch = self._new_batch()
            result = self._handlers[type(event)](event)
            self.deletion.run_if_signalled()
            self._send_batch(timing, writes)
        if isinstance(event, ControlledShutdown) and result is not None:
            event.answer(ErrorCode.NONE, result)

    def _still_controller(self) -> bool:
        """Checked before every controller action: are we, for certain, still the controller?"""
        if not self.active:
            return False
        if self.zk.session_id != self._active_session:
            self.log.info("Our ZooKeeper session changed; resigning as the controller")
            self._on_controller_resignation()
            return False
        if not self.zk.session_in_doubt():
            return True
        # We may have been frozen past our session timeout. Do nothing until ZooKeeper says whether the
        # session (and so /controller) is still ours: kazoo either reconnects to it or reports it expired.
        # While no ZooKeeper server answers at all (a lost quorum) nobody can expire the session, so we hold
        # rather than resign: the verdict comes with the reconnection (0.8.2's ZkClient waited the same way).
        hold_s = self.zk.session_timeout_ms / 1000.0 + 2.0
        deadline = time.monotonic() + hold_s
        while time.monotonic() < deadline and not self._closing.is_set():
            if self.zk.session_id != self._active_session:
                break
            # Confirmed, and still the session we were elected on (kazoo may have just opened a new one).
            if self.zk.confirm_session(timeout_s=1.0) and self.zk.session_id == self._active_session:
                return True
            if not self.zk.connected:
                deadline = time.monotonic() + hold_s
            time.sleep(0.05)
        self.log.info("Could not confirm our ZooKeeper session after a pause; resigning as the controller")
        self._on_controller_resignation()
        self._queue.put(Elect())
        return False

    def _new_batch(self) -> RequestBatch:
        return RequestBatch(self.broker_id, self.context.epoch, dict(self.context.live_brokers),
                            self.deletion.partitions_to_be_deleted)

    def _send_batch(self, timing: EventTiming, writes_before: int) -> None:
        """Send the event's requests. When the event wrote znodes or sends requests, say at INFO how long the
        decisions and writes took; the channel adds when the brokers acknowledged (bench/failover.py)."""
        batch = self.batch
        # The event's first check may be long past: a pause (SIGSTOP, a GC) can land between its ZooKeeper reads
        # and here, and a zombie must not send what it decided as the controller it no longer is. Its znode
        # writes are fenced already (zk_writes.py); this fences its requests. (Beyond 0.8.2, which relied on the
        # brokers refusing a stale controller epoch.)
        if not self._still_controller():
            raise ControllerMovedError(
                f"{timing.label}: decided before a pause this controller did not survive; its requests (LeaderAndIsr "
                f"to brokers {_ids(batch.leader_and_isr)}, UpdateMetadata to brokers {_ids(batch.update_metadata)}) "
                f"are not sent")
        batch.live_brokers = dict(self.context.live_brokers)
        writes = self.writer.writes - writes_before
        if writes or batch.leader_and_isr or batch.update_metadata:
            self.log.info("%s: %d znode writes done %.0f ms after the event began (%.0f ms of it on the CPU); "
                          "LeaderAndIsr (%d partition states) to brokers %s, UpdateMetadata (%d partition states) to "
                          "brokers %s", timing.label, writes, timing.elapsed_ms(), timing.cpu_ms(),
                          sum(len(s) for s in batch.leader_and_isr.values()), _ids(batch.leader_and_isr),
                          sum(len(s) for s in batch.update_metadata.values()), _ids(batch.update_metadata))
        batch.send(self.channel, timing)

    # ---- election and failover ----------------------------------------------------------------------------

    def _elect(self) -> None:
        if self.active:
            if self.elector.holds_controller_node():
                return
            self.log.info("/controller no longer names this broker")
            self._on_controller_resignation()
        won = self.elector.elect()
        # holds_controller_node: we hold /controller in this session but resigned in memory (e.g. after an
        # unconfirmed pause); take over again, with a new epoch.
        if won or (self.elector.leader_id == self.broker_id and self.elector.holds_controller_node()):
            with gc_paused():
                self._on_controller_failover(EventTiming("Controller failover", time.monotonic(), self.log))

    def _on_controller_failover(self, timing: EventTiming | None = None) -> None:
        """Kafka 0.8.2's onControllerFailover, in its order. `timing` starts when /controller became ours."""
        timing = timing or EventTiming("Controller failover", time.monotonic(), self.log)
        self.log.info("Broker %d starting become controller state transition", self.broker_id)
        try:
            epoch, zk_version = self.elector.increment_epoch()
        except ControllerMovedError as e:
            self.log.info("%s", e)
            self.elector.resign()
            return
        self.writer = FencedWriter(self.zk, zk_version, self.config["controller.zookeeper.batched"])
        self._take_context(ControllerContext(controller_id=self.broker_id, epoch=epoch, epoch_zk_version=zk_version))
        self.active = True
        self._active_session = self.zk.session_id
        self.log.info("Controller %d incremented epoch to %d", self.broker_id, epoch)
        timeline.emit(self.timeline_source, "controller_elected", broker=self.broker_id, epoch=epoch,
                      epoch_zk_version=zk_version, session=self.zk.session_id)
        ctx = self.context
        # (2) the watches, before reading what they watch
        reassign_data, _ = self.zk.subscribe_data_changes(paths.REASSIGN_PARTITIONS, self._on_reassign_partitions)
        preferred_data, _ = self.zk.subscribe_data_changes(paths.PREFERRED_REPLICA_ELECTION,
                                                           self._on_preferred_election)
        topics = self.zk.subscribe_child_changes(paths.BROKER_TOPICS, self._on_topics) or []
        queued = []
        if self.config["delete.topic.enable"]:
            queued = self.zk.subscribe_child_changes(paths.DELETE_TOPICS, self._on_delete_topics) or []
        self.zk.subscribe_child_changes(paths.BROKER_IDS, self._on_broker_ids)
        changes = self.zk.subscribe_child_changes(paths.CONFIG_CHANGES, self._on_config_changes) or []
        self._last_config_change = max((_change_seq(c) for c in changes), default=-1)
        # (3) the context; reading each topic also watches its data (the AddPartitionsListener, step 7 in 0.8.2)
        ctx.live_brokers = self._read_live_brokers()
        self._load_topics(topics)
        for tp, state in read_leaderships(self.zk, list(ctx.assignments)).items():
            if state is not None:
                ctx.leadership[tp] = state
        self.log.info("Currently active brokers in the cluster: Set(%s)", _ids(ctx.live_brokers))
        self.log.info("Current list of topics in the cluster: Set(%s)", ", ".join(sorted(ctx.all_topics)))
        self.log.info("%s: context loaded %.0f ms after the event began (%d topics, %d partitions, %d partition "
                      "states)", timing.label, timing.elapsed_ms(), len(ctx.all_topics), len(ctx.assignments),
                      len(ctx.leadership))
        # (4) the channel manager
        self.channel = ControllerChannelManager(self.broker_id, self.config["controller.socket.timeout.ms"],
                                                inter_broker_security(self.config))
        for broker in ctx.live_brokers.values():
            self.channel.add_broker(broker)
        self._initialize_preferred_replica_election(preferred_data)
        self.reassigner.initialize(reassign_data)
        self.reassigner.initialize_api(self._moving_topics)
        self._moving_topics = {}
        self._initialize_topic_deletion(queued)
        self.batch = self._new_batch()
        # (5) replicas: each one on a live broker hears its partition's current leadership
        self.replica_state_machine.initialize()
        self.replica_state_machine.handle_state_changes(self._replicas_on(ctx.live_broker_ids), ReplicaState.ONLINE)
        # (6) partitions: NEW/OFFLINE -> ONLINE
        self.partition_state_machine.initialize()
        self.partition_state_machine.trigger_online_partition_state_change(self.deletion.is_queued)
        self.log.info("Broker %d is ready to serve as the new controller with epoch %d", self.broker_id, epoch)
        # (8) resume what the previous controller left unfinished
        self.reassigner.resume_all()
        if preferred_data is not None:
            self._on_preferred_replica_election(set(ctx.partitions_undergoing_preferred_election))
        # (9) every live broker learns every partition
        self._update_metadata(ctx.live_or_shutting_down_broker_ids)
        # (10) the leader-imbalance timer
        if self.config["auto.leader.rebalance.enable"]:
            every = max(self.config["leader.imbalance.check.interval.seconds"], 1)
            self.log.info("starting the partition rebalance scheduler")
            self._rebalance_timer = _Ticker(f"partition-rebalance-{self.broker_id}",
                                            min(REBALANCE_FIRST_CHECK_S, every), every,
                                            lambda: self._queue.put(AutoLeaderRebalance()))
            self._rebalance_timer.start()
        # (11) topic deletion
        self.deletion.run_if_signalled()
        self._send_batch(timing, 0)

    def _on_controller_resignation(self) -> None:
        if not self.active:
            return
        for path, listener in ((paths.BROKER_IDS, self._on_broker_ids), (paths.BROKER_TOPICS, self._on_topics),
                               (paths.DELETE_TOPICS, self._on_delete_topics),
                               (paths.REASSIGN_PARTITIONS, self._on_reassign_partitions),
                               (paths.PREFERRED_REPLICA_ELECTION, self._on_preferred_election),
                               (paths.CONFIG_CHANGES, self._on_config_changes)):
            self.zk.unsubscribe(path, listener)
        for topic in self.context.all_topics:
            self.stop_watching_topic(topic)
        self.reassigner.stop_watching()
        if self._rebalance_timer is not None:
            self._rebalance_timer.stop()
            self._rebalance_timer = None
        if self.channel is not None:
            self.channel.shutdown()
            self.channel = None
        epoch = self.context.epoch
        self.active = False
        self._active_session = None
        self.writer = None
        self._take_context(ControllerContext(controller_id=self.broker_id))
        self.log.info("Broker %d resigned as the controller", self.broker_id)
        timeline.emit(self.timeline_source, "controller_resigned", broker=self.broker_id, epoch=epoch)

    def _initialize_preferred_replica_election(self, data: bytes | None) -> None:
        requested = self._read_preferred_election(data)
        ctx = self.context
        completed = {tp for tp in requested if tp not in ctx.assignments
                     or (tp in ctx.leadership and ctx.leadership[tp].leader == ctx.assignments[tp][0])}
        ctx.partitions_undergoing_preferred_election = requested - completed
        self.log.info("Partitions undergoing preferred replica election: %s", _tps(requested))
        self.log.info("Partitions that completed preferred replica election: %s", _tps(completed))
        self.log.info("Resuming preferred replica election for partitions: %s",
                      _tps(ctx.partitions_undergoing_preferred_election))

    def _initialize_topic_deletion(self, queued: list[str]) -> None:
        ctx = self.context
        unknown = [t for t in queued if t not in ctx.all_topics]
        if unknown:
            self.log.warning("Ignoring request to delete non-existing topics %s", ",".join(unknown))
            for topic in unknown:
                self.writer.delete(paths.delete_topic_path(topic))
        queued = [t for t in queued if t in ctx.all_topics]
        dead_replicas = {t for (t, _), replicas in ctx.assignments.items()
                         if any(r not in ctx.live_broker_ids for r in replicas)}
        busy = ({t for t, _ in ctx.partitions_undergoing_preferred_election}
                | {t for t, _ in ctx.partitions_being_reassigned})
        self.log.info("List of topics to be deleted: %s", ",".join(queued))
        self.log.info("List of topics ineligible for deletion: %s",
                      ",".join(sorted((dead_replicas | busy) & set(queued))))
        self.deletion.start(self.config["delete.topic.enable"], queued, dead_replicas | busy)

    # ---- reading ZooKeeper --------------------------------------------------------------------------------

    def _read_live_brokers(self) -> dict[int, BrokerRegistration]:
        return read_broker_registrations(self.zk, self.zk.get_children(paths.BROKER_IDS), self.log)

    def _load_topics(self, topics: list[str]) -> list[TopicPartition]:
        """Read (and watch) the topics' assignments, and read their configs, into the context; returns their
        partitions. The reads go out together (ZkClient's many-node reads)."""
        ctx = self.context
        found = self.zk.subscribe_data_changes_many([paths.topic_path(t) for t in topics], self._on_topic_data)
        ctx.all_topics.update(topics)
        readable = []
        partitions = []
        for topic, (data, _) in zip(topics, found):
            assignment = self._decode_assignment(topic, data)
            if assignment is None:
                continue
            readable.append(topic)
            if assignment.adding or assignment.removing:
                self._moving_topics[topic] = assignment  # an API reassignment a failover resumes
            for partition, replicas in assignment.partitions.items():
                ctx.assignments[(topic, partition)] = replicas
                partitions.append((topic, partition))
        configs = self.zk.get_many([paths.topic_config_path(t) for t in readable])
        for topic, (data, _) in zip(readable, configs):
            self._set_topic_config(topic, data)
        return sorted(partitions)

    def _decode_assignment(self, topic: str, data: bytes | None) -> TopicAssignment | None:
        if data is None:
            return None
        try:
            return TopicAssignment.decode(data, paths.topic_path(topic))
        except ZnodeFormatError as e:
            self.log.error("Ignoring topic %s: %s", topic, e)
            return None

    def _load_topic_config(self, topic: str) -> None:
        self._set_topic_config(topic, self.zk.get(paths.topic_config_path(topic))[0])

    def _set_topic_config(self, topic: str, config: bytes | None) -> None:
        self.context.topic_configs[topic] = topic_log_config(self.config, topic, config)

    def stop_watching_topic(self, topic: str) -> None:
        self.zk.unsubscribe(paths.topic_path(topic), self._on_topic_data)

    def _read_preferred_election(self, data: bytes | None) -> set[TopicPartition]:
        if data is None:
            return set()
        try:
            return set(decode_preferred_election(data))
        except ZnodeFormatError as e:
            self.log.error("Ignoring unreadable %s and deleting it: %s", paths.PREFERRED_REPLICA_ELECTION, e)
            self.writer.delete(paths.PREFERRED_REPLICA_ELECTION)
            return set()

    def unclean_election_enabled(self, topic: str) -> bool:
        config = self.context.topic_configs.get(topic)
        return config.unclean_leader_election_enable if config else self.config["unclean.leader.election.enable"]

    # ---- requests to brokers ------------------------------------------------------------------------------

    def _replicas_on(self, broker_ids: set[int]) -> list[tuple[str, int, int]]:
        return [(t, p, r) for (t, p), replicas in self.context.assignments.items() for r in replicas
                if r in broker_ids]

    def _update_metadata(self, broker_ids: set[int], partitions: Iterable[TopicPartition] | None = None) -> None:
        ctx = self.context
        wanted = ctx.leadership if partitions is None else partitions
        self.batch.add_update_metadata(broker_ids, {tp: (ctx.leadership[tp], ctx.assignments[tp]) for tp in wanted
                                                    if tp in ctx.leadership and tp in ctx.assignments})

    # ---- broker starts and failures -----------------------------------------------------------------------

    def _on_broker_change(self, event: BrokerChange) -> None:
        """BrokerChangeListener: diff the live set, then onBrokerStartup / onBrokerFailure."""
        current = self._read_live_brokers()
        known = self.context.live_brokers
        new_ids = set(current) - set(known)
        dead_ids = set(known) - set(current)
        # KIP-380 (broker.epoch.enable): a broker registered under a new znode since we last looked bounced; it is
        # handled as a failure and a startup. 0.8.2 compared the id sets only, and missed it (KAFKA-1120).
        bounced = {b for b in set(current) & set(known) if current[b].epoch != known[b].epoch} \
            if self.config["broker.epoch.enable"] else set()
        self.context.live_brokers = {b: r for b, r in current.items() if b not in bounced}
        if not new_ids and not dead_ids and not bounced:
            return
        if self.config["broker.epoch.enable"]:  # Kafka 2.2's line
            self.log.info("Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, all live brokers: %s",
                          _ids(new_ids), _ids(dead_ids), _ids(bounced), _ids(current))
        else:
            self.log.info("Newly added brokers: %s, deleted brokers: %s, all live brokers: %s",
                          _ids(new_ids), _ids(dead_ids), _ids(current))
        if bounced:
            for broker_id in sorted(bounced):
                self.channel.remove_broker(broker_id)
            self.batch.live_brokers = dict(self.context.live_brokers)
            self._on_broker_failure(bounced)
            self.context.live_brokers = current
            new_ids |= bounced
        for broker_id in sorted(new_ids):
            self.channel.add_broker(current[broker_id])
        for broker_id in sorted(dead_ids):
            self.channel.remove_broker(broker_id)
        self.batch.live_brokers = dict(current)
        if new_ids:
            self._on_broker_startup(new_ids)
        if dead_ids:
            self._on_broker_failure(dead_ids)

    def _on_broker_startup(self, new_ids: set[int]) -> None:
        ctx = self.context
        for broker_id in sorted(new_ids):
            self.log.info("Broker %d started", broker_id)
            timeline.emit(self.timeline_source, "broker_started", broker=broker_id, epoch=ctx.epoch)
            self.state_change_log.info("Controller %d epoch %d handled the startup of broker %d",
                                       self.broker_id, ctx.epoch, broker_id)
        self._update_metadata(new_ids)
        replicas = self._replicas_on(new_ids)
        self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)
        self.partition_state_machine.trigger_online_partition_state_change(self.deletion.is_queued)
        for tp, rar in sorted(ctx.partitions_being_reassigned.items()):
            if new_ids & set(rar):
                self.reassigner.reassign(tp)
        deleting = {t for t, _, _ in replicas if self.deletion.is_queued(t)}
        if deleting:
            self.log.info("Some replicas for topics scheduled for deletion %s are on the newly restarted brokers %s. "
                          "Signaling restart of topic deletion for these topics", ",".join(sorted(deleting)),
                          _ids(new_ids))
            self.deletion.resume(deleting)

    def _on_broker_failure(self, dead_ids: set[int]) -> None:
        ctx = self.context
        for broker_id in sorted(dead_ids):
            self.log.info("Broker %d failed", broker_id)
            timeline.emit(self.timeline_source, "broker_failed", broker=broker_id, epoch=ctx.epoch)
            self.state_change_log.info("Controller %d epoch %d handled the failure of broker %d",
                                       self.broker_id, ctx.epoch, broker_id)
        was_shutting_down = dead_ids & ctx.shutting_down_broker_ids
        if was_shutting_down:
            ctx.shutting_down_broker_ids -= was_shutting_down
            self.log.info("Removed %s from list of shutting down brokers.", _ids(was_shutting_down))
        led = [tp for tp, s in ctx.leadership.items() if s.leader in dead_ids and not self.deletion.is_queued(tp[0])]
        if led:
            self.log.info("Electing leaders for %d partitions led by failed brokers %s", len(led), _ids(dead_ids))
        psm = self.partition_state_machine
        psm.handle_state_changes(led, PartitionState.OFFLINE)
        psm.trigger_online_partition_state_change(self.deletion.is_queued)
        replicas = self._replicas_on(dead_ids)
        self.replica_state_machine.handle_state_changes(
            [r for r in replicas if not self.deletion.is_queued(r[0])], ReplicaState.OFFLINE)
        self.deletion.fail_replica_deletion([r for r in replicas if self.deletion.is_queued(r[0])])

    # ---- topics -------------------------------------------------------------------------------------------

    def _on_topic_change(self, event: TopicChange) -> None:
        """TopicChangeListener: new topics go NEW -> ONLINE (onNewTopicCreation)."""
        ctx = self.context
        topics = set(self.zk.get_children(paths.BROKER_TOPICS))
        new_topics = topics - ctx.all_topics
        gone = ctx.all_topics - topics
        for topic in gone:
            self.stop_watching_topic(topic)
            for tp in ctx.partitions_of(topic):
                self.partition_state_machine.remove(tp)
            self.replica_state_machine.forget_topic(topic)
            ctx.remove_topic(topic)
        if not new_topics:
            return
        self.log.info("New topics: [Set(%s)], deleted topics: [Set(%s)]", ", ".join(sorted(new_topics)),
                      ", ".join(sorted(gone)))
        self._on_new_partition_creation(self._load_topics(sorted(new_topics)))

    def _on_topic_data_change(self, event: TopicDataChange) -> None:
        """AddPartitionsListener: partitions in the topic's assignment that the controller does not know yet."""
        topic, ctx = event.topic, self.context
        if topic not in ctx.all_topics:
            return
        data, _ = self.zk.get(paths.topic_path(topic))
        assignment = self._decode_assignment(topic, data)
        if assignment is None:
            return
        added = {(topic, p): r for p, r in assignment.partitions.items() if (topic, p) not in ctx.assignments}
        if not added:
            return
        if self.deletion.is_queued(topic):
            self.log.error("Skipping adding partitions %s for topic %s since it is currently being deleted",
                           _ids(p for _, p in added), topic)
            return
        self.log.info("New partitions to be added %s", _tps(added))
        if topic not in ctx.topic_configs:
            self._load_topic_config(topic)
        ctx.assignments.update(added)
        self._on_new_partition_creation(sorted(added))

    def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        """onNewPartitionCreation: partitions NEW, replicas NEW, partitions ONLINE, replicas ONLINE."""
        if not partitions:
            return
        psm, rsm = self.partition_state_machine, self.replica_state_machine
        replicas = [(*tp, r) for tp in partitions for r in self.context.assignments[tp]]
        psm.handle_state_changes(partitions, PartitionState.NEW)
        rsm.handle_state_changes(replicas, ReplicaState.NEW)
        psm.handle_state_changes(partitions, PartitionState.ONLINE)
        rsm.handle_state_changes(replicas, ReplicaState.ONLINE)

    def _on_topic_config_change(self, event: TopicConfigChange) -> None:
        """Reload the overrides of topics named in config change notifications newer than the last one seen."""
        for child in sorted(self.zk.get_children(paths.CONFIG_CHANGES), key=_change_seq):  # ZooKeeper lists unordered
            seq = _change_seq(child)
            if seq <= self._last_config_change:
                continue
            self._last_config_change = seq
            data, _ = self.zk.get(f"{paths.CONFIG_CHANGES}/{child}")
            try:
                change = decode_config_change(data)
            except ZnodeFormatError as e:
                self.log.warning("Ignoring unreadable config change %s: %s", child, e)
                continue
            topic = change.entity_name
            if change.entity_type == "topics" and topic in self.context.all_topics:
                self._load_topic_config(topic)
                self.log.info("Reloaded the configuration overrides of topic %s", topic)

    # ---- topic deletion (deletion.py does the work) ---------------------------------------------------------

    def _on_delete_topics_change(self, event: DeleteTopicsChange) -> None:
        """DeleteTopicsListener."""
        ctx = self.context
        requested = set(self.zk.get_children(paths.DELETE_TOPICS))
        unknown = requested - ctx.all_topics
        if unknown:
            self.log.warning("Ignoring request to delete non-existing topics %s", ",".join(sorted(unknown)))
            for topic in sorted(unknown):
                self.writer.delete(paths.delete_topic_path(topic))
        topics = (requested - unknown) - self.deletion.topics_to_be_deleted
        if not topics:
            return
        self.log.info("Starting topic deletion for topics %s", ",".join(sorted(topics)))
        self.deletion.enqueue(topics)
        busy = ({t for t, _ in ctx.partitions_undergoing_preferred_election}
                | {t for t, _ in ctx.partitions_being_reassigned})
        self.deletion.mark_ineligible(topics & busy)

    def _on_stop_replica_answer(self, event: StopReplicaAnswer) -> None:
        if event.epoch != self.context.epoch:
            return  # an answer to a previous controller incarnation's request
        self.deletion.on_stop_replica_response(event.broker_id, list(event.partitions), event.response)

    # ---- reassignment (reassignment.py does the work) -------------------------------------------------------

    def _on_reassign_partitions_change(self, event: ReassignPartitionsChange) -> None:
        data, _ = self.zk.get(paths.REASSIGN_PARTITIONS)
        self.reassigner.on_reassign_partitions_changed(data)

    # ---- preferred replica election and the leader rebalance ------------------------------------------------

    def _on_preferred_replica_election_change(self, event: PreferredReplicaElectionChange) -> None:
        """PreferredReplicaElectionListener."""
        data, _ = self.zk.get(paths.PREFERRED_REPLICA_ELECTION)
        if data is None:
            return
        requested = self._read_preferred_election(data)
        ctx = self.context
        if ctx.partitions_undergoing_preferred_election:
            self.log.info("These partitions are already undergoing preferred replica election: %s",
                          _tps(ctx.partitions_undergoing_preferred_election))
        partitions = requested - ctx.partitions_undergoing_preferred_election
        deleting = {tp for tp in partitions if self.deletion.is_queued(tp[0])}
        if deleting:
            self.log.error("Skipping preferred replica election for partitions %s since the respective topics are "
                           "being deleted", _tps(deleting))
        self._on_preferred_replica_election(partitions - deleting)

    def _on_preferred_replica_election(self, partitions: set[TopicPartition], auto: bool = False) -> None:
        """onPreferredReplicaElection: move leadership to each partition's preferred replica (AR head); the
        admin node is deleted afterwards unless the auto-rebalance asked."""
        ctx = self.context
        unknown = {tp for tp in partitions if tp not in ctx.assignments}
        if unknown:
            self.log.warning("Skipping preferred replica leader election for partitions %s: they do not exist",
                             _tps(unknown))
        partitions = partitions - unknown
        self.log.info("Starting preferred replica leader election for partitions %s", _tps(partitions))
        topics = {t for t, _ in partitions}
        ctx.partitions_undergoing_preferred_election |= partitions
        self.deletion.mark_ineligible(topics)
        try:
            psm = self.partition_state_machine
            psm.handle_state_changes(partitions, PartitionState.ONLINE, Selector.PREFERRED_REPLICA)
        finally:
            level = per_partition_level(len(partitions))
            failed = 0
            for tp in sorted(partitions):
                leader = ctx.leadership[tp].leader if tp in ctx.leadership else -1
                if leader == ctx.assignments[tp][0]:
                    self.log.log(level, "Partition [%s,%d] completed preferred replica leader election. New leader "
                                 "is %d", *tp, leader)
                else:
                    failed += 1
                    self.log.log(logging.WARNING if level == logging.INFO else level, "Partition [%s,%d] failed to "
                                 "complete preferred replica leader election. Leader is %d", *tp, leader)
            if level != logging.INFO:
                self.log.log(logging.WARNING if failed else logging.INFO, "Preferred replica leader election "
                             "completed for %d partitions, failed for %d", len(partitions) - failed, failed)
            if not auto:
                self.writer.delete(paths.PREFERRED_REPLICA_ELECTION)
            ctx.partitions_undergoing_preferred_election -= partitions
            self.deletion.resume(topics)

    def _check_and_trigger_partition_rebalance(self, event: AutoLeaderRebalance) -> None:
        """checkAndTriggerPartitionRebalance: a broker whose share of partitions led by others exceeds
        leader.imbalance.per.broker.percentage gets its preferred leaderships back, while nothing else (a
        reassignment, a preferred election) is going on."""
        ctx = self.context
        if ctx.partitions_being_reassigned or ctx.partitions_undergoing_preferred_election:
            return
        assignments = {tp: r for tp, r in ctx.assignments.items() if not self.deletion.is_queued(tp[0])}
        leaders = {tp: s.leader for tp, s in ctx.leadership.items()}
        moves = partitions_to_rebalance(assignments, leaders, self.config["leader.imbalance.per.broker.percentage"])
        partitions = {tp for broker, tps in moves.items() if broker in ctx.live_broker_ids for tp in tps}
        if partitions:
            self.log.info("Leader imbalance found for brokers %s; moving leadership of %s back to the preferred "
                          "replicas", _ids(b for b in moves if b in ctx.live_broker_ids), _tps(partitions))
            self._on_preferred_replica_election(partitions, auto=True)

    # ---- unclean election on request (KIP-460) --------------------------------------------------------------

    def _on_unclean_election(self, event: UncleanElection) -> None:
        """Kafka 2.4's electLeaders with ElectionType.UNCLEAN in ZooKeeper mode: a partition that has a live leader
        needs no election; an offline one gets the first live ISR member, else the first live replica of its
        assignment, whatever unclean.leader.election.enable says (the operator asked for the data loss)."""
        ctx = self.context
        results: dict[TopicPartition, int] = {}
        offline = []
        for tp in dict.fromkeys(event.partitions):
            if tp not in ctx.assignments or self.deletion.is_queued(tp[0]):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif tp in ctx.leadership and ctx.leadership[tp].leader in ctx.live_broker_ids:
                results[tp] = ErrorCode.ELECTION_NOT_NEEDED
            else:
                offline.append(tp)
        if offline:
            self.log.info("Starting unclean leader election for partitions %s", _tps(offline))
            self.partition_state_machine.handle_state_changes(offline, PartitionState.ONLINE, Selector.OFFLINE,
                                                              force_unclean=True)
            for tp in offline:
                elected = tp in ctx.leadership and ctx.leadership[tp].leader in ctx.live_broker_ids
                results[tp] = ErrorCode.NONE if elected else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        event.reply(results)

    # ---- controlled shutdown --------------------------------------------------------------------------------

    def _on_controlled_shutdown(self, event: ControlledShutdown) -> list[TopicPartition] | None:
        """shutdownBroker: move every leadership of the broker's replicated partitions to another ISR member
        (controlled shutdown selector) and take it out of the other ISRs; answer with what it still leads."""
        ctx = self.context
        broker_id = event.broker_id
        self.log.info("Shutting down broker %d", broker_id)
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            self.log.info("Broker id %d does not exist.", broker_id)
            event.answer(ErrorCode.BROKER_NOT_AVAILABLE)
            return None
        ctx.shutting_down_broker_ids.add(broker_id)
        self.log.debug("All shutting down brokers: %s", _ids(ctx.shutting_down_broker_ids))
        self.log.debug("Live brokers: %s", _ids(ctx.live_broker_ids))
        replicated = [tp for tp in ctx.partitions_on_broker(broker_id)
                      if len(ctx.assignments[tp]) > 1 and tp in ctx.leadership]
        led = [tp for tp in replicated if ctx.leadership[tp].leader == broker_id]
        followed = [(*tp, broker_id) for tp in replicated if ctx.leadership[tp].leader != broker_id]
        psm = self.partition_state_machine
        psm.handle_state_changes(led, PartitionState.ONLINE, Selector.CONTROLLED_SHUTDOWN)
        self.replica_state_machine.handle_state_changes(followed, ReplicaState.OFFLINE)
        remaining = [tp for tp, s in ctx.leadership.items()
                     if s.leader == broker_id and len(ctx.assignments.get(tp, ())) > 1]
        self.log.info("Controlled shutdown of broker %d: moved leadership of %d partitions, %d remaining", broker_id,
                      len(led) - len(remaining), len(remaining))
        return remaining

    def stop_replica_callback(self):
        """The StopReplica callback of this controller incarnation (answers of an older one are ignored)."""
        return functools.partial(self.on_stop_replica_answer, self.context.epoch)


def _change_seq(child: str) -> int:
    try:
        return int(child[len(paths.CONFIG_CHANGE_PREFIX):])
    except ValueError:
        return -1
