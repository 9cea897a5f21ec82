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


TOPIC_ID = b"\x01" * 16


def _partition(leader: int, isr: list[int]) -> tuple:
    from zkbroker.metadata.partition import PartitionRegistration

    return PartitionRegistration((1, 2), tuple(isr), leader).to_record(TOPIC_ID, 0)


def test_partition_records_become_leader_and_isr_changes_named_by_topic_on_the_active_controller_only(
        tmp_path, monkeypatch):
    from zkbroker.metadata.partition import partition_change
    from zkbroker.metadata.records import TOPIC

    path = tmp_path / timeline.FILE_NAME
    monkeypatch.setenv(timeline.ENV_VAR, str(path))
    listener = FencingTimeline(3002)
    listener.handle_leader_change(3001, 1)
    listener.handle_commit(0, 1, 1, [record(TOPIC, name="t", topic_id=TOPIC_ID), _partition(1, [1, 2])])
    listener.handle_leader_change(3002, 2)  # a standby kept the partitions: it can say what changed when it leads
    listener.handle_commit(2, 3, 2, [partition_change(TOPIC_ID, 0, leader=2, isr=(2,)),
                                     partition_change(TOPIC_ID, 0, isr=(2, 1))])
    events = timeline.read(path)
    assert [(e["source"], e["kind"], e["leader"], e["leader_epoch"], e["isr"], e["partition_epoch"])
            for e in events] == [("controller:3002", "leader_changed", 2, 1, [2], 1),
                                 ("controller:3002", "isr_changed", 2, 1, [2, 1], 2)]
    assert events[0]["topic"] == "t" and events[0]["previous_leader"] == 1 and events[1]["from"] == [2]
