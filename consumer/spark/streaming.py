"""`spark.readStream.format("zkkafka")`: Structured Streaming from a ZooKeeper-era cluster, with Spark's Kafka source
contract for streams (DESIGN §21).

    query = (spark.readStream.format("zkkafka")
             .option("zookeeper.connect", "zk1:2181/kafka")
             .option("subscribe", "orders")
             .option("startingOffsets", "earliest")          # latest is the default, as Spark's
             .option("maxOffsetsPerTrigger", "100000")
             .load()
             .writeStream.format("parquet").option("checkpointLocation", "ckpt").start("out"))

Offsets are Spark's Kafka JSON (`{"orders":{"0":23,"1":57}}`): the first offset *not* yet read of each partition.
Spark keeps them in the checkpoint's offsets log, so a restarted query re-plans exactly the ranges of the batch
it was in and goes on from there; which records land where once is the sink's business (the file sink's
metadata log), as with Spark's own source.

How a micro-batch is made, on the driver (in the Python process Spark keeps for the source):

* `initialOffset` resolves startingOffsets once, for a query without a checkpoint, exactly as a batch read
  resolves its start (`planner.plan_ranges`);
* `latestOffset(start, limit)` is the end of the next batch: each subscribed partition's high watermark, cut to
  `maxOffsetsPerTrigger` shared among the partitions in proportion to how far behind each is (Spark's rule,
  never starving a partition with a little to read), and to the target of Trigger.AvailableNow once that is
  set. The subscription is re-read from ZooKeeper only after a watch on `/brokers/topics` or on a subscribed
  topic's znode fired: new partitions of a grown topic and new topics matching `subscribePattern` join the
  stream at their earliest offset;
* `partitions(start, end)` makes one task per partition range (split for `minPartitions`); offsets that went
  backwards (an unclean leader election, KAFKA-1211's truncation) and partitions that vanished (a deleted topic)
  are data loss, reported as Spark reports them (failOnDataLoss);
* each task reads its range as the batch source's tasks do (`source.read_range`), following leader moves.

Nothing is committed to Kafka by the source (nor by Spark's); `zkbroker spark-ingest --stream` commits the
group's offsets to ZooKeeper after each batch itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from .options import SourceOptions, ZkKafkaOptionError, tp_name, tp_names
from .planner import OffsetRange, plan_ranges, report_data_loss, split_ranges, subscribed_partitions

__all__ = ["ZkKafkaStreamReader", "offsets_from_json", "offsets_to_json", "rate_limit"]

log = logging.getLogger("consumer.spark")

Offsets = dict[tuple[str, int], int]


def offsets_to_json(offsets: Mapping[tuple[str, int], int]) -> dict:
    """{(topic, partition): offset} as Spark's Kafka offsets JSON: {"topic": {"partition": offset}}."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(value: Mapping) -> Offsets:
    """The inverse of offsets_to_json (what Spark hands back from its checkpoint)."""
    return {(topic, int(partition)): int(offset) for topic, partitions in value.items()
            for partition, offset in partitions.items()}


def rate_limit(limit: int, begin: Mapping[tuple[str, int], int], until: Mapping[tuple[str, int], int]) -> Offsets:
    """Cut `until` so that about `limit` offsets are read from `begin`: each partition gets its share of the limit in
    proportion to what it has to read, rounded down -- or up when the share is below one, so that a partition with
    little to read is never starved (Spark's KafkaMicroBatchStream.rateLimit rule). Partitions missing from `begin`
    (new ones) are not cut: their start is not known here."""
    sizes = {tp: end - begin[tp] for tp, end in until.items() if tp in begin and end > begin[tp]}
    total = sum(sizes.values())
    if total < 1:
        return dict(until)
    out = {}
    for tp, end in until.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        share = limit * size / total
        step = -int(-share // 1) if share < 1 else int(share)  # ceil below one, floor above
        out[tp] = min(end, begin[tp] + step)
    return out


class _Cluster:
    """The driver's view of the cluster for one stream (cluster_view.py: ZooKeeper with watches that say when the
    subscription may have changed, or the brokers' Metadata asked at every trigger), and a simple consumer for
    ListOffsets at the leaders."""

    def __init__(self, options: SourceOptions) -> None:
        from consumer.simple import SimpleConsumer

        from .cluster_view import open_view

        self.options = options
        self.view = open_view(options, "zkkafka-stream")
        self._subscription: list[tuple[str, int]] | None = None
        retry_backoff_ms = 200
        self.lookup = SimpleConsumer(list(self.view.brokers()), client_id=options.client_id,
                                     retry_backoff_ms=retry_backoff_ms,
                                     max_retries=max(5, options.poll_timeout_ms // retry_backoff_ms),
                                     security=options.security)

    def subscription(self) -> list[tuple[str, int]]:
        """The partitions subscribed now, read again only when the view says they may have changed."""
        if self.view.changed() or self._subscription is None:
            self._subscription = subscribed_partitions(self.options, self.view)
            self.view.watch({t for t, _ in self._subscription})
        return self._subscription

    def latest(self) -> Offsets:
        return {(t, p): self.lookup.latest_offset(t, p, self.options.isolation_level) for t, p in self.subscription()}

    def earliest(self, topic: str, partition: int) -> int:
        return self.lookup.earliest_offset(topic, partition)

    def brokers(self) -> tuple[tuple[str, int], ...]:
        return self.view.brokers()

    def close(self) -> None:
        self.lookup.close()
        self.view.close()


class ZkKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from ZooKeeper and the leaders' offsets; reads each range as the batch source does.

    Spark makes one on the driver for the life of the query and more, briefly, to ship `read` to the tasks: the
    connection to the cluster is therefore opened on first use and never pickled."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        from .source import kafka_schema

        if schema != kafka_schema(options.include_headers):
            raise ZkKafkaOptionError("Kafka source has a fixed schema and cannot be set with a custom one")
        self.options = options
        self.schema = schema
        self._cluster: _Cluster | None = None
        self._target: Offsets | None = None  # Trigger.AvailableNow's end
        self._latest: Offsets | None = None
        self._behind_since: dict[tuple[str, int], float] = {}  # partitions whose log ends before the stream's offset

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_cluster"] = None
        return state

    def _view(self) -> _Cluster:
        if self._cluster is None:
            self._cluster = _Cluster(self.options)
        return self._cluster

    # ---- offsets ----------------------------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        view = self._view()
        return offsets_to_json({(r.topic, r.partition): r.start for r in plan_ranges(self.options, view.view,
                                                                                        view.lookup)})

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._view().latest()
        log.info("Trigger.AvailableNow: the stream ends at %s", offsets_to_json(self._target))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        view = self._view()
        latest = view.latest()
        self._latest = latest
        if self._target is not None:
            # Partitions that appeared after the target was taken are left for the next query.
            latest = {tp: min(end, self._target[tp]) for tp, end in latest.items() if tp in self._target}
        begin = offsets_from_json(start)
        latest = self._hold_behind(begin, latest, time.monotonic())
        if isinstance(limit, ReadMaxRows):
            for tp in latest.keys() - begin.keys():
                begin[tp] = view.earliest(*tp)  # a new partition is read from its start (Spark's rule)
            latest = rate_limit(limit.max_rows, begin, latest)
        return offsets_to_json(latest)

    def _hold_behind(self, begin: Offsets, latest: Offsets, now: float) -> Offsets:
        """A partition whose latest offset is below what the stream has read stays where it is, for up to
        kafkaConsumer.pollTimeoutMs: after a leader failover 0.8.2's new leader serves its own high watermark, which
        may lag the old leader's until its followers fetch again. Still behind after that, the log really went
        back (an unclean election, KAFKA-1211's truncation): the offset is let go back, and `partitions` reports
        the data loss as Spark does."""
        out = dict(latest)
        for tp, end in latest.items():
            if tp not in begin or end >= begin[tp]:
                self._behind_since.pop(tp, None)
                continue
            since = self._behind_since.setdefault(tp, now)
            if now - since < self.options.poll_timeout_ms / 1000.0:
                if since == now:
                    log.warning("%s ends at %d, before offset %d the stream has read; waiting up to %d ms for it to "
                                "come back (a new leader's high watermark catching up) before calling it data loss",
                                tp_name(*tp), end, begin[tp], self.options.poll_timeout_ms)
                out[tp] = begin[tp]
        return out

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    # ---- planning and reading ---------------------------------------------------------------------------------

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        from .source import ZkKafkaPartition

        begin, until = offsets_from_json(start), offsets_from_json(end)
        gone = sorted(begin.keys() - until.keys())
        if gone:
            _report_gone(self.options.fail_on_data_loss, gone)
        ranges = []
        for (topic, partition), stop in sorted(until.items()):
            if (topic, partition) in begin:
                first = begin[(topic, partition)]
            else:  # a partition new in this batch is read from its start
                first = self._view().earliest(topic, partition)
            if stop < first:
                # The log is shorter than what was read already: an unclean election or a high-watermark truncation
                # took acknowledged offsets away (Spark: "offset was changed from ... to ...").
                report_data_loss(self.options.fail_on_data_loss, topic, partition, stop, first)
                continue
            ranges.append(OffsetRange(topic, partition, first, stop))
        ranges = split_ranges(ranges, self.options.min_partitions)
        if not ranges:
            return []  # an empty micro-batch: no task, and no need to ask ZooKeeper for the brokers
        brokers = self._view().brokers()
        return [ZkKafkaPartition(r.topic, r.partition, r.start, r.end, r.leader, brokers, self.options)
                for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        from .source import read_range

        return read_range(partition, to_arrow_schema(self.schema, timezone="UTC"))

    def commit(self, end: dict) -> None:
        pass  # as Spark's Kafka source: nothing is committed to the cluster

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def _report_gone(fail: bool, gone: list[tuple[str, int]]) -> None:
    from .planner import DataLossError

    message = (f"{tp_names(gone)} are gone. Some data may have been missed (a topic was deleted while the query "
               "ran). If you don't want your streaming query to fail on such cases, set the source option "
               "failOnDataLoss to false.")
    if fail:
        raise DataLossError(message)
    log.warning("%s", message)
