"""BrokerRegistration: one broker as the metadata log says it is (Kafka's BrokerRegistration): who it is (id,
incarnation, epoch), where it listens, what it supports, and whether it is fenced or shutting down. Built from
RegisterBrokerRecord and changed by FenceBroker/UnfenceBroker (metadata versions before 3.3) and
BrokerRegistrationChange records; ``changed`` is the one place that says how.

The broker epoch is the offset the controller chose for the registration (Kafka uses the record's own offset);
requests from the broker carry it, and one from an older incarnation is refused as stale.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .records import (
    BROKER_REGISTRATION_CHANGE,
    FENCE,
    FENCE_BROKER,
    IN_CONTROLLED_SHUTDOWN,
    REGISTER_BROKER,
    UNFENCE,
    UNFENCE_BROKER,
    element,
    record,
)

_ENDPOINT = element(REGISTER_BROKER, "end_points")
_FEATURE = element(REGISTER_BROKER, "features")


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    id: int
    epoch: int
    incarnation_id: bytes
    endpoints: tuple[Endpoint, ...]
    features: tuple[tuple[str, int, int], ...] = ()  # (name, min supported, max supported)
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False

    @classmethod
    def from_record(cls, rec: Any) -> BrokerRegistration:
        return cls(rec.broker_id, rec.broker_epoch, bytes(rec.incarnation_id),
                   tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in rec.end_points),
                   tuple((f.name, f.min_supported_version, f.max_supported_version) for f in rec.features),
                   rec.rack, bool(rec.fenced), bool(getattr(rec, "in_controlled_shutdown", False)))

    def changed(self, api_key: int, rec: Any) -> BrokerRegistration:
        """After a FenceBroker, UnfenceBroker or BrokerRegistrationChange record naming this broker's epoch."""
        if api_key == FENCE_BROKER:
            return replace(self, fenced=True)
        if api_key == UNFENCE_BROKER:
            return replace(self, fenced=False)
        assert api_key == BROKER_REGISTRATION_CHANGE
        fenced = {FENCE: True, UNFENCE: False}.get(rec.fenced, self.fenced)
        shutting = self.in_controlled_shutdown or rec.in_controlled_shutdown == IN_CONTROLLED_SHUTDOWN
        return replace(self, fenced=fenced, in_controlled_shutdown=shutting)

    def to_record(self) -> tuple:
        return record(REGISTER_BROKER, broker_id=self.id, incarnation_id=self.incarnation_id, broker_epoch=self.epoch,
                      end_points=[_ENDPOINT(e.name, e.host, e.port, e.security_protocol) for e in self.endpoints],
                      features=[_FEATURE(n, lo, hi) for n, lo, hi in self.features],
                      rack=self.rack, fenced=self.fenced, in_controlled_shutdown=self.in_controlled_shutdown)

    def endpoint(self, listener: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.name == listener), None)
