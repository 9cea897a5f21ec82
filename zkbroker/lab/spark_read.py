"""A Spark batch read of one offsets range through the `zkkafka` source, as a process of its own: a scenario's
`spark_read` step. The runner stays light (no JVM in it, and Ctrl-C or the end of a run kills the read's
whole process group: the driver, its JVM and Spark's Python workers), and a scenario can go on with its steps
while the read runs.

The process (`python -m zkbroker.lab.spark_read`) starts a local SparkSession (consumer/spark/session.py; local[2]
unless told otherwise), reads offsets [start, end) of one partition with `assign`, `startingOffsets` and
`endingOffsets`, and leaves in the lab directory:

    spark-read-NAME.status.json   {"state": "starting|reading|done|failed", "tasks": 2, "active": 1, "done": 1,
                                   "error": null} (rewritten as the read goes: Spark's own counts of its tasks)
    spark-read-NAME.rows.jsonl    one row a line: {"topic": "t", "partition": 0, "offset": 1, "value": "m2"}
                                  (value: the text when it is UTF-8, else "value_base64"; null for a null value)
    spark-read-NAME.log           the JVM's and Spark's own output

An end past the partition's log end is allowed (Spark's endingOffsets JSON takes any offset): a task that stands
at the log's end waits, up to the source's kafkaConsumer.pollTimeoutMs, for records not yet written, following
leader moves. (A task that starts beyond the log's end finds its offsets out of range: data loss, as Spark
defines it. With `maxRecordsPerPartition` and local[1] the tasks of a range run one after another, each
starting where the last one ended, and the status file's count of finished tasks says how far the read has
got.)
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zkbroker.lab.checker import Read
from zkbroker.topic_partition import TopicPartition

JOB_GROUP = "zkbroker-lab-read"


def status_file(directory: Path, name: str) -> Path:
    return directory / f"spark-read-{name}.status.json"


def rows_file(directory: Path, name: str) -> Path:
    return directory / f"spark-read-{name}.rows.jsonl"


def log_file(directory: Path, name: str) -> Path:
    return directory / f"spark-read-{name}.log"


@dataclass
class SparkRead:
    """A read the runner started: its process, and what its files say."""

    name: str
    topic: str
    partition: int
    start: int
    end: int
    directory: Path
    process: subprocess.Popen
    timeout_s: float
    deadline: float  # time.monotonic() after which the runner gives up on it
    killed: list[str] = field(default_factory=list)

    @classmethod
    def launch(cls, directory: Path, name: str, zookeeper: str, topic: str, partition: int, start: int, end: int,
               options: Mapping[str, str], timeout_s: float, master: str = "local[2]",
               preexec_fn: Callable[[], None] | None = None) -> SparkRead:
        for path in (status_file(directory, name), rows_file(directory, name)):
            path.unlink(missing_ok=True)
        command = [sys.executable, "-m", "zkbroker.lab.spark_read", "--dir", str(directory), "--name", name,
                   "--zookeeper", zookeeper, "--topic", topic, "--partition", str(partition), "--start", str(start),
                   "--end", str(end), "--master", master]
        command += [arg for k, v in options.items() for arg in ("--option", f"{k}={v}")]
        with open(log_file(directory, name), "ab") as out:
            # A session of its own: the JVM and Spark's Python workers join the read's process group, which the
            # runner kills as one.
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True, preexec_fn=preexec_fn)
        return cls(name, topic, partition, start, end, directory, process, timeout_s, time.monotonic() + timeout_s)

    def status(self) -> dict:
        try:
            return json.loads(status_file(self.directory, self.name).read_text())
        except (OSError, ValueError):
            return {"state": "starting", "tasks": 0, "active": 0, "done": 0, "error": None}

    def running(self) -> bool:
        return self.process.poll() is None

    def kill(self, why: str = "") -> None:
        if self.running():
            if why:
                self.killed.append(why)
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(10)

    def result(self) -> Read:
        """What the read returned (a Read for the checker); its error when it failed or never finished."""
        status = self.status()
        error = status.get("error")
        if self.killed:
            error = self.killed[0]
        elif status.get("state") != "done":
            error = error or f"the read process ended ({self.process.returncode}) without finishing; see " \
                             f"{log_file(self.directory, self.name)}"
        rows = read_rows(rows_file(self.directory, self.name)) if error is None else []
        return Read(self.name, {TopicPartition(self.topic, self.partition): (self.start, self.end)}, rows, error)


def read_rows(path: Path) -> list[tuple[str, int, int, bytes | None]]:
    rows = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        value = base64.b64decode(row["value_base64"]) if "value_base64" in row else \
            None if row["value"] is None else row["value"].encode()
        rows.append((row["topic"], row["partition"], row["offset"], value))
    return rows


def row_line(topic: str, partition: int, offset: int, value: bytes | None) -> str:
    row: dict = {"topic": topic, "partition": partition, "offset": offset}
    try:
        row["value"] = None if value is None else value.decode()
    except UnicodeDecodeError:
        row["value_base64"] = base64.b64encode(value).decode()
    return json.dumps(row)


# ---- the read's own process -----------------------------------------------------------------------------------


def _write_status(path: Path, **status) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(status))
    os.replace(tmp, path)


def _tasks(tracker) -> dict[str, int]:
    """The read's tasks, those running and those finished, as Spark's status tracker counts them."""
    total = active = done = 0
    for job in tracker.getJobIdsForGroup(JOB_GROUP):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else ():
            stage_info = tracker.getStageInfo(stage)
            if stage_info:
                total += stage_info.numTasks
                active += stage_info.numActiveTasks
                done += stage_info.numCompletedTasks
    return {"tasks": total, "active": active, "done": done}


def _error_line(error: BaseException) -> str:
    """The line that says what went wrong, out of Spark's long error text (the Python exception's own line)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    ours = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)]
    return (ours[-1] if ours else lines[0] if lines else type(error).__name__)[:1000]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zkbroker.lab.spark_read", description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--zookeeper", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, default=0)
    parser.add_argument("--start", type=int, required=True)
    parser.add_argument("--end", type=int, required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--option", action="append", default=[], help="a zkkafka source option, KEY=VALUE")
    args = parser.parse_args(argv)
    status = status_file(args.dir, args.name)
    _write_status(status, state="starting", tasks=0, active=0, done=0, error=None)

    from consumer.spark.session import spark_session

    spark = spark_session(args.master, log_file(args.dir, args.name))
    sc = spark.sparkContext
    reader = (spark.read.format("zkkafka").option("zookeeper.connect", args.zookeeper)
              .option("assign", json.dumps({args.topic: [args.partition]}))
              .option("startingOffsets", json.dumps({args.topic: {str(args.partition): args.start}}))
              .option("endingOffsets", json.dumps({args.topic: {str(args.partition): args.end}})))
    for option in args.option:
        key, _, value = option.partition("=")
        reader = reader.option(key, value)
    outcome: dict = {}

    def collect() -> None:
        sc.setJobGroup(JOB_GROUP, f"offsets [{args.start}, {args.end}) of {args.topic}-{args.partition}")
        try:
            outcome["rows"] = reader.load().select("topic", "partition", "offset", "value").collect()
        except Exception as e:  # the read failed: its status says why
            outcome["error"] = _error_line(e)

    thread = threading.Thread(target=collect, name="spark-read")
    thread.start()
    tracker = sc.statusTracker()
    while thread.is_alive():
        _write_status(status, state="reading", **_tasks(tracker), error=None)
        thread.join(0.2)
    if "error" in outcome:
        _write_status(status, state="failed", **_tasks(tracker), error=outcome["error"])
    else:
        lines = [row_line(r.topic, r.partition, r.offset, None if r.value is None else bytes(r.value))
                 for r in sorted(outcome["rows"], key=lambda r: (r.topic, r.partition, r.offset))]
        rows_file(args.dir, args.name).write_text("".join(line + "\n" for line in lines))
        _write_status(status, state="done", **_tasks(tracker), error=None, rows=len(lines))
    spark.stop()
    return 0 if "error" not in outcome else 1


if __name__ == "__main__":
    sys.exit(main())
