"""ClusterControlManager: the registered brokers (KIP-631) and their lifecycle.

A broker registers with an incarnation id (new at every start) and gets a broker epoch; it starts fenced. Its
heartbeats say how far it has read the metadata log: once past its own RegisterBrokerRecord it is caught up and
unfenced; a broker silent for ``broker.session.timeout.ms`` is fenced again; a heartbeat asking to shut down puts
it in controlled shutdown until its leaderships have moved. Fenced brokers and brokers shutting down lead
nothing and are left out of new ISRs (ReplicationControlManager decides the partitions' side of each step).

The registrations are replicated state (replayed from records); the heartbeats' times are the active
controller's own (BrokerHeartbeatManager), and restart when a controller becomes active: every unfenced broker
gets a full session from then.
"""

from __future__ import annotations

from typing import Any

from zkbroker.admin_checks import ApiError
from zkbroker.metadata.broker import BrokerRegistration, Endpoint
from zkbroker.metadata.records import (
    BROKER_REGISTRATION_CHANGE,
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    UNFENCE,
    UNREGISTER_BROKER,
    MetadataRecord,
    record,
)
from zkbroker.protocol.errors import ErrorCode

from .feature_control import FeatureControlManager
from .timeline import SnapshotRegistry, TimelineDict


class BrokerHeartbeatManager:
    """When the active controller last heard from each broker (Kafka's BrokerHeartbeatManager)."""

    def __init__(self) -> None:
        self.last_contact_ms: dict[int, int] = {}
        self.metadata_offsets: dict[int, int] = {}  # how far each broker said it has read the metadata log

    def touch(self, broker_id: int, now_ms: int, metadata_offset: int | None = None) -> None:
        self.last_contact_ms[broker_id] = now_ms
        if metadata_offset is not None:
            self.metadata_offsets[broker_id] = metadata_offset

    def remove(self, broker_id: int) -> None:
        self.last_contact_ms.pop(broker_id, None)
        self.metadata_offsets.pop(broker_id, None)

    def has_valid_session(self, broker_id: int, now_ms: int, session_timeout_ms: int) -> bool:
        last = self.last_contact_ms.get(broker_id)
        return last is not None and now_ms - last <= session_timeout_ms

    def clear(self) -> None:
        self.last_contact_ms.clear()
        self.metadata_offsets.clear()


class ClusterControlManager:
    def __init__(self, registry: SnapshotRegistry, features: FeatureControlManager, cluster_id: str,
                 session_timeout_ms: int) -> None:
        self.features = features
        self.cluster_id = cluster_id
        self.session_timeout_ms = session_timeout_ms
        self.brokers: TimelineDict[int, BrokerRegistration] = TimelineDict(registry)
        # where each broker's RegisterBrokerRecord is: it is caught up once its metadata offset reaches it
        self.registration_offsets: TimelineDict[int, int] = TimelineDict(registry)
        # where each broker entered controlled shutdown
        self.controlled_shutdown_offsets: TimelineDict[int, int] = TimelineDict(registry)
        self.heartbeats = BrokerHeartbeatManager()

    # ---- questions ------------------------------------------------------------------------------------------

    def is_active(self, broker_id: int) -> bool:
        """May lead and join ISRs: registered, unfenced, not shutting down (Kafka's isActive)."""
        broker = self.brokers.get(broker_id)
        return broker is not None and not broker.fenced and not broker.in_controlled_shutdown

    def active_brokers(self) -> set[int]:
        return {b.id for b in self.brokers.values() if not b.fenced and not b.in_controlled_shutdown}

    def unfenced_brokers(self) -> list[int]:
        """Where new replicas may go (Kafka's usable brokers)."""
        return sorted(b.id for b in self.brokers.values() if not b.fenced)

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> BrokerRegistration:
        broker = self.brokers.get(broker_id)
        if broker is None:
            raise ApiError(ErrorCode.STALE_BROKER_EPOCH, f"No broker registration found for broker {broker_id}")
        if broker.epoch != broker_epoch:
            raise ApiError(ErrorCode.STALE_BROKER_EPOCH, f"Expected broker epoch {broker.epoch}, but got broker "
                                                         f"epoch {broker_epoch}")
        return broker

    def heard_from(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """A heartbeat of the registered broker's current epoch arrived: its session runs from now (its metadata
        offset is taken when the heartbeat is processed)."""
        broker = self.brokers.get(broker_id)
        if broker is not None and broker.epoch == broker_epoch and broker_id in self.heartbeats.last_contact_ms:
            self.heartbeats.touch(broker_id, now_ms)

    def stale_brokers(self, now_ms: int) -> list[int]:
        """Unfenced brokers whose session has expired, oldest contact first."""
        expired = [(last, broker_id) for broker_id, last in self.heartbeats.last_contact_ms.items()
                   if now_ms - last > self.session_timeout_ms and broker_id in self.brokers
                   and not self.brokers[broker_id].fenced]
        return [broker_id for _, broker_id in sorted(expired)]

    # ---- requests -------------------------------------------------------------------------------------------

    def register_broker(self, request: Any, broker_epoch: int, now_ms: int) -> MetadataRecord:
        """BrokerRegistration's checks; the RegisterBrokerRecord to write (the broker fenced, at `broker_epoch`)."""
        if request.cluster_id != self.cluster_id:
            raise ApiError(ErrorCode.INCONSISTENT_CLUSTER_ID,
                           f"Expected cluster ID {self.cluster_id}, but got cluster ID {request.cluster_id}")
        existing = self.brokers.get(request.broker_id)
        if (existing is not None and existing.incarnation_id != bytes(request.incarnation_id)
                and self.heartbeats.has_valid_session(request.broker_id, now_ms, self.session_timeout_ms)):
            raise ApiError(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                           f"Another broker is registered with that broker id {request.broker_id}.")
        self.features.check_broker_supports(request.features)
        names = [listener.name for listener in request.listeners]
        if len(set(names)) != len(names):
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Listener names repeat: {','.join(names)}")
        if existing is not None:
            broker_epoch = max(broker_epoch, existing.epoch + 1)
        registration = BrokerRegistration(
            request.broker_id, broker_epoch, bytes(request.incarnation_id),
            tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in request.listeners),
            tuple((f.name, f.min_supported_version, f.max_supported_version) for f in request.features),
            request.rack, fenced=True)
        self.heartbeats.touch(request.broker_id, now_ms)
        return registration.to_record()

    def fence_record(self, broker: BrokerRegistration) -> MetadataRecord:
        return record(BROKER_REGISTRATION_CHANGE, broker_id=broker.id, broker_epoch=broker.epoch, fenced=FENCE)

    def unfence_record(self, broker: BrokerRegistration) -> MetadataRecord:
        return record(BROKER_REGISTRATION_CHANGE, broker_id=broker.id, broker_epoch=broker.epoch, fenced=UNFENCE)

    def controlled_shutdown_record(self, broker: BrokerRegistration) -> MetadataRecord:
        return record(BROKER_REGISTRATION_CHANGE, broker_id=broker.id, broker_epoch=broker.epoch,
                      in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN)

    def unregister_record(self, broker: BrokerRegistration) -> MetadataRecord:
        return record(UNREGISTER_BROKER, broker_id=broker.id, broker_epoch=broker.epoch)

    def activate(self, now_ms: int) -> None:
        """A new active controller gives every unfenced broker a full session from now."""
        self.heartbeats.clear()
        for broker in self.brokers.values():
            if not broker.fenced:
                self.heartbeats.touch(broker.id, now_ms)

    # ---- replay ---------------------------------------------------------------------------------------------

    def replay_register(self, rec: Any, offset: int) -> None:
        registration = BrokerRegistration.from_record(rec)
        self.brokers[registration.id] = registration
        self.registration_offsets[registration.id] = offset
        if registration.in_controlled_shutdown:  # as a snapshot holds it
            self.controlled_shutdown_offsets[registration.id] = offset
        else:
            self.controlled_shutdown_offsets.pop(registration.id)

    def replay_unregister(self, rec: Any) -> None:
        broker = self._named(rec.broker_id, rec.broker_epoch)
        del self.brokers[broker.id]
        self.registration_offsets.pop(broker.id)
        self.controlled_shutdown_offsets.pop(broker.id)
        self.heartbeats.remove(broker.id)

    def replay_change(self, api_key: int, rec: Any, offset: int) -> None:
        """FenceBroker, UnfenceBroker or BrokerRegistrationChange."""
        broker_id = rec.broker_id if hasattr(rec, "broker_id") else rec.id
        epoch = rec.broker_epoch if hasattr(rec, "broker_epoch") else rec.epoch
        broker = self._named(broker_id, epoch)
        changed = broker.changed(api_key, rec)
        if changed.in_controlled_shutdown and not broker.in_controlled_shutdown:
            self.controlled_shutdown_offsets[broker_id] = offset
        self.brokers[broker_id] = changed

    def _named(self, broker_id: int, epoch: int) -> BrokerRegistration:
        broker = self.brokers.get(broker_id)
        if broker is None or broker.epoch != epoch:
            raise ValueError(f"a record names broker {broker_id} at epoch {epoch}, but the registration is "
                             f"{None if broker is None else broker.epoch}")
        return broker

    def snapshot_records(self) -> list[MetadataRecord]:
        return [self.brokers[broker_id].to_record() for broker_id in sorted(self.brokers)]
