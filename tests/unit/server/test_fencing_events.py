"""The timeline's broker_fenced / broker_unfenced events from committed metadata records (a lab controller's
FencingTimeline): a registration starts fenced with its incarnation id, the changes name the broker epoch, and
only the active controller reports them."""

from __future__ import annotations

import uuid

from zkbroker import timeline
from zkbroker.metadata.broker import BrokerRegistration, Endpoint
from zkbroker.metadata.records import BROKER_REGISTRATION_CHANGE, FENCE, NO_OP, UNFENCE, record
from zkbroker.server.fencing_events import FencingTimeline, fencing_events

INCARNATION = uuid.UUID("00000000-0000-0000-0000-0000000000aa")


def _registration(epoch: int) -> tuple:
    return BrokerRegistration(2, epoch, INCARNATION.bytes, (Endpoint("PLAINTEXT", "h", 9092, 0),)).to_record()


def test_a_registration_is_a_fencing_with_the_incarnation_id_and_changes_name_the_broker_epoch():
    records = [_registration(7), record(NO_OP),
               record(BROKER_REGISTRATION_CHANGE, broker_id=2, broker_epoch=7, fenced=UNFENCE),
               record(BROKER_REGISTRATION_CHANGE, broker_id=2, broker_epoch=7, fenced=FENCE),
               record(BROKER_REGISTRATION_CHANGE, broker_id=2, broker_epoch=7, fenced=0)]
    assert fencing_events(records) == [
        ("broker_fenced", {"broker": 2, "epoch": 7, "registered": True, "incarnation_id": str(INCARNATION)}),
        ("broker_unfenced", {"broker": 2, "epoch": 7}),
        ("broker_fenced", {"broker": 2, "epoch": 7})]


def test_only_the_active_controller_reports_the_decisions(tmp_path, monkeypatch):
    path = tmp_path / timeline.FILE_NAME
    monkeypatch.setenv(timeline.ENV_VAR, str(path))
    unfence = [record(BROKER_REGISTRATION_CHANGE, broker_id=2, broker_epoch=7, fenced=UNFENCE)]
    listener = FencingTimeline(3002)
    listener.handle_leader_change(3001, 1)
    listener.handle_commit(5, 5, 1, unfence)
    listener.handle_leader_change(3002, 2)
    listener.handle_commit(6, 6, 2, unfence)
    events = timeline.read(path)
    assert [(e["source"], e["kind"], e["broker"]) for e in events] == [("controller:3002", "broker_unfenced", 2)]
