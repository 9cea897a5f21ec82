"""Spark drivers on the standalone cluster of the tests, each a process of its own -- one SparkContext per process,
and none of the test process's PYTHONPATH or working directory for Spark to hand on to the Python workers it starts:
what our code Spark's Python processes can import comes from the zip the job ships, as on a real cluster.

As a script, the zkkafka read of the failover test: it reads TOPICS (comma-separated) on MASTER and writes the
rows to OUTPUT (Parquet), touching OUTPUT.reading once tasks of the read run:

    python cluster_driver.py MASTER ZK TOPICS OUTPUT [option=value ...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
#: Every driver's Spark settings on the test cluster: small executors, one per worker, whose JVMs start as quickly
#: as the drivers' (tests/conftest.py sets SPARK_SUBMIT_OPTS, which reaches the drivers through driver_env).
CLUSTER_CONF = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
                "spark.driver.memory": "512m",
                "spark.executor.extraJavaOptions": os.environ.get("SPARK_SUBMIT_OPTS", "")}
_CLI = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from zkbroker.cli import main; sys.exit(main(sys.argv[1:]))"


def driver_env(cluster, **extra: str) -> dict[str, str]:
    """A driver machine's environment: PySpark's interpreter is the workers' (only pyspark and pyarrow; it also
    runs the data source's planning on this side), Spark bound to 127.0.0.1, and no PYTHONPATH."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR", "JAVA_HOME", "SPARK_SUBMIT_OPTS")
           if k in os.environ}
    env.update(PYSPARK_PYTHON=str(cluster.python), SPARK_LOCAL_IP="127.0.0.1", **extra)
    return env


def spark_ingest(cluster, args: list[str], cwd: Path, timeout_s: float = 300,
                 **env: str) -> subprocess.CompletedProcess:
    """`zkbroker spark-ingest ARGS --master <the cluster> --conf ...`, run by this interpreter as its own driver."""
    conf = [arg for key, value in CLUSTER_CONF.items() for arg in ("--conf", f"{key}={value}")]
    return subprocess.run([sys.executable, "-c", _CLI, "spark-ingest", *args, "--master", cluster.master_url, *conf],
                          env=driver_env(cluster, **env), cwd=cwd, capture_output=True, timeout=timeout_s)


def start_read(cluster, zk_connect: str, topics: list[str], output: Path, **options: str) -> subprocess.Popen:
    """This file as a script: the zkkafka read of `topics`, into `output`."""
    args = [f"{k}={v}" for k, v in options.items()]
    log = open(output.with_suffix(".log"), "wb")  # the child keeps its own copy of the descriptor
    try:
        return subprocess.Popen([sys.executable, __file__, cluster.master_url, zk_connect, ",".join(topics),
                                 str(output), *args], env=driver_env(cluster), cwd=output.parent, stdout=log,
                                stderr=subprocess.STDOUT)
    finally:
        log.close()


def _read(master: str, zk_connect: str, topics: str, output: Path, options: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    from consumer.spark.session import spark_session

    spark = spark_session(master, conf=CLUSTER_CONF)
    reader = spark.read.format("zkkafka").option("zookeeper.connect", zk_connect).option("subscribe", topics)
    for option in options:
        key, _, value = option.partition("=")
        reader = reader.option(key, value)
    sc = spark.sparkContext
    sc.setJobGroup("read", "the zkkafka read")
    done = threading.Event()

    def mark_when_reading() -> None:
        tracker = sc.statusTracker()
        while not done.wait(0.1):
            for job in tracker.getJobIdsForGroup("read"):
                info = tracker.getJobInfo(job)
                if info and any((s := tracker.getStageInfo(i)) and s.numActiveTasks for i in info.stageIds):
                    Path(f"{output}.reading").touch()
                    return

    threading.Thread(target=mark_when_reading, daemon=True).start()
    started = time.monotonic()
    try:
        reader.load().select("topic", "partition", "offset", "key", "value").write.parquet(str(output))
    finally:
        done.set()
    print(f"read in {time.monotonic() - started:.1f} s", flush=True)
    spark.stop()


if __name__ == "__main__":
    _read(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]), sys.argv[5:])
