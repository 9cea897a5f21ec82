"""The zkkafka source without Spark or a cluster: option checks with Spark's messages, planning from a
ZooKeeper stand-in, range splitting, and message sets decoded into Arrow batches."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from consumer.spark import (
    DataLossError,
    OffsetRange,
    ZkKafkaOptionError,
    kafka_schema,
    message_set_batch,
    parse_options,
    plan_ranges,
    split_ranges,
)
from zkbroker.protocol.compression import CODEC_GZIP, CODEC_NONE, compress
from zkbroker.protocol.message_set import LOG_APPEND_TIME, InvalidMessageError, build_message_set, encode_message
from zkbroker.zk import paths
from zkbroker.zk.znodes import LeaderIsrState, TopicAssignment, encode_offset

ZK = "127.0.0.1:2181/kafka"
SCHEMA = to_arrow_schema(kafka_schema(), timezone="UTC")


def options(**extra: str) -> dict[str, str]:
    return {"zookeeper.connect": ZK, **extra}


# ---- options ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("given_options, message", [
    ({}, "One of the following options must be specified for Kafka source: subscribe, subscribepattern, assign. "
         "See the docs for more details."),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options can be specified for Kafka "
                                                 "source: subscribe, subscribepattern, assign."),
    ({"subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe' is ' , '"),
    ({"subscribePattern": " "}, "Pattern to subscribe is empty as specified value for option 'subscribePattern'"),
    ({"subscribePattern": "a("}, "Invalid subscribePattern 'a('"),
    ({"assign": "a:0"}, "No topicpartitions to assign as specified value for option 'assign' is 'a:0'"),
    ({"assign": '{"a":0}'}, 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got {"a":0}'),
    ({"subscribe": "a", "startingOffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'},
     "startingOffsets for a-0 can't be latest for batch queries on Kafka"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
    ({"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'},
     "ending offset for a-0 can't be earliest for batch queries on Kafka"),
    ({"subscribe": "a", "startingOffsets": "{oops"}, 'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, '
                                                      "got {oops"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":1}}', "endingOffsets": '{"a":{"1":5}}'},
     "The specified start offset and end offset should have the same topic-partitions. Topic-partitions for "
     "start offset: [a-0], topic-partitions for end offset: [a-1]."),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":9}}', "endingOffsets": '{"a":{"0":5}}'},
     "The specified start offset 9 is greater than the end offset 5 for topic a partition 0."),
    ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be positive"),
    ({"subscribe": "a", "minPartitions": "many"}, "minPartitions must be positive, got 'many'"),
    ({"subscribe": "a", "maxRecordsPerPartition": "-3"}, "maxrecordsperpartition must be positive"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "Option 'failondataloss' must be true or false, got 'maybe'"),
    ({"subscribe": "a", "startingOffsets": "group"}, "startingOffsets 'group' needs the option 'group.id'"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported."),
    ({"subscribe": "a", "kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not supported"),
])
def test_bad_options_fail_with_sparks_message(given_options, message):
    with pytest.raises(ZkKafkaOptionError) as e:
        parse_options(options(**given_options))
    assert message in str(e.value)


def test_zookeeper_connect_is_required_and_bootstrap_servers_is_refused():
    with pytest.raises(ZkKafkaOptionError, match="Option 'zookeeper.connect' must be specified"):
        parse_options({"subscribe": "a"})
    with pytest.raises(ZkKafkaOptionError, match="instead of 'kafka.bootstrap.servers'"):
        parse_options({"subscribe": "a", "kafka.bootstrap.servers": "h:9092"})


def test_options_are_case_insensitive_and_parsed():
    opts = parse_options({"ZOOKEEPER.CONNECT": ZK, "Subscribe": "a, b,a", "StartingOffsets": "EARLIEST",
                          "FAILONDATALOSS": "False", "minpartitions": "4", "includeHeaders": "true"})
    assert (opts.strategy, opts.topics, opts.starting, opts.ending) == ("subscribe", ("a", "b"), "earliest", "latest")
    assert (opts.fail_on_data_loss, opts.min_partitions, opts.include_headers) == (False, 4, True)
    opts = parse_options(options(assign='{"b":[1,0],"a":[2]}', startingOffsets='{"a":{"2":-2},"b":{"0":3,"1":4}}'))
    assert opts.assigned == (("a", 2), ("b", 0), ("b", 1))
    assert opts.starting == {("a", 2): -2, ("b", 0): 3, ("b", 1): 4}


def test_schema_is_sparks_kafka_schema():
    assert kafka_schema().simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                                             "timestamp:timestamp,timestampType:int>")
    assert kafka_schema(True).fieldNames()[-1] == "headers"
    assert str(SCHEMA.field("timestamp").type) == "timestamp[us, tz=UTC]"


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
    def __init__(self, earliest: dict, latest: dict) -> None:
        self.earliest, self.latest = earliest, latest

    def earliest_offset(self, topic: str, partition: int) -> int:
        return self.earliest[(topic, partition)]

    def latest_offset(self, topic: str, partition: int) -> int:
        return self.latest[(topic, partition)]


def cluster(topics: dict[str, int], committed: dict | None = None) -> FakeZk:
    nodes = {}
    for topic, count in topics.items():
        nodes[paths.topic_path(topic)] = TopicAssignment({p: (1, 2) for p in range(count)}).encode()
        for p in range(count):
            nodes[paths.partition_state_path(topic, p)] = LeaderIsrState(1 + p % 2, 0, 1, (1, 2)).encode()
    for (topic, p), offset in (committed or {}).items():
        nodes[paths.consumer_offset_path("g", topic, p)] = encode_offset(offset)
    return FakeZk(nodes)


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


# ---- message sets to Arrow ------------------------------------------------------------------------------------


def entry(offset: int, message: bytes) -> bytes:
    return struct.pack(">qi", offset, len(message)) + message


def expected_rows(batch: pa.RecordBatch) -> list[tuple]:
    return list(zip(*(batch.column(name).to_pylist() for name in ("offset", "key", "value", "timestampType"))))


keys_and_values = st.one_of(st.none(), st.binary(max_size=20))


def micros(batch: pa.RecordBatch) -> list[int | None]:
    return batch.column("timestamp").cast(pa.int64()).to_pylist()


@st.composite
def message_sets(draw):
    """A message set as a broker stores it, the (offset, key, value, timestampType) of each message in it, each
    one's timestamp in ms (None for magic 0), and (end in bytes, messages so far) after each stored entry."""
    offset = draw(st.integers(0, 2**40))
    parts, rows, timestamps, ends = [], [], [], []
    for _ in range(draw(st.integers(1, 4))):
        magic = draw(st.sampled_from([0, 1]))
        log_append = magic == 1 and draw(st.booleans())
        compressed = draw(st.sampled_from([False, False, True]))
        items = draw(st.lists(st.tuples(keys_and_values, keys_and_values, st.integers(0, 2**41)), min_size=1,
                              max_size=8))
        attributes = LOG_APPEND_TIME if log_append else 0
        ts_type = -1 if magic == 0 else int(log_append)
        if compressed:
            # Inner offsets absolute in magic 0 and relative in magic 1; a LogAppendTime wrapper's time is every
            # inner message's.
            inner = b"".join(entry(offset + i if magic == 0 else i, encode_message(k, v, magic=magic, timestamp=ts))
                             for i, (k, v, ts) in enumerate(items))
            wrapper_ts = draw(st.integers(0, 2**41))
            parts.append(entry(offset + len(items) - 1, encode_message(
                None, compress(CODEC_GZIP, inner, magic), magic=magic, attributes=CODEC_GZIP | attributes,
                timestamp=wrapper_ts)))
            ends.append((sum(map(len, parts)), len(rows) + len(items)))
        else:
            for i, (k, v, ts) in enumerate(items):
                parts.append(entry(offset + i, encode_message(k, v, magic=magic, attributes=attributes, timestamp=ts)))
                ends.append((sum(map(len, parts)), len(rows) + i + 1))
        for i, (key, value, ts) in enumerate(items):
            rows.append((offset + i, key, value, ts_type))
            timestamps.append(None if magic == 0 else (wrapper_ts if compressed and log_append else ts))
        offset += len(items)
    return b"".join(parts), rows, timestamps, ends


@settings(max_examples=300, deadline=None)
@given(message_sets(), st.data())
def test_any_message_set_decodes_to_its_messages(case, data):
    records, rows, timestamps, ends = case
    # A fetch may end anywhere: the messages of every entry it holds completely come out.
    cut = data.draw(st.integers(ends[0][0], len(records)), label="fetched bytes")
    kept = max(count for end, count in ends if end <= cut)
    records, rows, timestamps = records[:cut], rows[:kept], timestamps[:kept]
    batch, next_offset, count = message_set_batch(records, "t", 7, 0, 2**62, SCHEMA)
    assert batch.schema.equals(SCHEMA)
    assert expected_rows(batch) == rows
    assert micros(batch) == [None if t is None else t * 1000 for t in timestamps]
    assert set(batch.column("topic").to_pylist()) == {"t"} and set(batch.column("partition").to_pylist()) == {7}
    assert (next_offset, count) == (rows[-1][0] + 1, len(rows))


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 60), st.sampled_from([0, 1]), st.one_of(st.none(), st.integers(0, 6)), st.integers(0, 30),
       st.integers(0, 60), st.data())
def test_equal_sized_sets_decode_alike_wherever_a_fetch_ends_or_a_message_differs(count, magic, key_size,
                                                                                    value_size, odd_at, data):
    items = [(None if key_size is None else b"k" * key_size, bytes([i % 256]) * value_size, i) for i in range(count)]
    if odd_at < count:  # one message of another size somewhere, or none
        items[odd_at] = (b"odd key", b"odd", 0)
    records = build_message_set(items, magic=magic, base_offset=9)
    cut = data.draw(st.integers(0, len(records)), label="fetched bytes")
    entries = [len(build_message_set(items[:i + 1], magic=magic)) for i in range(count)]
    kept = sum(1 for end in entries if end <= cut)
    batch, next_offset, complete = message_set_batch(records[:cut], "t", 0, 0, 10**6, SCHEMA)
    assert complete == kept and next_offset == (9 + kept if kept else 0)
    if kept:
        assert expected_rows(batch) == [(9 + i, k, v, -1 if magic == 0 else 0) for i, (k, v, _) in
                                        enumerate(items[:kept])]


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_sets_take_the_columnar_path_with_nulls_and_empties(magic):
    items = [(None, b"v0", 5), (b"", b"", 6), (b"k2", None, 7), (b"key-3", b"x" * 300, 8)]
    records = build_message_set(items, magic=magic, base_offset=100)
    batch, next_offset, count = message_set_batch(records, "t", 0, 0, 1000, SCHEMA)
    assert expected_rows(batch) == [(100 + i, k, v, -1 if magic == 0 else 0) for i, (k, v, _) in enumerate(items)]
    assert micros(batch) == ([None] * 4 if magic == 0 else [5000, 6000, 7000, 8000])
    assert (next_offset, count) == (104, 4)


def test_only_the_requested_offsets_come_out_but_the_next_offset_passes_them():
    records = build_message_set([(None, b"v%d" % i) for i in range(10)], base_offset=50)
    batch, next_offset, count = message_set_batch(records, "t", 0, 53, 57, SCHEMA)
    assert batch.column("offset").to_pylist() == [53, 54, 55, 56]
    assert (next_offset, count) == (60, 10)
    batch, next_offset, _ = message_set_batch(records, "t", 0, 70, 80, SCHEMA)
    assert batch is None and next_offset == 60


def test_a_torn_last_message_is_left_for_the_next_fetch():
    records = build_message_set([(None, b"v%d" % i) for i in range(5)], base_offset=0)
    batch, next_offset, count = message_set_batch(records[:-3], "t", 0, 0, 100, SCHEMA)
    assert batch.num_rows == 4 and (next_offset, count) == (4, 4)
    assert message_set_batch(records[:20], "t", 0, 0, 100, SCHEMA) == (None, 0, 0)


@pytest.mark.parametrize("compressed", [False, True])
def test_a_corrupt_message_fails_its_crc(compressed):
    records = bytearray(build_message_set([(None, b"value-%d" % i) for i in range(5)], base_offset=0,
                                          codec=CODEC_GZIP if compressed else CODEC_NONE))
    records[-2] ^= 0xFF
    with pytest.raises(InvalidMessageError, match="CRC"):
        message_set_batch(bytes(records), "t", 0, 0, 100, SCHEMA)


def test_headers_column_is_null():
    schema = to_arrow_schema(kafka_schema(True), timezone="UTC")
    batch, _, _ = message_set_batch(build_message_set([(None, b"v")]), "t", 0, 0, 1, schema)
    assert batch.schema.equals(schema) and batch.column("headers").to_pylist() == [None]


# ---- reading one range through the simple consumer --------------------------------------------------------------


class FakeLeader:
    """A partition's leader as the simple consumer sees it: a log from `start` to `end`, fetches of max_bytes, and
    scripted trouble (no leader for a few fetches, retention or truncation after a number of fetches)."""

    def __init__(self, start: int, end: int, value_size: int = 10) -> None:
        self.start, self.end, self.value_size = start, end, value_size
        self.fetches: list[tuple[int, int]] = []
        self.leaderless = 0
        self.after: dict[int, tuple[int, int]] = {}  # fetch number -> new (start, end)

    def fetch(self, offset: int, max_bytes: int):
        from consumer.simple import LeaderNotFound
        from zkbroker.protocol.errors import OffsetOutOfRangeError

        if self.leaderless:
            self.leaderless -= 1
            raise LeaderNotFound("no leader yet")
        self.fetches.append((offset, max_bytes))
        self.start, self.end = self.after.get(len(self.fetches), (self.start, self.end))
        if not self.start <= offset <= self.end:
            raise OffsetOutOfRangeError(f"offset {offset}")
        records = build_message_set([(None, b"%0*d" % (self.value_size, o)) for o in range(offset, self.end)],
                                    base_offset=offset)
        return records[:max_bytes], self.end


@pytest.fixture
def leader(monkeypatch):
    import consumer.simple
    import consumer.spark

    fake = FakeLeader(0, 100)

    class Consumer:
        def __init__(self, *args, **kwargs) -> None:
            pass

        def earliest_offset(self, topic: str, partition: int) -> int:
            return fake.start

        def latest_offset(self, topic: str, partition: int) -> int:
            return fake.end

        def close(self) -> None:
            pass

    monkeypatch.setattr(consumer.simple, "SimpleConsumer", Consumer)
    monkeypatch.setattr(consumer.spark, "_fetch_raw", lambda c, t, p, offset, max_bytes: fake.fetch(offset, max_bytes))
    return fake


def read(start: int, end: int, **extra: str) -> list[int]:
    from consumer.spark import ZkKafkaPartition, read_range

    opts = parse_options(options(subscribe="t", **extra))
    part = ZkKafkaPartition("t", 0, start, end, 1, (("127.0.0.1", 9092),), opts)
    return [o for batch in read_range(part, SCHEMA) for o in batch.column("offset").to_pylist()]


TEN = {"fetch.message.max.bytes": "360"}  # ten 36-byte messages a fetch


def test_a_range_is_read_in_fetches_of_fetch_message_max_bytes(leader):
    assert read(10, 90, **TEN) == list(range(10, 90))
    assert leader.fetches == [(offset, 360) for offset in range(10, 90, 10)]


def test_a_message_larger_than_a_fetch_doubles_the_fetch_size(leader):
    leader.value_size = 700
    assert read(0, 3, **{"fetch.message.max.bytes": "300"}) == [0, 1, 2]
    assert [size for _, size in leader.fetches][:3] == [300, 600, 1200]


def test_no_leader_for_a_while_is_waited_out(leader):
    leader.leaderless = 3
    assert read(0, 100) == list(range(100))


def test_retention_overtaking_the_read_is_data_loss_failed_or_skipped(leader):
    leader.after = {2: (50, 100)}  # after the first fetch, retention deletes offsets below 50
    with pytest.raises(DataLossError, match=r"Could not read records in offset \[10, 50\) for topic partition t-0"):
        read(0, 100, **TEN)
    leader.fetches, leader.start = [], 0
    assert read(0, 100, failOnDataLoss="false", **TEN) == [*range(10), *range(50, 100)]


@pytest.mark.parametrize("new_end, read_first", [(5, 10), (30, 30)])
def test_a_log_truncated_below_the_range_is_data_loss(leader, new_end, read_first):
    """An unclean leader election: the new leader's log ends at new_end, before (5) or after (30) the offset the
    read had reached (OFFSET_OUT_OF_RANGE, or a high watermark that stays below the range's end)."""
    quick = {"kafkaConsumer.pollTimeoutMs": "200", **TEN}
    leader.after = {2: (0, new_end)}
    assert read(0, 100, failOnDataLoss="false", **quick) == list(range(read_first))
    leader.fetches, leader.end = [], 100
    with pytest.raises(DataLossError, match=rf"offset \[{read_first}, 100\)"):
        read(0, 100, **quick)


def test_a_broker_that_answers_nothing_below_its_high_watermark_times_out(leader, monkeypatch):
    import consumer.spark

    monkeypatch.setattr(consumer.spark, "_fetch_raw", lambda *args: (b"", 100))
    with pytest.raises(TimeoutError, match="Cannot fetch record for offset 0 of t-0 in 300 milliseconds"):
        read(0, 10, **{"kafkaConsumer.pollTimeoutMs": "300"})


def test_a_set_of_equal_sized_messages_with_a_different_one_decodes_every_message():
    same = [(None, b"v%03d" % i) for i in range(20)]
    for odd_at, odd in ((0, b"longer value"), (7, b"longer value"), (7, b"v"), (19, b"longer value")):
        items = list(same)
        items[odd_at] = (b"key", odd)
        batch, next_offset, _ = message_set_batch(build_message_set(items, base_offset=500), "t", 0, 0, 10**4, SCHEMA)
        assert expected_rows(batch) == [(500 + i, k, v, -1) for i, (k, v) in enumerate(items)]
        assert next_offset == 520


def test_equal_sized_messages_then_a_torn_or_shorter_last_one():
    items = [(None, b"v%03d" % i) for i in range(19)] + [(None, b"v")]
    records = build_message_set(items, base_offset=500)
    batch, next_offset, count = message_set_batch(records, "t", 0, 0, 10_000, SCHEMA)
    assert batch.column("value").to_pylist() == [v for _, v in items] and (next_offset, count) == (520, 20)
    batch, next_offset, count = message_set_batch(records[:-3], "t", 0, 0, 10_000, SCHEMA)
    assert batch.column("offset").to_pylist() == list(range(500, 519)) and (next_offset, count) == (519, 19)
