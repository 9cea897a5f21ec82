"""The zkkafka stream's pure parts without Spark running or a cluster: its options with Spark's messages, the
offsets JSON, and maxOffsetsPerTrigger's share-out (Spark's rateLimit rule)."""

from __future__ import annotations

import pickle

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from consumer.spark import ZkKafkaOptionError, kafka_schema, parse_stream_options
from consumer.spark.source import ZkKafkaDataSource
from consumer.spark.streaming import ZkKafkaStreamReader, offsets_from_json, offsets_to_json, rate_limit

ZK = "127.0.0.1:2181/kafka"


def options(**extra: str) -> dict[str, str]:
    return {"zookeeper.connect": ZK, **extra}


def test_a_stream_starts_at_latest_by_default_and_takes_latest_in_json():
    assert parse_stream_options(options(subscribe="a")).starting == "latest"
    assert parse_stream_options(options(subscribe="a", startingOffsets="earliest")).starting == "earliest"
    assert parse_stream_options(options(subscribe="a", startingOffsets='{"a":{"0":-1,"1":7}}')).starting == {
        ("a", 0): -1, ("a", 1): 7}
    assert parse_stream_options(options(subscribe="a", maxOffsetsPerTrigger="500")).max_offsets_per_trigger == 500


@pytest.mark.parametrize("given_options, message", [
    ({"subscribe": "a", "endingOffsets": "latest"}, "ending offset not valid in streaming queries"),
    ({"subscribe": "a", "endingOffsetsByTimestamp": '{"a":{"0":1}}'},
     "ending timestamp not valid in streaming queries"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be positive"),
    ({}, "One of the following options must be specified for Kafka source: subscribe, subscribepattern, assign"),
    ({"subscribe": "a", "kafka.bootstrap.servers": "h:9092"}, "both name the cluster"),
])
def test_bad_stream_options_fail_with_sparks_message(given_options, message):
    given = {"zookeeper.connect": ZK, **given_options}
    with pytest.raises(ZkKafkaOptionError) as e:
        parse_stream_options(given)
    assert message in str(e.value)


def test_loading_accepts_options_a_stream_takes_and_refuses_those_nothing_takes():
    assert ZkKafkaDataSource(options(subscribe="a", startingOffsets="latest")).schema() == kafka_schema()
    assert ZkKafkaDataSource(options(subscribe="a", endingOffsets="latest")).schema() == kafka_schema()
    with pytest.raises(ZkKafkaOptionError, match="ending offset can't be earliest for batch queries"):
        ZkKafkaDataSource(options(subscribe="a", endingOffsets="earliest")).schema()
    with pytest.raises(ZkKafkaOptionError, match="starting offset can't be latest for batch queries"):
        ZkKafkaDataSource(options(subscribe="a", startingOffsets="latest")).reader(kafka_schema())
    with pytest.raises(ZkKafkaOptionError, match="ending offset not valid in streaming queries"):
        ZkKafkaDataSource(options(subscribe="a", endingOffsets="latest")).streamReader(kafka_schema())


def test_offsets_json_is_sparks_kafka_json_and_round_trips():
    offsets = {("b", 1): 57, ("a", 0): 23, ("b", 0): 4}
    assert offsets_to_json(offsets) == {"a": {"0": 23}, "b": {"0": 4, "1": 57}}
    assert offsets_from_json(offsets_to_json(offsets)) == offsets


def test_rate_limit_shares_the_limit_in_proportion_to_what_each_partition_has_to_read():
    begin = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    until = {("t", 0): 300, ("t", 1): 200, ("t", 2): 50}  # 300 and 100 to read, partition 2 nothing
    assert rate_limit(100, begin, until) == {("t", 0): 75, ("t", 1): 125, ("t", 2): 50}
    # Everything fits: untouched.
    assert rate_limit(10_000, begin, until) == until


def test_rate_limit_never_starves_a_partition_with_little_to_read():
    begin = {("t", 0): 0, ("t", 1): 0}
    until = {("t", 0): 1_000_000, ("t", 1): 3}
    cut = rate_limit(10, begin, until)
    assert cut[("t", 1)] == 1  # a share below one offset rounds up
    assert cut[("t", 0)] == 9  # 9.99... rounds down


def test_rate_limit_leaves_partitions_of_unknown_start_and_empty_ranges_alone():
    assert rate_limit(5, {}, {("t", 0): 40}) == {("t", 0): 40}
    assert rate_limit(5, {("t", 0): 40}, {("t", 0): 40}) == {("t", 0): 40}


def test_the_stream_reader_asks_for_the_limit_in_its_options_and_pickles_without_a_connection():
    limited = ZkKafkaStreamReader(parse_stream_options(options(subscribe="a", maxOffsetsPerTrigger="9")),
                                  kafka_schema())
    assert limited.getDefaultReadLimit() == ReadMaxRows(9)
    unlimited = ZkKafkaStreamReader(parse_stream_options(options(subscribe="a")), kafka_schema())
    assert unlimited.getDefaultReadLimit() == ReadAllAvailable()
    assert unlimited.reportLatestOffset() is None
    copy = pickle.loads(pickle.dumps(limited))  # Spark ships the reader to its tasks for read()
    assert copy.options == limited.options and copy._cluster is None


def test_an_empty_micro_batch_plans_no_task_without_asking_the_cluster():
    reader = ZkKafkaStreamReader(parse_stream_options(options(subscribe="a")), kafka_schema())
    assert reader.partitions({"a": {"0": 5}}, {"a": {"0": 5}}) == []
    assert reader._cluster is None


def test_a_partition_that_vanished_or_went_backwards_is_data_loss_as_spark_reports_it():
    from consumer.spark import DataLossError

    reader = ZkKafkaStreamReader(parse_stream_options(options(subscribe="a")), kafka_schema())
    with pytest.raises(DataLossError, match=r"\[a-1\] are gone"):
        reader.partitions({"a": {"0": 5, "1": 3}}, {"a": {"0": 5}})
    tolerant = ZkKafkaStreamReader(parse_stream_options(options(subscribe="a", failOnDataLoss="false")),
                                   kafka_schema())
    assert tolerant.partitions({"a": {"0": 5, "1": 3}}, {"a": {"0": 5}}) == []
    with pytest.raises(DataLossError, match=r"Could not read records in offset \[4, 9\) for topic partition a-0"):
        reader.partitions({"a": {"0": 9}}, {"a": {"0": 4}})  # truncated below what was read (KAFKA-1211)
    assert tolerant.partitions({"a": {"0": 9}}, {"a": {"0": 4}}) == []


def test_a_log_that_ends_before_the_streams_offset_is_waited_for_up_to_the_poll_timeout_then_let_go_back():
    opts = parse_stream_options(options(subscribe="a", **{"kafkaConsumer.pollTimeoutMs": "1000"}))
    reader = ZkKafkaStreamReader(opts, kafka_schema())
    begin = {("a", 0): 10, ("a", 1): 4}
    behind = {("a", 0): 7, ("a", 1): 9}
    # A new leader's high watermark lagging: held where the stream stands, the other partition goes on.
    assert reader._hold_behind(begin, behind, now=100.0) == {("a", 0): 10, ("a", 1): 9}
    assert reader._hold_behind(begin, behind, now=100.9) == {("a", 0): 10, ("a", 1): 9}
    # Still behind after the poll timeout: the log went back; planning then reports the data loss.
    assert reader._hold_behind(begin, behind, now=101.0) == {("a", 0): 7, ("a", 1): 9}
    # Caught up meanwhile: the wait starts afresh the next time.
    assert reader._hold_behind(begin, {("a", 0): 12, ("a", 1): 9}, now=102.0) == {("a", 0): 12, ("a", 1): 9}
    assert reader._hold_behind(begin, behind, now=103.0) == {("a", 0): 10, ("a", 1): 9}
