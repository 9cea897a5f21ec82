"""`spark.readStream.format("zkkafka")` against real brokers and ZooKeeper, run by PySpark local[2] into Parquet with
a checkpoint: every record exactly once across restarts of the query, maxOffsetsPerTrigger's micro-batches, a topic
that grows partitions and a topic that appears for a pattern while the stream runs, the latest offsets reported to
Spark's progress, and data loss after the log went back under the stream."""

from __future__ import annotations

import json

import pytest

from tests.integration.harness import metadata_leaders, wait_for, wait_for_leaders
from tests.integration.spark.support import expected_rows, make_topic, new_topic, produce, rows, run_available_now

PER_PARTITION = 50


def stream(spark, zk_connect: str, **options: str):
    reader = spark.readStream.format("zkkafka").option("zookeeper.connect", zk_connect)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def offsets(value) -> dict:
    """A source's offsets in a progress report (Spark's Kafka JSON, as a string or parsed)."""
    return json.loads(value) if isinstance(value, str) else value


@pytest.mark.timeout(300)
def test_a_stream_reads_every_record_once_across_restarts_growing_partitions_and_max_offsets_per_trigger(
        spark, brokers, zk_connect, tmp_path):
    from zkbroker import admin
    from zkbroker.zk.client import ZkClient

    cluster = brokers(1, 2)
    topic, leaders = make_topic(zk_connect, cluster, 2, 1, PER_PARTITION)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    df = stream(spark, zk_connect, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="40")

    batches = run_available_now(df, out, checkpoint)
    assert [b["numInputRows"] for b in batches] == [40, 40, 20]  # 100 records, 40 a trigger
    assert offsets(batches[-1]["sources"][0]["endOffset"]) == {topic: {"0": 50, "1": 50}}
    assert offsets(batches[0]["sources"][0]["latestOffset"]) == {topic: {"0": 50, "1": 50}}  # reportLatestOffset
    assert rows(spark.read.parquet(str(out))) == expected_rows(topic, [0, 1], range(PER_PARTITION))

    # More records, and a third partition, while the query is down: the restarted query reads only what is new,
    # the new partition from its start.
    produce(cluster, leaders, topic, 10, first=PER_PARTITION)
    zk = ZkClient(zk_connect)
    zk.start()
    try:
        admin.add_partitions(zk, topic, 3)
    finally:
        zk.close()
    leaders = wait_for_leaders(cluster, topic, 3)
    produce(cluster, {2: leaders[2]}, topic, 30)
    batches = run_available_now(df, out, checkpoint)
    assert sum(b["numInputRows"] for b in batches) == 2 * 10 + 30
    want = sorted(expected_rows(topic, [0, 1], range(PER_PARTITION + 10)) + expected_rows(topic, [2], range(30)))
    assert rows(spark.read.parquet(str(out))) == want


@pytest.mark.timeout(300)
def test_a_running_stream_picks_up_a_topic_matching_its_pattern_and_starts_at_latest_by_default(
        spark, brokers, zk_connect, tmp_path):
    cluster = brokers(1)
    prefix = new_topic("pattern")
    first, leaders = make_topic(zk_connect, cluster, 1, 1, 20, topic=f"{prefix}-a")  # before: not read (latest)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = (stream(spark, zk_connect, subscribePattern=f"{prefix}-.*").writeStream.format("parquet")
             .option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="500 milliseconds").start())
    try:
        wait_for(lambda: query.lastProgress is not None, 120, "the stream's first batch")
        produce(cluster, leaders, first, 5, first=20)
        second, second_leaders = make_topic(zk_connect, cluster, 1, 1, 0, topic=f"{prefix}-b")
        metadata_leaders(cluster[0], second)
        produce(cluster, second_leaders, second, 7)

        def landed() -> int:
            files = list(out.glob("*.parquet"))
            return len(files) and spark.read.parquet(str(out)).count()

        wait_for(lambda: landed() == 12, 120, "the new records of both topics in Parquet")
    finally:
        query.stop()
    assert query.exception() is None
    assert rows(spark.read.parquet(str(out))) == sorted(
        expected_rows(first, [0], range(20, 25)) + expected_rows(second, [0], range(7)))
