"""`zkbroker spark-ingest` against real brokers and ZooKeeper: every record once in Parquet with the group's
offsets committed; crashes between data and manifest, manifest and publish, publish and ZooKeeper (in-process,
and one real SIGKILL of the command) then a re-run; two concurrent jobs of one group; retention."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import consumer.spark.ingest as ingest
from consumer.spark.ingest import IngestConfig, IngestError, run_ingest
from consumer.spark.output import OutputLayout
from tests.integration.harness import wait_for, wait_for_retention
from tests.integration.spark.support import expected_rows, make_topic, new_topic, produce, rows
from zkbroker.cli import main


class SimulatedCrash(BaseException):
    """Stands for the process dying at a checkpoint: nothing of the job's own clean-up runs."""


def crash_at(monkeypatch, stage: str) -> None:
    def checkpoint(at: str) -> None:
        if at == stage:
            raise SimulatedCrash(stage)

    monkeypatch.setattr(ingest, "_checkpoint", checkpoint)


def config(zk_connect: str, output: Path, group: str = "etl", **kwargs) -> IngestConfig:
    return IngestConfig(zookeeper=zk_connect, group=group, output=output, **kwargs)


def ingested(spark, output: Path) -> list[tuple]:
    return rows(spark.read.parquet(str(output)))


def committed(zk, group: str, topic: str, partitions: int) -> list[int | None]:
    out = []
    for p in range(partitions):
        data = zk.get(f"/consumers/{group}/offsets/{topic}/{p}")
        out.append(None if data is None else int(data))
    return out


@pytest.mark.timeout(180)
def test_ingest_writes_every_record_once_with_a_manifest_and_commits_the_groups_offsets(spark, brokers, zk_connect,
                                                                                        zk, tmp_path, capsys):
    cluster = brokers(1, 2)
    prefix = new_topic("ingest")
    topics = [make_topic(zk_connect, cluster, 6, 1, 150, topic=f"{prefix}-{n}")[0] for n in "ab"]
    output = tmp_path / "out"

    result = run_ingest(config(zk_connect, output, whitelist=f"{prefix}-.*"), spark=spark)
    assert (result.batch, result.records, result.partitions) == (1, 2 * 6 * 150, 12)
    assert result.path == output / "batch=1" and result.bytes > 0
    assert ingested(spark, output) == sorted(r for t in topics for r in expected_rows(t, range(6), range(150)))
    for topic in topics:
        assert committed(zk, "etl", topic, 6) == [150] * 6
    manifest = json.loads((output / "_zkkafka" / "1.json").read_text())
    assert sorted(manifest["ranges"]) == sorted([t, p, 0, 150] for t in topics for p in range(6))
    assert (manifest["group"], manifest["records"], manifest["format"]) == ("etl", 1800, "parquet")
    assert not list((output / "_zkkafka" / "staging").iterdir())
    assert zk.children("/consumers/etl/ids") == []  # the job left the group

    # More records, and the command line: only the new ones land, in batch 2.
    leaders = {p: zk_leader(zk, topics[0], p) for p in range(6)}
    produce(cluster, leaders, topics[0], 40, first=150)
    assert main(["spark-ingest", "--zookeeper", zk_connect, "--whitelist", f"{prefix}-.*", "--group", "etl",
                 "--output", str(output)]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith("spark-ingest: 240 records from 6 partitions, ") and "batch=2" in summary
    assert rows(spark.read.parquet(str(output / "batch=2"))) == expected_rows(topics[0], range(6), range(150, 190))
    assert committed(zk, "etl", topics[0], 6) == [190] * 6
    assert spark.read.parquet(str(output)).groupBy("batch").count().orderBy("batch").collect() == [(1, 1800), (2, 240)]

    nothing = run_ingest(config(zk_connect, output, whitelist=f"{prefix}-.*"), spark=spark)
    assert (nothing.batch, nothing.records) == (None, 0)


def zk_leader(zk, topic: str, partition: int) -> int:
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state"))["leader"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("stage", ["data-written", "manifest-written", "published"])
def test_a_crash_at_any_point_of_the_commit_then_a_rerun_ingests_every_record_exactly_once(
        spark, brokers, zk_connect, zk, tmp_path, monkeypatch, stage):
    cluster = brokers(1)
    topic, leaders = make_topic(zk_connect, cluster, 6, 1, 100)
    output = tmp_path / "out"
    layout = OutputLayout(output)

    crash_at(monkeypatch, stage)
    with pytest.raises(SimulatedCrash):
        run_ingest(config(zk_connect, output, topic=topic), spark=spark)
    assert committed(zk, "etl", topic, 6) == [None] * 6  # no crash point is after the ZooKeeper commit
    assert layout.manifest(1).exists() == (stage != "data-written")
    assert (output / "batch=1").exists() == (stage == "published")
    produce(cluster, leaders, topic, 20, first=100)  # more records arrive before the re-run

    monkeypatch.setattr(ingest, "_checkpoint", lambda at: None)
    result = run_ingest(config(zk_connect, output, topic=topic), spark=spark)
    every = expected_rows(topic, range(6), range(120))
    assert ingested(spark, output) == every  # nothing twice, nothing missing
    assert committed(zk, "etl", topic, 6) == [120] * 6
    if stage == "data-written":
        # Nothing was committed: the staging data is removed, its number reused, and all 120 records per
        # partition read again.
        assert any("removed uncommitted batch 1" in s for s in result.recovered)
        assert (result.batch, result.records) == (1, 720)
    else:
        # Batch 1 was committed by its manifest: the re-run finishes it, then reads only what came after.
        assert any("committed offsets recorded in manifests" in s for s in result.recovered)
        assert (result.batch, result.records) == (2, 120)
        assert rows(spark.read.parquet(str(output / "batch=1"))) == expected_rows(topic, range(6), range(100))
    assert sorted(p.name for p in (output / "_zkkafka" / "staging").iterdir()) == []


@pytest.mark.timeout(240)
def test_a_real_kill_of_the_command_between_manifest_and_zookeeper_commit_then_a_rerun_is_exactly_once(
        spark, brokers, zk_connect, zk, tmp_path):
    cluster = brokers(1)
    topic, _ = make_topic(zk_connect, cluster, 6, 1, 100)
    output = tmp_path / "out"
    env = {**os.environ, "ZKBROKER_TEST_CRASH_AT": "manifest-written", "PYSPARK_PYTHON": sys.executable}
    crashed = subprocess.run([sys.executable, "-m", "zkbroker", "spark-ingest", "--zookeeper", zk_connect,
                              "--topic", topic, "--group", "etl", "--output", str(output)],
                             env=env, capture_output=True, timeout=180)
    assert crashed.returncode == -9, crashed.stderr.decode(errors="replace")[-2000:]
    assert OutputLayout(output).manifest(1).exists() and not (output / "batch=1").exists()
    assert committed(zk, "etl", topic, 6) == [None] * 6
    # The killed member stays registered until ZooKeeper expires its session (0.8.2: its partitions wait).
    wait_for(lambda: not zk.children("/consumers/etl/ids"), 30, "the killed job's session to expire")

    result = run_ingest(config(zk_connect, output, topic=topic), spark=spark)
    assert (result.batch, result.records) == (None, 0)  # the recovered batch 1 holds everything
    assert ingested(spark, output) == expected_rows(topic, range(6), range(100))
    assert committed(zk, "etl", topic, 6) == [100] * 6


@pytest.mark.timeout(240)
def test_two_concurrent_ingest_jobs_of_one_group_split_the_partitions_and_together_ingest_everything_once(
        spark, brokers, zk_connect, zk, tmp_path, monkeypatch):
    cluster = brokers(1, 2)
    topic, _ = make_topic(zk_connect, cluster, 6, 1, 300)
    output = tmp_path / "out"
    both_joined = threading.Barrier(2, timeout=60)
    monkeypatch.setattr(ingest, "_checkpoint", lambda at: both_joined.wait() if at == "joined" else None)
    results: dict[str, object] = {}

    def job(name: str) -> None:
        try:
            results[name] = run_ingest(config(zk_connect, output, topic=topic), spark=spark)
        except Exception as e:  # reported by the assertion below
            results[name] = e

    threads = [threading.Thread(target=job, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(200)
    assert all(not isinstance(r, Exception) for r in results.values()), results
    assert ingested(spark, output) == expected_rows(topic, range(6), range(300))
    assert committed(zk, "etl", topic, 6) == [300] * 6
    manifests = OutputLayout(output).manifests()
    writers = {m.consumer for m in manifests}
    assert len(writers) == 2, manifests  # both members read a share
    covered = sorted((t, p) for m in manifests for t, p, _, _ in m.ranges)
    assert covered == [(topic, p) for p in range(6)]  # each partition in exactly one batch
    assert sum(r.records for r in results.values()) == 6 * 300


@pytest.mark.timeout(150)
def test_retention_deleting_uncommitted_records_fails_the_ingest_or_skips_them_when_told(spark, brokers,
                                                                                          zk_connect, zk, tmp_path):
    (broker,) = brokers(1, log_segment_bytes=20_000, log_retention_bytes=60_000,
                        log_retention_check_interval_ms=200)
    topic, leaders = make_topic(zk_connect, [broker], 1, 1)
    zk.client.create("/consumers/etl/offsets/" + topic + "/0", b"0", makepath=True)  # the group read nothing
    produce([broker], leaders, topic, 4000)
    earliest = wait_for_retention(broker, topic, 0, 60_000)
    output = tmp_path / "out"
    with pytest.raises(IngestError, match=rf"Could not read records in offset \[0, \d+\) for topic partition "
                                          rf"{topic}-0.*--fail-on-data-loss false"):
        run_ingest(config(zk_connect, output, topic=topic), spark=spark)
    assert committed(zk, "etl", topic, 1) == [0]

    result = run_ingest(config(zk_connect, output, topic=topic, fail_on_data_loss=False), spark=spark)
    manifest = OutputLayout(output).manifests()[0]
    assert manifest.lost == [[topic, 0, 0, earliest]]
    assert manifest.ranges == [[topic, 0, earliest, 4000]]
    assert ingested(spark, output) == expected_rows(topic, [0], range(earliest, 4000))
    assert result.records == 4000 - earliest
    assert committed(zk, "etl", topic, 1) == [4000]
