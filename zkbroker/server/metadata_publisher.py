"""What a KRaft broker makes of the metadata log (Kafka's BrokerMetadataListener and BrokerMetadataPublisher).

The listener replays each committed run of records (or a snapshot, onto an empty image) into a MetadataDelta
and applies it: one new MetadataImage per run. The pure functions below say what the image means for the
broker, so that the rest of the broker keeps one home for each concept:

* ``cluster_snapshot``: the MetadataCache's ClusterSnapshot (what Metadata, DescribeCluster, FindCoordinator and
  the coordinators read), fenced brokers left out, and a live broker named as the controller (DESIGN §17:
  clients send controller-bound admin requests there, and brokers forward them, KIP-590);
* ``leader_and_isr``: the delta's local changes as the LeaderAndIsr-shaped request the ReplicaManager already
  applies (the partition epoch stands for the zkVersion, the metadata log's epoch for the controller epoch),
  plus the changes that keep the leader and its epoch (an ISR change), which LeaderAndIsr would call stale;
* ``stop_replica``: the partitions to delete, as the StopReplica-shaped request the ReplicaManager applies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from zkbroker.metadata.delta import LocalReplicaChanges, MetadataDelta
from zkbroker.metadata.image import MetadataImage
from zkbroker.metadata.partition import PartitionRegistration
from zkbroker.protocol.metadata_records import encode_frame
from zkbroker.raft.listener import MetadataRecord
from zkbroker.raft.snapshot_policy import SnapshotPolicy
from zkbroker.server.metadata_cache import ClusterSnapshot, PartitionStateInfo
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk.znodes import BrokerRegistration as ZkBrokerRegistration

_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


def cluster_snapshot(image: MetadataImage, broker_id: int, listener: str = "PLAINTEXT") -> ClusterSnapshot:
    live = {}
    for broker in image.live_brokers():
        endpoints = tuple((e.name, e.host, e.port, _PROTOCOLS.get(e.security_protocol, e.name))
                          for e in broker.endpoints)
        main = broker.endpoint(listener) or (broker.endpoints[0] if broker.endpoints else None)
        if main is None:
            continue
        live[broker.id] = ZkBrokerRegistration(broker.id, main.host, main.port, timestamp="", epoch=broker.epoch,
                                               endpoints=endpoints)
    # Kafka 3.7 names a live broker as the controller; this broker when it is live, so admin requests come here
    controller = broker_id if broker_id in live else min(live, default=-1)
    partitions = {name: {pid: PartitionStateInfo(p.leader, p.leader_epoch, p.isr, p.replicas)
                         for pid, p in topic.partitions.items()}
                  for name, topic in image.topics_by_name.items()}
    return ClusterSnapshot(live, controller, partitions)


# ---- the ReplicaManager's requests ------------------------------------------------------------------------------

@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int  # the partition epoch
    replicas: tuple[int, ...]


@dataclass(frozen=True)
class LiveLeader:
    broker_id: int
    host: str
    port: int


@dataclass(frozen=True)
class ImageLeaderAndIsr:
    """A LeaderAndIsr request as the image says it (the controller id is the metadata log's leader)."""

    controller_id: int
    controller_epoch: int
    partition_states: list[PartitionState]
    live_leaders: list[LiveLeader]


@dataclass(frozen=True)
class _StopEntry:
    topic: str
    partition: int


@dataclass(frozen=True)
class ImageStopReplica:
    controller_id: int
    controller_epoch: int
    delete_partitions: bool
    partitions: list[_StopEntry]


@dataclass(frozen=True)
class IsrUpdate:
    """A partition whose leader and leader epoch stay, with a new ISR (or replicas) and partition epoch."""

    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int


def leader_and_isr(changes: LocalReplicaChanges, image: MetadataImage, leader_epochs: Mapping[TopicPartition, int],
                   listener: str = "PLAINTEXT", controller_id: int = -1
                   ) -> tuple[ImageLeaderAndIsr, dict[TopicPartition, IsrUpdate]]:
    """The partitions whose leader epoch moved past the one this broker holds (`leader_epochs`; a partition it
    does not hold yet always) as one LeaderAndIsr request; those whose leader epoch stays, as ISR updates."""
    states: list[PartitionState] = []
    updates: dict[TopicPartition, IsrUpdate] = {}
    for tp, part in [*changes.leaders.items(), *changes.followers.items()]:
        held = leader_epochs.get(tp)
        if held is not None and part.leader_epoch <= held:
            updates[tp] = IsrUpdate(part.isr, part.replicas, part.partition_epoch)
            continue
        states.append(_state(tp, part, image.epoch))
    wanted = {s.leader for s in states}
    leaders = []
    for broker_id in sorted(wanted):
        broker = image.brokers.get(broker_id)
        endpoint = None if broker is None else broker.endpoint(listener)
        if endpoint is not None:
            leaders.append(LiveLeader(broker_id, endpoint.host, endpoint.port))
    return ImageLeaderAndIsr(controller_id, image.epoch, states, leaders), updates


def _state(tp: TopicPartition, part: PartitionRegistration, epoch: int) -> PartitionState:
    return PartitionState(tp[0], tp[1], epoch, part.leader, part.leader_epoch, part.isr, part.partition_epoch,
                          part.replicas)


def stop_replica(deletes: set[TopicPartition], image: MetadataImage, controller_id: int = -1) -> ImageStopReplica:
    return ImageStopReplica(controller_id, image.epoch, True, [_StopEntry(t, p) for t, p in sorted(deletes)])


# ---- the listener ----------------------------------------------------------------------------------------------

@dataclass
class BrokerMetadataListener:
    """The metadata log's listener on a broker: the image, replaced after each committed run of records, handed
    to `publish(image, delta)` (delta None: a snapshot replaced the whole image)."""

    publish: Callable[[MetadataImage, MetadataDelta], None]
    image: MetadataImage = field(default_factory=MetadataImage)
    leader: tuple[int | None, int] = (None, -1)

    def handle_commit(self, base_offset: int, last_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        delta = MetadataDelta(self.image)
        offset = base_offset
        for item in records:
            delta.replay(item, offset, epoch)
            offset += 1
        delta.offset = last_offset
        self.image = delta.apply()
        self.publish(self.image, delta)

    def handle_load_snapshot(self, end_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        delta = MetadataDelta(MetadataImage())
        for item in records:
            delta.replay(item, end_offset - 1, epoch)
        self.image = delta.apply()
        self.publish(self.image, delta)

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        self.leader = (leader_id, epoch)


@dataclass
class BrokerSnapshotWriter:
    """A second listener of the metadata log on a broker, after the image's: when the SnapshotPolicy says so
    (metadata.log.max.record.bytes.between.snapshots, or the interval), the image goes to the broker's own
    metadata log dir as a snapshot (`write(end_offset, epoch, records)`, the RaftClient's create_snapshot), so a
    restart loads it and replays only the log after it; the segments below it are deleted."""

    listener: BrokerMetadataListener
    policy: SnapshotPolicy
    write: Callable[[int, int, list[MetadataRecord]], None]
    clock: Callable[[], int]

    def handle_commit(self, base_offset: int, last_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        nbytes = sum(len(encode_frame(*item)) for item in records)
        if self.policy.committed(nbytes, self.clock()):
            image = self.listener.image
            self.write(image.offset + 1, image.epoch, image.to_records())
            self.policy.taken(self.clock())

    def handle_load_snapshot(self, end_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        self.policy.taken(self.clock())

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        pass
