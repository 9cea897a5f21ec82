"""The PySpark data source `zkkafka`: batch reads of a ZooKeeper-era Kafka cluster with Spark's Kafka contract.

    from consumer.spark import ZkKafkaDataSource
    spark.dataSource.register(ZkKafkaDataSource)
    df = (spark.read.format("zkkafka")
          .option("zookeeper.connect", "zk1:2181/kafka")          # or kafka.bootstrap.servers
          .option("subscribe", "orders,payments")                  # or subscribePattern, or assign
          .option("startingOffsets", "earliest")                   # or JSON, or "group" with group.id
          .load())

Spark's own Kafka source (`format("kafka")`, which shadows any Python source of that name) needs Kafka 0.10+;
this one speaks 0.8.2's protocol and finds everything through ZooKeeper (`zookeeper.connect`), or through the
brokers' Metadata (`kafka.bootstrap.servers`, the only way into a KRaft cluster: cluster_view.py). It mirrors
Spark's batch source:

* the schema `key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
  timestampType int` (plus `headers` with includeHeaders=true: a record's headers, an empty array for a record
  without any, null for magic-0 and magic-1 messages, which have none). A magic-0 message (0.8's format) has a
  null timestamp and timestampType -1; a magic-1 message or a record of a batch (magic 2) has its timestamp and
  0 (CreateTime) or 1 (LogAppendTime);
* the options: exactly one of `subscribe` (comma-separated topics), `subscribePattern` (a regex the whole
  topic name must match; Python's dialect, which agrees with Java's on ordinary topic patterns) and `assign`
  (`{"t":[0,1]}`); `startingOffsets` `earliest` (the default) or `{"t":{"0":23,"1":-2}}` (-2 = earliest);
  `endingOffsets` `latest` (the default: the high watermark when the query is planned) or JSON (-1 = latest);
  `failOnDataLoss` (default true); `minPartitions`; `maxRecordsPerPartition`; `kafkaConsumer.pollTimeoutMs`;
* its error messages, word for word where Spark has one, raised before any task runs: option errors when the
  DataFrame is loaded, planning errors (offsets that do not match the topics, a start past the end) when the
  query is planned.

Extensions: `startingOffsets` `group` with `group.id` starts where a 0.8.2 consumer group's committed offsets
in ZooKeeper (`/consumers/<g>/offsets/<t>/<p>`) say, or with `kafka.bootstrap.servers` the offsets the group
committed at its coordinator (partitions without one start at the earliest offset);
`fetch.message.max.bytes` (0.8.2's consumer setting, default 1 MiB) is the size of each fetch; and
`zookeeper.session.timeout.ms` / `zookeeper.connection.timeout.ms` for the planner's ZooKeeper session.

How a read runs. Planning (on the driver, in `ZkKafkaReader.__init__`, with `planner.py`) reads ZooKeeper: each
topic's partitions from `/brokers/topics/<t>`, each partition's leader from its `state` znode, the group's committed
offsets, the live brokers from `/brokers/ids` (or the same from Metadata and the coordinator); it resolves earliest
and latest with ListOffsets at the leaders, checks for data already deleted by retention (`failOnDataLoss`), and
makes one offset range per partition, split into more for `minPartitions` / `maxRecordsPerPartition`. Each Spark
task then fetches its range through our simple consumer (`consumer/simple.py`: it finds the partition's current
leader, follows leader moves and retries NOT_LEADER_FOR_PARTITION) and turns every fetched message set into one
Arrow record batch without making a Python object per message (`arrow.py`).

Data loss as Spark defines it: offsets of the range no longer in the log (deleted by retention, or gone with
an unclean leader election). With failOnDataLoss=true the query fails with Spark's KAFKA_DATA_LOSS message;
with false it logs a warning and reads what is left.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from zkbroker.protocol.message_set import read_inflation_bound

from .arrow import message_set_batch
from .options import SourceOptions, ZkKafkaOptionError, parse_options, parse_stream_options, tp_name
from .planner import OffsetRange, plan_ranges, report_data_loss, split_ranges

__all__ = ["ZkKafkaDataSource", "ZkKafkaPartition", "ZkKafkaReader", "kafka_schema", "read_range"]

log = logging.getLogger("consumer.spark")


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema (KafkaRecordToRowConverter.kafkaSchema)."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


# ---- reading one range --------------------------------------------------------------------------------------


def read_range(part: ZkKafkaPartition, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Fetch offsets [start, end) of one partition from its current leader and yield them as record batches."""
    from consumer.simple import READ_COMMITTED, LeaderNotFound, SimpleConsumer
    from consumer.stream import MessageSizeTooLarge
    from zkbroker.client.metadata import NoBrokersAvailable
    from zkbroker.protocol.errors import OffsetOutOfRangeError

    o = part.options
    committed = o.isolation_level == READ_COMMITTED
    log.debug("Reading offsets [%d, %d) of %s (its leader at planning: broker %d)", part.start, part.end,
              tp_name(part.topic, part.partition), part.leader)
    consumer = SimpleConsumer(list(part.brokers), client_id=o.client_id,
                              socket_timeout_ms=max(30_000, o.poll_timeout_ms), security=o.security)
    try:
        offset, end = part.start, part.end
        fetch_size = o.fetch_max_bytes
        waited_since = None
        while offset < end:
            try:
                if committed:  # what a read_committed consumer keeps, and where the fetched set ended
                    records, high_watermark, set_end = _fetch_committed(consumer, part.topic, part.partition,
                                                                        offset, fetch_size)
                else:
                    (records, high_watermark), set_end = _fetch_raw(consumer, part.topic, part.partition, offset,
                                                                    fetch_size), -1
            except OffsetOutOfRangeError:
                offset = _after_out_of_range(consumer, part, offset)
                continue
            except (LeaderNotFound, NoBrokersAvailable) as e:
                # No leader for longer than the simple consumer's retries: a broker died and ZooKeeper has not
                # expired its session yet. Keep looking until the poll timeout.
                waited_since = waited_since or time.monotonic()
                if time.monotonic() - waited_since > o.poll_timeout_ms / 1000.0:
                    raise TimeoutError(f"No leader for {tp_name(part.topic, part.partition)} within "
                                       f"{o.poll_timeout_ms} milliseconds: {e}") from e
                continue
            batch, next_offset, complete = message_set_batch(records, part.topic, part.partition, offset, end,
                                                             schema, read_inflation_bound(fetch_size))
            if batch is not None:
                yield batch
            if complete or set_end > offset:  # (set_end: past aborted data and markers left out)
                offset, waited_since = max(offset, next_offset, set_end), None
                continue
            if len(records):
                if fetch_size >= 64 * o.fetch_max_bytes:
                    raise MessageSizeTooLarge(
                        f"The message at offset {offset} of {tp_name(part.topic, part.partition)} is larger than "
                        f"{fetch_size} bytes; raise the option fetch.message.max.bytes")
                fetch_size *= 2  # one message larger than a fetch: ask for more, as a consumer must
                continue
            # Nothing at `offset` yet: a new leader whose high watermark has not caught up with its followers (it
            # will), or a log that ends before the range does (an unclean leader election truncated it).
            waited_since = waited_since or time.monotonic()
            if time.monotonic() - waited_since > o.poll_timeout_ms / 1000.0:
                if high_watermark <= offset:
                    report_data_loss(o.fail_on_data_loss, part.topic, part.partition, offset, end)
                    return
                raise TimeoutError(f"Cannot fetch record for offset {offset} of {tp_name(part.topic, part.partition)} "
                                   f"in {o.poll_timeout_ms} milliseconds")
    finally:
        consumer.close()


def _after_out_of_range(consumer, part: ZkKafkaPartition, offset: int) -> int:
    """Where to go on after OFFSET_OUT_OF_RANGE at `offset`: the offsets missing are data loss."""
    earliest = consumer.earliest_offset(part.topic, part.partition)
    latest = consumer.latest_offset(part.topic, part.partition, part.options.isolation_level)
    if offset < earliest:
        resume = min(earliest, part.end)
    elif offset >= latest:
        resume = part.end  # the log ends before the range does (an unclean leader election)
    else:
        return offset  # the leader moved meanwhile and the new one has it: fetch again
    report_data_loss(part.options.fail_on_data_loss, part.topic, part.partition, offset, resume)
    return resume


def _fetch_raw(consumer, topic: str, partition: int, offset: int, max_bytes: int):
    """One Fetch of one partition through the simple consumer's leader following, returning the message set
    undecoded (the columnar decoder reads it in place) and the high watermark."""
    return consumer.fetch_raw(topic, partition, offset, max_bytes, max_wait_ms=100, min_bytes=1)


def _fetch_committed(consumer, topic: str, partition: int, offset: int, max_bytes: int):
    """One read_committed Fetch: the entries a read_committed consumer keeps (aborted transactions' data and
    every marker left out), the last stable offset, and the offset after the last entry fetched."""
    from consumer.read_committed import committed_records

    records, last_stable_offset, aborted = consumer.fetch_committed(topic, partition, offset, max_bytes,
                                                                    max_wait_ms=100, min_bytes=1)
    kept, set_end = committed_records(records, aborted)
    return kept, last_stable_offset, set_end


# ---- the Spark data source ------------------------------------------------------------------------------------


@dataclass
class ZkKafkaPartition(InputPartition):
    """One Spark task: offsets [start, end) of one Kafka partition, and how to reach the cluster."""

    topic: str
    partition: int
    start: int
    end: int
    leader: int
    brokers: tuple[tuple[str, int], ...]
    options: SourceOptions


class ZkKafkaDataSource(DataSource):
    """`spark.read.format("zkkafka")`: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "zkkafka"

    def schema(self) -> StructType:
        # Called when the DataFrame is loaded, batch or stream alike (a Python source cannot tell which): options
        # that neither a batch read nor a stream accepts fail here; those only one of them refuses (e.g.
        # startingOffsets=latest, endingOffsets) fail when that kind of query is planned, before any task runs.
        try:
            options = parse_options(self.options)
        except ZkKafkaOptionError as batch_error:
            try:
                options = parse_stream_options(self.options)
            except ZkKafkaOptionError:
                raise batch_error from None
        return kafka_schema(options.include_headers)

    def reader(self, schema: StructType) -> ZkKafkaReader:
        return ZkKafkaReader(parse_options(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .streaming import ZkKafkaStreamReader

        return ZkKafkaStreamReader(parse_stream_options(self.options), schema)


class ZkKafkaReader(DataSourceReader):
    """Plans the read from ZooKeeper when created (on the driver) and reads one range per task."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        if schema != kafka_schema(options.include_headers):
            raise ZkKafkaOptionError("Kafka source has a fixed schema and cannot be set with a custom one")
        self.options = options
        self.schema = schema
        self.ranges, self.brokers = self._plan()

    def _plan(self) -> tuple[list[OffsetRange], tuple[tuple[str, int], ...]]:
        from consumer.simple import SimpleConsumer

        from .cluster_view import open_view

        o = self.options
        view = open_view(o, "zkkafka-plan")
        try:
            brokers = view.brokers()
            # A leader that died a moment ago stays in its state znode until its session expires: keep asking
            # for up to the poll timeout, as the tasks do, so a failover during planning costs a pause.
            retry_backoff_ms = 200
            with SimpleConsumer(list(brokers), client_id=o.client_id, retry_backoff_ms=retry_backoff_ms,
                                max_retries=max(5, o.poll_timeout_ms // retry_backoff_ms),
                                security=o.security) as lookup:
                ranges = plan_ranges(o, view, lookup)
        finally:
            view.close()
        return split_ranges(ranges, o.min_partitions, o.max_records_per_partition), brokers

    def partitions(self) -> list[InputPartition]:
        return [ZkKafkaPartition(r.topic, r.partition, r.start, r.end, r.leader, self.brokers, self.options)
                for r in self.ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ZkKafkaPartition):
            return iter(())  # no partitions at all: Spark still runs one task
        from pyspark.sql.pandas.types import to_arrow_schema

        return read_range(partition, to_arrow_schema(self.schema, timezone="UTC"))
