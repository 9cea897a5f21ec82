"""Controller election: the race for the ephemeral `/controller` node (Kafka's ZookeeperLeaderElector).

Every broker tries to create `/controller`; the one that succeeds is the controller until its session
ends, and the others watch the node and race again when it disappears. The winner then increments
`/controller_epoch` *conditionally on the zkVersion it read*: if that write fails, someone else became
controller in between (ControllerMovedException in Kafka) and this broker must not act.

The elector only talks to ZooKeeper; when to elect and what to do after winning is KafkaController's
business (it calls these methods from its single event thread).
"""

from __future__ import annotations

import logging

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from zkbroker.fault_points import FAULTS
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import (
    ControllerRegistration,
    ZnodeFormatError,
    decode_controller_epoch,
    encode_controller_epoch,
)

log = logging.getLogger("controller.ZookeeperLeaderElector")


class ControllerMovedError(RuntimeError):
    """Another broker became controller while we were taking over (Kafka's ControllerMovedException)."""


class ZookeeperLeaderElector:
    def __init__(self, zk: ZkClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.leader_id = -1

    def elect(self) -> bool:
        """Try to become controller. True when this call created `/controller`; leader_id says who leads."""
        self.leader_id = self.read_controller_id()
        if self.leader_id != -1:
            return False
        FAULTS.at_zookeeper_write("controller_election", "before")
        try:
            self.zk.kazoo.create(paths.CONTROLLER, ControllerRegistration(self.broker_id).encode(), ephemeral=True)
        except NodeExistsError:
            self.leader_id = self.read_controller_id()
            return False
        FAULTS.at_zookeeper_write("controller_election", "after")
        self.leader_id = self.broker_id
        log.info("%d successfully elected as leader", self.broker_id)
        return True

    def read_controller_id(self) -> int:
        data, stat = self.zk.get(paths.CONTROLLER)
        if stat is None:
            return -1
        try:
            return ControllerRegistration.decode(data).broker_id
        except ZnodeFormatError as e:
            log.error("Ignoring unreadable /controller: %s", e)
            return -1

    def holds_controller_node(self) -> bool:
        """Whether `/controller` names this broker *and* belongs to our current session."""
        data, stat = self.zk.get(paths.CONTROLLER)
        if stat is None or stat.ephemeralOwner != self.zk.session_id:
            return False
        try:
            return ControllerRegistration.decode(data).broker_id == self.broker_id
        except ZnodeFormatError:
            return False

    def resign(self) -> None:
        """Give up `/controller` if (and only if) our session holds it, so the others elect at once."""
        _, stat = self.zk.get(paths.CONTROLLER)
        if stat is not None and stat.ephemeralOwner == self.zk.session_id:
            try:
                self.zk.kazoo.delete(paths.CONTROLLER, version=stat.version)
            except (NoNodeError, BadVersionError):
                pass
        self.leader_id = -1

    def increment_epoch(self) -> tuple[int, int]:
        """Write epoch + 1 conditionally on the zkVersion read; returns (new epoch, its zkVersion).

        A missing node is created as "1" (the first controller of a cluster); NodeExists or BadVersion
        means another controller moved in first.
        """
        data, stat = self.zk.get(paths.CONTROLLER_EPOCH)
        FAULTS.at_zookeeper_write("controller_epoch", "before")
        if stat is None:
            try:
                self.zk.kazoo.create(paths.CONTROLLER_EPOCH, encode_controller_epoch(1))
            except NodeExistsError as e:
                raise ControllerMovedError("Controller moved to another broker. Aborting controller startup "
                                           "procedure") from e
            FAULTS.at_zookeeper_write("controller_epoch", "after")
            return 1, 0
        epoch = decode_controller_epoch(data) + 1
        try:
            new_stat = self.zk.kazoo.set(paths.CONTROLLER_EPOCH, encode_controller_epoch(epoch),
                                         version=stat.version)
        except BadVersionError as e:
            raise ControllerMovedError("Controller moved to another broker. Aborting controller startup "
                                       "procedure") from e
        FAULTS.at_zookeeper_write("controller_epoch", "after")
        return epoch, new_stat.version
