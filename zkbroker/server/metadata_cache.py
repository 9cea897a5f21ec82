"""The broker's view of cluster metadata, as served in Metadata responses.

Live brokers come from `/brokers/ids` and the controller id from `/controller`, both watched in ZooKeeper;
partition leadership arrives from the controller's UpdateMetadata requests (the wire-protocol issue).
The cache publishes immutable snapshots: ZooKeeper's event thread swaps in a new one, and request
handlers on the network thread read whichever is current without locks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import BrokerRegistration, ControllerRegistration, ZnodeFormatError

log = logging.getLogger("zkbroker.server.MetadataCache")


@dataclass(frozen=True)
class ClusterSnapshot:
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    controller_id: int = -1


class MetadataCache:
    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk
        self.snapshot = ClusterSnapshot()

    def startup(self) -> None:
        self._set_brokers(self.zk.subscribe_child_changes(paths.BROKER_IDS, self._on_brokers))
        data, _ = self.zk.subscribe_data_changes(paths.CONTROLLER, self._on_controller)
        self._set_controller(data)

    def _on_brokers(self, path: str, children: list[str] | None) -> None:
        self._set_brokers(children)

    def _on_controller(self, path: str, data: bytes | None, stat) -> None:
        self._set_controller(data)

    def _set_brokers(self, children: list[str] | None) -> None:
        brokers = {}
        for child in children or ():
            try:
                broker_id = int(child)
                data, stat = self.zk.get(paths.broker_path(broker_id))
                if stat is not None:
                    brokers[broker_id] = BrokerRegistration.decode(broker_id, data)
            except (ValueError, ZnodeFormatError) as e:
                log.warning("Ignoring unreadable broker registration %s: %s", child, e)
        self.snapshot = ClusterSnapshot(brokers, self.snapshot.controller_id)

    def _set_controller(self, data: bytes | None) -> None:
        controller_id = -1
        if data:
            try:
                controller_id = ControllerRegistration.decode(data).broker_id
            except ZnodeFormatError as e:
                log.warning("Ignoring unreadable /controller: %s", e)
        self.snapshot = ClusterSnapshot(self.snapshot.brokers, controller_id)
