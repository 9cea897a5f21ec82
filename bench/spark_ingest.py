"""Spark ingestion: 10 million 100-byte records in 6 partitions, broker -> Parquet with `zkbroker spark-ingest` on
local[2], beside the raw fetch rate of the same data by our simple consumer alone, measured in the same run.

Figures, each next to its reference:

1. Spark start-up: creating the SparkSession (the JVM and py4j), reported apart from every rate below.
2. The simple consumer alone (no Spark): two processes -- local[2]'s parallelism -- of three partitions each
   read every record with `SimpleConsumer.fetch` (the leader found through metadata, Fetch v0 of 1 MiB, the
   messages decoded: its public API). Beside it, the same fetches with the message sets left undecoded: the
   transport's ceiling (broker sendfile, socket, Python framing).
3. The zkkafka source alone: `count()` over the topic (fetch and Arrow decode in the Spark tasks, no Parquet).
4. `spark-ingest` (the job: group join and rebalance, planning, Spark writing Parquet, the manifest, the offset
   commit), first on a 500,000-record topic in the fresh JVM (cold: the first Spark job of a process), then on
   the 10 million records: rows/s, against the targets of >= 50% of (2) and >= 1,000,000 rows/s.
5. The same `spark-ingest` through a Spark standalone cluster on this machine (zkbroker/lab/spark_cluster.py: a
   master and two workers of one core each, whose Python has only pyspark and pyarrow, so every record is
   decoded with the shipped code and pyarrow's codecs): with one worker's executor (spark.cores.max=1) and with
   both, beside local[2]'s row (4). Each runs in a driver process of its own after a warm-up ingest of the
   500,000-record topic there, as (4) does.

Every rate is given twice: wall-clock, as measured, and per CPU-second -- the CPU time of every process doing the
work (this one and its children: the consumer processes, Spark's JVM and Python workers; and the broker), so a
figure taken on a machine shared with other work still says what two dedicated cores would do (2 x rows per
CPU-second, the "2-core" column). The load average during the run is printed with the table.

Everything runs on 127.0.0.1: a ZooKeeper of its own, a one-broker lab cluster and the Spark cluster, stopped at
the end; the data (~1.3 GB of log, ~1.1 GB of Parquet per ingest) lives in a temporary directory that is removed
afterwards.

Usage: python bench/spark_ingest.py [--records N] [--keep] [--no-cluster]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zkbroker import admin  # noqa: E402
from zkbroker.client.connection import BrokerConnection  # noqa: E402
from zkbroker.lab.cluster import LabCluster  # noqa: E402
from zkbroker.lab.spark_cluster import SparkStandalone  # noqa: E402
from zkbroker.lab.zookeeper import ZooKeeperServer  # noqa: E402
from zkbroker.protocol.message_set import build_message_set  # noqa: E402
from zkbroker.zk.client import ZkClient  # noqa: E402

PARTITIONS = 6
VALUE_BYTES = 100
CHUNK = 10_000  # records per produce request (~1.26 MB)
DISTINCT_CHUNKS = 32  # random values, so Parquet cannot compress or dictionary-encode them away
WARM_UP_RECORDS = 500_000
TARGET_SHARE = 0.5
TARGET_ROWS_S = 1_000_000


def build_chunks() -> list[bytes]:
    rng = random.Random(1)
    return [build_message_set([(None, rng.randbytes(VALUE_BYTES)) for _ in range(CHUNK)])
            for _ in range(DISTINCT_CHUNKS)]


def create_topic(zk_connect: str, broker, topic: str) -> None:
    zk = ZkClient(zk_connect, name="bench-admin")
    zk.start()
    try:
        admin.create_topic(zk, topic, PARTITIONS, 1)
    finally:
        zk.close()
    deadline = time.monotonic() + 30
    while any(error != 0 for error, _ in end_offsets(broker, topic)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} got no leaders within 30 s")
        time.sleep(0.05)


def end_offsets(broker, topic: str) -> list[tuple[int, int]]:
    with BrokerConnection(broker.host, broker.port, timeout_s=10) as conn:
        response = conn.send(2, 0, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": p, "timestamp": -1, "max_num_offsets": 1} for p in range(PARTITIONS)]}]})
    return [(row.error_code, row.offsets[0] if row.offsets else -1) for row in response.topics[0].partitions]


def produce(broker, topic: str, records: int, chunks: list[bytes]) -> float:
    """records / PARTITIONS records per partition, in produce requests of CHUNK (acks=1); returns seconds."""
    started = time.perf_counter()
    per_partition = records // PARTITIONS
    with BrokerConnection(broker.host, broker.port, timeout_s=60) as conn:
        n = 0
        for partition in range(PARTITIONS):
            for first in range(0, per_partition, CHUNK):
                count = min(CHUNK, per_partition - first)
                records_set = chunks[n % len(chunks)]
                if count < CHUNK:
                    records_set = build_message_set([(None, b"x" * VALUE_BYTES)] * count)
                n += 1
                row = conn.send(0, 0, {"acks": 1, "timeout_ms": 30000, "topics": [{"topic": topic, "partitions": [
                    {"partition": partition, "records": records_set}]}]}).topics[0].partitions[0]
                if row.error_code:
                    raise RuntimeError(f"produce to {topic}-{partition} failed with error {row.error_code}")
    ends = [offset for _, offset in end_offsets(broker, topic)]
    if sum(ends) != per_partition * PARTITIONS:
        raise RuntimeError(f"{topic} ends at {ends}")
    return time.perf_counter() - started


# ---- the simple consumer alone ---------------------------------------------------------------------------------


def _read_partitions(bootstrap: list[tuple[str, int]], topic: str, partitions: list[int], ends: dict[int, int],
                     decode: bool) -> int:
    """One process: read the partitions to their ends with the simple consumer; returns records (or bytes)."""
    from consumer.decode import last_offset
    from consumer.simple import SimpleConsumer
    from consumer.spark.source import _fetch_raw

    total = 0
    with SimpleConsumer(bootstrap, client_id="bench") as consumer:
        for partition in partitions:
            offset = 0
            while offset < ends[partition]:
                if decode:
                    result = consumer.fetch(topic, partition, offset)
                    total += sum(1 for m in result.messages if m.offset < ends[partition])
                    offset = result.next_offset
                else:
                    records, _ = _fetch_raw(consumer, topic, partition, offset, consumer.fetch_size)
                    last = last_offset(records)
                    total += last + 1 - offset
                    offset = last + 1
    return total


def simple_consumer_rate(meter: CpuMeter, broker, topic: str, decode: bool) -> Rate:
    ends = dict(enumerate(offset for _, offset in end_offsets(broker, topic)))
    halves = [list(range(0, PARTITIONS, 2)), list(range(1, PARTITIONS, 2))]
    bootstrap = [(broker.host, broker.port)]
    ctx = multiprocessing.get_context("fork")
    with meter.measure() as measured:
        with ctx.Pool(2) as pool:
            counts = pool.starmap(_read_partitions, [(bootstrap, topic, half, ends, decode) for half in halves])
    if sum(counts) != sum(ends.values()):
        raise RuntimeError(f"the simple consumer read {sum(counts)} records, not {sum(ends.values())}")
    return measured.rate(sum(counts))


# ---- CPU accounting ---------------------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime: the process and its children already reaped."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(parent, []).append(int(entry.name))
    return out


class Rate:
    def __init__(self, rows: int, wall_s: float, cpu_s: float) -> None:
        self.rows, self.wall_s, self.cpu_s = rows, wall_s, cpu_s

    @property
    def wall(self) -> float:
        return self.rows / self.wall_s

    @property
    def two_cores(self) -> float:
        return 2 * self.rows / self.cpu_s


class CpuMeter:
    """CPU seconds of this process's tree (minus ZooKeeper's) plus the broker's, across a measured phase."""

    def __init__(self, broker_pid: int, exclude: set[int]) -> None:
        self.broker_pid = broker_pid
        self.exclude = exclude | {broker_pid}

    def total(self) -> dict[int, float]:
        children = _children()
        seen, stack = {}, [os.getpid()]
        while stack:
            pid = stack.pop()
            seen[pid] = _cpu_seconds(pid)
            stack += [c for c in children.get(pid, ()) if c not in self.exclude]
        seen[self.broker_pid] = _cpu_seconds(self.broker_pid)
        return seen

    def measure(self) -> Measured:
        return Measured(self)


class Measured:
    def __init__(self, meter: CpuMeter) -> None:
        self.meter = meter

    def __enter__(self) -> Measured:
        self._cpu0 = self.meter.total()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall_s = time.perf_counter() - self._t0
        after = self.meter.total()
        self.cpu_s = sum(cpu - self._cpu0.get(pid, 0.0) for pid, cpu in after.items())

    def rate(self, rows: int) -> Rate:
        return Rate(rows, self.wall_s, self.cpu_s)


# ---- Spark ------------------------------------------------------------------------------------------------------

CLUSTER_CONF = {"spark.executor.cores": "1", "spark.executor.memory": "512m"}


def _cluster_driver(conn, master: str, python: str, cores: int, zookeeper: str, workdir: str) -> None:
    """A driver process on the standalone cluster (one SparkContext per process): a warm-up ingest, then -- once
    the parent, which meters the CPU, says go -- the measured one; sends back (records, seconds)."""
    from consumer.spark.ingest import IngestConfig, run_ingest
    from consumer.spark.session import spark_session

    os.environ.update(PYSPARK_PYTHON=python, SPARK_LOCAL_IP="127.0.0.1")
    work = Path(workdir)
    spark = spark_session(master, work / f"spark-{cores}-cores.log",
                          conf={**CLUSTER_CONF, "spark.cores.max": str(cores)})
    try:
        run_ingest(IngestConfig(zookeeper, f"bench-{cores}-cores", work / f"warm-up-{cores}", topic="warm-up"),
                   spark=spark)
        conn.send("warm")
        conn.recv()
        started = time.perf_counter()
        result = run_ingest(IngestConfig(zookeeper, f"bench-{cores}-cores", work / f"out-{cores}", topic="bench"),
                            spark=spark)
        conn.send((result.records, time.perf_counter() - started))
        shutil.rmtree(work / f"out-{cores}", ignore_errors=True)
    finally:
        spark.stop()


def cluster_ingest_rate(meter: CpuMeter, spark_cluster: SparkStandalone, cores: int, zookeeper: str,
                        workdir: Path, records: int) -> Rate:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    driver = ctx.Process(target=_cluster_driver, args=(child, spark_cluster.master_url, str(spark_cluster.python),
                                                       cores, zookeeper, str(workdir)))
    driver.start()
    try:
        if not parent.poll(600) or parent.recv() != "warm":
            raise RuntimeError(f"the {cores}-core cluster driver did not warm up; see {workdir}")
        with meter.measure() as measured:
            parent.send("go")
            if not parent.poll(1800):
                raise RuntimeError(f"the {cores}-core cluster ingest did not finish; see {workdir}")
            ingested, _ = parent.recv()
        driver.join(120)
    finally:
        if driver.is_alive():
            driver.kill()
            driver.join()
    if ingested != records:
        raise RuntimeError(f"spark-ingest on {cores} cluster cores wrote {ingested} records, not {records}")
    return measured.rate(ingested)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000, help="records to ingest (default 10 million)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    parser.add_argument("--no-cluster", action="store_true", help="leave out the standalone-cluster rows")
    args = parser.parse_args()
    records = args.records - args.records % PARTITIONS

    workdir = Path(tempfile.mkdtemp(prefix="zkbroker-bench-spark-"))
    zookeeper = ZooKeeperServer(tick_time_ms=200, data_dir=workdir / "zookeeper")
    lab = LabCluster(workdir / "lab")
    spark = None
    try:
        zookeeper.start()
        cluster = lab.up(brokers=1, zookeeper=zookeeper.connect_string)
        broker = cluster.brokers[0]
        chunks = build_chunks()
        create_topic(cluster.zookeeper, broker, "warm-up")
        create_topic(cluster.zookeeper, broker, "bench")
        produce(broker, "warm-up", WARM_UP_RECORDS, chunks)
        produced_s = produce(broker, "bench", records, chunks)
        log_bytes = sum(f.stat().st_size for f in (Path(broker.config).parent / "data").glob("bench-*/*.log"))
        print(f"produced {records:,} records of {VALUE_BYTES} bytes in {PARTITIONS} partitions "
              f"({log_bytes / 2**20:,.0f} MiB of log) in {produced_s:.1f} s", flush=True)

        meter = CpuMeter(broker.pid, {zookeeper.pid or -1})
        load_before = os.getloadavg()[0]
        decoded = simple_consumer_rate(meter, broker, "bench", decode=True)
        undecoded = simple_consumer_rate(meter, broker, "bench", decode=False)

        os.environ["PYSPARK_PYTHON"] = sys.executable
        from consumer.spark.ingest import IngestConfig, run_ingest
        from consumer.spark.session import spark_session

        started = time.perf_counter()
        spark = spark_session("local[2]", workdir / "spark.log")
        startup_s = time.perf_counter() - started

        with meter.measure() as measured:
            cold = run_ingest(IngestConfig(cluster.zookeeper, "bench", workdir / "warm-up", topic="warm-up"),
                              spark=spark)
        cold_rate = measured.rate(cold.records)
        with meter.measure() as measured:
            counted = (spark.read.format("zkkafka").option("zookeeper.connect", cluster.zookeeper)
                       .option("subscribe", "bench").load().count())
        count_rate = measured.rate(counted)
        if counted != records:
            raise RuntimeError(f"zkkafka counted {counted} records, not {records}")
        with meter.measure() as measured:
            result = run_ingest(IngestConfig(cluster.zookeeper, "bench", workdir / "out", topic="bench"),
                                spark=spark)
        ingest_rate = measured.rate(result.records)
        if result.records != records:
            raise RuntimeError(f"spark-ingest wrote {result.records} records, not {records}")
        if spark.read.parquet(str(workdir / "out")).count() != records:
            raise RuntimeError("the Parquet output does not hold every record")
        shutil.rmtree(workdir / "out", ignore_errors=True)
        spark.stop()
        spark = None

        cluster_rates = {}
        if not args.no_cluster:
            spark_cluster = SparkStandalone(workers=2, cores=1, memory="512m", base_dir=workdir / "spark-cluster")
            spark_cluster.start()
            try:
                for cores in (1, 2):
                    cluster_rates[cores] = cluster_ingest_rate(meter, spark_cluster, cores, cluster.zookeeper,
                                                               workdir, records)
            finally:
                spark_cluster.stop()
        load_after = os.getloadavg()[0]
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
    print(f"load average (1 min) {load_before:.1f} before the measured phases, {load_after:.1f} after, on "
          f"{os.cpu_count()} cores")
    print(f"{'figure':<58} {'wall-clock':>16} {'2-core':>16}   reference")

    def row(name: str, rate: Rate, reference: str = "") -> None:
        print(f"{name:<58} {rate.wall:>9,.0f} rows/s {rate.two_cores:>9,.0f} rows/s   {reference}", flush=True)

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    print(f"{'Spark start-up (SparkSession, local[2])':<58} {startup_s:>14.1f} s {'':>16}   apart from every rate")
    row("simple consumer alone, 2 processes, messages decoded", decoded, "the raw fetch rate")
    row("simple consumer alone, 2 processes, sets not decoded", undecoded, "the transport's ceiling")
    row("zkkafka count(), local[2] (no Parquet)", count_rate)
    row(f"spark-ingest, first job of the JVM ({WARM_UP_RECORDS:,} records)", cold_rate, "cold JIT")
    row(f"spark-ingest broker -> Parquet ({records:,} records)", ingest_rate,
        f">= {TARGET_ROWS_S:,} rows/s: wall {verdict(ingest_rate.wall >= TARGET_ROWS_S)}, "
        f"2-core {verdict(ingest_rate.two_cores >= TARGET_ROWS_S)}")
    print(f"{'  ... share of the raw fetch rate':<58} {ingest_rate.wall / decoded.wall:>16.0%} "
          f"{ingest_rate.two_cores / decoded.two_cores:>16.0%}   >= {TARGET_SHARE:.0%}: wall "
          f"{verdict(ingest_rate.wall >= TARGET_SHARE * decoded.wall)}, 2-core "
          f"{verdict(ingest_rate.two_cores >= TARGET_SHARE * decoded.two_cores)}")
    print(f"{'  ... share of the transport ceiling':<58} {ingest_rate.wall / undecoded.wall:>16.0%} "
          f"{ingest_rate.two_cores / undecoded.two_cores:>16.0%}")
    print(f"{'  ... Parquet written':<58} {result.bytes / 2**20:>12,.0f} MiB   in {ingest_rate.wall_s:.1f} s, "
          f"{ingest_rate.cpu_s:.1f} CPU-s")
    for cores, rate in cluster_rates.items():
        row(f"spark-ingest, standalone cluster, {cores} worker{'s' if cores > 1 else ''} x 1 core", rate,
            f"beside local[2]: {rate.wall / ingest_rate.wall:.0%} wall, {rate.two_cores / ingest_rate.two_cores:.0%} "
            "2-core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
