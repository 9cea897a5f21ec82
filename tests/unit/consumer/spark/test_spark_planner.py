"""Planning a zkkafka read from a ZooKeeper stand-in (through the ZooKeeper view), and range splitting."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from consumer.spark import (
    DataLossError,
    OffsetRange,
    ZkKafkaOptionError,
    kafka_schema,
    parse_options,
    plan_ranges,
    split_ranges,
)
from consumer.spark.cluster_view import ZooKeeperView
from zkbroker.zk import paths
from zkbroker.zk.znodes import LeaderIsrState, TopicAssignment, encode_offset

ZK = "127.0.0.1:2181/kafka"
SCHEMA = to_arrow_schema(kafka_schema(), timezone="UTC")


def options(**extra: str) -> dict[str, str]:
    return {"zookeeper.connect": ZK, **extra}


# ---- planning -----------------------------------------------------------------------------------------------


class FakeZk:
    """The two reads planning makes, over a dict of znodes."""

    def __init__(self, nodes: dict[str, bytes]) -> None:
        self.nodes = nodes

    def get(self, path: str):
        return (self.nodes[path], object()) if path in self.nodes else (None, None)

    def get_children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix):].split("/")[0] for p in self.nodes if p.startswith(prefix)})


class FakeLookup:
    def __init__(self, earliest: dict, latest: dict, times: dict | None = None) -> None:
        self.earliest, self.latest = earliest, latest
        self.times = times or {}  # {(topic, partition): [(timestamp, offset)...]}: the log's records

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        return next((o for t, o in self.times.get((topic, partition), []) if t >= timestamp), None)

    def earliest_offset(self, topic: str, partition: int) -> int:
        return self.earliest[(topic, partition)]

    def latest_offset(self, topic: str, partition: int) -> int:
        return self.latest[(topic, partition)]


def cluster(topics: dict[str, int], committed: dict | None = None) -> ZooKeeperView:
    nodes = {}
    for topic, count in topics.items():
        nodes[paths.topic_path(topic)] = TopicAssignment({p: (1, 2) for p in range(count)}).encode()
        for p in range(count):
            nodes[paths.partition_state_path(topic, p)] = LeaderIsrState(1 + p % 2, 0, 1, (1, 2)).encode()
    for (topic, p), offset in (committed or {}).items():
        nodes[paths.consumer_offset_path("g", topic, p)] = encode_offset(offset)
    return ZooKeeperView(FakeZk(nodes), ZK)


def lookup(topics: dict[str, int], earliest: int = 0, latest: int = 100) -> FakeLookup:
    tps = [(t, p) for t, n in topics.items() for p in range(n)]
    return FakeLookup(dict.fromkeys(tps, earliest), dict.fromkeys(tps, latest))


def test_plan_by_subscribe_pattern_and_assign_with_leaders_from_state_znodes():
    topics = {"orders": 2, "order-log": 1, "other": 1}
    zk, offsets = cluster(topics), lookup(topics, 5, 50)
    by_subscribe = plan_ranges(parse_options(options(subscribe="orders,missing")), zk, offsets)
    assert by_subscribe == [OffsetRange("orders", 0, 5, 50, 1), OffsetRange("orders", 1, 5, 50, 2)]
    by_pattern = plan_ranges(parse_options(options(subscribePattern="order.*")), zk, offsets)
    assert [(r.topic, r.partition) for r in by_pattern] == [("order-log", 0), ("orders", 0), ("orders", 1)]
    by_assign = plan_ranges(parse_options(options(assign='{"orders":[1]}')), zk, offsets)
    assert by_assign == [OffsetRange("orders", 1, 5, 50, 2)]
    with pytest.raises(ZkKafkaOptionError, match=r"assign names partitions that do not exist .*\[orders-7\]"):
        plan_ranges(parse_options(options(assign='{"orders":[7]}')), zk, offsets)


def test_plan_json_offsets_resolve_minus_one_and_minus_two_and_must_cover_the_assignment():
    topics = {"t": 2}
    zk, offsets = cluster(topics), lookup(topics, 10, 90)
    opts = parse_options(options(subscribe="t", startingOffsets='{"t":{"0":-2,"1":20}}',
                                 endingOffsets='{"t":{"0":30,"1":-1}}'))
    assert [(r.start, r.end) for r in plan_ranges(opts, zk, offsets)] == [(10, 30), (20, 90)]
    partial = parse_options(options(subscribe="t", startingOffsets='{"t":{"0":-2}}'))
    with pytest.raises(ZkKafkaOptionError, match=r"Partitions specified for Kafka start offsets don't match what are "
                                                 r"assigned.*Specified: \[t-0\] Assigned: \[t-0, t-1\]"):
        plan_ranges(partial, zk, offsets)
    beyond = parse_options(options(assign='{"t":[0]}', startingOffsets='{"t":{"0":95}}'))
    with pytest.raises(ZkKafkaOptionError, match="The resolved start offset 95 is greater than the resolved end "
                                                 "offset 90 for topic t partition 0"):
        plan_ranges(beyond, zk, offsets)


def test_plan_by_timestamp_with_sparks_semantics_and_precedence():
    topics = {"t": 2}
    zk = cluster(topics)
    offsets = FakeLookup(dict.fromkeys([("t", 0), ("t", 1)], 0), dict.fromkeys([("t", 0), ("t", 1)], 100),
                         {("t", 0): [(1000, 10), (2000, 20)], ("t", 1): [(1500, 5)]})
    opts = parse_options(options(subscribe="t", startingOffsets="earliest",
                                 startingOffsetsByTimestamp='{"t":{"0":1001,"1":1000}}',
                                 endingOffsetsByTimestamp='{"t":{"0":2000,"1":9000}}'))
    # each start and end: the first offset at or after its timestamp; an end with none is the latest
    assert [(r.start, r.end) for r in plan_ranges(opts, zk, offsets)] == [(20, 20), (5, 100)]
    none_after = parse_options(options(subscribe="t", startingOffsetsByTimestamp='{"t":{"0":5000,"1":0}}'))
    with pytest.raises(ZkKafkaOptionError, match="No offset matched from request of topic-partition t-0 and "
                                                 "timestamp 5000"):
        plan_ranges(none_after, zk, offsets)
    latest = parse_options(options(subscribe="t", startingOffsetsByTimestamp='{"t":{"0":5000,"1":0}}',
                                   startingOffsetsByTimestampStrategy="latest"))
    assert [(r.start, r.end) for r in plan_ranges(latest, zk, offsets)] == [(100, 100), (5, 100)]
    partial = parse_options(options(subscribe="t", endingOffsetsByTimestamp='{"t":{"0":1}}'))
    with pytest.raises(ZkKafkaOptionError, match="Partitions specified for Kafka end offsets don't match"):
        plan_ranges(partial, zk, offsets)
    with pytest.raises(ZkKafkaOptionError, match="Expected e.g."):
        parse_options(options(subscribe="t", startingOffsetsByTimestamp='{"t":{"0":"soon"}}'))


def test_plan_from_a_groups_committed_offsets():
    topics = {"t": 2}
    zk, offsets = cluster(topics, committed={("t", 0): 42}), lookup(topics, 0, 100)
    opts = parse_options(options(subscribe="t", startingOffsets="group", **{"group.id": "g"}))
    assert [(r.start, r.end) for r in plan_ranges(opts, zk, offsets)] == [(42, 100), (0, 100)]


def test_plan_data_loss_fails_or_skips_to_the_log_start():
    topics = {"t": 1}
    zk, offsets = cluster(topics, committed={("t", 0): 3}), lookup(topics, 40, 100)
    failing = parse_options(options(subscribe="t", startingOffsets="group", **{"group.id": "g"}))
    with pytest.raises(DataLossError, match=r"failOnDataLoss to false\. Reason: Could not read records in offset "
                                            r"\[3, 40\) for topic partition t-0"):
        plan_ranges(failing, zk, offsets)
    skipping = parse_options(options(subscribe="t", startingOffsets="group", failOnDataLoss="false",
                                     **{"group.id": "g"}))
    assert [(r.start, r.end) for r in plan_ranges(skipping, zk, offsets)] == [(40, 100)]


# ---- splitting -----------------------------------------------------------------------------------------------


def test_split_drops_empty_ranges_and_keeps_one_per_partition_by_default():
    ranges = [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 5, 5), OffsetRange("t", 2, 3, 4)]
    assert split_ranges(ranges) == [ranges[0], ranges[2]]


def test_split_for_min_partitions_is_proportional_and_covers_every_offset_once():
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 100, 200), OffsetRange("t", 2, 0, 1)]
    pieces = split_ranges(ranges, min_partitions=10)
    assert len(pieces) == 10
    assert sum(1 for p in pieces if p.partition == 0) == 8  # 9 of 10 quota, minus what the others must keep
    for r in ranges:
        mine = [p for p in pieces if p.partition == r.partition]
        assert mine[0].start == r.start and mine[-1].end == r.end
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))
        assert max(p.size for p in mine) - min(p.size for p in mine) <= 1


@given(st.lists(st.integers(0, 50), min_size=1, max_size=6), st.integers(1, 40), st.one_of(st.none(),
                                                                                           st.integers(1, 20)))
def test_split_never_loses_or_repeats_an_offset(sizes, min_partitions, max_records):
    ranges = [OffsetRange("t", p, 7, 7 + size) for p, size in enumerate(sizes)]
    pieces = split_ranges(ranges, min_partitions, max_records)
    for r in ranges:
        covered = [o for p in pieces if p.partition == r.partition for o in range(p.start, p.end)]
        assert covered == list(range(r.start, r.end))
    assert all(p.size > 0 for p in pieces)
    if max_records:
        assert all(p.size <= max_records for p in pieces)
    assert len(pieces) >= min(min_partitions, sum(sizes))
