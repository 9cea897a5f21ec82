"""The zkkafka data source against real brokers and ZooKeeper, read by PySpark local[2]: every record once with
subscribe, subscribePattern and assign; JSON offsets; minPartitions; a leader failover during a read; retention
and failOnDataLoss; bad options."""

from __future__ import annotations

import json
import threading

import pytest

from tests.integration.harness import list_offset, wait_for, wait_for_retention
from tests.integration.spark.support import expected_rows, make_topic, new_topic, produce, rows

PER_PARTITION = 120


def zkkafka(spark, zk_connect: str, **options: str):
    reader = spark.read.format("zkkafka").option("zookeeper.connect", zk_connect)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.fixture
def three_topics(brokers, zk_connect):
    """Three topics of six partitions over two brokers (and a fourth that no pattern below matches)."""
    cluster = brokers(1, 2)
    prefix = new_topic("three")
    topics = [make_topic(zk_connect, cluster, 6, 1, PER_PARTITION, topic=f"{prefix}-{n}")[0] for n in "abc"]
    make_topic(zk_connect, cluster, 2, 1, 10, topic=f"other-{prefix}")
    return prefix, topics


def everything(topics: list[str]) -> list[tuple]:
    return sorted(row for t in topics for row in expected_rows(t, range(6), range(PER_PARTITION)))


@pytest.mark.timeout(180)
def test_subscribe_pattern_and_assign_read_every_record_of_three_topics_of_six_partitions_once(
        spark, zk_connect, three_topics):
    prefix, topics = three_topics
    by_subscribe = zkkafka(spark, zk_connect, subscribe=",".join(topics))
    assert by_subscribe.count() == 3 * 6 * PER_PARTITION
    assert rows(by_subscribe) == everything(topics)
    assert rows(zkkafka(spark, zk_connect, subscribePattern=f"{prefix}-.*")) == everything(topics)

    assign = {t: list(range(6)) for t in topics}
    assert rows(zkkafka(spark, zk_connect, assign=json.dumps(assign))) == everything(topics)

    # JSON offsets, -2 (earliest) and -1 (latest) among them; the same read split into 40 tasks.
    starting = {t: {str(p): (-2 if p == 0 else 10 * p) for p in range(6)} for t in topics}
    ending = {t: {str(p): (-1 if p == 5 else 100 + p) for p in range(6)} for t in topics}
    bounds = {p: (0 if p == 0 else 10 * p, PER_PARTITION if p == 5 else 100 + p) for p in range(6)}
    wanted = sorted(row for t in topics for p, (lo, hi) in bounds.items()
                    for row in expected_rows(t, [p], range(lo, hi)))
    ranged = zkkafka(spark, zk_connect, assign=json.dumps(assign), startingOffsets=json.dumps(starting),
                     endingOffsets=json.dumps(ending))
    assert rows(ranged) == wanted
    split = zkkafka(spark, zk_connect, subscribePattern=f"{prefix}-.*", startingOffsets=json.dumps(starting),
                    endingOffsets=json.dumps(ending), minPartitions="40")
    assert split.rdd.getNumPartitions() == 40
    assert rows(split) == wanted


@pytest.mark.timeout(120)
def test_schema_timestamps_and_timestamp_types_match_sparks_kafka_source(spark, brokers, zk_connect):
    cluster = brokers(1)
    old, _ = make_topic(zk_connect, cluster, 1, 1, 5, magic=0)
    new, _ = make_topic(zk_connect, cluster, 1, 1, 5, magic=1)
    df = zkkafka(spark, zk_connect, subscribe=f"{old},{new}", includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>")
    by_topic = {}
    for r in df.orderBy("offset").collect():
        by_topic.setdefault(r.topic, []).append((r.timestamp, r.timestampType, r.headers))
    assert by_topic[old] == [(None, -1, None)] * 5  # 0.8's format: no timestamp
    millis = [int(ts.timestamp() * 1000) for ts, _, _ in by_topic[new]]
    assert millis == [1_700_000_000_000 + i for i in range(5)]
    assert {t for _, t, _ in by_topic[new]} == {0}  # CreateTime
    # Stored as UTC instants: 1_700_000_000_000 ms is 2023-11-14 22:13:20 UTC.
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        text = df.filter(df.topic == new).selectExpr("cast(min(timestamp) as string)").first()[0]
    finally:
        spark.conf.unset("spark.sql.session.timeZone")
    assert text == "2023-11-14 22:13:20"
    assert zkkafka(spark, zk_connect, subscribe=f"no-such-topic,{old}", endingOffsets=json.dumps(
        {old: {"0": 0}})).count() == 0  # nothing to read at all: no range, one empty task


@pytest.mark.timeout(120)
def test_record_batches_give_headers_and_offsets_by_timestamp(spark, brokers, zk_connect):
    cluster = brokers(1)
    topic, _ = make_topic(zk_connect, cluster, 1, 1, 10, magic=2)  # records at 1_700_000_000_000 + i ms
    df = zkkafka(spark, zk_connect, subscribe=topic, includeHeaders="true")
    got = [(r.offset, r.timestampType, [(h.key, bytes(h.value)) for h in r.headers])
           for r in df.orderBy("offset").collect()]
    assert got == [(i, 0, [("i", b"%d" % i)]) for i in range(10)]
    ranged = zkkafka(spark, zk_connect, subscribe=topic,
                     startingOffsetsByTimestamp=json.dumps({topic: {"0": 1_700_000_000_003}}),
                     endingOffsetsByTimestamp=json.dumps({topic: {"0": 1_700_000_000_007}}))
    assert [r.offset for r in ranged.orderBy("offset").collect()] == [3, 4, 5, 6]
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        zkkafka(spark, zk_connect, subscribe=topic,
                startingOffsetsByTimestamp=json.dumps({topic: {"0": 1_800_000_000_000}})).count()


@pytest.mark.timeout(180)
def test_a_leader_failover_while_a_read_runs_still_returns_every_record_once(spark, brokers, zk_connect, zk):
    cluster = brokers(1, 2, 3)
    per_partition = 5000
    topic, leaders = make_topic(zk_connect, cluster, 6, 2)
    produce(cluster, leaders, topic, per_partition)
    victim = max(set(leaders.values()), key=lambda b: sum(1 for leader in leaders.values() if leader == b))
    moved = [p for p, leader in leaders.items() if leader == victim]
    # Small fetches (4 KiB, ~60 records) make the read take long enough to be cut by the failover.
    df = zkkafka(spark, zk_connect, subscribe=topic, **{"fetch.message.max.bytes": "4096"})
    result: dict[str, object] = {}
    sc = spark.sparkContext

    def read() -> None:
        sc.setJobGroup("failover-read", "a read cut by a leader failover")
        try:
            result["rows"] = rows(df)
        except Exception as e:  # reported by the assertion below
            result["error"] = e

    reader = threading.Thread(target=read)
    reader.start()
    tracker = sc.statusTracker()
    wait_for(lambda: any(tracker.getStageInfo(s) and tracker.getStageInfo(s).numActiveTasks
                         for j in tracker.getJobIdsForGroup("failover-read") for s in tracker.getJobInfo(j).stageIds),
             60, "the read to start")
    next(b for b in cluster if b.id == victim).kill()
    assert reader.is_alive()  # the read is cut by the failover
    reader.join(150)
    assert "error" not in result, result.get("error")
    assert result["rows"] == sorted(expected_rows(topic, range(6), range(per_partition)))
    states = [json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")) for p in moved]
    assert all(state["leader"] not in (victim, -1) for state in states), states  # read through the new leaders


@pytest.mark.timeout(150)
def test_retention_deleting_a_range_fails_the_read_or_skips_it_as_fail_on_data_loss_says(spark, brokers,
                                                                                          zk_connect):
    (broker,) = brokers(1, log_segment_bytes=20_000, log_retention_bytes=60_000,
                        log_retention_check_interval_ms=200)
    topic, leaders = make_topic(zk_connect, [broker], 1, 1)
    produce([broker], leaders, topic, 4000)
    earliest = wait_for_retention(broker, topic, 0, 60_000)
    end = list_offset(broker, topic, 0, -1)[1]
    from_zero = {"startingOffsets": json.dumps({topic: {"0": 0}})}

    with pytest.raises(Exception) as failed:
        zkkafka(spark, zk_connect, subscribe=topic, **from_zero).count()
    message = str(failed.value)
    assert f"Could not read records in offset [0, {earliest}) for topic partition {topic}-0" in message
    assert "set the source option failOnDataLoss to false" in message

    skipped = zkkafka(spark, zk_connect, subscribe=topic, failOnDataLoss="false", **from_zero)
    got = rows(skipped)
    first = got[0][2]
    assert first >= earliest  # retention may have moved on meanwhile
    assert got == expected_rows(topic, [0], range(first, end))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("options, message", [
    ({}, "One of the following options must be specified for Kafka source: subscribe, subscribepattern, assign"),
    ({"subscribe": "a", "subscribePattern": "a.*"}, "Only one of the following options can be specified"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
    ({"assign": "[a]"}, "No topicpartitions to assign as specified value for option 'assign' is '[a]'"),
    ({"subscribe": "a", "minPartitions": "-1"}, "minPartitions must be positive"),
    ({"subscribe": "a", "startingOffsets": "group"}, "startingOffsets 'group' needs the option 'group.id'"),
])
def test_bad_options_fail_when_the_dataframe_is_loaded_with_one_clear_error(spark, zk_connect, options, message):
    with pytest.raises(Exception) as failed:
        zkkafka(spark, zk_connect, **options)
    assert message in str(failed.value)


@pytest.mark.timeout(120)
def test_offsets_that_do_not_fit_the_topics_fail_at_planning_before_any_task(spark, brokers, zk_connect):
    (broker,) = brokers(1)
    topic, _ = make_topic(zk_connect, [broker], 2, 1, 10)
    sc = spark.sparkContext
    sc.setJobGroup("planning-errors", "reads that must fail before any task")
    cases = [
        ({"subscribe": topic, "startingOffsets": json.dumps({topic: {"0": 0}})},
         f"Partitions specified for Kafka start offsets don't match what are assigned. Maybe topic partitions are "
         f"created or deleted while the query is running. Use -1 for latest, -2 for earliest. Specified: [{topic}-0] "
         f"Assigned: [{topic}-0, {topic}-1]"),
        ({"assign": json.dumps({topic: [0]}), "startingOffsets": json.dumps({topic: {"0": 50}})},
         f"The resolved start offset 50 is greater than the resolved end offset 10 for topic {topic} partition 0"),
        ({"assign": json.dumps({topic: [5]})},
         f"assign names partitions that do not exist in {zk_connect}: [{topic}-5]"),
        # Valid for a stream, so not refused at load (a Python source cannot tell a batch load from a stream's).
        ({"subscribe": topic, "startingOffsets": "latest"},
         "starting offset can't be latest for batch queries on Kafka"),
    ]
    for options, message in cases:
        with pytest.raises(Exception) as failed:
            zkkafka(spark, zk_connect, **options).collect()
        assert message in str(failed.value)
    with pytest.raises(Exception) as failed:
        (spark.read.format("zkkafka").schema("value string").option("zookeeper.connect", zk_connect)
         .option("subscribe", topic).load().collect())
    assert "Kafka source has a fixed schema and cannot be set with a custom one" in str(failed.value)
    assert sc.statusTracker().getJobIdsForGroup("planning-errors") == []  # not one Spark job started
