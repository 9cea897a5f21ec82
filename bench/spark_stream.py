"""Spark Structured Streaming from a ZooKeeper-era cluster (`readStream.format("zkkafka")`, DESIGN §21), in one run:

1. End-to-end latency, produce -> Parquet file committed: a producer writes at 1,000 and at 50,000 records/s, each
   record stamped with its CreateTime (magic 1), while a streaming query (processing-time trigger of 0: a batch as
   soon as the last one ends) writes Parquet. A watcher sees each batch's entry appear in the sink's metadata log
   (`_spark_metadata/<batch>`, or `<batch>.compact` every tenth batch: the moment the batch is committed) and reads
   the timestamps of the files it names for the first time:
   latency = commit seen - CreateTime, p50 / p99 / max over every record. Reference: Spark's micro-batch
   engine documents ~100 ms end-to-end latencies at best (Structured Streaming Programming Guide).
2. Trigger.AvailableNow rows/s over a backlog, beside the batch path (`spark.read` ... `write.parquet`) over the
   same records, in the same JVM.
3. Exactly once across kills: `zkbroker spark-ingest --stream` (its query is readStream -> Parquet on a checkpoint)
   SIGKILLed at five seeded random moments while confluent-kafka (acks=all, idempotent) writes to a 2-broker,
   replication-factor-2 topic and one broker is SIGKILLed and restarted; a final AvailableNow run; then every
   acknowledged record must be in the output exactly once, and nothing in it twice.

Everything runs on 127.0.0.1 (a ZooKeeper and a lab cluster of this run's own), in a temporary directory removed at
the end. Usage: python bench/spark_stream.py [--backlog N] [--seconds S] [--kills K] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zkbroker import admin  # noqa: E402
from zkbroker.client.connection import BrokerConnection  # noqa: E402
from zkbroker.lab.cluster import LabCluster  # noqa: E402
from zkbroker.lab.zookeeper import ZooKeeperServer  # noqa: E402
from zkbroker.protocol.message_set import build_message_set  # noqa: E402
from zkbroker.zk.client import ZkClient  # noqa: E402

PARTITIONS = 4
VALUE_BYTES = 100


def create_topic(zk_connect: str, topic: str, partitions: int, replication_factor: int, brokers) -> None:
    zk = ZkClient(zk_connect, name="bench-admin")
    zk.start()
    try:
        admin.create_topic(zk, topic, partitions, replication_factor)
    finally:
        zk.close()
    deadline = time.monotonic() + 30
    while True:
        try:
            leaders(brokers[0], topic, partitions)
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def leaders(broker, topic: str, partitions: int) -> dict[int, tuple[str, int]]:
    with BrokerConnection(broker.host, broker.port, timeout_s=10) as conn:
        meta = conn.send(3, 0, {"topics": [topic]})
    hosts = {b.node_id: (b.host, b.port) for b in meta.brokers}
    found = {p.partition: hosts.get(p.leader) for t in meta.topics for p in t.partitions if p.error_code == 0}
    if len(found) != partitions or None in found.values():
        raise RuntimeError(f"{topic} has no leader for every partition yet")
    return found


class PacedProducer(threading.Thread):
    """Writes `rate` records/s over the partitions in turn, each stamped with its CreateTime, in requests of 1/50 s,
    each to its partition's leader."""

    def __init__(self, leaders: dict[int, tuple[str, int]], topic: str, rate: int, seconds: float) -> None:
        super().__init__(daemon=True)
        self.leaders, self.topic, self.rate, self.seconds = leaders, topic, rate, seconds
        self.sent = 0

    def run(self) -> None:
        per_tick = max(1, self.rate // 50)
        connections = {address: BrokerConnection(*address, timeout_s=30).connect()
                       for address in set(self.leaders.values())}
        started = time.monotonic()
        try:
            tick = 0
            while time.monotonic() - started < self.seconds:
                now_ms = int(time.time() * 1000)
                partition = tick % PARTITIONS
                records = build_message_set([(None, b"v" * VALUE_BYTES, now_ms)] * per_tick, magic=1)
                conn = connections[self.leaders[partition]]
                row = conn.send(0, 2, {"acks": 1, "timeout_ms": 10000, "topics": [{"topic": self.topic, "partitions": [
                    {"partition": partition, "records": records}]}]}).topics[0].partitions[0]
                if row.error_code:
                    raise RuntimeError(f"produce failed with {row.error_code}")
                self.sent += per_tick
                tick += 1
                pause = started + tick / 50 - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
        finally:
            for conn in connections.values():
                conn.close()


class CommitWatcher(threading.Thread):
    """Sees each batch of a file sink committed (its `_spark_metadata/<n>` file appearing, or `<n>.compact` every
    tenth batch, which names the files of every batch so far) and measures, for every record of the files it
    commits, the time from CreateTime to then."""

    def __init__(self, output: Path) -> None:
        super().__init__(daemon=True)
        self.output = output
        self.latencies_ms: list[float] = []
        self.batches = 0
        self._done = threading.Event()

    def run(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        seen: set[str] = set()
        files: set[str] = set()
        log_dir = self.output / "_spark_metadata"
        while not self._done.is_set():
            names = sorted(p.name for p in log_dir.iterdir()) if log_dir.is_dir() else []
            for name in names:
                batch = name.removesuffix(".compact")
                if name in seen or not batch.isdigit():
                    continue
                committed_ms = time.time() * 1000
                self.batches += batch not in seen
                seen |= {name, batch}
                for line in (log_dir / name).read_text().splitlines()[1:]:
                    path = json.loads(line)["path"].removeprefix("file://")
                    if path in files:  # a compaction names the files of earlier batches again
                        continue
                    files.add(path)
                    # Whatever unit the file stores (Spark's INT96 reads as nanoseconds), as milliseconds.
                    stamps = (pq.read_table(path, columns=["timestamp"]).column("timestamp")
                              .cast(pa.timestamp("ms")).cast(pa.int64()))
                    self.latencies_ms.extend(committed_ms - v for v in stamps.to_pylist())
            time.sleep(0.01)

    def stop(self) -> None:
        self._done.set()
        self.join()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def latency_run(spark, zk_connect: str, broker, workdir: Path, rate: int, seconds: float) -> dict:
    topic = f"latency-{rate}"
    create_topic(zk_connect, topic, PARTITIONS, 1, [broker])
    output = workdir / f"{topic}-out"
    watcher = CommitWatcher(output)
    watcher.start()
    query = (spark.readStream.format("zkkafka").option("zookeeper.connect", zk_connect).option("subscribe", topic)
             .load().writeStream.format("parquet").option("path", str(output))
             .option("checkpointLocation", str(workdir / f"{topic}-checkpoint"))
             .trigger(processingTime="0 seconds").start())
    try:
        while query.lastProgress is None:  # the query is running before the clock starts
            time.sleep(0.05)
        producer = PacedProducer(leaders(broker, topic, PARTITIONS), topic, rate, seconds)
        producer.start()
        producer.join()
        deadline = time.monotonic() + 60
        while len(watcher.latencies_ms) < producer.sent and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        query.stop()
        watcher.stop()
    lat = watcher.latencies_ms
    return {"rate": rate, "sent": producer.sent, "read": len(lat), "batches": watcher.batches,
            "p50": percentile(lat, 0.5), "p99": percentile(lat, 0.99), "max": max(lat) if lat else float("nan")}


def backlog_rates(spark, zk_connect: str, broker, workdir: Path, records: int) -> tuple[float, float]:
    topic = "backlog"
    create_topic(zk_connect, topic, PARTITIONS, 1, [broker])
    per_partition = records // PARTITIONS
    chunk = build_message_set([(None, os.urandom(VALUE_BYTES)) for _ in range(10_000)])
    for partition, address in leaders(broker, topic, PARTITIONS).items():
        with BrokerConnection(*address, timeout_s=60) as conn:
            for _ in range(per_partition // 10_000):
                row = conn.send(0, 0, {"acks": 1, "timeout_ms": 30000, "topics": [{"topic": topic, "partitions": [
                    {"partition": partition, "records": chunk}]}]}).topics[0].partitions[0]
                if row.error_code:
                    raise RuntimeError(f"produce to {topic}-{partition} failed with {row.error_code}")
    total = PARTITIONS * (per_partition // 10_000) * 10_000
    started = time.perf_counter()
    query = (spark.readStream.format("zkkafka").option("zookeeper.connect", zk_connect).option("subscribe", topic)
             .option("startingOffsets", "earliest").load().writeStream.format("parquet")
             .option("path", str(workdir / "backlog-stream")).option("checkpointLocation", str(workdir / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    stream_s = time.perf_counter() - started
    started = time.perf_counter()
    (spark.read.format("zkkafka").option("zookeeper.connect", zk_connect).option("subscribe", topic).load()
     .write.parquet(str(workdir / "backlog-batch")))
    batch_s = time.perf_counter() - started
    if spark.read.parquet(str(workdir / "backlog-stream")).count() != total:
        raise RuntimeError("the AvailableNow stream did not write every record")
    return total / stream_s, total / batch_s


def kill_run(lab: LabCluster, cluster, zk_connect: str, workdir: Path, kills: int, seed: int) -> dict:
    """spark-ingest --stream SIGKILLed `kills` times while confluent-kafka writes and a broker dies and comes back."""
    from confluent_kafka import Producer

    topic = "killed"
    create_topic(zk_connect, topic, PARTITIONS, 2, cluster.brokers)
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in cluster.brokers)
    acked: list[bytes] = []
    stop = threading.Event()

    def write() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5})

        def delivered(err, msg) -> None:
            if err is None:
                acked.append(msg.value())

        n = 0
        while not stop.is_set():
            producer.produce(topic, value=b"record-%09d" % n, on_delivery=delivered)
            n += 1
            if n % 100 == 0:
                producer.poll(0)
                time.sleep(0.02)  # ~5,000 records/s
        producer.flush(60)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    chance = random.Random(seed)
    output, checkpoint = workdir / "killed-out", workdir / "killed-checkpoint"
    argv = [sys.executable, "-m", "zkbroker", "spark-ingest", "--stream", "--zookeeper", zk_connect, "--topic", topic,
            "--group", "bench", "--output", str(output), "--checkpoint", str(checkpoint)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    for kill in range(kills):
        proc = subprocess.Popen([*argv, "--trigger", "processing-time=500ms"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(chance.uniform(15.0, 30.0))  # Spark's start-up, then somewhere among the batches
        if kill == kills // 2:
            victim = cluster.brokers[1].id
            lab.kill(victim)
            time.sleep(chance.uniform(1.0, 5.0))
            lab.start(victim)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    stop.set()
    writer.join(120)
    final = subprocess.run([*argv, "--trigger", "available-now"], env=env, capture_output=True, text=True, timeout=600)
    if final.returncode != 0:
        raise RuntimeError(f"the final run failed: {final.stderr[-2000:]}")
    from consumer.spark.session import spark_session

    spark = spark_session("local[2]")
    try:
        values = [bytes(r.value) for r in spark.read.parquet(str(output)).select("value").collect()]
    finally:
        spark.stop()
    counts: dict[bytes, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return {"acked": len(acked), "missing": sum(1 for v in acked if v not in counts),
            "twice": sum(1 for c in counts.values() if c > 1), "stored": len(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=2_000_000, help="records of the AvailableNow backlog")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of each latency run")
    parser.add_argument("--kills", type=int, default=5, help="SIGKILLs of the streaming ingest")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="zkbroker-bench-spark-stream-"))
    zookeeper = ZooKeeperServer(tick_time_ms=200, data_dir=workdir / "zookeeper")
    lab = LabCluster(workdir / "lab")
    spark = None
    try:
        zookeeper.start()
        cluster = lab.up(brokers=2, zookeeper=zookeeper.connect_string)
        broker = cluster.brokers[0]
        os.environ["PYSPARK_PYTHON"] = sys.executable
        from consumer.spark.session import spark_session

        spark = spark_session("local[2]", workdir / "spark.log")
        latencies = [latency_run(spark, cluster.zookeeper, broker, workdir, rate, args.seconds)
                     for rate in (1_000, 50_000)]
        stream_rate, batch_rate = backlog_rates(spark, cluster.zookeeper, broker, workdir, args.backlog)
        spark.stop()
        spark = None
        killed = kill_run(lab, cluster, cluster.zookeeper, workdir, args.kills, args.seed)
    finally:
        if spark is not None:
            spark.stop()
        try:
            lab.down()
        finally:
            zookeeper.stop()
            if not args.keep:
                shutil.rmtree(workdir, ignore_errors=True)

    print()
    print(f"load average (1 min) {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for row in latencies:
        print(f"end-to-end latency at {row['rate']:>6,} records/s: p50 {row['p50']:>7,.0f} ms, p99 {row['p99']:>7,.0f} "
              f"ms, max {row['max']:>7,.0f} ms over {row['read']:,} of {row['sent']:,} records in {row['batches']} "
              "batches   (reference: ~100 ms, Spark's micro-batch floor)")
    print(f"Trigger.AvailableNow over {args.backlog:,} records: {stream_rate:>10,.0f} rows/s")
    print(f"batch read -> Parquet over the same records:   {batch_rate:>10,.0f} rows/s   "
          f"(stream / batch {stream_rate / batch_rate:.0%})")
    verdict = "exactly once" if killed["missing"] == 0 and killed["twice"] == 0 else "NOT exactly once"
    print(f"spark-ingest --stream, {args.kills} SIGKILLs and a broker killed and restarted: {killed['acked']:,} "
          f"acknowledged, {killed['missing']} missing, {killed['twice']} stored twice, {killed['stored']:,} rows "
          f"-> {verdict}")
    return 0 if verdict == "exactly once" else 1


if __name__ == "__main__":
    sys.exit(main())
