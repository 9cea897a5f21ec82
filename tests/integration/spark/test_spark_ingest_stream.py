"""`zkbroker spark-ingest --stream` against real brokers and ZooKeeper, as a real command: SIGKILLed three times at
seeded random moments while a producer writes, restarted on the same checkpoint each time, it ends with every record
exactly once in Parquet and the group's offsets in ZooKeeper at the high watermarks."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.integration.harness import wait_for
from tests.integration.spark.support import expected_rows, make_topic, produce, rows

PARTITIONS = 3
CHUNK = 100
CHUNKS = 12


class IngestProcess:
    """One `spark-ingest --stream` command; its progress lines are collected as they come."""

    def __init__(self, zk_connect: str, topic: str, output, checkpoint, trigger: str) -> None:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zkbroker", "spark-ingest", "--stream", "--zookeeper", zk_connect,
             "--topic", topic, "--group", "etl", "--output", str(output), "--checkpoint", str(checkpoint),
             "--trigger", trigger, "--max-offsets-per-trigger", "150"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.batches: list[str] = []
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)
            if line.startswith("batch "):
                self.batches.append(line)

    def batch_done_or_exited(self) -> bool:
        return bool(self.batches) or self.proc.poll() is not None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def tail(self) -> str:
        return "".join(self.lines[-40:])


@pytest.mark.timeout(420)
def test_the_stream_ingest_killed_three_times_while_records_arrive_ends_exactly_once_with_offsets_at_the_hw(
        spark, brokers, zk_connect, zk, tmp_path):
    cluster = brokers(1)
    topic, leaders = make_topic(zk_connect, cluster, PARTITIONS, 1, CHUNK)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    chance = random.Random(30)

    def write() -> None:
        for chunk in range(1, CHUNKS):
            produce(cluster, leaders, topic, CHUNK, first=chunk * CHUNK)
            time.sleep(0.5)

    producer = threading.Thread(target=write, daemon=True)
    producer.start()
    for kill in range(3):
        run = IngestProcess(zk_connect, topic, output, checkpoint, "processing-time=200ms")
        wait_for(run.batch_done_or_exited, 180, f"a batch of run {kill + 1}")
        assert run.proc.poll() is None, run.tail()
        time.sleep(chance.uniform(0.0, 1.5))  # somewhere in a batch, between batches, or in the ZooKeeper commit
        run.kill()
    producer.join(120)
    assert not producer.is_alive()

    final = IngestProcess(zk_connect, topic, output, checkpoint, "available-now")
    assert final.proc.wait(240) == 0, final.tail()
    assert "spark-ingest --stream:" in final.proc.stdout.read()

    assert rows(spark.read.parquet(str(output))) == expected_rows(topic, range(PARTITIONS), range(CHUNKS * CHUNK))
    offsets = [int(zk.get(f"/consumers/etl/offsets/{topic}/{p}")) for p in range(PARTITIONS)]
    assert offsets == [CHUNKS * CHUNK] * PARTITIONS
