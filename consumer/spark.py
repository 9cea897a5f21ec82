"""The PySpark data source `zkkafka`: batch reads of a ZooKeeper-era Kafka cluster with Spark's Kafka contract.

    from consumer.spark import ZkKafkaDataSource
    spark.dataSource.register(ZkKafkaDataSource)
    df = (spark.read.format("zkkafka")
          .option("zookeeper.connect", "zk1:2181/kafka")          # instead of kafka.bootstrap.servers
          .option("subscribe", "orders,payments")                  # or subscribePattern, or assign
          .option("startingOffsets", "earliest")                   # or JSON, or "group" with group.id
          .load())

Spark's own Kafka source (`format("kafka")`, which shadows any Python source of that name) needs Kafka 0.10+;
this one speaks 0.8.2's protocol and finds everything through ZooKeeper. It mirrors Spark's batch source:

* the schema `key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
  timestampType int` (plus `headers` with includeHeaders=true: always null, 0.8 messages have none). A magic-0
  message (0.8's format) has a null timestamp and timestampType -1; a magic-1 message has its timestamp and
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
in ZooKeeper (`/consumers/<g>/offsets/<t>/<p>`) say (partitions without one start at the earliest offset);
`fetch.message.max.bytes` (0.8.2's consumer setting, default 1 MiB) is the size of each fetch; and
`zookeeper.session.timeout.ms` / `zookeeper.connection.timeout.ms` for the planner's ZooKeeper session.

How a read runs. Planning (on the driver, in `ZkKafkaReader.__init__`) reads ZooKeeper: each topic's
partitions from `/brokers/topics/<t>`, each partition's leader from its `state` znode, the group's committed
offsets, the live brokers from `/brokers/ids`; it resolves earliest and latest with ListOffsets at the
leaders, checks for data already deleted by retention (`failOnDataLoss`), and makes one offset range per
partition, split into more for `minPartitions` / `maxRecordsPerPartition`. Each Spark task then fetches its
range through our simple consumer (`consumer/simple.py`: it finds the partition's current leader, follows
leader moves and retries NOT_LEADER_FOR_PARTITION) and turns every fetched message set into one Arrow record
batch without making a Python object per message (`message_set_batch`).

Data loss as Spark defines it: offsets of the range no longer in the log (deleted by retention, or gone with
an unclean leader election). With failOnDataLoss=true the query fails with Spark's KAFKA_DATA_LOSS message;
with false it logs a warning and reads what is left.
"""

from __future__ import annotations

import array
import functools
import json
import logging
import math
import re
import struct
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
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

from zkbroker.protocol.message_set import LOG_APPEND_TIME, InvalidMessageError, crc32, iter_messages

__all__ = [
    "EARLIEST",
    "LATEST",
    "DataLossError",
    "OffsetRange",
    "SourceOptions",
    "ZkKafkaDataSource",
    "ZkKafkaOptionError",
    "ZkKafkaPartition",
    "ZkKafkaReader",
    "kafka_schema",
    "message_set_batch",
    "parse_options",
    "plan_ranges",
    "split_ranges",
]

log = logging.getLogger("consumer.spark")

#: Offsets in startingOffsets / endingOffsets JSON that mean "look it up" (Kafka's ListOffsets times).
LATEST = -1
EARLIEST = -2

_STRATEGIES = ("subscribe", "subscribepattern", "assign")  # Spark's order, in its messages
_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'
_DATA_LOSS_HINT = ("Some data may have been lost because they are not available in Kafka any more; either the "
                   "data was aged out by Kafka or the topic may have been deleted before all the data in the "
                   "topic was processed. If you don't want your streaming query to fail on such cases, set the "
                   "source option failOnDataLoss to false.")
_IGNORED_IN_BATCH = ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay")


class ZkKafkaOptionError(ValueError):
    """The options are invalid (Spark's IllegalArgumentException): the query fails before any task runs."""


class DataLossError(RuntimeError):
    """Offsets to be read are gone from the log and failOnDataLoss is true (Spark's KAFKA_DATA_LOSS)."""


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


def _tp(topic: str, partition: int) -> str:
    """Kafka's TopicPartition.toString, as Spark's messages print it."""
    return f"{topic}-{partition}"


def _tps(keys) -> str:
    return "[" + ", ".join(_tp(t, p) for t, p in sorted(keys)) + "]"


# ---- options ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceOptions:
    """The parsed, checked options of one read. Offsets maps are {(topic, partition): offset}."""

    zookeeper_connect: str
    strategy: str  # one of _STRATEGIES
    topics: tuple[str, ...] = ()  # subscribe
    pattern: str | None = None  # subscribepattern
    assigned: tuple[tuple[str, int], ...] = ()  # assign
    starting: str | dict = "earliest"  # "earliest" | "group" | {(t, p): offset or EARLIEST}
    ending: str | dict = "latest"  # "latest" | {(t, p): offset or LATEST}
    group_id: str | None = None
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    fetch_max_bytes: int = 1024 * 1024
    poll_timeout_ms: int = 120_000
    zk_session_timeout_ms: int = 30_000
    zk_connection_timeout_ms: int = 30_000
    client_id: str = "zkkafka"


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Check the options of a batch read as Spark's KafkaSourceProvider does (validateBatchOptions), with
    Spark's messages; raise ZkKafkaOptionError. Keys are case-insensitive."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    if "kafka.bootstrap.servers" in opts and "zookeeper.connect" not in opts:
        raise ZkKafkaOptionError("zkkafka finds the brokers through ZooKeeper: set the option 'zookeeper.connect' "
                                 "(host:port[,host:port...][/chroot]) instead of 'kafka.bootstrap.servers'")
    starting = _offsets_limit(opts, "startingoffsets", "earliest")
    if starting == "latest":
        raise ZkKafkaOptionError("starting offset can't be latest for batch queries on Kafka")
    if isinstance(starting, dict):
        for (topic, partition), offset in sorted(starting.items()):
            if offset == LATEST:
                raise ZkKafkaOptionError(f"startingOffsets for {_tp(topic, partition)} can't be latest for batch "
                                         "queries on Kafka")
    ending = _offsets_limit(opts, "endingoffsets", "latest")
    if ending in ("earliest", "group"):
        raise ZkKafkaOptionError("ending offset can't be earliest for batch queries on Kafka" if ending == "earliest"
                                 else "endingOffsets can't be group: committed offsets are where a read starts")
    if isinstance(ending, dict):
        for (topic, partition), offset in sorted(ending.items()):
            if offset == EARLIEST:
                raise ZkKafkaOptionError(f"ending offset for {_tp(topic, partition)} can't be earliest for batch "
                                         "queries on Kafka")
    if isinstance(starting, dict) and isinstance(ending, dict):
        if set(starting) != set(ending):
            raise ZkKafkaOptionError(
                "The specified start offset and end offset should have the same topic-partitions. Topic-partitions "
                f"for start offset: {_tps(starting)}, topic-partitions for end offset: {_tps(ending)}.")
        for (topic, partition), start in sorted(starting.items()):
            end = ending[(topic, partition)]
            if start >= 0 and end >= 0 and start > end:
                raise ZkKafkaOptionError(f"The specified start offset {start} is greater than the end offset {end} "
                                         f"for topic {topic} partition {partition}.")

    strategies = [k for k in _STRATEGIES if k in opts]
    if not strategies:
        raise ZkKafkaOptionError("One of the following options must be specified for Kafka source: "
                                 f"{', '.join(_STRATEGIES)}. See the docs for more details.")
    if len(strategies) > 1:
        raise ZkKafkaOptionError("Only one of the following options can be specified for Kafka source: "
                                 f"{', '.join(_STRATEGIES)}. See the docs for more details.")
    strategy = strategies[0]
    value = opts[strategy]
    topics: tuple[str, ...] = ()
    pattern = None
    assigned: tuple[tuple[str, int], ...] = ()
    if strategy == "assign":
        if not value.strip().startswith("{"):
            raise ZkKafkaOptionError(f"No topicpartitions to assign as specified value for option 'assign' is "
                                     f"'{value}'")
        assigned = _assign_json(value)
    elif strategy == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise ZkKafkaOptionError(f"No topics to subscribe to as specified value for option 'subscribe' is "
                                     f"'{value}'")
    else:
        pattern = value.strip()
        if not pattern:
            raise ZkKafkaOptionError(f"Pattern to subscribe is empty as specified value for option "
                                     f"'subscribePattern' is '{value}'")
        try:
            re.compile(pattern)
        except re.error as e:
            raise ZkKafkaOptionError(f"Invalid subscribePattern '{pattern}': {e}") from None

    min_partitions = _positive(opts, "minpartitions", "minPartitions must be positive")
    max_records = _positive(opts, "maxrecordsperpartition", "maxrecordsperpartition must be positive")
    for key, message in (
        ("kafka.auto.offset.reset", "Kafka option 'auto.offset.reset' is not supported. Instead set the source "
         "option 'startingoffsets' to 'earliest' or 'latest' to specify where to start."),
        ("kafka.key.deserializer", "Kafka option 'key.deserializer' is not supported as keys are deserialized as "
         "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys."),
        ("kafka.value.deserializer", "Kafka option 'value.deserializer' is not supported as values are "
         "deserialized as byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
         "deserialize the values."),
        ("kafka.enable.auto.commit", "Kafka option 'enable.auto.commit' is not supported"),
        ("kafka.interceptor.classes", "Kafka option 'interceptor.classes' is not supported"),
    ):
        if key in opts:
            raise ZkKafkaOptionError(message)
    if "zookeeper.connect" not in opts or not opts["zookeeper.connect"].strip():
        raise ZkKafkaOptionError("Option 'zookeeper.connect' must be specified for configuring Kafka consumer")

    group_id = opts.get("group.id", "").strip() or None
    if starting == "group" and group_id is None:
        raise ZkKafkaOptionError("startingOffsets 'group' needs the option 'group.id': the consumer group whose "
                                 "committed offsets in ZooKeeper the read starts from")
    if group_id is not None and starting != "group":
        log.warning("Option group.id is only used with startingOffsets=group; ignoring it")
    for key in _IGNORED_IN_BATCH:
        if key in opts:
            log.warning("%s option ignored in batch queries", key)
    return SourceOptions(
        zookeeper_connect=opts["zookeeper.connect"].strip(), strategy=strategy, topics=topics, pattern=pattern,
        assigned=assigned, starting=starting, ending=ending, group_id=group_id,
        fail_on_data_loss=_boolean(opts, "failondataloss", True), min_partitions=min_partitions,
        max_records_per_partition=max_records, include_headers=_boolean(opts, "includeheaders", False),
        fetch_max_bytes=_positive(opts, "fetch.message.max.bytes", "fetch.message.max.bytes must be positive")
        or 1024 * 1024,
        poll_timeout_ms=_positive(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs must be "
                                  "positive") or 120_000,
        zk_session_timeout_ms=_positive(opts, "zookeeper.session.timeout.ms", "zookeeper.session.timeout.ms must "
                                        "be positive") or 30_000,
        zk_connection_timeout_ms=_positive(opts, "zookeeper.connection.timeout.ms", "zookeeper.connection."
                                           "timeout.ms must be positive") or 30_000,
        client_id=opts.get("client.id", "zkkafka"))


def _offsets_limit(opts: dict[str, str], key: str, default: str) -> str | dict:
    value = opts.get(key, default).strip()
    if value.lower() in ("earliest", "latest", "group"):
        return value.lower()
    try:
        parsed = json.loads(value)
        if not isinstance(parsed, dict) or not parsed:
            raise ValueError
        out = {}
        for topic, partitions in parsed.items():
            if not isinstance(partitions, dict):
                raise ValueError
            for partition, offset in partitions.items():
                if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                    raise ValueError
                out[(topic, int(partition))] = offset
        return out
    except ValueError:
        raise ZkKafkaOptionError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {value}") from None


def _assign_json(value: str) -> tuple[tuple[str, int], ...]:
    try:
        parsed = json.loads(value)
        if not isinstance(parsed, dict):
            raise ValueError
        out = []
        for topic, partitions in parsed.items():
            if not isinstance(partitions, list):
                raise ValueError
            for partition in partitions:
                if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
                    raise ValueError
                out.append((topic, partition))
    except ValueError:
        raise ZkKafkaOptionError(f"Expected e.g. {_ASSIGN_EXAMPLE}, got {value}") from None
    return tuple(sorted(set(out)))


def _positive(opts: dict[str, str], key: str, message: str) -> int | None:
    if key not in opts:
        return None
    try:
        number = int(opts[key].strip())
    except ValueError:
        raise ZkKafkaOptionError(f"{message}, got '{opts[key]}'") from None
    if number <= 0:
        raise ZkKafkaOptionError(message)
    return number


def _boolean(opts: dict[str, str], key: str, default: bool) -> bool:
    value = opts.get(key)
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ZkKafkaOptionError(f"Option '{key}' must be true or false, got '{value}'")


# ---- planning ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetRange:
    """Offsets start <= offset < end of one partition; leader is the broker its state znode named at planning."""

    topic: str
    partition: int
    start: int
    end: int
    leader: int = -1

    @property
    def size(self) -> int:
        return self.end - self.start


class OffsetLookup(Protocol):
    """What planning asks the brokers: ListOffsets -2 / -1 at a partition's leader (our SimpleConsumer)."""

    def earliest_offset(self, topic: str, partition: int) -> int: ...

    def latest_offset(self, topic: str, partition: int) -> int: ...


def plan_ranges(opts: SourceOptions, zk, lookup: OffsetLookup) -> list[OffsetRange]:
    """One range per partition of the subscription, offsets resolved and checked (before any task runs).

    `zk` is a started ZkClient on the cluster; `lookup` resolves earliest and latest offsets.
    """
    from zkbroker.zk import paths
    from zkbroker.zk.znodes import LeaderIsrState, TopicAssignment, ZnodeFormatError, decode_offset

    existing = set(zk.get_children(paths.BROKER_TOPICS))
    if opts.strategy == "subscribe":
        topics = [t for t in opts.topics if t in existing]
        for missing in sorted(set(opts.topics) - existing):
            log.warning("Topic %s does not exist in %s; nothing to read from it", missing, opts.zookeeper_connect)
    elif opts.strategy == "subscribepattern":
        regex = re.compile(opts.pattern)
        topics = sorted(t for t in existing if regex.fullmatch(t))
    else:
        topics = sorted({t for t, _ in opts.assigned})
    partitions: dict[str, list[int]] = {}
    for topic in topics:
        data, _ = zk.get(paths.topic_path(topic))
        known = sorted(TopicAssignment.decode(data, paths.topic_path(topic)).partitions) if data else []
        partitions[topic] = known
    if opts.strategy == "assign":
        unknown = [(t, p) for t, p in opts.assigned if p not in partitions.get(t, ())]
        if unknown:
            raise ZkKafkaOptionError(f"assign names partitions that do not exist in {opts.zookeeper_connect}: "
                                     f"{_tps(unknown)}")
        wanted = sorted(opts.assigned)
    else:
        wanted = sorted((t, p) for t, ps in partitions.items() for p in ps)

    for limit, name in ((opts.starting, "start"), (opts.ending, "end")):
        if isinstance(limit, dict) and set(limit) != set(wanted):
            raise ZkKafkaOptionError(
                f"Partitions specified for Kafka {name} offsets don't match what are assigned. Maybe topic "
                "partitions are created or deleted while the query is running. Use -1 for latest, -2 for earliest. "
                f"Specified: {_tps(limit)} Assigned: {_tps(wanted)}")

    committed: dict[tuple[str, int], int | None] = {}
    if opts.starting == "group":
        for tp in wanted:
            data, _ = zk.get(paths.consumer_offset_path(opts.group_id, *tp))
            try:
                committed[tp] = decode_offset(data) if data is not None else None
            except ZnodeFormatError as e:
                log.warning("Ignoring the committed offset of %s for group %s: %s", _tp(*tp), opts.group_id, e)
                committed[tp] = None

    ranges = []
    for topic, partition in wanted:
        data, _ = zk.get(paths.partition_state_path(topic, partition))
        leader = LeaderIsrState.decode(data).leader if data else -1
        earliest = lookup.earliest_offset(topic, partition)
        latest = lookup.latest_offset(topic, partition)
        if opts.starting == "earliest":
            start = earliest
        elif opts.starting == "group":
            start = committed[(topic, partition)]
            start = earliest if start is None else start
        else:
            start = opts.starting[(topic, partition)]
            start = earliest if start == EARLIEST else start
        end = latest if opts.ending == "latest" else opts.ending[(topic, partition)]
        end = latest if end == LATEST else end
        if start > end:
            raise ZkKafkaOptionError(
                f"The resolved start offset {start} is greater than the resolved end offset {end} for topic {topic} "
                f"partition {partition}. There may be multiple reasons: 1. Start offset is set to too big a value "
                "that after resolution, end offset is smaller than it. 2. The Kafka topic partition is broken.")
        if start < earliest:
            report_data_loss(opts.fail_on_data_loss, topic, partition, start, min(earliest, end))
            start = min(earliest, end)
        ranges.append(OffsetRange(topic, partition, start, end, leader))
    return ranges


def report_data_loss(fail: bool, topic: str, partition: int, start: int, end: int) -> None:
    """Offsets [start, end) of the partition are gone: fail, or warn and go on (failOnDataLoss)."""
    reason = f"Could not read records in offset [{start}, {end}) for topic partition {_tp(topic, partition)}."
    if fail:
        raise DataLossError(f"{_DATA_LOSS_HINT} Reason: {reason}")
    log.warning("Skipping offsets [%d, %d) of %s, no longer in the log (failOnDataLoss=false): some data may have "
                "been lost because they are not available in Kafka any more.", start, end, _tp(topic, partition))


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None = None,
                 max_records: int | None = None) -> list[OffsetRange]:
    """Drop empty ranges; cut ranges into at most `max_records` offsets each; then, while there are fewer
    than `min_partitions` pieces, share the missing ones among the ranges in proportion to their size
    (largest remainder first). A range is cut into near-equal consecutive pieces."""
    ranges = [r for r in ranges if r.size > 0]
    parts = [math.ceil(r.size / max_records) if max_records else 1 for r in ranges]
    if min_partitions and sum(parts) < min_partitions:
        total = sum(r.size for r in ranges)
        quotas = [min_partitions * r.size / total for r in ranges]
        parts = [min(r.size, max(n, math.floor(q))) for r, n, q in zip(ranges, parts, quotas)]
        by_remainder = sorted(range(len(ranges)), key=lambda i: (-(quotas[i] - math.floor(quotas[i])), i))
        while sum(parts) < min_partitions:
            grown = False
            for i in by_remainder:
                if sum(parts) >= min_partitions:
                    break
                if parts[i] < ranges[i].size:
                    parts[i] += 1
                    grown = True
            if not grown:
                break  # fewer offsets than min_partitions: one piece per offset
    out = []
    for r, n in zip(ranges, parts):
        step, extra = divmod(r.size, n)
        start = r.start
        for i in range(n):
            end = start + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, start, end, r.leader))
            start = end
    return out


# ---- message sets to Arrow --------------------------------------------------------------------------------

_SIZE = struct.Struct(">i")
_KEY_LENGTH_AT = {0: 18, 1: 26}  # offset 8, size 4, crc 4, magic 1, attributes 1, [timestamp 8]
_LITTLE_ENDIAN = sys.byteorder == "little"
_INT32_MAX = 2**31 - 1
_NULL_LENGTH = b"\xff\xff\xff\xff"
_TIMESTAMP = pa.timestamp("us", tz="UTC")


def message_set_batch(records, topic: str, partition: int, start: int, end: int,
                      schema: pa.Schema) -> tuple[pa.RecordBatch | None, int, int]:
    """The messages of a fetched message set with start <= offset < end, as one record batch of `schema`.

    Returns (batch or None, the offset after the last complete message in the set, how many complete
    messages the set held). CRCs are checked. A set of uncompressed messages of one format -- what 0.8
    producers write without compression -- is decoded column by column on little-endian hosts: where the
    messages start comes from one Python loop over their sizes (or from Arrow, when they all have the same
    size), and Arrow kernels cut out offsets, keys and values. Anything else (compressed wrappers, formats
    mixed) goes message by message through the codec's `iter_messages`.
    """
    view = memoryview(records).cast("B") if not isinstance(records, memoryview) else records.cast("B")
    columns = _plain_columns(view) if _LITTLE_ENDIAN else None
    if columns is None:
        columns = _general_columns(view)
    offsets, keys, values, timestamps, ts_types, count = columns
    if count == 0:
        return None, start, 0
    next_offset = offsets[count - 1].as_py() + 1
    if offsets[0].as_py() < start or offsets[count - 1].as_py() >= end:
        keep = pc.and_(pc.greater_equal(offsets, start), pc.less(offsets, end))
        offsets, keys, values, timestamps, ts_types = (pc.filter(c, keep) for c in
                                                       (offsets, keys, values, timestamps, ts_types))
    rows = len(offsets)
    if rows == 0:
        return None, next_offset, count
    arrays = [keys, values, pa.repeat(pa.scalar(topic, pa.string()), rows),
              pa.repeat(pa.scalar(partition, pa.int32()), rows), offsets, timestamps, ts_types]
    if len(schema) > len(arrays):
        arrays.append(pa.nulls(rows, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema), next_offset, count


def _plain_columns(view: memoryview):
    """Columns of a set of uncompressed messages of one magic and attributes, or None for anything else."""
    if len(view) > _INT32_MAX:
        return None  # Arrow's 32-bit offsets
    found = _uniform_entries(view) or _walk_entries(view)
    if found is None:
        return None
    bounds, starts, stops = found
    count = len(bounds) - 1
    buffer = pa.py_buffer(view)
    entries = pa.Array.from_buffers(pa.binary(), count, [None, bounds.buffers()[1], buffer])
    magic, attributes = view[16], view[17]
    same_head = pc.equal(pc.binary_slice(entries, 16, 18), _scalar(bytes(view[16:18])))  # magic, attributes
    if magic not in _KEY_LENGTH_AT or attributes & 0x07 or not pc.all(same_head).as_py():
        return None
    key_at = _KEY_LENGTH_AT[magic]
    if magic and pc.min(pc.binary_length(entries)).as_py() < key_at + 8:
        return None
    # CRCs: each message's, computed here, against the stored ones (big-endian, contiguous once cut out).
    computed = array.array("I", map(crc32, map(view.__getitem__, map(slice, map((16).__add__, starts), stops))))
    computed.byteswap()
    if pc.binary_slice(entries, 12, 16).buffers()[2].to_pybytes()[:4 * count] != computed.tobytes():
        return None  # the general path names the message that fails its CRC
    entry_starts = bounds.slice(0, count)
    entry_stops = bounds.slice(1, count)
    offsets = _big_endian(pc.binary_slice(entries, 0, 8), pa.int64())
    key_lengths = _big_endian(pc.binary_slice(entries, key_at, key_at + 4), pa.int32())
    key_starts = pc.add(entry_starts, _scalar(key_at + 4))
    key_stops = pc.add(key_starts, pc.max_element_wise(key_lengths, _scalar(0)))
    value_starts = pc.add(key_stops, _scalar(4))
    if pc.min(key_lengths).as_py() < -1 or not pc.all(pc.less_equal(value_starts, entry_stops)).as_py():
        return None
    keys = _cut(buffer, key_starts, key_stops, pc.equal(key_lengths, _scalar(-1)))
    null_values = pc.and_(pc.equal(value_starts, entry_stops),
                          pc.equal(pc.binary_slice(entries, -4, _INT32_MAX), _scalar(_NULL_LENGTH)))
    values = _cut(buffer, value_starts, entry_stops, null_values)
    if magic == 0:
        timestamps = pa.nulls(count, _TIMESTAMP)
        ts_types = pa.repeat(_scalar(-1), count)
    else:
        millis = _big_endian(pc.binary_slice(entries, 18, 26), pa.int64())
        timestamps = pc.cast(pc.multiply_checked(millis, _scalar(1000, pa.int64())), _TIMESTAMP)
        ts_types = pa.repeat(_scalar(1 if attributes & LOG_APPEND_TIME else 0), count)
    return offsets, keys, values, timestamps, ts_types, count


def _walk_entries(view: memoryview):
    """(entry bounds as an Arrow int32 array, entry starts, entry stops) of the complete entries, walking the
    sizes; None when there is none or a size is corrupt."""
    n = len(view)
    unpack = _SIZE.unpack_from
    starts = []
    append = starts.append
    pos = 0
    while pos + 12 <= n:
        (size,) = unpack(view, pos + 8)
        stop = pos + 12 + size
        if size < 14 or stop > n:
            break
        append(pos)
        pos = stop
    if not starts or (pos + 12 <= n and unpack(view, pos + 8)[0] < 14):
        return None
    stops = starts[1:]
    stops.append(pos)
    return pa.array(starts + [pos], pa.int32()), starts, stops


def _uniform_entries(view: memoryview):
    """The same as _walk_entries without a Python loop, when every complete entry has the first one's size (a
    producer writing records of one size, as the benchmark's): the set is cut into equal strides and Arrow
    checks that each stride's size field says so -- each entry then ends where the next stride begins. None
    when the sizes are not uniform."""
    n = len(view)
    if n < 12:
        return None
    (size,) = _SIZE.unpack_from(view, 8)
    stride = 12 + size
    count = n // stride
    if size < 14 or count < 2:
        return None
    end = count * stride
    if end + 12 <= n and end + 12 + _SIZE.unpack_from(view, end + 8)[0] <= n:
        return None  # a complete message of another size follows the strides: walk
    strides = pa.FixedSizeBinaryArray.from_buffers(pa.binary(stride), count, [None, pa.py_buffer(view)])
    sizes = pc.binary_slice(strides, 8, 12)
    if not pc.all(pc.equal(sizes, _scalar(bytes(view[8:12]), pa.binary(4)))).as_py():
        return None
    bounds = pc.multiply(_indices(count + 1), _scalar(stride))
    return bounds, range(0, end, stride), range(stride, end + 1, stride)


@functools.lru_cache(maxsize=16)
def _indices(count: int) -> pa.Array:
    return pa.array(range(count), pa.int32())


@functools.lru_cache(maxsize=64)
def _scalar(value, type_: pa.DataType = None) -> pa.Scalar:
    """Arrow scalars made once: a Python value passed to a compute function is converted on every call."""
    if type_ is None:
        type_ = pa.binary() if isinstance(value, bytes) else pa.int32()
    return pa.scalar(value, type_)


def _big_endian(fixed: pa.Array, type_: pa.DataType) -> pa.Array:
    """Equal-width big-endian binary values as integers: reverse each value's bytes, then reinterpret the
    contiguous data buffer (little-endian hosts only)."""
    reversed_ = pc.binary_reverse(fixed)
    return pa.Array.from_buffers(type_, len(fixed), [None, reversed_.buffers()[2]])


@functools.lru_cache(maxsize=16)
def _even_indices(count: int) -> pa.Array:
    return pa.array(range(0, 2 * count, 2), pa.int32())


def _cut(buffer: pa.Buffer, starts: pa.Array, stops: pa.Array, nulls: pa.Array) -> pa.Array:
    """Binary values buffer[starts[i]:stops[i]] (ascending, not overlapping), null where `nulls`.

    The pairs interleaved -- start0, stop0, start1, stop1... -- are the offsets of a binary array over the
    whole buffer whose even elements are the values and odd ones the bytes between; `take` copies the even
    ones out. Interleaving: an int64 stop * 2**32 + start is, in little-endian memory, the int32 pair
    (start, stop).
    """
    count = len(starts)
    pairs = pc.add(pc.cast(starts, pa.int64()), pc.multiply(pc.cast(stops, pa.int64()), _scalar(1 << 32, pa.int64())))
    spans = pa.Array.from_buffers(pa.binary(), 2 * count - 1, [None, pairs.buffers()[1], buffer])
    values = pc.take(spans, _even_indices(count))
    if pc.any(nulls).as_py():
        values = pc.if_else(nulls, _scalar(None, pa.binary()), values)
    return values


def _general_columns(view: memoryview):
    """Columns of any message set, message by message (compressed wrappers opened by the codec)."""
    offsets, keys, values, timestamps, ts_types = [], [], [], [], []
    n = len(view)
    pos = 0
    while pos + 12 <= n:
        (size,) = _SIZE.unpack_from(view, pos + 8)
        stop = pos + 12 + size
        if stop > n and size >= 14:
            break  # a torn last message: the fetch ended inside it
        if size < 14 or pos + 18 > n:
            raise InvalidMessageError(f"message with corrupt size {size}", pos)
        magic, attributes = view[pos + 16], view[pos + 17]
        ts_type = -1 if magic == 0 else (1 if attributes & LOG_APPEND_TIME else 0)
        for message in iter_messages(view[pos:stop]):
            offsets.append(message.offset)
            keys.append(message.key)
            values.append(message.value)
            timestamps.append(message.timestamp * 1000 if magic else None)
            ts_types.append(ts_type)
        pos = stop
    return (pa.array(offsets, pa.int64()), pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
            pa.array(timestamps, pa.int64()).cast(pa.timestamp("us", tz="UTC")), pa.array(ts_types, pa.int32()),
            len(offsets))


# ---- reading one range --------------------------------------------------------------------------------------


def read_range(part: ZkKafkaPartition, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Fetch offsets [start, end) of one partition from its current leader and yield them as record batches."""
    from consumer.simple import LeaderNotFound, SimpleConsumer
    from consumer.stream import MessageSizeTooLarge
    from zkbroker.client.metadata import NoBrokersAvailable
    from zkbroker.protocol.errors import OffsetOutOfRangeError

    o = part.options
    log.debug("Reading offsets [%d, %d) of %s (its leader at planning: broker %d)", part.start, part.end,
              _tp(part.topic, part.partition), part.leader)
    consumer = SimpleConsumer(list(part.brokers), client_id=o.client_id,
                              socket_timeout_ms=max(30_000, o.poll_timeout_ms))
    try:
        offset, end = part.start, part.end
        fetch_size = o.fetch_max_bytes
        waited_since = None
        while offset < end:
            try:
                records, high_watermark = _fetch_raw(consumer, part.topic, part.partition, offset, fetch_size)
            except OffsetOutOfRangeError:
                offset = _after_out_of_range(consumer, part, offset)
                continue
            except (LeaderNotFound, NoBrokersAvailable) as e:
                # No leader for longer than the simple consumer's retries: a broker died and ZooKeeper has not
                # expired its session yet. Keep looking until the poll timeout.
                waited_since = waited_since or time.monotonic()
                if time.monotonic() - waited_since > o.poll_timeout_ms / 1000.0:
                    raise TimeoutError(f"No leader for {_tp(part.topic, part.partition)} within "
                                       f"{o.poll_timeout_ms} milliseconds: {e}") from e
                continue
            batch, next_offset, complete = message_set_batch(records, part.topic, part.partition, offset, end,
                                                             schema)
            if batch is not None:
                yield batch
            if complete:
                offset, waited_since = max(offset, next_offset), None
                continue
            if len(records):
                if fetch_size >= 64 * o.fetch_max_bytes:
                    raise MessageSizeTooLarge(
                        f"The message at offset {offset} of {_tp(part.topic, part.partition)} is larger than "
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
                raise TimeoutError(f"Cannot fetch record for offset {offset} of {_tp(part.topic, part.partition)} "
                                   f"in {o.poll_timeout_ms} milliseconds")
    finally:
        consumer.close()


def _after_out_of_range(consumer, part: ZkKafkaPartition, offset: int) -> int:
    """Where to go on after OFFSET_OUT_OF_RANGE at `offset`: the offsets missing are data loss."""
    earliest = consumer.earliest_offset(part.topic, part.partition)
    latest = consumer.latest_offset(part.topic, part.partition)
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
        # Called when the DataFrame is loaded: bad options fail here, before any query is planned.
        return kafka_schema(parse_options(self.options).include_headers)

    def reader(self, schema: StructType) -> ZkKafkaReader:
        return ZkKafkaReader(parse_options(self.options), schema)


class ZkKafkaReader(DataSourceReader):
    """Plans the read from ZooKeeper when created (on the driver) and reads one range per task."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        if schema != kafka_schema(options.include_headers):
            raise ZkKafkaOptionError("Kafka source has a fixed schema and cannot be set with a custom one")
        self.options = options
        self.schema = schema
        self.ranges, self.brokers = self._plan()

    def _plan(self) -> tuple[list[OffsetRange], tuple[tuple[str, int], ...]]:
        from consumer.fetcher import live_brokers
        from consumer.simple import SimpleConsumer
        from zkbroker.zk.client import ZkClient

        o = self.options
        logging.getLogger("kazoo").setLevel(logging.ERROR)  # it logs each failed connect; ours is one sentence
        zk = ZkClient(o.zookeeper_connect, o.zk_session_timeout_ms, o.zk_connection_timeout_ms, name="zkkafka-plan")
        zk.start()
        try:
            brokers = tuple((b.host, b.port) for b in live_brokers(zk))
            if not brokers:
                raise ZkKafkaOptionError(f"No broker is registered in {o.zookeeper_connect}")
            # A leader that died a moment ago stays in its state znode until its session expires: keep asking
            # for up to the poll timeout, as the tasks do, so a failover during planning costs a pause.
            retry_backoff_ms = 200
            with SimpleConsumer(list(brokers), client_id=o.client_id, retry_backoff_ms=retry_backoff_ms,
                                max_retries=max(5, o.poll_timeout_ms // retry_backoff_ms)) as lookup:
                ranges = plan_ranges(o, zk, lookup)
        finally:
            zk.close()
        return split_ranges(ranges, o.min_partitions, o.max_records_per_partition), brokers

    def partitions(self) -> list[InputPartition]:
        return [ZkKafkaPartition(r.topic, r.partition, r.start, r.end, r.leader, self.brokers, self.options)
                for r in self.ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ZkKafkaPartition):
            return iter(())  # no partitions at all: Spark still runs one task
        from pyspark.sql.pandas.types import to_arrow_schema

        return read_range(partition, to_arrow_schema(self.schema, timezone="UTC"))
