"""Planning a `zkkafka` read on the driver: one offset range per partition of the subscription, resolved
from the cluster's view (ZooKeeper or the brokers' Metadata, cluster_view.py) and ListOffsets at the leaders,
checked for data loss (Spark's KAFKA_DATA_LOSS), and split into Spark tasks (`minPartitions`,
`maxRecordsPerPartition`). The data source's docstring (`source.py`) tells the whole story."""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from typing import Protocol

from .options import EARLIEST, LATEST, SourceOptions, ZkKafkaOptionError, tp_name, tp_names

__all__ = ["DataLossError", "OffsetLookup", "OffsetRange", "plan_ranges", "report_data_loss", "split_ranges",
           "subscribed_partitions"]

log = logging.getLogger("consumer.spark")

_DATA_LOSS_HINT = ("Some data may have been lost because they are not available in Kafka any more; either the "
                   "data was aged out by Kafka or the topic may have been deleted before all the data in the "
                   "topic was processed. If you don't want your streaming query to fail on such cases, set the "
                   "source option failOnDataLoss to false.")


class DataLossError(RuntimeError):
    """Offsets to be read are gone from the log and failOnDataLoss is true (Spark's KAFKA_DATA_LOSS)."""


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
    """What planning asks the brokers: ListOffsets -2 / -1, and v1 by timestamp, at a partition's leader (our
    SimpleConsumer)."""

    def earliest_offset(self, topic: str, partition: int) -> int: ...

    def latest_offset(self, topic: str, partition: int) -> int: ...

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None: ...


def plan_ranges(opts: SourceOptions, view, lookup: OffsetLookup) -> list[OffsetRange]:
    """One range per partition of the subscription, offsets resolved and checked (before any task runs).

    `view` is the cluster's (cluster_view.py); `lookup` resolves earliest and latest offsets.
    """
    wanted = subscribed_partitions(opts, view)

    limits = ((opts.starting_timestamps or opts.starting, "start"), (opts.ending_timestamps or opts.ending, "end"))
    for limit, name in limits:
        if isinstance(limit, dict) and set(limit) != set(wanted):
            raise ZkKafkaOptionError(
                f"Partitions specified for Kafka {name} offsets don't match what are assigned. Maybe topic "
                "partitions are created or deleted while the query is running. Use -1 for latest, -2 for earliest. "
                f"Specified: {tp_names(limit)} Assigned: {tp_names(wanted)}")

    committed = view.committed(opts.group_id, wanted) if opts.starting == "group" else {}

    ranges = []
    for topic, partition in wanted:
        leader = view.leader(topic, partition)
        earliest = lookup.earliest_offset(topic, partition)
        latest = lookup.latest_offset(topic, partition)
        if opts.starting == "earliest":
            start = earliest
        elif opts.starting == "latest":  # streams only
            start = latest
        elif opts.starting == "group":
            start = committed[(topic, partition)]
            start = earliest if start is None else start
        else:
            start = opts.starting[(topic, partition)]
            start = earliest if start == EARLIEST else latest if start == LATEST else start
        end = latest if opts.ending == "latest" else opts.ending[(topic, partition)]
        end = latest if end == LATEST else end
        if opts.starting_timestamps is not None:  # Spark's precedence: ...ByTimestamp over ...Offsets
            timestamp = opts.starting_timestamps[(topic, partition)]
            start = lookup.offset_for_time(topic, partition, timestamp)
            if start is None:
                if opts.starting_timestamp_strategy == "error":
                    raise ZkKafkaOptionError(f"No offset matched from request of topic-partition "
                                             f"{tp_name(topic, partition)} and timestamp {timestamp}.")
                start = latest
        if opts.ending_timestamps is not None:
            found = lookup.offset_for_time(topic, partition, opts.ending_timestamps[(topic, partition)])
            end = latest if found is None else found
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


def subscribed_partitions(opts: SourceOptions, view) -> list[tuple[str, int]]:
    """The (topic, partition) pairs the subscription names in the cluster now, sorted: the topics of `subscribe`
    that exist, those matching `subscribePattern`, or `assign`'s (which must all exist)."""
    existing = view.topics()
    if opts.strategy == "subscribe":
        topics = [t for t in opts.topics if t in existing]
        for missing in sorted(set(opts.topics) - existing):
            log.warning("Topic %s does not exist in %s; nothing to read from it", missing, view.where)
    elif opts.strategy == "subscribepattern":
        regex = re.compile(opts.pattern)
        topics = sorted(t for t in existing if regex.fullmatch(t))
    else:
        topics = sorted({t for t, _ in opts.assigned})
    partitions = {topic: view.partitions(topic) for topic in topics}
    if opts.strategy == "assign":
        unknown = [(t, p) for t, p in opts.assigned if p not in partitions.get(t, ())]
        if unknown:
            raise ZkKafkaOptionError(f"assign names partitions that do not exist in {view.where}: "
                                     f"{tp_names(unknown)}")
        return sorted(opts.assigned)
    return sorted((t, p) for t, ps in partitions.items() for p in ps)


def report_data_loss(fail: bool, topic: str, partition: int, start: int, end: int) -> None:
    """Offsets [start, end) of the partition are gone: fail, or warn and go on (failOnDataLoss)."""
    reason = f"Could not read records in offset [{start}, {end}) for topic partition {tp_name(topic, partition)}."
    if fail:
        raise DataLossError(f"{_DATA_LOSS_HINT} Reason: {reason}")
    log.warning("Skipping offsets [%d, %d) of %s, no longer in the log (failOnDataLoss=false): some data may have "
                "been lost because they are not available in Kafka any more.", start, end, tp_name(topic, partition))


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

