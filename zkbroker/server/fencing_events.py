"""The timeline's `broker_fenced` / `broker_unfenced` events (DESIGN §17) as the active controller commits them.

A broker reports its own fencing when its heartbeat learns it, but a broker that was killed learns nothing: the
quorum fences it after broker.session.timeout.ms, and only the metadata log says so. This listener reads the
committed RegisterBroker (a registration starts fenced, with its incarnation id: a restarted broker's new one),
FenceBroker, UnfenceBroker and BrokerRegistrationChange records and, on the active controller only (so one event
per decision in a lab of several voters), emits them from `controller:ID`. Only a lab controller registers it.
"""

from __future__ import annotations

import uuid

from zkbroker import timeline
from zkbroker.metadata.records import (
    BROKER_REGISTRATION_CHANGE,
    FENCE,
    FENCE_BROKER,
    REGISTER_BROKER,
    UNFENCE,
    UNFENCE_BROKER,
)
from zkbroker.raft.listener import MetadataRecord


def fencing_events(records: list[MetadataRecord]) -> list[tuple[str, dict]]:
    """(kind, fields) for each record that fences, unfences or registers a broker, in log order."""
    events = []
    for api_key, _, rec in records:
        if api_key == REGISTER_BROKER:
            events.append(("broker_fenced" if rec.fenced else "broker_unfenced",
                           {"broker": rec.broker_id, "epoch": rec.broker_epoch, "registered": True,
                            "incarnation_id": str(uuid.UUID(bytes=bytes(rec.incarnation_id)))}))
        elif api_key in (FENCE_BROKER, UNFENCE_BROKER):
            broker = rec.broker_id if hasattr(rec, "broker_id") else rec.id
            epoch = rec.broker_epoch if hasattr(rec, "broker_epoch") else rec.epoch
            events.append(("broker_fenced" if api_key == FENCE_BROKER else "broker_unfenced",
                           {"broker": broker, "epoch": epoch}))
        elif api_key == BROKER_REGISTRATION_CHANGE and rec.fenced in (FENCE, UNFENCE):
            events.append(("broker_fenced" if rec.fenced == FENCE else "broker_unfenced",
                           {"broker": rec.broker_id, "epoch": rec.broker_epoch}))
    return events


class FencingTimeline:
    """A RaftListener of a lab controller: the committed fencing decisions, as timeline events."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.source = f"controller:{node_id}"
        self.leading = False

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        self.leading = leader_id == self.node_id

    def handle_commit(self, base_offset: int, last_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        if not self.leading:
            return
        for kind, fields in fencing_events(records):
            timeline.emit(self.source, kind, **fields)

    def handle_load_snapshot(self, end_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        pass  # a snapshot is state, not a decision taken now
