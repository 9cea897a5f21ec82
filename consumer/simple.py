"""The simple consumer (seed 000 §6.1): the low-level API -- you choose partitions and offsets, it finds
leaders and follows them.

    consumer = SimpleConsumer("127.0.0.1:9092")                  # or SimpleConsumer.from_zookeeper(zk_connect)
    start, end = consumer.earliest_offset("t", 0), consumer.latest_offset("t", 0)
    for message in consumer.iter_messages("t", 0, start, end):  # Message(offset, key, value, timestamp, magic)
        ...
    result = consumer.fetch("t", 0, offset=42)                  # one Fetch: messages, high watermark

The three chores seed 000 lists are done here: find a live broker and each partition's leader (a Metadata
request), fetch from an offset (the leader answers up to its high watermark, so only committed messages),
and notice leader changes: NOT_LEADER_FOR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE or a
lost connection refresh the metadata and retry (`max_retries`, `retry_backoff_ms` apart). Offsets are the
caller's to keep (the point of this API: they can live with the data, e.g. in Spark's checkpoints).
OFFSET_OUT_OF_RANGE is raised, since only the caller knows what it wants instead.

`isolation_level` (of `fetch` and `iter_messages`; READ_UNCOMMITTED by default, as Kafka's consumers):
READ_COMMITTED reads up to the last stable offset instead of the high watermark and leaves out the records
of aborted transactions (consumer/read_committed.py); control records (transaction markers) are never
returned, and a fetch that met only those moves `next_offset` past them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from zkbroker.client.connection import BrokerConnection
from zkbroker.client.metadata import BrokerInfo, Cluster, MetadataClient, NoBrokersAvailable, parse_broker_list
from zkbroker.client.security import AuthenticationError, ClientSecurity
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import (
    BrokerResponseError,
    ErrorCode,
    NetworkExceptionError,
    ProtocolError,
    UnknownTopicOrPartitionError,
    for_code,
)
from zkbroker.protocol.message_set import InflationBoundError, Message, iter_messages, read_inflation_bound
from zkbroker.zk.client import ZkClient

from .fetcher import live_brokers
from .read_committed import committed_records
from .stream import MessageSizeTooLarge

__all__ = ["FetchResult", "LeaderNotFound", "SimpleConsumer"]

log = logging.getLogger("consumer.SimpleConsumer")

LATEST_TIME = -1
EARLIEST_TIME = -2
_RETRIABLE = frozenset((ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.REPLICA_NOT_AVAILABLE,
                        ErrorCode.REQUEST_TIMED_OUT))


class LeaderNotFound(ConnectionError):
    """No leader could be found (or reached) for a partition within the retries."""


@dataclass(frozen=True)
class FetchResult:
    """One fetch of one partition: messages at or after the offset asked for, in order."""

    messages: list[Message]
    high_watermark: int  # the last stable offset, for a read_committed fetch: where such a read ends
    next_offset: int  # where the next fetch should start


# Fetch's and ListOffsets' isolation levels (KIP-98).
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


class SimpleConsumer:
    def __init__(self, brokers: str | Iterable[tuple[str, int]], client_id: str = "zkbroker-simple-consumer",
                 socket_timeout_ms: int = 30000, max_retries: int = 5, retry_backoff_ms: int = 200,
                 fetch_size: int = 1024 * 1024, security: ClientSecurity | None = None) -> None:
        self.client_id = client_id
        self.security = security  # TLS and SASL for a secured listener (client/security.py); None: PLAINTEXT
        self.timeout_s = socket_timeout_ms / 1000.0
        self.max_retries = max_retries
        self.retry_backoff_s = retry_backoff_ms / 1000.0
        self.fetch_size = fetch_size
        self._metadata = MetadataClient(parse_broker_list(brokers, "brokers") if isinstance(brokers, str)
                                        else list(brokers), client_id, self.timeout_s, security)
        self._cluster = Cluster()
        self._connections: dict[int, BrokerConnection] = {}

    @classmethod
    def from_zookeeper(cls, zk_connect: str, session_timeout_ms: int = 30000, **kwargs) -> SimpleConsumer:
        """A simple consumer bootstrapped from the brokers registered in a cluster's ZooKeeper."""
        zk = ZkClient(zk_connect, session_timeout_ms, session_timeout_ms, name="simple-consumer")
        zk.start()
        try:
            brokers = live_brokers(zk)
        finally:
            zk.close()
        if not brokers:
            raise NoBrokersAvailable(f"No broker is registered in {zk_connect}")
        return cls([(b.host, b.port) for b in brokers], **kwargs)

    # ---- metadata -----------------------------------------------------------------------------------------

    def refresh(self, topics: Iterable[str] | None = None) -> Cluster:
        self._cluster = self._cluster.merged(self._metadata.fetch(topics))
        return self._cluster

    def partitions(self, topic: str) -> list[int]:
        """The topic's partition ids; UnknownTopicOrPartitionError if it does not exist."""
        cluster = self.refresh([topic])
        if not cluster.topics.get(topic):
            raise UnknownTopicOrPartitionError(f"topic {topic} does not exist")
        return cluster.partitions_for(topic)

    def find_leader(self, topic: str, partition: int, refresh: bool = False) -> BrokerInfo:
        """The partition's leader, from cached metadata unless refresh (or not yet known)."""
        leader = None if refresh else self._cluster.leader_for(topic, partition)
        if leader is None:
            leader = self.refresh([topic]).leader_for(topic, partition)
        if leader is None:
            info = self._cluster.topics.get(topic, {}).get(partition)
            if info is None:
                raise UnknownTopicOrPartitionError(f"[{topic},{partition}] does not exist")
            raise LeaderNotFound(f"[{topic},{partition}] has no leader")
        return leader

    # ---- requests to the leader ---------------------------------------------------------------------------

    def _with_leader(self, topic: str, partition: int, request):
        """Run request(connection) against the partition's leader, following leader moves."""
        refresh = False
        last: BaseException | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.retry_backoff_s)
            try:
                leader = self.find_leader(topic, partition, refresh)
            except (LeaderNotFound, NoBrokersAvailable) as e:
                last, refresh = e, True
                continue
            conn = self._connection(leader)
            try:
                return request(conn)
            except AuthenticationError:
                self._drop(leader.node_id)
                raise  # a wrong login stays wrong: the reader fails now rather than after every retry
            except (OSError, ProtocolError) as e:
                self._drop(leader.node_id)
                last, refresh = NetworkExceptionError(f"broker {leader}: {e}"), True
            except BrokerResponseError as e:
                if e.errno not in _RETRIABLE:
                    raise
                log.info("[%s,%d]: %s from broker %d; looking for the leader again", topic, partition, e.name,
                         leader.node_id)
                last, refresh = e, True
        raise LeaderNotFound(f"Gave up on [{topic},{partition}] after {self.max_retries} retries: {last}")

    def _fetch_row(self, topic: str, partition: int, offset: int, max_bytes: int | None, max_wait_ms: int,
                   min_bytes: int, isolation_level: int):
        """One Fetch v10 of a partition from `offset`, following leader moves: the partition's answer. Record
        batches come as stored (headers, zstd too), not down-converted; session 0 at epoch -1 is a fetch
        without a fetch session (KIP-227)."""
        max_bytes = max_bytes or self.fetch_size

        def request(conn: BrokerConnection):
            response = conn.send(ApiKey.FETCH, 10, {
                "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
                "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1, "forgotten_topics": [],
                "topics": [{"topic": topic, "partitions": [
                    {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                     "log_start_offset": -1, "max_bytes": max_bytes}]}]})
            row = response.topics[0].partitions[0]
            if row.error_code != ErrorCode.NONE:
                raise for_code(row.error_code)(f"[{topic},{partition}] at offset {offset}")
            return row

        return self._with_leader(topic, partition, request)

    def fetch_raw(self, topic: str, partition: int, offset: int, max_bytes: int | None = None,
                  max_wait_ms: int = 0, min_bytes: int = 0) -> tuple[bytes | memoryview, int]:
        """One Fetch of a partition from `offset`, following leader moves: the message set as the leader sent
        it (undecoded; it may begin before `offset` when compressed, and end in a partial message) and the
        high watermark. For readers that decode message sets their own way (the Spark source)."""
        row = self._fetch_row(topic, partition, offset, max_bytes, max_wait_ms, min_bytes, READ_UNCOMMITTED)
        return (row.records if row.records is not None else b""), row.high_watermark

    def fetch_committed(self, topic: str, partition: int, offset: int, max_bytes: int | None = None,
                        max_wait_ms: int = 0, min_bytes: int = 0) -> tuple[bytes | memoryview, int, list]:
        """fetch_raw at isolation level read_committed (KIP-98): the message set below the last stable offset,
        undecoded, the last stable offset, and the aborted transactions it overlaps as (producer id, first
        offset) pairs (consumer/read_committed.py drops their data)."""
        row = self._fetch_row(topic, partition, offset, max_bytes, max_wait_ms, min_bytes, READ_COMMITTED)
        aborted = [(a.producer_id, a.first_offset) for a in row.aborted_transactions or ()]
        return (row.records if row.records is not None else b""), row.last_stable_offset, aborted

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int | None = None, max_wait_ms: int = 0,
              min_bytes: int = 0, isolation_level: int = READ_UNCOMMITTED) -> FetchResult:
        """Messages of a partition from `offset` (up to max_bytes of them), following leader moves; with
        READ_COMMITTED, those of committed transactions (and plain ones) below the last stable offset."""
        max_bytes = max_bytes or self.fetch_size
        aborted: list = []
        if isolation_level == READ_COMMITTED:
            records, end, aborted = self.fetch_committed(topic, partition, offset, max_bytes, max_wait_ms,
                                                         min_bytes)
        else:
            records, end = self.fetch_raw(topic, partition, offset, max_bytes, max_wait_ms, min_bytes)
        if not len(records):
            return FetchResult([], end, offset)
        kept, walked_end = committed_records(records, aborted)  # control batches out; aborted data too
        if walked_end < 0:
            raise MessageSizeTooLarge(
                f"The message at offset {offset} of [{topic},{partition}] is larger than the fetch size "
                f"{max_bytes}; fetch it with a larger max_bytes")
        try:
            every = list(iter_messages(kept, max_inflated_bytes=read_inflation_bound(max_bytes)))
        except InflationBoundError as e:
            raise e.in_partition(topic, partition) from None
        messages = [m for m in every if m.offset >= offset]
        return FetchResult(messages, end, max(offset, walked_end))

    def _offset(self, topic: str, partition: int, time_ms: int) -> int:
        def request(conn: BrokerConnection) -> int:
            response = conn.send(ApiKey.LIST_OFFSETS, 0, {"replica_id": -1, "topics": [
                {"topic": topic, "partitions": [{"partition": partition, "timestamp": time_ms,
                                                 "max_num_offsets": 1}]}]})
            row = response.topics[0].partitions[0]
            if row.error_code != ErrorCode.NONE:
                raise for_code(row.error_code)(f"[{topic},{partition}]")
            return row.offsets[0]

        return self._with_leader(topic, partition, request)

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        """The first offset whose message's timestamp is at or after `timestamp` (ListOffsets v1, the broker's
        time index), or None when there is none."""
        def request(conn: BrokerConnection) -> int:
            response = conn.send(ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
                {"topic": topic, "partitions": [{"partition": partition, "timestamp": timestamp}]}]})
            row = response.topics[0].partitions[0]
            if row.error_code != ErrorCode.NONE:
                raise for_code(row.error_code)(f"[{topic},{partition}]")
            return row.offset

        offset = self._with_leader(topic, partition, request)
        return None if offset < 0 else offset

    def earliest_offset(self, topic: str, partition: int) -> int:
        """The first offset still in the log."""
        return self._offset(topic, partition, EARLIEST_TIME)

    def latest_offset(self, topic: str, partition: int, isolation_level: int = READ_UNCOMMITTED) -> int:
        """The high watermark: the offset the next committed message will get; at read_committed the last stable
        offset (ListOffsets v2: below it no transaction is open)."""
        if isolation_level == READ_UNCOMMITTED:
            return self._offset(topic, partition, LATEST_TIME)

        def request(conn: BrokerConnection) -> int:
            response = conn.send(ApiKey.LIST_OFFSETS, 2, {"replica_id": -1, "isolation_level": isolation_level,
                                                          "topics": [{"topic": topic, "partitions": [
                                                              {"partition": partition, "timestamp": LATEST_TIME}]}]})
            row = response.topics[0].partitions[0]
            if row.error_code != ErrorCode.NONE:
                raise for_code(row.error_code)(f"[{topic},{partition}]")
            return row.offset

        return self._with_leader(topic, partition, request)

    def iter_messages(self, topic: str, partition: int, start: int, end: int | None = None,
                      max_bytes: int | None = None, isolation_level: int = READ_UNCOMMITTED) -> Iterator[Message]:
        """Messages with start <= offset < end (end None: up to the high watermark at the first fetch, or the
        last stable offset with READ_COMMITTED)."""
        offset = start
        while end is None or offset < end:
            result = self.fetch(topic, partition, offset, max_bytes, isolation_level=isolation_level)
            if end is None:
                end = result.high_watermark
            for message in result.messages:
                if message.offset >= end:
                    return
                yield message
            if not result.messages and result.next_offset > offset:
                offset = result.next_offset  # only markers or aborted records: past them
                continue
            if not result.messages:
                if offset >= result.high_watermark:
                    return  # nothing more committed (end may lie beyond the log: truncated or deleted)
                raise ProtocolError(f"[{topic},{partition}]: an empty fetch at offset {offset}, below the high "
                                    f"watermark {result.high_watermark}")
            offset = result.next_offset

    # ---- connections --------------------------------------------------------------------------------------

    def _connection(self, broker: BrokerInfo) -> BrokerConnection:
        conn = self._connections.get(broker.node_id)
        if conn is None or (conn.host, conn.port) != (broker.host, broker.port):
            if conn is not None:
                conn.close()
            conn = self._connections[broker.node_id] = BrokerConnection(broker.host, broker.port, self.client_id,
                                                                        self.timeout_s, self.security)
        return conn

    def _drop(self, node_id: int) -> None:
        conn = self._connections.pop(node_id, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for node_id in list(self._connections):
            self._drop(node_id)
        self._metadata.close()

    def __enter__(self) -> SimpleConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
