"""`zkbroker spark-ingest --stream` (a readStream -> Parquet query on a checkpoint) against real brokers and
ZooKeeper, as a real command: SIGKILLed three times at seeded random moments while confluent-kafka writes (acks=all,
idempotent) to a replicated topic whose leader broker is SIGKILLed and restarted meanwhile, restarted on the same
checkpoint each time and finished with Trigger.AvailableNow, it holds every acknowledged record exactly once, and the
group's offsets in ZooKeeper stand at the high watermarks."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.integration.harness import create_topic, list_offset, wait_for, wait_for_leaders

PARTITIONS = 3


class IngestProcess:
    """One `spark-ingest --stream` command; its progress lines are collected as they come."""

    def __init__(self, zk_connect: str, topic: str, output, checkpoint, trigger: str,
                 max_offsets: int | None = None) -> None:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        limit = ["--max-offsets-per-trigger", str(max_offsets)] if max_offsets else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zkbroker", "spark-ingest", "--stream", "--zookeeper", zk_connect,
             "--topic", topic, "--group", "etl", "--output", str(output), "--checkpoint", str(checkpoint),
             "--trigger", trigger, *limit],
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

    def finish(self, timeout_s: float) -> int:
        """Wait for the command to end by itself; past the timeout, kill it and fail with what it printed."""
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"spark-ingest --stream did not finish in {timeout_s} s:\n{self.tail()}") from None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def tail(self) -> str:
        return "".join(self.lines[-40:])


class Writer(threading.Thread):
    """confluent-kafka, acks=all and idempotent, writing numbered values (~500 a second, `limit` at most) until told
    to stop; what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, limit: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.limit = bootstrap, topic, limit
        self.acked: list[bytes] = []
        self.errors: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 60000})

        def delivered(err, msg) -> None:
            (self.errors.append(str(err)) if err else self.acked.append(msg.value()))

        n = 0
        while not self.done.is_set() and n < self.limit:
            producer.produce(self.topic, value=b"record-%07d" % n, on_delivery=delivered)
            n += 1
            if n % 50 == 0:
                producer.poll(0)
                time.sleep(0.1)
        assert producer.flush(90) == 0


@pytest.mark.timeout(600)
def test_the_stream_ingest_killed_three_times_through_a_leader_failover_holds_every_acked_record_exactly_once(
        spark, brokers, zk_connect, zk, tmp_path):
    cluster = brokers(1, 2)
    topic = "streamed"
    create_topic(zk_connect, topic, PARTITIONS, 2, cluster)
    wait_for_leaders(cluster, topic, PARTITIONS)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    chance = random.Random(30)
    writer = Writer(",".join(b.bootstrap for b in cluster), topic, limit=30_000)
    writer.start()
    started = time.monotonic()
    for kill in range(3):
        run = IngestProcess(zk_connect, topic, output, checkpoint, "processing-time=200ms", max_offsets=400)
        wait_for(run.batch_done_or_exited, 240, f"a batch of run {kill + 1}")
        print(f"{time.monotonic() - started:.1f} s: run {kill + 1}'s first batch: {run.batches[:1]}")
        assert run.proc.poll() is None, run.tail()
        if kill == 1:  # the broker leading some partitions dies under the running query, and comes back
            cluster[0].kill()
            time.sleep(chance.uniform(0.5, 2.0))
            cluster[0].start()
        time.sleep(chance.uniform(0.0, 1.5))  # somewhere in a batch, between batches, or in the ZooKeeper commit
        run.kill()
    writer.done.set()
    writer.join(120)
    assert not writer.is_alive() and writer.acked, writer.errors

    print(f"{time.monotonic() - started:.1f} s: {len(writer.acked)} acknowledged; the final run starts")
    final = IngestProcess(zk_connect, topic, output, checkpoint, "available-now")
    assert final.finish(240) == 0, final.tail()
    assert "spark-ingest --stream:" in final.proc.stdout.read()

    values = [bytes(r.value) for r in spark.read.parquet(str(output)).select("value").collect()]
    assert len(values) == len(set(values)), "a record was written twice"
    missing = set(writer.acked) - set(values)
    assert not missing, f"{len(missing)} acknowledged records are missing, e.g. {sorted(missing)[:3]}"
    ends = wait_for_leaders(cluster, topic, PARTITIONS)
    by_id = {b.id: b for b in cluster}
    high_watermarks = [list_offset(by_id[ends[p]], topic, p, -1)[1] for p in range(PARTITIONS)]
    offsets = [int(zk.get(f"/consumers/etl/offsets/{topic}/{p}")) for p in range(PARTITIONS)]
    assert offsets == high_watermarks
