"""Beyond one machine: `spark-ingest` and a zkkafka read on a Spark standalone master and two workers (separate JVMs,
one core each) whose Python has only pyspark and pyarrow -- no zkbroker, cramjam, lz4, isal or kazoo -- over topics
written uncompressed and with gzip, snappy and lz4, in magic 0 and magic 1 by our producer and in magic 0 by
kafka-python pinned to 0.8.2. Every record is found exactly once: across a SIGKILL of the ingest job and its
re-run, and across a leader failover in the middle of a read. The drivers run as processes of their own
(cluster_driver.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from tests.integration.clients import PYTHON_CLIENTS
from tests.integration.harness import create_topic, wait_for
from tests.integration.spark.cluster_driver import spark_ingest, start_read
from tests.integration.spark.support import expected_rows, make_topic, new_topic
from zkbroker.protocol.compression import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY

PER_PARTITION = 1500
KAFKA_PYTHON_RECORDS = 1000
CODECS = {"none": CODEC_NONE, "gzip": CODEC_GZIP, "snappy": CODEC_SNAPPY, "lz4": CODEC_LZ4}
KAFKA_PYTHON_082 = next(c for c in PYTHON_CLIENTS if c.id == "kafka-python-0.8.2")


def codec_topics(zk_connect: str, cluster, prefix: str) -> tuple[list[str], list[tuple]]:
    """Topics of 2 partitions, replicated twice: one per codec and magic from our producer (1 wrapper of up to 200
    records per request), one per codec from kafka-python 0.8.2. Returns the topics and every record's row."""
    topics, rows = [], []
    for name, codec in CODECS.items():
        for magic in (0, 1):
            topic, _ = make_topic(zk_connect, cluster, 2, 2, PER_PARTITION, topic=f"{prefix}-{name}-m{magic}",
                                  magic=magic, codec=codec)
            topics.append(topic)
            rows += expected_rows(topic, range(2), range(PER_PARTITION))
    for name in ("gzip", "snappy", "lz4"):
        topic = f"{prefix}-kafka-python-{name}"
        create_topic(zk_connect, topic, 2, 2, cluster)
        records = [(b"kp-%d" % i, b"kafka-python %s %d " % (name.encode(), i) * (1 + i % 4))
                   for i in range(KAFKA_PYTHON_RECORDS)]
        acked = KAFKA_PYTHON_082.produce(cluster[0].bootstrap, topic, records, compression=name)
        topics.append(topic)
        rows += [(topic, p, o, k, v) for (p, o), (k, v) in zip(acked, records)]
    return topics, sorted(rows)


@pytest.fixture
def codec_cluster(brokers, zk_connect):
    """Three brokers, and the codec topics on them: (brokers, topic prefix, topics, every record's row)."""
    cluster = brokers(1, 2, 3)
    prefix = new_topic("cluster")
    return cluster, prefix, *codec_topics(zk_connect, cluster, prefix)


def on_both_workers(spark_cluster, apps_before: int, count: int) -> list[bool]:
    """For each of the `count` applications finished after the first `apps_before`: whether both workers ran an
    executor of it (the master lists an application once it has noticed its driver leave)."""
    def finished():
        apps = spark_cluster.status()["completedapps"][apps_before:]
        return apps if len(apps) >= count else None

    apps = wait_for(finished, 30, f"{count} Spark applications to finish", interval_s=0.5)
    return [all((work / app["id"]).is_dir() for work in spark_cluster.work_dirs) for app in apps]


def parquet_rows(path: Path) -> list[tuple]:
    table = ds.dataset(str(path), format="parquet", partitioning="hive",
                       exclude_invalid_files=True).to_table(columns=["topic", "partition", "offset", "key", "value"])
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names)))


def committed(zk, group: str, topic: str) -> list[int | None]:
    return [None if (data := zk.get(f"/consumers/{group}/offsets/{topic}/{p}")) is None else int(data)
            for p in range(2)]


def tail(done) -> str:
    return (done.stdout + done.stderr).decode(errors="replace")[-3000:]


@pytest.mark.timeout(600)
def test_spark_ingest_on_clean_workers_ingests_every_codec_exactly_once_across_a_sigkill_and_a_rerun(
        spark_cluster, codec_cluster, zk_connect, zk, tmp_path):
    _, prefix, topics, every = codec_cluster
    apps_before = len(spark_cluster.status()["completedapps"])
    output = tmp_path / "out"
    args = ["--zookeeper", zk_connect, "--whitelist", f"{prefix}-.*", "--group", "etl", "--output", str(output)]

    # Killed (SIGKILL, by its own crash point) once the executors have written the batch, before its manifest.
    crashed = spark_ingest(spark_cluster, args, tmp_path, ZKBROKER_TEST_CRASH_AT="data-written")
    assert crashed.returncode == -9, tail(crashed)
    assert not (output / "_zkkafka" / "1.json").exists() and list((output / "_zkkafka" / "staging").iterdir())
    assert all(committed(zk, "etl", t) == [None, None] for t in topics)
    wait_for(lambda: not zk.children("/consumers/etl/ids"), 30, "the killed job's session to expire")

    rerun = spark_ingest(spark_cluster, args, tmp_path)
    assert rerun.returncode == 0, tail(rerun)
    assert f"spark-ingest: {len(every)} records from {2 * len(topics)} partitions" in rerun.stdout.decode()
    assert parquet_rows(output) == every  # each record once: the killed batch's files were removed
    ends = {t: [max(o for tt, p, o, _, _ in every if tt == t and p == part) + 1 for part in range(2)]
            for t in topics}
    assert all(committed(zk, "etl", t) == ends[t] for t in topics)
    assert not list((output / "_zkkafka" / "staging").iterdir())
    assert on_both_workers(spark_cluster, apps_before, 2) == [True, True]  # the killed run and the re-run


@pytest.mark.timeout(600)
def test_a_zkkafka_read_on_clean_workers_survives_a_leader_failover_over_every_codec(
        spark_cluster, codec_cluster, zk_connect, zk, tmp_path):
    cluster, _, topics, every = codec_cluster
    apps_before = len(spark_cluster.status()["completedapps"])
    leaders = {(t, p): json.loads(zk.get(f"/brokers/topics/{t}/partitions/{p}/state"))["leader"]
               for t in topics for p in range(2)}
    victim = max(set(leaders.values()), key=lambda b: sum(1 for leader in leaders.values() if leader == b))
    output = tmp_path / "read"
    # Small fetches (4 KiB) make the read last long enough for the failover to cut it.
    reader = start_read(spark_cluster, zk_connect, topics, output, **{"fetch.message.max.bytes": "4096"})
    try:
        wait_for(lambda: Path(f"{output}.reading").exists() or reader.poll() is not None, 240, "the read to start")
        assert reader.poll() is None, output.with_suffix(".log").read_text()[-3000:]
        next(b for b in cluster if b.id == victim).kill()
        assert reader.wait(300) == 0, output.with_suffix(".log").read_text()[-3000:]
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert parquet_rows(output) == every
    assert on_both_workers(spark_cluster, apps_before, 1) == [True]
    moved = [tp for tp, leader in leaders.items() if leader == victim]
    states = [json.loads(zk.get(f"/brokers/topics/{t}/partitions/{p}/state")) for t, p in moved]
    assert all(state["leader"] not in (victim, -1) for state in states), states  # read through the new leaders


@pytest.mark.timeout(600)
def test_the_stream_ingest_on_clean_workers_reads_every_codec_once_in_several_micro_batches(
        spark_cluster, codec_cluster, zk_connect, zk, tmp_path):
    _, prefix, topics, every = codec_cluster
    apps_before = len(spark_cluster.status()["completedapps"])
    output = tmp_path / "stream"
    args = ["--stream", "--zookeeper", zk_connect, "--whitelist", f"{prefix}-.*", "--group", "etl", "--output",
            str(output), "--checkpoint", str(tmp_path / "checkpoint"), "--trigger", "available-now",
            "--max-offsets-per-trigger", str(len(every) // 3 + 1)]
    done = spark_ingest(spark_cluster, args, tmp_path)
    assert done.returncode == 0, tail(done)
    batches = [line for line in done.stderr.decode().splitlines() if line.startswith("batch ")]
    assert len(batches) >= 3, tail(done)  # one progress line per micro-batch
    assert parquet_rows(output) == every
    ends = {t: [max(o for tt, p, o, _, _ in every if tt == t and p == part) + 1 for part in range(2)]
            for t in topics}
    assert all(committed(zk, "etl", t) == ends[t] for t in topics)
    assert on_both_workers(spark_cluster, apps_before, 1) == [True]
