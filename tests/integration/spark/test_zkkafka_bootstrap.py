"""`zkkafka` through `kafka.bootstrap.servers` (Metadata and the group coordinator, the way a KRaft cluster is read:
DESIGN §17) against real brokers, read by PySpark local[2]: the same rows as through `zookeeper.connect` for
subscribe, subscribePattern and assign; `startingOffsets=group` from offsets a confluent-kafka consumer committed at
the coordinator; a stream that picks up a partition added while it was down; and a KRaft cluster's topic (one
combined node, no ZooKeeper anywhere) read the same way."""

from __future__ import annotations

import json

import pytest

from tests.integration.harness import wait_for, wait_for_leaders
from tests.integration.spark.support import expected_rows, make_topic, new_topic, produce, rows, run_available_now

PER_PARTITION = 60


def zkkafka(spark, **options: str):
    reader = spark.read.format("zkkafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def bootstrap_of(cluster) -> str:
    return ",".join(b.bootstrap for b in cluster)


@pytest.mark.timeout(240)
def test_a_read_through_the_brokers_returns_what_a_read_through_zookeeper_does(spark, brokers, zk_connect):
    cluster = brokers(1, 2)
    prefix = new_topic("bootstrap")
    topics = [make_topic(zk_connect, cluster, 3, 2, PER_PARTITION, topic=f"{prefix}-{n}")[0] for n in "ab"]
    every = sorted(row for t in topics for row in expected_rows(t, range(3), range(PER_PARTITION)))
    # Only the second broker is named: the first is learnt from Metadata.
    via_brokers = {"kafka.bootstrap.servers": cluster[1].bootstrap}
    assert rows(zkkafka(spark, subscribe=",".join(topics), **via_brokers)) == every
    assert rows(zkkafka(spark, subscribePattern=f"{prefix}-.*", **via_brokers)) == every
    assigned = json.dumps({topics[0]: [2]})
    assert rows(zkkafka(spark, assign=assigned, **via_brokers)) == rows(
        zkkafka(spark, assign=assigned, **{"zookeeper.connect": zk_connect}))
    with pytest.raises(Exception, match="assign names partitions that do not exist in"):
        zkkafka(spark, assign=json.dumps({topics[0]: [7]}), **via_brokers).count()


@pytest.mark.timeout(240)
def test_starting_offsets_group_reads_from_what_the_group_committed_at_its_coordinator(spark, brokers, zk_connect):
    from confluent_kafka import Consumer, TopicPartition

    cluster = brokers(1, 2)
    topic, _ = make_topic(zk_connect, cluster, 2, 1, PER_PARTITION)
    consumer = Consumer({"bootstrap.servers": bootstrap_of(cluster), "group.id": "spark-from-group",
                         "enable.auto.commit": False})
    try:
        # A group with no members may commit (generation -1), as Kafka's simple consumers do.
        consumer.commit(offsets=[TopicPartition(topic, 0, 25)], asynchronous=False)
    finally:
        consumer.close()
    df = zkkafka(spark, subscribe=topic, startingOffsets="group", **{"group.id": "spark-from-group",
                                                                     "kafka.bootstrap.servers": bootstrap_of(cluster)})
    # Partition 1 has no committed offset: it starts at the earliest, as a ZooKeeper group's read does.
    assert rows(df) == sorted(expected_rows(topic, [0], range(25, PER_PARTITION))
                              + expected_rows(topic, [1], range(PER_PARTITION)))


@pytest.mark.timeout(300)
def test_a_stream_through_the_brokers_reads_every_record_once_and_a_partition_added_while_it_was_down(
        spark, brokers, zk_connect, tmp_path):
    from zkbroker import admin
    from zkbroker.zk.client import ZkClient

    cluster = brokers(1, 2)
    topic, leaders = make_topic(zk_connect, cluster, 2, 1, PER_PARTITION)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    df = (spark.readStream.format("zkkafka").option("kafka.bootstrap.servers", bootstrap_of(cluster))
          .option("subscribe", topic).option("startingOffsets", "earliest").load())

    def run_to_the_end() -> int:
        return sum(p["numInputRows"] for p in run_available_now(df, out, checkpoint))

    assert run_to_the_end() == 2 * PER_PARTITION
    zk = ZkClient(zk_connect)
    zk.start()
    try:
        admin.add_partitions(zk, topic, 3)
    finally:
        zk.close()
    leaders = wait_for_leaders(cluster, topic, 3)
    produce(cluster, {2: leaders[2]}, topic, 20)
    assert run_to_the_end() == 20
    assert rows(spark.read.parquet(str(out))) == sorted(expected_rows(topic, [0, 1], range(PER_PARTITION))
                                                        + expected_rows(topic, [2], range(20)))


@pytest.mark.timeout(240)
def test_a_kraft_clusters_topic_is_read_through_its_brokers(spark, tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.integration.kraft_support import make_combined_node

    node = make_combined_node(tmp_path).start()
    try:
        wait_for(lambda: node.log_lines("Unfenced: serving"), 90, "the KRaft node to serve", interval_s=0.2)
        topic = new_topic("kraft")
        admin = AdminClient({"bootstrap.servers": node.bootstrap})  # held: its handle must outlive the future
        assert admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(90) is None
        leaders = wait_for_leaders([node], topic, 2)
        produce([node], leaders, topic, PER_PARTITION, magic=2)
        df = zkkafka(spark, subscribe=topic, **{"kafka.bootstrap.servers": node.bootstrap})
        assert rows(df) == sorted(expected_rows(topic, [0, 1], range(PER_PARTITION)))
    finally:
        node.cleanup()
