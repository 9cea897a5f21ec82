"""The high-level consumer's fetchers (0.8.2's ConsumerFetcherManager and ConsumerFetcherThread).

`start_connections` hands the partitions this consumer owns to a *leader finder* thread, which asks a broker
(any of those registered in /brokers/ids) for their leaders and gives each partition to the fetcher thread of
its leader. A fetcher long-polls its broker (`fetch.wait.max.ms`, `fetch.min.bytes`,
`fetch.message.max.bytes` per partition) and puts each partition's messages on its stream's queue, which
blocks when the consumer is `queued.max.message.chunks` behind. A partition whose leader moved
(NOT_LEADER_FOR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION, a lost connection) goes back to the leader finder,
which looks again every `refresh.leader.backoff.ms` -- so consumers follow leader moves without a rebalance,
as in 0.8.2. OFFSET_OUT_OF_RANGE, and a partition without a committed offset, start over where
`auto.offset.reset` says (smallest: the log start; largest: the high watermark).

With `isolation.level=read_committed` (Kafka 0.11's key) a fetch reads up to the last stable offset, the records
of the aborted transactions it lists are dropped before they reach the stream (consumer/read_committed.py), and
`largest` is the last stable offset; a fetch of markers or aborted records alone moves the fetch offset past them.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Iterable

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from zkbroker.client.connection import BrokerConnection
from zkbroker.client.metadata import BrokerInfo, Cluster, MetadataClient, NoBrokersAvailable
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode, ProtocolError
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import BrokerRegistration, ZnodeFormatError

from .decode import last_offset
from .read_committed import committed_records
from .stream import ChunkQueue, FetchedChunk, MessageSizeTooLarge

__all__ = ["EARLIEST", "LATEST", "ConsumerFetcherManager", "PartitionTopicInfo", "live_brokers"]

log = logging.getLogger("consumer.ConsumerFetcherManager")

#: Starting offsets a rebalance listener may give instead of a number (Kafka's OffsetRequest times).
LATEST = -1
EARLIEST = -2
_LEADER_ERRORS = frozenset((ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.REPLICA_NOT_AVAILABLE))
_PUT_POLL_S = 0.1


class PartitionTopicInfo:
    """One owned partition: its stream's queue and two positions. fetched_offset is where the next fetch
    starts; consumed_offset is the next offset to hand out (what a commit writes). None: not known yet
    (auto.offset.reset decides); EARLIEST / LATEST: to be looked up."""

    __slots__ = ("topic", "partition", "chunks", "consumed_offset", "fetched_offset", "fetch_size")

    def __init__(self, topic: str, partition: int, chunks: ChunkQueue, offset: int | None, fetch_size: int) -> None:
        self.topic = topic
        self.partition = partition
        self.chunks = chunks
        self.consumed_offset = offset if offset is None or offset >= 0 else None
        self.fetched_offset = offset
        self.fetch_size = fetch_size

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __repr__(self) -> str:
        return (f"{self.topic}:{self.partition}: fetched offset = {self.fetched_offset}: consumed offset = "
                f"{self.consumed_offset}")


def live_brokers(zk: ZkClient) -> list[BrokerInfo]:
    """The brokers registered in /brokers/ids (0.8.2's getAllBrokersInCluster)."""
    out = []
    for child in zk.get_children(paths.BROKER_IDS):
        data, _ = zk.get(paths.broker_path(int(child)))
        if data is None:
            continue
        try:
            reg = BrokerRegistration.decode(int(child), data)
        except (ZnodeFormatError, ValueError):
            continue
        out.append(BrokerInfo(reg.broker_id, reg.host, reg.port))
    return out


class ConsumerFetcherManager:
    def __init__(self, consumer_id: str, config, zk: ZkClient) -> None:
        self.consumer_id = consumer_id
        self.config = config
        self.zk = zk
        self.client_id = config["client.id"]
        self.security = config.security  # TLS and SASL to a secured listener; None: PLAINTEXT
        self._lock = threading.Condition()
        self._partitions: dict[TopicPartition, PartitionTopicInfo] = {}
        self._no_leader: set[TopicPartition] = set()
        self._suspect: set[TopicPartition] = set()  # handed back after an error: their leaders may have moved
        self._cluster: Cluster | None = None
        self._fetchers: dict[tuple[int, int], ConsumerFetcherThread] = {}
        self._leader_finder: threading.Thread | None = None
        self._running = False
        #: Set while every owned partition has a fetcher (its leader found); for tools and benchmarks.
        self.fetching = threading.Event()

    # ---- the connector's side ----------------------------------------------------------------------------

    def start_connections(self, infos: Iterable[PartitionTopicInfo]) -> None:
        with self._lock:
            self._partitions = {info.tp: info for info in infos}
            self._no_leader = set(self._partitions)
            self._running = True
            if not self._no_leader:
                self.fetching.set()
            self._leader_finder = threading.Thread(target=self._find_leaders, daemon=True,
                                                   name=f"{self.consumer_id}-leader-finder-thread")
            self._leader_finder.start()

    def stop_connections(self) -> None:
        """Stop the leader finder, then every fetcher (0.8.2's order, so no fetcher is added meanwhile)."""
        with self._lock:
            self._running = False
            self.fetching.clear()
            self._lock.notify_all()
            finder, self._leader_finder = self._leader_finder, None
        if finder is not None and finder is not threading.current_thread():
            finder.join()
        with self._lock:
            fetchers, self._fetchers = list(self._fetchers.values()), {}
        for fetcher in fetchers:
            fetcher.initiate_shutdown()
        for fetcher in fetchers:
            fetcher.join()
        with self._lock:
            self._partitions = {}
            self._no_leader = set()

    def add_partitions_with_error(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            if self._running:
                self._no_leader.update(tp for tp in tps if tp in self._partitions)
                self._suspect.update(tps)
                if self._no_leader:
                    self.fetching.clear()
                self._lock.notify_all()

    # ---- the leader finder --------------------------------------------------------------------------------

    def _find_leaders(self) -> None:
        backoff_s = self.config["refresh.leader.backoff.ms"] / 1000.0
        while True:
            with self._lock:
                while self._running and not self._no_leader:
                    self._lock.wait()
                if not self._running:
                    return
                wanted = set(self._no_leader)
                suspect, self._suspect = self._suspect & wanted, set()
            # Leaders from the last answer serve partitions nobody reported trouble with (a rebalance hands the
            # same topics back); a fetch error sends a partition here again, and then we ask afresh.
            leaders: dict[TopicPartition, BrokerInfo] = {}
            cached = self._cluster
            if cached is not None and not suspect:
                leaders = {tp: b for tp in wanted if (b := cached.leader_for(tp.topic, tp.partition)) is not None}
            if len(leaders) < len(wanted):
                try:
                    cluster = self._fetch_metadata({tp.topic for tp in wanted})
                    if cluster is not None:
                        leaders = {tp: b for tp in wanted
                                   if (b := cluster.leader_for(tp.topic, tp.partition)) is not None}
                except (NoBrokersAvailable, OSError, ProtocolError, ValueError, KazooException,
                        KazooTimeoutError) as e:  # ZooKeeper or brokers out of reach: try again after the backoff
                    log.warning("[%s], Failed to find leader for %s: %s", self.consumer_id,
                                ",".join(map(str, sorted(wanted))), e)
            with self._lock:
                if not self._running:
                    return
                for tp, broker in leaders.items():
                    info = self._partitions.get(tp)
                    if info is None or tp not in self._no_leader:
                        continue
                    self._no_leader.discard(tp)
                    fetcher_id = zlib.crc32(f"{tp.topic}-{tp.partition}".encode()) % \
                        self.config["num.consumer.fetchers"]
                    fetcher = self._fetchers.get((broker.node_id, fetcher_id))
                    if fetcher is None or fetcher.broker != broker or not fetcher.is_alive():
                        if fetcher is not None:
                            fetcher.initiate_shutdown()
                        fetcher = ConsumerFetcherThread(self, broker, fetcher_id)
                        self._fetchers[(broker.node_id, fetcher_id)] = fetcher
                        fetcher.start()
                    fetcher.add_partition(info)
                    for other in self._fetchers.values():
                        if other is not fetcher:
                            other.remove_partition(tp)
                if self._no_leader:
                    self._lock.wait(backoff_s)
                else:
                    self.fetching.set()


    def _fetch_metadata(self, topics: set[str]) -> Cluster | None:
        brokers = live_brokers(self.zk)
        if not brokers:
            return None
        client = MetadataClient([(b.host, b.port) for b in brokers], self.client_id,
                                self.config["socket.timeout.ms"] / 1000.0, self.security)
        try:
            cluster = client.fetch(topics)
        finally:
            client.close()
        self._cluster = cluster if self._cluster is None else self._cluster.merged(cluster)
        return cluster


class ConsumerFetcherThread(threading.Thread):
    def __init__(self, manager: ConsumerFetcherManager, broker: BrokerInfo, fetcher_id: int) -> None:
        super().__init__(daemon=True,
                         name=f"ConsumerFetcherThread-{manager.consumer_id}-{fetcher_id}-{broker.node_id}")
        self.manager = manager
        self.broker = broker
        config = manager.config
        self._max_wait_ms = config["fetch.wait.max.ms"]
        self._min_bytes = config["fetch.min.bytes"]
        self._reset = config["auto.offset.reset"]
        self._isolation_level = 1 if config["isolation.level"] == "read_committed" else 0
        self._conn = BrokerConnection(broker.host, broker.port, manager.client_id,
                                      config["socket.timeout.ms"] / 1000.0, manager.security)
        self._partitions: dict[TopicPartition, PartitionTopicInfo] = {}
        self._lock = threading.Condition()
        self._running = True

    def add_partition(self, info: PartitionTopicInfo) -> None:
        with self._lock:
            self._partitions[info.tp] = info
            self._lock.notify_all()

    def remove_partition(self, tp: TopicPartition) -> None:
        with self._lock:
            self._partitions.pop(tp, None)

    def initiate_shutdown(self) -> None:
        with self._lock:
            self._running = False
            self._lock.notify_all()
        self._conn.abort()

    def run(self) -> None:
        try:
            while True:
                with self._lock:
                    while self._running and not self._partitions:
                        self._lock.wait()
                    if not self._running:
                        return
                    partitions = dict(self._partitions)
                self._fetch_once(partitions)
        finally:
            self._conn.close()

    def _fetch_once(self, partitions: dict[TopicPartition, PartitionTopicInfo]) -> None:
        errors: list[TopicPartition] = []
        try:
            for info in partitions.values():
                if info.fetched_offset is None or info.fetched_offset < 0:
                    self._reset_offset(info, info.fetched_offset)
            topics: dict[str, list[dict]] = {}
            for tp, info in partitions.items():
                topics.setdefault(tp.topic, []).append(
                    {"partition": tp.partition, "current_leader_epoch": -1, "fetch_offset": info.fetched_offset,
                     "log_start_offset": -1, "max_bytes": info.fetch_size})
            # Fetch v10: record batches come as stored (zstd too), not down-converted; no response-wide limit
            # beyond 0.8.2's; session 0 at epoch -1: no fetch session (KIP-227)
            response = self._conn.send(ApiKey.FETCH, 10, {
                "replica_id": -1, "max_wait_ms": self._max_wait_ms, "min_bytes": self._min_bytes,
                "max_bytes": 2**31 - 1, "isolation_level": self._isolation_level, "session_id": 0, "session_epoch": -1,
                "forgotten_topics": [], "topics": [{"topic": t, "partitions": p} for t, p in topics.items()]})
        except (OSError, ProtocolError) as e:
            self._conn.close()
            if self._running:
                log.warning("[%s], Error in fetch from broker %s: %s; looking for the leaders again", self.name,
                            self.broker, e)
                self._hand_back(list(partitions))
            return
        for topic in response.topics:
            for row in topic.partitions:
                tp = TopicPartition(topic.topic, row.partition)
                info = partitions.get(tp)
                if info is None or not self._running:
                    continue
                with self._lock:
                    if self._partitions.get(tp) is not info:
                        continue  # removed meanwhile
                if row.error_code == ErrorCode.NONE:
                    records, end = row.records, None
                    if self._isolation_level and records is not None and len(records):
                        aborted = [(a.producer_id, a.first_offset) for a in row.aborted_transactions or ()]
                        kept, walked_end = committed_records(records, aborted)
                        if walked_end >= 0:
                            records, end = kept, walked_end
                    if not self._enqueue(info, records, end):
                        return
                elif row.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    try:
                        self._reset_offset(info, None)
                        log.warning("[%s], Current offset out of range for partition %s; reset offset to %d",
                                    self.name, tp, info.fetched_offset)
                    except (OSError, ProtocolError):
                        errors.append(tp)
                elif row.error_code in _LEADER_ERRORS:
                    errors.append(tp)
                else:
                    log.warning("[%s], Error for partition %s to broker %s: %s", self.name, tp, self.broker,
                                ErrorCode(row.error_code).name if row.error_code in ErrorCode._value2member_map_
                                else row.error_code)
                    errors.append(tp)
        if errors:
            self._hand_back(errors)

    def _hand_back(self, tps: list[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                self._partitions.pop(tp, None)
        self.manager.add_partitions_with_error(tps)

    def _enqueue(self, info: PartitionTopicInfo, records, end: int | None = None) -> bool:
        """Put a fetched message set on the stream's queue; False if shut down while waiting for room. `end`: where
        the fetched set ended before read_committed left entries out (the next fetch starts there)."""
        fetch_offset = info.fetched_offset
        last = None if records is None or not len(records) else last_offset(records)
        if end is not None and end > fetch_offset and (last is None or last < fetch_offset):
            info.fetched_offset = end  # markers or aborted records only: nothing for the stream
            return True
        if records is None or not len(records):
            return True
        if last is None:
            chunk = FetchedChunk(info, [], MessageSizeTooLarge(
                f"Found a message larger than the maximum fetch size of this consumer on topic {info.topic} "
                f"partition {info.partition} at fetch offset {fetch_offset}. Increase the fetch size, or "
                "decrease the maximum message size the broker will allow."))
            next_offset = fetch_offset
        elif last < fetch_offset:
            return True
        else:
            chunk = FetchedChunk(info, [], None, bytes(records), fetch_offset)  # decoded by the iterator
            next_offset = max(last + 1, end or 0)
        while self._running:
            if not info.chunks.put(chunk, _PUT_POLL_S):
                continue
            info.fetched_offset = next_offset
            if chunk.error is not None:
                self._hand_back_quietly(info)
            return True
        return False

    def _hand_back_quietly(self, info: PartitionTopicInfo) -> None:
        """A partition stuck on a too-large message stops fetching (0.8.2's iterator raised every time)."""
        with self._lock:
            self._partitions.pop(info.tp, None)

    def _reset_offset(self, info: PartitionTopicInfo, wanted: int | None) -> None:
        """Look up the earliest or latest offset (auto.offset.reset, or what a listener asked for)."""
        if wanted is None:
            wanted = EARLIEST if self._reset == "smallest" else LATEST
        if wanted == LATEST and self._isolation_level:  # ListOffsets v2: the last stable offset
            response = self._conn.send(ApiKey.LIST_OFFSETS, 2, {"replica_id": -1, "isolation_level": 1, "topics": [
                {"topic": info.topic, "partitions": [{"partition": info.partition, "timestamp": wanted}]}]})
            row = response.topics[0].partitions[0]
            if row.error_code != ErrorCode.NONE:
                raise ProtocolError(f"ListOffsets for [{info.topic},{info.partition}] answered error "
                                    f"{row.error_code}")
            info.fetched_offset = info.consumed_offset = row.offset
            return
        response = self._conn.send(ApiKey.LIST_OFFSETS, 0, {"replica_id": -1, "topics": [
            {"topic": info.topic, "partitions": [{"partition": info.partition, "timestamp": wanted,
                                                  "max_num_offsets": 1}]}]})
        row = response.topics[0].partitions[0]
        if row.error_code != ErrorCode.NONE or not row.offsets:
            raise ProtocolError(f"ListOffsets for [{info.topic},{info.partition}] answered error {row.error_code}")
        info.fetched_offset = info.consumed_offset = row.offsets[0]
