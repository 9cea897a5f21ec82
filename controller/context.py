"""ControllerContext: what the active controller knows about the cluster (Kafka's ControllerContext).

It is owned by the controller's event thread alone, so it needs no locks. It grows with the controller
issue (topics, assignments, leadership); today it holds the epoch and the live brokers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zkbroker.zk.znodes import BrokerRegistration


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)

    @property
    def live_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers) | self.shutting_down_broker_ids
