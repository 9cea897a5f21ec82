"""Cluster metadata for clients: which brokers exist and which of them leads each partition.

`MetadataClient.fetch` asks any reachable broker (the bootstrap list first, then every broker learned since)
with a Metadata v0 request -- 0.8.2's TopicMetadataRequest -- and returns an immutable `Cluster`. `Metadata`
is the producer's shared, refreshable copy (the Java client's `Metadata`): senders mark it stale when a
broker says the leadership moved, and whoever needs it fresh refreshes it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from zkbroker.client.connection import BrokerConnection
from zkbroker.client.security import AuthenticationError, ClientSecurity
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode, ProtocolError

__all__ = [
    "BrokerInfo",
    "Cluster",
    "Metadata",
    "MetadataClient",
    "NoBrokersAvailable",
    "PartitionInfo",
    "parse_broker_list",
]

log = logging.getLogger("zkbroker.client.Metadata")


class NoBrokersAvailable(ConnectionError):
    """No broker of the list answered a metadata request."""


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"id:{self.node_id},host:{self.host},port:{self.port}"


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1: no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int = 0


@dataclass(frozen=True)
class Cluster:
    """One answer to a metadata request. `topic_errors` holds the topic-level error of each topic asked about
    (LEADER_NOT_AVAILABLE while an auto-created topic gets its leaders, UNKNOWN_TOPIC_OR_PARTITION...)."""

    brokers: Mapping[int, BrokerInfo] = field(default_factory=dict)
    topics: Mapping[str, Mapping[int, PartitionInfo]] = field(default_factory=dict)
    topic_errors: Mapping[str, int] = field(default_factory=dict)
    controller_id: int = -1

    def partitions_for(self, topic: str) -> list[int]:
        return sorted(self.topics.get(topic, {}))

    def available_partitions_for(self, topic: str) -> list[int]:
        return sorted(p for p, info in self.topics.get(topic, {}).items() if info.leader in self.brokers)

    def leader_for(self, topic: str, partition: int) -> BrokerInfo | None:
        info = self.topics.get(topic, {}).get(partition)
        return None if info is None else self.brokers.get(info.leader)

    def merged(self, newer: Cluster) -> Cluster:
        """This cluster with `newer`'s brokers and the topics `newer` answered about replaced."""
        topics = dict(self.topics)
        errors = dict(self.topic_errors)
        for name in set(newer.topics) | set(newer.topic_errors):
            topics.pop(name, None)
            errors.pop(name, None)
        topics.update(newer.topics)
        errors.update(newer.topic_errors)
        return Cluster(MappingProxyType(dict(newer.brokers) or dict(self.brokers)), MappingProxyType(topics),
                       MappingProxyType(errors), newer.controller_id)


def parse_broker_list(text: str | Iterable[str], what: str = "bootstrap.servers") -> list[tuple[str, int]]:
    """`host:port,host:port` (or a list of them) as (host, port) pairs; a clear error for anything else."""
    items = text.split(",") if isinstance(text, str) else list(text)
    out = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"Invalid url in {what}: {item} (expected host:port)")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError(f"No resolvable bootstrap urls given in {what}")
    return out


class MetadataClient:
    """Sends Metadata requests to whichever broker answers, remembering every broker it hears of."""

    def __init__(self, bootstrap: str | Iterable[tuple[str, int]], client_id: str = "zkbroker",
                 timeout_s: float = 30.0, security: ClientSecurity | None = None) -> None:
        self.bootstrap = parse_broker_list(bootstrap) if isinstance(bootstrap, str) else list(bootstrap)
        self.security = security  # None: PLAINTEXT
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._known: dict[tuple[str, int], None] = dict.fromkeys(self.bootstrap)
        self._conn: BrokerConnection | None = None
        self._lock = threading.Lock()

    def fetch(self, topics: Iterable[str] | None = None) -> Cluster:
        """Metadata of `topics` (None: every topic) from the first broker that answers."""
        names = sorted(set(topics)) if topics is not None else []
        with self._lock:
            candidates = list(self._known)
            if self._conn is not None:  # the broker that answered last is asked first
                current = (self._conn.host, self._conn.port)
                candidates = [current] + [c for c in candidates if c != current]
            errors = []
            for host, port in candidates:
                try:
                    if self._conn is None or (self._conn.host, self._conn.port) != (host, port):
                        self._close()
                        self._conn = BrokerConnection(host, port, self.client_id, self.timeout_s, self.security)
                    response = self._conn.send(ApiKey.METADATA, 0, {"topics": names})
                except AuthenticationError:
                    self._close()
                    raise  # refused credentials are refused by every broker: not worth another try (Kafka's too)
                except (OSError, ProtocolError) as e:
                    errors.append(f"{host}:{port} ({e})")
                    self._close()
                    continue
                cluster = cluster_of(response)
                for broker in cluster.brokers.values():
                    self._known.setdefault((broker.host, broker.port), None)
                return cluster
        raise NoBrokersAvailable("No broker answered a metadata request: " + "; ".join(errors))

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self._close()


def cluster_of(response) -> Cluster:
    """The Cluster a Metadata answer (any version) describes."""
    brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port) for b in response.brokers}
    topics: dict[str, dict[int, PartitionInfo]] = {}
    errors: dict[str, int] = {}
    for t in response.topics:
        if t.error_code != ErrorCode.NONE and not t.partitions:
            errors[t.topic] = t.error_code
            continue
        if t.error_code != ErrorCode.NONE:
            errors[t.topic] = t.error_code
        topics[t.topic] = {p.partition: PartitionInfo(t.topic, p.partition, p.leader, tuple(p.replicas),
                                                      tuple(p.isr), p.error_code)
                           for p in t.partitions}
    return Cluster(MappingProxyType(brokers), MappingProxyType(topics), MappingProxyType(errors),
                   getattr(response, "controller_id", -1))


class Metadata:
    """A refreshable Cluster shared by threads: `cluster` is always a complete, immutable snapshot.

    `request_update()` marks it stale (a leader moved); `refresh()` fetches the topics of interest, no more
    often than every `refresh_backoff_ms`; `wait_for_topic` blocks a caller until a topic's partitions are
    known (0.8.2's new producer blocked send() the same way, up to metadata.fetch.timeout.ms).
    """

    def __init__(self, client: MetadataClient, refresh_backoff_ms: int = 100, max_age_ms: int = 300_000) -> None:
        self.client = client
        self.refresh_backoff_s = refresh_backoff_ms / 1000.0
        self.max_age_s = max_age_ms / 1000.0
        self.cluster = Cluster()
        self.topics: set[str] = set()
        self._stale = True
        self._last_refresh = float("-inf")
        self._lock = threading.Lock()

    def request_update(self) -> None:
        self._stale = True

    def needs_refresh(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        due = self._stale or now - self._last_refresh >= self.max_age_s
        return due and now - self._last_refresh >= self.refresh_backoff_s

    def refresh(self, extra_topics: Iterable[str] = (), force: bool = False) -> Cluster:
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last_refresh < self.refresh_backoff_s:
                return self.cluster
            self.topics.update(extra_topics)
            self._last_refresh = now
            try:
                fresh = self.client.fetch(self.topics)
            except NoBrokersAvailable as e:
                log.warning("Failed to refresh metadata: %s", e)
                raise
            self.cluster = self.cluster.merged(fresh)
            self._stale = False
            return self.cluster

    def wait_for_topic(self, topic: str, timeout_s: float) -> Cluster:
        """The cluster once `topic` has partitions; TimeoutError after timeout_s (the topic error, if any, said)."""
        cluster = self.cluster
        if cluster.topics.get(topic):
            return cluster
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                cluster = self.refresh([topic], force=True)
            except NoBrokersAvailable:
                cluster = self.cluster
            if cluster.topics.get(topic):
                return cluster
            error = cluster.topic_errors.get(topic)
            if error == ErrorCode.INVALID_TOPIC:
                raise ValueError(f"Invalid topic name {topic!r}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                reason = f" (last error: {ErrorCode(error).name})" if error in ErrorCode._value2member_map_ else ""
                raise TimeoutError(f"Failed to update metadata of topic {topic} after {timeout_s * 1000:.0f} ms"
                                   + reason)
            time.sleep(min(self.refresh_backoff_s, remaining))
