"""Broker registration: the ephemeral `/brokers/ids/<id>` node (Kafka 0.8.2's KafkaHealthcheck).

The node exists exactly while the broker's ZooKeeper session lives; the controller watches the children
of `/brokers/ids` to learn of broker starts and failures. After a session expiry the broker registers
again in the new session.

A fast restart (within the session timeout) finds the node still held by the previous process's session.
Kafka 0.8.2 (KAFKA-1029, the ZOOKEEPER-1740 workaround) recognises its own node by its content and backs
off until ZooKeeper expires the old session; a node with different content belongs to another live broker
with the same id, and the broker refuses to start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import NodeExistsError

from zkbroker import timeline
from zkbroker.fault_points import FAULTS
from zkbroker.zk import paths
from zkbroker.zk.client import SessionListener, ZkClient
from zkbroker.zk.znodes import BrokerRegistration, ZnodeFormatError

log = logging.getLogger("zkbroker.server.KafkaHealthcheck")


class BrokerIdConflict(RuntimeError):
    """Another live broker is registered with our broker.id."""


class BrokerRegistrar(SessionListener):
    def __init__(self, zk: ZkClient, broker_id: int, host: str, port: int,
                 stopping: Callable[[], bool] = lambda: False,
                 endpoints: tuple[tuple[str, str, int, str], ...] = ()) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.endpoints = endpoints  # every listener's advertised endpoint, when there is more than PLAINTEXT
        self._stopping = stopping
        self._lock = threading.Lock()

    def startup(self) -> None:
        self.zk.subscribe_state_changes(self)
        self.register()

    def handle_session_expired(self) -> None:
        timeline.emit(f"broker:{self.broker_id}", "broker_expired", broker=self.broker_id, session=self.zk.session_id)

    def handle_new_session(self) -> None:
        log.info("re-registering broker info in ZK for broker %d", self.broker_id)
        try:
            self.register()
        except BrokerIdConflict as e:
            log.error("%s", e)

    def register(self) -> None:
        """Create our ephemeral node, waiting out a previous session of ours that still holds it."""
        path = paths.broker_path(self.broker_id)
        with self._lock:
            while not self._stopping():
                mine = BrokerRegistration(self.broker_id, self.host, self.port, endpoints=self.endpoints)
                FAULTS.at_zookeeper_write("registration", "before")
                try:
                    self.zk.create_ephemeral(path, mine.encode())
                except NodeExistsError:
                    pass
                else:
                    FAULTS.at_zookeeper_write("registration", "after")
                    log.info("Registered broker %d at path %s with address %s:%d.",
                             self.broker_id, path, self.host, self.port)
                    timeline.emit(f"broker:{self.broker_id}", "broker_registered", broker=self.broker_id,
                                  session=self.zk.session_id, host=self.host, port=self.port)
                    return
                data, stat = self.zk.get(path)
                if stat is None:
                    continue  # the old node just vanished: try again at once
                if stat.ephemeralOwner == self.zk.session_id:
                    return  # our own node from this session (a retried create after a connection loss)
                try:
                    holder = BrokerRegistration.decode(self.broker_id, data)
                except ZnodeFormatError:
                    holder = None
                if holder is None or not holder.same_endpoint(mine):
                    where = f"{holder.host}:{holder.port}" if holder else "an unknown address"
                    raise BrokerIdConflict(
                        f"Broker id {self.broker_id} is already registered at {path} by a live broker at "
                        f"{where}; refusing to start a second broker with the same id.")
                log.info("I wrote this conflicted ephemeral node [%s] at %s a while back in a different "
                         "session, hence I will backoff for this node to be deleted by Zookeeper and retry",
                         data.decode(errors="replace"), path)
                time.sleep(min(1.0, self.zk.session_timeout_ms / 4000.0))
