"""KafkaController: the controller of a zkbroker cluster, driven by one event queue.

Kafka 0.8's controller mixed ZooKeeper callbacks, a lock and sender threads, and raced (fixed in Kafka
0.11 by a single event queue, KAFKA-5028). Here ZooKeeper callbacks only enqueue events; one thread takes
them in order and is the only one that reads or changes the ControllerContext. Each event's decisions
collect their requests in one batch, sent to the brokers when the event is done.

Becoming controller follows Kafka 0.8.2's onControllerFailover order: increment the epoch (conditionally),
register the watches, load the context, start the channel manager, bring replicas and partitions online,
send UpdateMetadata to every broker. Broker starts and failures (watch on `/brokers/ids`) and new topics
(watch on `/brokers/topics`) are handled as 0.8.2's onBrokerStartup, onBrokerFailure and onNewTopicCreation.

Beyond 0.8.2: every controller write is fenced by the controller epoch (zk_writes.py), and a controller
that may have been frozen (SIGSTOP, a long pause) re-checks its ZooKeeper session before acting on
anything, so a resumed zombie learns it lost before it can act.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass

from controller.channel import ControllerChannelManager, RequestBatch
from controller.context import ControllerContext, LeaderIsrAndZkVersion, TopicPartition
from controller.election import ControllerMovedError, ZookeeperLeaderElector
from controller.partition_state import PartitionState, PartitionStateMachine, decode_leadership, encode_leadership
from controller.zk_writes import FencedWriter
from zkbroker.config import KafkaConfig
from zkbroker.zk import paths
from zkbroker.zk.client import SessionListener, ZkClient
from zkbroker.zk.znodes import BrokerRegistration, TopicAssignment, TopicConfig, ZnodeFormatError


@dataclass(frozen=True)
class Elect:
    """Race for `/controller` (startup, the node changed or vanished, or a new session)."""


@dataclass(frozen=True)
class BrokerChange:
    """The children of `/brokers/ids` changed."""


@dataclass(frozen=True)
class TopicChange:
    """The children of `/brokers/topics` changed."""


@dataclass(frozen=True)
class SessionExpired:
    """Our ZooKeeper session expired: a controller resigns at once (Kafka's handleNewSession, first half)."""


@dataclass(frozen=True)
class Shutdown:
    """The broker is shutting down."""


ControllerEvent = Elect | BrokerChange | TopicChange | SessionExpired | Shutdown


class _Prefixed(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"{self.extra['prefix']}{msg}", kwargs


def _ids(ids) -> str:
    return ",".join(str(i) for i in sorted(ids))


def _parse_bool(value: str) -> bool:
    return value.strip().lower() == "true"


class KafkaController(SessionListener):
    def __init__(self, zk: ZkClient, config: KafkaConfig) -> None:
        self.zk = zk
        self.config = config
        self.broker_id = config.broker_id
        self.elector = ZookeeperLeaderElector(zk, self.broker_id)
        self.context = ControllerContext()
        self.partition_state_machine = PartitionStateMachine(self)
        self.channel: ControllerChannelManager | None = None
        self.batch: RequestBatch | None = None
        self.writer: FencedWriter | None = None
        self.active = False
        self._active_session: int | None = None
        self._queue: queue.Queue[ControllerEvent] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"controller-{self.broker_id}", daemon=True)
        self.log = _Prefixed(logging.getLogger("controller.KafkaController"),
                             {"prefix": f"[Controller {self.broker_id}]: "})
        self.state_change_log = logging.getLogger("state.change.logger")

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
        self._queue.put(Shutdown())
        self._thread.join(timeout_s)
        self.log.info("Controller shutdown complete")

    def is_active(self) -> bool:
        return self.active

    # ---- ZooKeeper callbacks (ZkClient event thread): enqueue only ------------------------------------------

    def _on_controller_node(self, path: str, data, stat) -> None:
        self._queue.put(Elect())

    def _on_broker_ids(self, path: str, children) -> None:
        self._queue.put(BrokerChange())

    def _on_topics(self, path: str, children) -> None:
        self._queue.put(TopicChange())

    def handle_session_expired(self) -> None:
        self._queue.put(SessionExpired())

    def handle_new_session(self) -> None:
        self._queue.put(Elect())

    # ---- the event thread ---------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            try:
                if isinstance(event, Shutdown):
                    self._on_controller_resignation()
                    return
                self._process(event)
            except ControllerMovedError as e:
                self.log.info("%s; resigning", e)
                self._on_controller_resignation()
                self._queue.put(Elect())
            except Exception:
                self.log.exception("Error processing %s", type(event).__name__)

    def _process(self, event: ControllerEvent) -> None:
        if isinstance(event, Elect):
            self._elect()
        elif isinstance(event, SessionExpired):
            if self.active:
                self.log.info("ZooKeeper session expired; resigning as the controller")
                self._on_controller_resignation()
        elif isinstance(event, BrokerChange | TopicChange):
            if not self._still_controller():
                return
            self.batch = self._new_batch()
            if isinstance(event, BrokerChange):
                self._on_broker_change()
            else:
                self._on_topic_change()
            self._send_batch()

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
        deadline = time.monotonic() + self.zk.session_timeout_ms / 1000.0 + 2.0
        while time.monotonic() < deadline:
            if self.zk.session_id != self._active_session:
                break
            if self.zk.confirm_session(timeout_s=1.0):
                return True
            time.sleep(0.05)
        self.log.info("Could not confirm our ZooKeeper session after a pause; resigning as the controller")
        self._on_controller_resignation()
        self._queue.put(Elect())
        return False

    def _new_batch(self) -> RequestBatch:
        return RequestBatch(self.broker_id, self.context.epoch, dict(self.context.live_brokers))

    def _send_batch(self) -> None:
        self.batch.live_brokers = dict(self.context.live_brokers)
        self.batch.send(self.channel)

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
            self._on_controller_failover()

    def _on_controller_failover(self) -> None:
        """Kafka 0.8.2's onControllerFailover, in its order (the steps that exist so far)."""
        self.log.info("Broker %d starting become controller state transition", self.broker_id)
        try:
            epoch, zk_version = self.elector.increment_epoch()
        except ControllerMovedError as e:
            self.log.info("%s", e)
            self.elector.resign()
            return
        self.context = ControllerContext(epoch=epoch, epoch_zk_version=zk_version)
        self.writer = FencedWriter(self.zk, zk_version)
        self.active = True
        self._active_session = self.zk.session_id
        self.log.info("Controller %d incremented epoch to %d", self.broker_id, epoch)
        # (2) watches, (3) the context
        self.zk.subscribe_child_changes(paths.BROKER_IDS, self._on_broker_ids)
        self.zk.subscribe_child_changes(paths.BROKER_TOPICS, self._on_topics)
        self.context.live_brokers = self._read_live_brokers()
        for topic in self.zk.get_children(paths.BROKER_TOPICS):
            self._load_topic(topic)
        for tp in self.context.assignments:
            state = self.read_leadership(tp)
            if state is not None:
                self.context.leadership[tp] = state
        self.log.info("Currently active brokers in the cluster: Set(%s)", _ids(self.context.live_brokers))
        self.log.info("Current list of topics in the cluster: Set(%s)", ", ".join(sorted(self.context.topics)))
        # (4) the channel manager
        self.channel = ControllerChannelManager(self.broker_id, self.config["controller.socket.timeout.ms"])
        for broker in self.context.live_brokers.values():
            self.channel.add_broker(broker)
        self.batch = self._new_batch()
        # (5) every replica on a live broker hears its partition's current leadership
        self._replicas_online(self.context.live_broker_ids)
        # (6) partitions: NEW/OFFLINE -> ONLINE
        self.partition_state_machine = PartitionStateMachine(self)
        self.partition_state_machine.initialize()
        self.partition_state_machine.trigger_online_partition_state_change()
        # (9) every live broker learns every partition
        self._update_metadata(self.context.live_broker_ids)
        self._send_batch()
        self.log.info("Broker %d is ready to serve as the new controller with epoch %d", self.broker_id, epoch)

    def _on_controller_resignation(self) -> None:
        if not self.active:
            return
        self.zk.unsubscribe(paths.BROKER_IDS, self._on_broker_ids)
        self.zk.unsubscribe(paths.BROKER_TOPICS, self._on_topics)
        if self.channel is not None:
            self.channel.shutdown()
            self.channel = None
        self.active = False
        self._active_session = None
        self.context = ControllerContext()
        self.writer = None
        self.log.info("Broker %d resigned as the controller", self.broker_id)

    # ---- reading ZooKeeper --------------------------------------------------------------------------------

    def _read_live_brokers(self) -> dict[int, BrokerRegistration]:
        brokers = {}
        for child in self.zk.get_children(paths.BROKER_IDS):
            try:
                broker_id = int(child)
                data, stat = self.zk.get(paths.broker_path(broker_id))
                if stat is not None:
                    brokers[broker_id] = BrokerRegistration.decode(broker_id, data)
            except (ValueError, ZnodeFormatError) as e:
                self.log.warning("Ignoring unreadable broker registration %s: %s", child, e)
        return brokers

    def _load_topic(self, topic: str) -> list[TopicPartition]:
        """Read a topic's assignment and config into the context; returns its partitions."""
        data, _ = self.zk.get(paths.topic_path(topic))
        if data is None:
            return []
        try:
            assignment = TopicAssignment.decode(data, paths.topic_path(topic))
        except ZnodeFormatError as e:
            self.log.error("Ignoring topic %s: %s", topic, e)
            return []
        config, _ = self.zk.get(paths.topic_config_path(topic))
        try:
            self.context.topic_configs[topic] = TopicConfig.decode(config).config if config else {}
        except ZnodeFormatError:
            self.context.topic_configs[topic] = {}
        partitions = []
        for partition, replicas in assignment.partitions.items():
            self.context.assignments[(topic, partition)] = replicas
            partitions.append((topic, partition))
        return sorted(partitions)

    def read_leadership(self, tp: TopicPartition) -> LeaderIsrAndZkVersion | None:
        path = paths.partition_state_path(*tp)
        data, stat = self.zk.get(path)
        if stat is None:
            return None
        return decode_leadership(data, stat.version, path)

    def unclean_election_enabled(self, topic: str) -> bool:
        override = self.context.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        return _parse_bool(override) if override is not None else self.config["unclean.leader.election.enable"]

    # ---- requests to brokers ------------------------------------------------------------------------------

    def _replicas_online(self, broker_ids: set[int]) -> None:
        """Replicas on these brokers -> Online: each hears its partition's leadership (LeaderAndIsr)."""
        for tp, replicas in sorted(self.context.assignments.items()):
            targets = [b for b in replicas if b in broker_ids]
            leadership = self.context.leadership.get(tp)
            if targets and leadership is not None and leadership.leader >= 0:
                self.batch.add_leader_and_isr(targets, tp, leadership, replicas)

    def _update_metadata(self, broker_ids: set[int]) -> None:
        partitions = {tp: (state, self.context.assignments[tp]) for tp, state in self.context.leadership.items()
                      if tp in self.context.assignments}
        self.batch.add_update_metadata(broker_ids, partitions)

    # ---- broker starts and failures -----------------------------------------------------------------------

    def _on_broker_change(self) -> None:
        """BrokerChangeListener: diff the live set, then onBrokerStartup / onBrokerFailure."""
        current = self._read_live_brokers()
        known = self.context.live_brokers
        new_ids = set(current) - set(known)
        dead_ids = set(known) - set(current)
        self.context.live_brokers = current
        if not new_ids and not dead_ids:
            return
        self.log.info("Newly added brokers: %s, deleted brokers: %s, all live brokers: %s",
                      _ids(new_ids), _ids(dead_ids), _ids(current))
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
        for broker_id in sorted(new_ids):
            self.log.info("Broker %d started", broker_id)
            self.state_change_log.info("Controller %d epoch %d handled the startup of broker %d",
                                       self.broker_id, self.context.epoch, broker_id)
        self._update_metadata(new_ids)
        self._replicas_online(new_ids)
        self.partition_state_machine.trigger_online_partition_state_change()

    def _on_broker_failure(self, dead_ids: set[int]) -> None:
        for broker_id in sorted(dead_ids):
            self.log.info("Broker %d failed", broker_id)
            self.state_change_log.info("Controller %d epoch %d handled the failure of broker %d",
                                       self.broker_id, self.context.epoch, broker_id)
        led = [tp for tp, s in self.context.leadership.items() if s.leader in dead_ids]
        if led:
            self.log.info("Electing leaders for %d partitions led by failed brokers %s", len(led), _ids(dead_ids))
        psm = self.partition_state_machine
        psm.handle_state_changes(led, PartitionState.OFFLINE)
        psm.trigger_online_partition_state_change()
        for tp, replicas in sorted(self.context.assignments.items()):
            for broker_id in dead_ids & set(replicas):
                self._remove_replica_from_isr(tp, broker_id)

    def _remove_replica_from_isr(self, tp: TopicPartition, broker_id: int) -> None:
        """ReplicaStateMachine's OfflineReplica: drop a dead replica from the ISR (leader -1 if it led), with
        leader_epoch + 1; 0.8.2 keeps the last ISR member when unclean election is disabled, so that the
        partition waits for it."""
        for _ in range(3):
            current = self.read_leadership(tp)
            if current is None or broker_id not in current.isr:
                return
            isr = tuple(r for r in current.isr if r != broker_id)
            if not isr and not self.unclean_election_enabled(tp[0]):
                isr = current.isr
            leader = -1 if current.leader == broker_id else current.leader
            state = LeaderIsrAndZkVersion(leader, current.leader_epoch + 1, isr, self.context.epoch,
                                          current.zk_version)
            new_version = self.writer.set(paths.partition_state_path(*tp), encode_leadership(state),
                                          current.zk_version)
            if new_version is None:
                continue
            state = LeaderIsrAndZkVersion(leader, state.leader_epoch, isr, state.controller_epoch, new_version)
            self.context.leadership[tp] = state
            replicas = self.context.assignments[tp]
            live = [r for r in replicas if r in self.context.live_brokers]
            self.batch.add_leader_and_isr(live, tp, state, replicas)
            self.state_change_log.info("Controller %d epoch %d removed broker %d from the ISR of [%s,%d]: leader %d, "
                                       "ISR %s", self.broker_id, self.context.epoch, broker_id, *tp, leader, _ids(isr))
            return

    # ---- topics -------------------------------------------------------------------------------------------

    def _on_topic_change(self) -> None:
        """TopicChangeListener: new topics go NEW -> ONLINE (onNewTopicCreation)."""
        topics = set(self.zk.get_children(paths.BROKER_TOPICS))
        new_topics = topics - self.context.topics
        gone = self.context.topics - topics
        for topic in gone:
            for tp in self.context.partitions_of(topic):
                self.context.assignments.pop(tp, None)
                self.context.leadership.pop(tp, None)
                self.partition_state_machine.remove(tp)
            self.context.topic_configs.pop(topic, None)
        if not new_topics:
            return
        self.log.info("New topics: [Set(%s)], deleted topics: [Set(%s)]", ", ".join(sorted(new_topics)),
                      ", ".join(sorted(gone)))
        new_partitions = []
        for topic in sorted(new_topics):
            new_partitions += self._load_topic(topic)
        psm = self.partition_state_machine
        psm.handle_state_changes(new_partitions, PartitionState.NEW)
        psm.handle_state_changes(new_partitions, PartitionState.ONLINE)
