"""KafkaController: the controller of a zkbroker cluster, driven by one event queue.

Kafka 0.8's controller mixed ZooKeeper callbacks, a lock and sender threads, and raced (fixed in Kafka
0.11 by a single event queue, KAFKA-5028). Here ZooKeeper callbacks only enqueue events; one thread takes
them in order and is the only one that reads or changes the ControllerContext.

Becoming controller follows Kafka 0.8.2's onControllerFailover order: increment the epoch (conditionally),
register the watches, load the context, then serve. This issue's controller watches `/brokers/ids` and
reports broker starts and failures; partition state machines, leader election, topic deletion and the
channel manager grow from here.

Beyond 0.8.2: a controller that may have been frozen (SIGSTOP, a long pause) re-checks its ZooKeeper
session before acting on anything, so a resumed zombie learns it lost before it can act.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass

from controller.context import ControllerContext
from controller.election import ControllerMovedError, ZookeeperLeaderElector
from zkbroker.zk import paths
from zkbroker.zk.client import SessionListener, ZkClient
from zkbroker.zk.znodes import BrokerRegistration, ZnodeFormatError


@dataclass(frozen=True)
class Elect:
    """Race for `/controller` (startup, the node changed or vanished, or a new session)."""


@dataclass(frozen=True)
class BrokerChange:
    """The children of `/brokers/ids` changed."""


@dataclass(frozen=True)
class SessionExpired:
    """Our ZooKeeper session expired: a controller resigns at once (Kafka's handleNewSession, first half)."""


@dataclass(frozen=True)
class Shutdown:
    """The broker is shutting down."""


ControllerEvent = Elect | BrokerChange | SessionExpired | Shutdown


class _Prefixed(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"{self.extra['prefix']}{msg}", kwargs


def _ids(ids) -> str:
    return ",".join(str(i) for i in sorted(ids))


class KafkaController(SessionListener):
    def __init__(self, zk: ZkClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.elector = ZookeeperLeaderElector(zk, broker_id)
        self.context = ControllerContext()
        self.active = False
        self._active_session: int | None = None
        self._queue: queue.Queue[ControllerEvent] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"controller-{broker_id}", daemon=True)
        self.log = _Prefixed(logging.getLogger("controller.KafkaController"),
                             {"prefix": f"[Controller {broker_id}]: "})
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
            except Exception:
                self.log.exception("Error processing %s", type(event).__name__)

    def _process(self, event: ControllerEvent) -> None:
        if isinstance(event, Elect):
            self._elect()
        elif isinstance(event, SessionExpired):
            if self.active:
                self.log.info("ZooKeeper session expired; resigning as the controller")
                self._on_controller_resignation()
        elif isinstance(event, BrokerChange):
            if self._still_controller():
                self._on_broker_change()

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
        """Kafka 0.8.2's onControllerFailover, in its order (the steps this issue needs)."""
        self.log.info("Broker %d starting become controller state transition", self.broker_id)
        try:
            epoch, zk_version = self.elector.increment_epoch()
        except ControllerMovedError as e:
            self.log.info("%s", e)
            self.elector.resign()
            return
        self.context = ControllerContext(epoch=epoch, epoch_zk_version=zk_version)
        self.active = True
        self._active_session = self.zk.session_id
        self.log.info("Controller %d incremented epoch to %d", self.broker_id, epoch)
        self.zk.subscribe_child_changes(paths.BROKER_IDS, self._on_broker_ids)
        self.context.live_brokers = self._read_live_brokers()
        self.log.info("Currently active brokers in the cluster: Set(%s)", _ids(self.context.live_brokers))
        self.log.info("Broker %d is ready to serve as the new controller with epoch %d", self.broker_id, epoch)

    def _on_controller_resignation(self) -> None:
        if not self.active:
            return
        self.zk.unsubscribe(paths.BROKER_IDS, self._on_broker_ids)
        self.active = False
        self._active_session = None
        self.context = ControllerContext()
        self.log.info("Broker %d resigned as the controller", self.broker_id)

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

    def _on_broker_change(self) -> None:
        """BrokerChangeListener: diff the live set; report starts and failures (onBrokerStartup/Failure)."""
        current = self._read_live_brokers()
        known = self.context.live_brokers
        new_ids = set(current) - set(known)
        dead_ids = set(known) - set(current)
        self.context.live_brokers = current
        if not new_ids and not dead_ids:
            return
        self.log.info("Newly added brokers: %s, deleted brokers: %s, all live brokers: %s",
                      _ids(new_ids), _ids(dead_ids), _ids(current))
        for broker_id in sorted(dead_ids):
            self.log.info("Broker %d failed", broker_id)
            self.state_change_log.info("Controller %d epoch %d handled the failure of broker %d",
                                       self.broker_id, self.context.epoch, broker_id)
        for broker_id in sorted(new_ids):
            self.log.info("Broker %d started", broker_id)
            self.state_change_log.info("Controller %d epoch %d handled the startup of broker %d",
                                       self.broker_id, self.context.epoch, broker_id)
