"""Where a `zkkafka` read learns the cluster on the driver: its topics, their partitions and leaders, the live
brokers and a group's committed offsets.

* `zookeeper.connect` (the 0.8.2 way): the znodes (/brokers/topics, the partitions' state znodes, /brokers/ids,
  /consumers/GROUP/offsets), with watches telling a stream when its subscription may have changed;
* `kafka.bootstrap.servers` (the way Spark's own Kafka source goes, and the only one a KRaft cluster offers,
  DESIGN §17): Metadata from the brokers, and the committed offsets at the group's coordinator (OffsetFetch:
  the offsets a coordinator group commits to Kafka, not a 0.8.2 group's in ZooKeeper). With no watches to
  wait on, a stream asks Metadata again at every trigger.

The offsets themselves (ListOffsets at the leaders) and the reads are the same either way."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from .options import SourceOptions, ZkKafkaOptionError

__all__ = ["BootstrapView", "ClusterView", "ZooKeeperView", "open_view"]

# OffsetFetch v1 (Kafka 0.8.2+) reads the offsets stored in Kafka; -1 means none committed.
_OFFSET_FETCH_VERSION = 1


class ZooKeeperView:
    """The cluster as its ZooKeeper holds it. `zk` is a started client (or anything with get/get_children)."""

    def __init__(self, zk, where: str, on_close: Callable[[], None] | None = None) -> None:
        self.zk = zk
        self.where = where
        self._on_close = on_close
        self._stale = threading.Event()
        self._stale.set()
        self._watching_topics = False
        self._watched: set[str] = set()

    def topics(self) -> set[str]:
        from zkbroker.zk import paths

        return set(self.zk.get_children(paths.BROKER_TOPICS))

    def partitions(self, topic: str) -> list[int]:
        """The topic's partition ids, sorted ([] for a topic that does not exist)."""
        from zkbroker.zk import paths
        from zkbroker.zk.znodes import TopicAssignment

        data, _ = self.zk.get(paths.topic_path(topic))
        return sorted(TopicAssignment.decode(data, paths.topic_path(topic)).partitions) if data else []

    def leader(self, topic: str, partition: int) -> int:
        from zkbroker.zk import paths
        from zkbroker.zk.znodes import LeaderIsrState

        data, _ = self.zk.get(paths.partition_state_path(topic, partition))
        return LeaderIsrState.decode(data).leader if data else -1

    def committed(self, group: str, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        from zkbroker.zk import paths
        from zkbroker.zk.znodes import ZnodeFormatError, decode_offset

        out: dict[tuple[str, int], int | None] = {}
        for topic, partition in partitions:
            data, _ = self.zk.get(paths.consumer_offset_path(group, topic, partition))
            try:
                out[(topic, partition)] = decode_offset(data) if data is not None else None
            except ZnodeFormatError as e:
                logging.getLogger("consumer.spark").warning(
                    "Ignoring the committed offset of %s-%d for group %s: %s", topic, partition, group, e)
                out[(topic, partition)] = None
        return out

    def brokers(self) -> tuple[tuple[str, int], ...]:
        from consumer.fetcher import live_brokers

        return tuple((b.host, b.port) for b in live_brokers(self.zk))

    def changed(self) -> bool:
        """Whether the subscription may have changed since the last call (a topic created or deleted, a watched
        topic's partitions added); True the first time. The topic list is watched from the first call on."""
        from zkbroker.zk import paths

        if not self._watching_topics:
            self.zk.subscribe_child_changes(paths.BROKER_TOPICS, self._changed)
            self._watching_topics = True
        changed = self._stale.is_set()
        self._stale.clear()  # before the caller reads: a change during its read fires again
        return changed

    def watch(self, topics: Iterable[str]) -> None:
        """Watch these topics' partition lists too."""
        from zkbroker.zk import paths

        for topic in set(topics) - self._watched:
            self.zk.subscribe_data_changes(paths.topic_path(topic), self._changed)
            self._watched.add(topic)

    def _changed(self, *_args) -> None:
        self._stale.set()

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()


class BootstrapView:
    """The cluster as its brokers describe it (Metadata), starting from `kafka.bootstrap.servers`."""

    def __init__(self, bootstrap: str, client_id: str, timeout_s: float, security=None) -> None:
        from zkbroker.client.metadata import MetadataClient, parse_broker_list

        self.where = bootstrap
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._security = security  # the options' ClientSecurity; None: PLAINTEXT
        self._metadata = MetadataClient(parse_broker_list(bootstrap, "kafka.bootstrap.servers"), client_id, timeout_s,
                                        security)
        self._cluster = None

    def _fetch(self, topics: Iterable[str] | None = None):
        self._cluster = self._metadata.fetch(topics)
        return self._cluster

    def topics(self) -> set[str]:
        return set(self._fetch().topics)

    def partitions(self, topic: str) -> list[int]:
        cluster = self._cluster if self._cluster is not None and topic in self._cluster.topics else self._fetch()
        return sorted(cluster.topics.get(topic, {}))

    def leader(self, topic: str, partition: int) -> int:
        cluster = self._cluster if self._cluster is not None else self._fetch([topic])
        leader = cluster.leader_for(topic, partition)
        return leader.node_id if leader is not None else -1

    def brokers(self) -> tuple[tuple[str, int], ...]:
        cluster = self._cluster if self._cluster is not None else self._fetch()
        return tuple((b.host, b.port) for b in cluster.brokers.values())

    def committed(self, group: str, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        """The group's committed offsets at its coordinator (FindCoordinator, then OffsetFetch)."""
        from zkbroker.client.connection import BrokerConnection
        from zkbroker.protocol.api import ApiKey
        from zkbroker.protocol.errors import for_code

        wanted = sorted(partitions)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in wanted:
            by_topic.setdefault(topic, []).append(partition)
        host, port = self.brokers()[0]
        with BrokerConnection(host, port, self._client_id, self._timeout_s, self._security) as any_broker:
            found = any_broker.send(ApiKey.FIND_COORDINATOR, 0, {"group_id": group})
        if found.error_code:
            raise for_code(found.error_code)(f"no coordinator for group {group}")
        request = {"group_id": group, "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}
        with BrokerConnection(found.host, found.port, self._client_id, self._timeout_s,
                              self._security) as coordinator:
            response = coordinator.send(ApiKey.OFFSET_FETCH, _OFFSET_FETCH_VERSION, request)
        out: dict[tuple[str, int], int | None] = dict.fromkeys(wanted)
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code:
                    raise for_code(p.error_code)(f"OffsetFetch of {topic.topic}-{p.partition} for group {group}")
                out[(topic.topic, p.partition)] = p.offset if p.offset >= 0 else None
        return out

    def changed(self) -> bool:
        return True  # no watches: Metadata is asked again each time

    def watch(self, topics: Iterable[str]) -> None:
        pass

    def close(self) -> None:
        self._metadata.close()


ClusterView = ZooKeeperView | BootstrapView


def open_view(options: SourceOptions, name: str) -> ClusterView:
    """The view the options name (exactly one of zookeeper.connect and kafka.bootstrap.servers is set)."""
    if options.bootstrap_servers is not None:
        view: ClusterView = BootstrapView(options.bootstrap_servers, options.client_id,
                                          options.zk_connection_timeout_ms / 1000, options.security)
    else:
        from zkbroker.zk.client import ZkClient

        logging.getLogger("kazoo").setLevel(logging.ERROR)  # it logs each failed connect; ours is one sentence
        zk = ZkClient(options.zookeeper_connect, options.zk_session_timeout_ms, options.zk_connection_timeout_ms,
                      name=name)
        zk.start()
        view = ZooKeeperView(zk, options.zookeeper_connect, on_close=zk.close)
    try:
        if not view.brokers():
            raise ZkKafkaOptionError(f"No broker is registered in {view.where}")
    except BaseException:
        view.close()
        raise
    return view
