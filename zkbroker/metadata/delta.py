"""MetadataDelta: the changes of a run of metadata records on top of a MetadataImage (Kafka's MetadataDelta), and
what they mean for one broker's replicas (``local_changes``: the partitions it now leads, follows, or must
delete, Kafka's LocalReplicaChanges).

A broker replays each committed record (or a snapshot's, onto an empty image) into a delta, then ``apply`` makes
the next image. Records change partitions and brokers through ``PartitionRegistration.merge`` and
``BrokerRegistration.changed``, the same functions the quorum controller replays with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from zkbroker.topic_partition import TopicPartition

from .broker import BrokerRegistration
from .image import MetadataImage, TopicImage
from .partition import PartitionRegistration
from .records import (
    BROKER_REGISTRATION_CHANGE,
    CONFIG,
    FEATURE_LEVEL,
    FENCE_BROKER,
    PARTITION,
    PARTITION_CHANGE,
    PRODUCER_IDS,
    REGISTER_BROKER,
    REMOVE_TOPIC,
    TOPIC,
    TOPIC_RESOURCE,
    UNFENCE_BROKER,
    UNREGISTER_BROKER,
    MetadataRecord,
)


@dataclass
class _TopicDelta:
    image: TopicImage  # as before the delta (a new topic: empty)
    changed: dict[int, PartitionRegistration] = field(default_factory=dict)

    def partition(self, partition_id: int) -> PartitionRegistration:
        found = self.changed.get(partition_id) or self.image.partitions.get(partition_id)
        if found is None:
            raise ValueError(f"a change names partition {partition_id} of {self.image.name}, which does not exist")
        return found


@dataclass(frozen=True)
class LocalReplicaChanges:
    """What a broker must do after a delta: become leader of `leaders`, follower of `followers` (each with the
    partition's new registration), stop and delete its replicas of `deletes`."""

    leaders: dict[TopicPartition, PartitionRegistration]
    followers: dict[TopicPartition, PartitionRegistration]
    deletes: set[TopicPartition]


class MetadataDelta:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._features: dict[str, int] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}  # None: unregistered
        self._topics: dict[bytes, _TopicDelta] = {}
        self._removed: dict[bytes, TopicImage] = {}
        self._configs: dict[tuple[int, str], dict[str, str]] = {}
        self._next_producer_id: int | None = None
        self.offset, self.epoch = image.offset, image.epoch

    # ---- replay ---------------------------------------------------------------------------------------------

    def replay(self, item: MetadataRecord, offset: int, epoch: int) -> None:
        api_key, _version, rec = item
        self.offset, self.epoch = offset, epoch
        if api_key == REGISTER_BROKER:
            self._brokers[rec.broker_id] = BrokerRegistration.from_record(rec)
        elif api_key == UNREGISTER_BROKER:
            self._brokers[rec.broker_id] = None
        elif api_key in (FENCE_BROKER, UNFENCE_BROKER, BROKER_REGISTRATION_CHANGE):
            broker_id = rec.id if api_key != BROKER_REGISTRATION_CHANGE else rec.broker_id
            broker = self._broker(broker_id)
            if broker is not None:
                self._brokers[broker_id] = broker.changed(api_key, rec)
        elif api_key == TOPIC:
            topic_id = bytes(rec.topic_id)
            self._topics[topic_id] = _TopicDelta(TopicImage(rec.name, topic_id))
        elif api_key == PARTITION:
            self._topic(bytes(rec.topic_id)).changed[rec.partition_id] = PartitionRegistration.from_record(rec)
        elif api_key == PARTITION_CHANGE:
            topic = self._topic(bytes(rec.topic_id))
            topic.changed[rec.partition_id] = topic.partition(rec.partition_id).merge(rec)
        elif api_key == REMOVE_TOPIC:
            topic_id = bytes(rec.topic_id)
            topic = self._topic(topic_id)
            del self._topics[topic_id]
            if topic_id in self.image.topics_by_id:
                self._removed[topic_id] = self.image.topics_by_id[topic_id]
            self._configs[(TOPIC_RESOURCE, topic.image.name)] = {}  # its configs go with it
        elif api_key == CONFIG:
            key = (rec.resource_type, rec.resource_name)
            props = self._configs.setdefault(key, dict(self.image.configs.get(key, {})))
            if rec.value is None:
                props.pop(rec.name, None)
            else:
                props[rec.name] = rec.value
        elif api_key == FEATURE_LEVEL:
            self._features[rec.name] = rec.feature_level
        elif api_key == PRODUCER_IDS:
            self._next_producer_id = rec.next_producer_id

    @property
    def changed_topic_configs(self) -> set[str]:
        """The topics whose configs this delta changes (a broker's open logs take them)."""
        return {name for rtype, name in self._configs if rtype == TOPIC_RESOURCE}

    def _broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self.image.brokers.get(broker_id)

    def _topic(self, topic_id: bytes) -> _TopicDelta:
        delta = self._topics.get(topic_id)
        if delta is None:
            image = self.image.topics_by_id.get(topic_id)
            if image is None or topic_id in self._removed:
                raise ValueError(f"a record names topic id {topic_id.hex()}, which does not exist")
            delta = self._topics[topic_id] = _TopicDelta(image)
        return delta

    # ---- the next image -------------------------------------------------------------------------------------

    def apply(self) -> MetadataImage:
        image = self.image
        features = {**image.features, **self._features}
        features = {name: level for name, level in features.items() if level != 0}
        brokers = dict(image.brokers)
        for broker_id, broker in self._brokers.items():
            if broker is None:
                brokers.pop(broker_id, None)
            else:
                brokers[broker_id] = broker
        by_id = {topic_id: topic for topic_id, topic in image.topics_by_id.items() if topic_id not in self._removed}
        for topic_id, delta in self._topics.items():
            partitions = {**delta.image.partitions, **delta.changed}
            by_id[topic_id] = TopicImage(delta.image.name, topic_id, MappingProxyType(partitions))
        configs = dict(image.configs)
        for key, props in self._configs.items():
            if props:
                configs[key] = MappingProxyType(dict(props))
            else:
                configs.pop(key, None)
        return MetadataImage(
            self.offset, self.epoch, MappingProxyType(features), MappingProxyType(brokers),
            MappingProxyType(by_id), MappingProxyType({t.name: t for t in by_id.values()}),
            MappingProxyType(configs),
            image.next_producer_id if self._next_producer_id is None else self._next_producer_id)

    def local_changes(self, broker_id: int) -> LocalReplicaChanges:
        """The partitions whose role on `broker_id` this delta changes (a partition epoch that moved, a new
        partition), and those it must delete (no longer a replica, or the topic removed)."""
        leaders: dict[TopicPartition, PartitionRegistration] = {}
        followers: dict[TopicPartition, PartitionRegistration] = {}
        deletes: set[TopicPartition] = set()
        for topic in self._removed.values():
            deletes |= {(topic.name, p) for p, part in topic.partitions.items() if broker_id in part.replicas}
        for delta in self._topics.values():
            for partition_id, part in delta.changed.items():
                tp = (delta.image.name, partition_id)
                before = delta.image.partitions.get(partition_id)
                if broker_id in part.replicas:
                    if before is not None and before.partition_epoch == part.partition_epoch:
                        continue
                    (leaders if part.leader == broker_id else followers)[tp] = part
                elif before is not None and broker_id in before.replicas:
                    deletes.add(tp)
        return LocalReplicaChanges(leaders, followers, deletes)


def image_from_records(records: list[MetadataRecord], offset: int, epoch: int,
                       base: MetadataImage | None = None) -> MetadataImage:
    """An image from a snapshot's records (onto an empty image) or a run of committed records (onto `base`)."""
    delta = MetadataDelta(base or MetadataImage())
    for item in records:
        delta.replay(item, offset, epoch)
    return delta.apply()
