"""The broker's view of cluster metadata, as served in Metadata responses.

Live brokers come from `/brokers/ids` and the controller id from `/controller`, both watched in ZooKeeper;
partition leadership arrives from the controller's UpdateMetadata requests. In KRaft mode the metadata image
replaces the whole snapshot instead (``publish``). The cache publishes immutable
snapshots: ZooKeeper's event thread and the UpdateMetadata handler swap in new ones, and request handlers
on the network thread read whichever is current without locks.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from zkbroker.zk import paths
from zkbroker.zk.broker_ids import read_broker_registrations
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import BrokerRegistration, ControllerRegistration, ZnodeFormatError

log = logging.getLogger("zkbroker.server.MetadataCache")


# UpdateMetadata's leader value for a partition whose topic is being deleted (0.8.2's LeaderDuringDelete).
LEADER_DURING_DELETE = -2


@dataclass(frozen=True)
class PartitionStateInfo:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]


@dataclass(frozen=True)
class ClusterSnapshot:
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    controller_id: int = -1
    partitions: dict[str, dict[int, PartitionStateInfo]] = field(default_factory=dict)


def listed_controller_id(controller_id: int, listed: Iterable[int]) -> int:
    """The controller id a Metadata or DescribeCluster answer may name: -1 unless that broker is among the ones
    the answer lists. The cache learns the controller and the live brokers from two watches (/controller,
    /brokers/ids), so a starting broker knows for a moment that it is the controller before it sees its own
    registration. An id without an address leaves a client waiting for a broker it was never told about
    (librdkafka's admin client waits for it until its request times out); -1 says "not known yet", and it
    asks again, as it does of a Kafka broker that has not had its first UpdateMetadata."""
    return controller_id if controller_id in set(listed) else -1


class MetadataCache:
    def __init__(self, zk: ZkClient | None) -> None:
        self.zk = zk
        self.snapshot = ClusterSnapshot()
        self.cluster_id: str | None = None  # /cluster/id, read once at start (KafkaServer)
        self._write_lock = threading.Lock()  # writers come from two threads; readers never lock
        self._waiters: list[asyncio.Future] = []  # resolved at the next UpdateMetadata (event loop only)
        # What a watch has delivered: a watch can fire (on ZooKeeper's event thread) between startup's
        # subscription reading a znode and startup applying what it read; the watch's value is the newer one.
        self._watched: set[str] = set()

    def startup(self) -> None:
        self._set_brokers(self.zk.subscribe_child_changes(paths.BROKER_IDS, self._on_brokers), watched=False)
        data, _ = self.zk.subscribe_data_changes(paths.CONTROLLER, self._on_controller)
        self._set_controller(data, watched=False)

    def _on_brokers(self, path: str, children: list[str] | None) -> None:
        self._set_brokers(children, watched=True)

    def _on_controller(self, path: str, data: bytes | None, stat) -> None:
        self._set_controller(data, watched=True)

    def _set_brokers(self, children: list[str] | None, watched: bool) -> None:
        brokers = read_broker_registrations(self.zk, children or (), log)
        with self._write_lock:
            if self._keep(paths.BROKER_IDS, watched):
                self.snapshot = ClusterSnapshot(brokers, self.snapshot.controller_id, self.snapshot.partitions)

    def _set_controller(self, data: bytes | None, watched: bool) -> None:
        controller_id = -1
        if data:
            try:
                controller_id = ControllerRegistration.decode(data).broker_id
            except ZnodeFormatError as e:
                log.warning("Ignoring unreadable /controller: %s", e)
        with self._write_lock:
            if self._keep(paths.CONTROLLER, watched):
                self.snapshot = ClusterSnapshot(self.snapshot.brokers, controller_id, self.snapshot.partitions)

    def _keep(self, path: str, watched: bool) -> bool:
        """Whether a value read from `path` may replace the cached one (under the write lock): always from a watch;
        from startup's own read only while no watch has delivered a newer one."""
        if watched:
            self._watched.add(path)
            return True
        return path not in self._watched

    def update_partitions(self, states) -> None:
        """Apply an UpdateMetadata request's partition states (on the network thread)."""
        with self._write_lock:
            self._update_partitions(states)
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def publish(self, snapshot: ClusterSnapshot) -> None:
        """KRaft mode: the whole snapshot, made from a new metadata image (server/metadata_publisher.py), on the
        event loop; requests waiting for an outcome look again."""
        with self._write_lock:
            self.snapshot = snapshot
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def waiter(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        """A future resolved when the controller next updates the partitions (for requests that wait for an
        outcome: a created topic's leaders, a deleted topic gone)."""
        future = loop.create_future()
        self._waiters.append(future)
        return future

    def _update_partitions(self, states) -> None:
        partitions = {topic: dict(parts) for topic, parts in self.snapshot.partitions.items()}
        for s in states:
            if s.leader == LEADER_DURING_DELETE:
                partitions.get(s.topic, {}).pop(s.partition, None)
                if not partitions.get(s.topic, True):
                    del partitions[s.topic]
                continue
            partitions.setdefault(s.topic, {})[s.partition] = PartitionStateInfo(
                s.leader, s.leader_epoch, tuple(s.isr), tuple(s.replicas))
        self.snapshot = ClusterSnapshot(self.snapshot.brokers, self.snapshot.controller_id, partitions)
