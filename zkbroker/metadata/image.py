"""MetadataImage: a KRaft broker's view of the whole cluster at one offset of the metadata log (Kafka's
MetadataImage), immutable, so the request handlers read one consistent image while the next is built.

Brokers serve Metadata and DescribeCluster from it (fenced brokers are left out; topics by name and by id,
KIP-516), and learn from it which partitions they lead or follow. A new image comes from applying a
MetadataDelta (delta.py) to the last one; parts a delta did not touch are shared, not copied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .broker import BrokerRegistration
from .partition import PartitionRegistration
from .records import CONFIG, FEATURE_LEVEL, METADATA_VERSION, PRODUCER_IDS, TOPIC, TOPIC_RESOURCE, record

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


def _none() -> Any:
    return field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class TopicImage:
    name: str
    id: bytes
    partitions: Mapping[int, PartitionRegistration] = _none()


@dataclass(frozen=True)
class MetadataImage:
    offset: int = -1  # the last offset of the metadata log this image includes
    epoch: int = -1
    features: Mapping[str, int] = _none()
    brokers: Mapping[int, BrokerRegistration] = _none()
    topics_by_id: Mapping[bytes, TopicImage] = _none()
    topics_by_name: Mapping[str, TopicImage] = _none()
    configs: Mapping[tuple[int, str], Mapping[str, str]] = _none()
    next_producer_id: int = 0

    @property
    def metadata_version(self) -> int | None:
        return self.features.get(METADATA_VERSION)

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def partition(self, topic: str, partition_id: int) -> PartitionRegistration | None:
        image = self.topics_by_name.get(topic)
        return None if image is None else image.partitions.get(partition_id)

    def topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.configs.get((TOPIC_RESOURCE, topic), {}))

    def live_brokers(self) -> list[BrokerRegistration]:
        """The brokers clients may be sent to: registered and unfenced (Metadata leaves the fenced out)."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def is_empty(self) -> bool:
        return self.offset < 0

    def to_records(self) -> list[tuple]:
        """The image as records a fresh image replays into the same one (a KRaft broker's own snapshot): features
        (metadata.version first), brokers, topics with their partitions, configs, the next producer id."""
        names = sorted(self.features, key=lambda name: (name != METADATA_VERSION, name))
        out = [record(FEATURE_LEVEL, name=name, feature_level=self.features[name]) for name in names]
        out += [self.brokers[broker_id].to_record() for broker_id in sorted(self.brokers)]
        for name in sorted(self.topics_by_name):
            topic = self.topics_by_name[name]
            out.append(record(TOPIC, name=name, topic_id=topic.id))
            out += [topic.partitions[p].to_record(topic.id, p) for p in sorted(topic.partitions)]
        for (rtype, rname), props in sorted(self.configs.items()):
            out += [record(CONFIG, resource_type=rtype, resource_name=rname, name=k, value=v)
                    for k, v in sorted(props.items())]
        if self.next_producer_id:
            out.append(record(PRODUCER_IDS, broker_id=-1, broker_epoch=-1, next_producer_id=self.next_producer_id))
        return out
