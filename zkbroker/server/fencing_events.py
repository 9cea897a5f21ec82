"""The timeline's `broker_fenced` / `broker_unfenced` events (DESIGN §17) and the partitions' `leader_changed` /
`isr_changed` (DESIGN §10's kinds) as the active controller commits them.

A broker reports its own fencing when its heartbeat learns it, but a broker that was killed learns nothing: the
quorum fences it after broker.session.timeout.ms, and only the metadata log says so. This listener reads the
committed RegisterBroker (a registration starts fenced, with its incarnation id: a restarted broker's new one),
FenceBroker, UnfenceBroker and BrokerRegistrationChange records and, on the active controller only (so one event
per decision in a lab of several voters), emits them from `controller:ID`. Likewise each committed
PartitionRecord and PartitionChangeRecord that names a leader or an ISR, as ZooKeeper mode's controller does
when it writes a partition's state znode (with the partition epoch where ZooKeeper mode has the zkVersion), so
the history and the side-by-side view draw a KRaft lab's leaderships as they draw a ZooKeeper lab's. Every
controller keeps the partitions it needs for that (a standby may lead next). Only a lab controller registers it.
"""

from __future__ import annotations

import uuid

from zkbroker import timeline
from zkbroker.metadata.partition import PartitionRegistration
from zkbroker.metadata.records import (
    BROKER_REGISTRATION_CHANGE,
    FENCE,
    FENCE_BROKER,
    PARTITION,
    PARTITION_CHANGE,
    REGISTER_BROKER,
    REMOVE_TOPIC,
    TOPIC,
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


class PartitionLeaderships:
    """The partitions as the committed records leave them (topic names by id, each PartitionRegistration), and the
    `leader_changed` / `isr_changed` events a run of records makes: a new leader or leader epoch, or a new ISR."""

    def __init__(self) -> None:
        self.topics: dict[bytes, str] = {}
        self.partitions: dict[tuple[bytes, int], PartitionRegistration] = {}

    def replay(self, records: list[MetadataRecord]) -> list[tuple[str, dict]]:
        events = []
        for api_key, _, rec in records:
            if api_key == TOPIC:
                self.topics[bytes(rec.topic_id)] = rec.name
            elif api_key == REMOVE_TOPIC:
                topic_id = bytes(rec.topic_id)
                self.topics.pop(topic_id, None)
                for key in [k for k in self.partitions if k[0] == topic_id]:
                    del self.partitions[key]
            elif api_key in (PARTITION, PARTITION_CHANGE):
                key = (bytes(rec.topic_id), rec.partition_id)
                before = self.partitions.get(key)
                if api_key == PARTITION:
                    after = PartitionRegistration.from_record(rec)
                elif before is not None:
                    after = before.merge(rec)
                else:
                    continue  # a change to a partition this listener never saw created: nothing to compare
                self.partitions[key] = after
                topic = self.topics.get(key[0])
                if topic is None:
                    continue
                fields = {"topic": topic, "partition": key[1], "leader": after.leader,
                          "leader_epoch": after.leader_epoch, "isr": list(after.isr),
                          "partition_epoch": after.partition_epoch}
                if before is None or (before.leader, before.leader_epoch) != (after.leader, after.leader_epoch):
                    events.append(("leader_changed", {**fields, "previous_leader": None if before is None
                                                      else before.leader}))
                elif before.isr != after.isr:
                    events.append(("isr_changed", {**fields, "from": list(before.isr)}))
        return events


class FencingTimeline:
    """A RaftListener of a lab controller: the committed fencing and leadership decisions, as timeline events."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.source = f"controller:{node_id}"
        self.leading = False
        self.leaderships = PartitionLeaderships()

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        self.leading = leader_id == self.node_id

    def handle_commit(self, base_offset: int, last_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        leaderships = self.leaderships.replay(records)
        if not self.leading:
            return
        for kind, fields in fencing_events(records) + leaderships:
            timeline.emit(self.source, kind, **fields)

    def handle_load_snapshot(self, end_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        self.leaderships = PartitionLeaderships()  # a snapshot is state, not a decision taken now
        self.leaderships.replay(records)
