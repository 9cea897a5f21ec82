"""A streaming ingest as a process of its own: a scenario's `spark_stream` step.

The process (`python -m zkbroker.lab.spark_stream`) runs what `zkbroker spark-ingest --stream` runs -- a Structured
Streaming query `readStream.format("zkkafka")` into Parquet on a checkpoint, committing its group's offsets to
ZooKeeper after each batch -- in a local SparkSession, and tells the lab how it goes. It leaves in the lab directory:

    spark-stream-NAME/output/     the Parquet sink (its metadata log, `_spark_metadata`, says what it holds)
    spark-stream-NAME/checkpoint/ the query's checkpoint (a restarted stream goes on from it)
    spark-stream-NAME.status.json {"state": "starting|running|stopped|failed", "batches": 3, "rows": 120,
                                   "offsets": {"t": {"0": 41}}, "latest": {"t": {"0": 45}}, "error": null}
    spark-stream-NAME.log         the progress lines, the JVM's and Spark's own output

and appends to the timeline, as `client:NAME`: `stream_started` (topic, group, trigger, checkpoint),
`stream_batch` per batch (batch, rows, rows_per_s, start, end and latest offsets as Spark's Kafka JSON, behind:
the offsets between its end and the latest), and `stream_stopped` (batches, rows) or `stream_failed` (error).

The stream starts, on a new checkpoint, where its group's offsets are: the group (`lab-stream-NAME`) is new, so at
the earliest offsets. The runner kills it (SIGKILL to its process group: the driver, its JVM and Spark's Python
workers), stops it (SIGTERM: the running batch finishes, then the query stops) and starts it again on the same
checkpoint. At the end of a run the checker judges what the sink holds (`SparkStream.result`): the rows of every
file its metadata log names, over offsets [0, the end of its last committed batch) of each partition.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zkbroker import timeline
from zkbroker.lab.checker import Read
from zkbroker.topic_partition import TopicPartition


def status_file(directory: Path, name: str) -> Path:
    return directory / f"spark-stream-{name}.status.json"


def log_file(directory: Path, name: str) -> Path:
    return directory / f"spark-stream-{name}.log"


def output_dir(directory: Path, name: str) -> Path:
    return directory / f"spark-stream-{name}" / "output"


def checkpoint_dir(directory: Path, name: str) -> Path:
    return directory / f"spark-stream-{name}" / "checkpoint"


def group_of(name: str) -> str:
    return f"lab-stream-{name}"


@dataclass
class SparkStream:
    """A stream the runner started: its process (the latest, after restarts), and what its files say."""

    name: str
    topic: str
    directory: Path
    command: list[str]
    preexec_fn: Callable[[], None] | None = None
    process: subprocess.Popen | None = None
    killed: list[str] = field(default_factory=list)

    @classmethod
    def launch(cls, directory: Path, name: str, zookeeper: str, topic: str, trigger: str,
               options: Mapping[str, str], master: str = "local[1]",
               preexec_fn: Callable[[], None] | None = None) -> SparkStream:
        status_file(directory, name).unlink(missing_ok=True)
        command = [sys.executable, "-m", "zkbroker.lab.spark_stream", "--dir", str(directory), "--name", name,
                   "--zookeeper", zookeeper, "--topic", topic, "--trigger", trigger, "--master", master]
        command += [arg for k, v in options.items() for arg in ("--option", f"{k}={v}")]
        stream = cls(name, topic, directory, command, preexec_fn)
        stream.start()
        return stream

    def start(self) -> None:
        """Start the stream (again): on the same checkpoint, it goes on where its last committed batch ended."""
        if self.running():
            raise RuntimeError(f"the stream {self.name} is running already")
        with open(log_file(self.directory, self.name), "ab") as out:
            # A session of its own: the JVM and Spark's Python workers join the stream's process group.
            self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=self.preexec_fn)

    def status(self) -> dict:
        try:
            return json.loads(status_file(self.directory, self.name).read_text())
        except (OSError, ValueError):
            return {"state": "starting", "batches": 0, "rows": 0, "offsets": {}, "latest": {}, "error": None}

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def offset(self, topic: str, partition: int) -> int | None:
        """Where its last committed batch ended in topic-partition (the next offset it reads), None before one."""
        value = self.status().get("offsets", {}).get(topic, {}).get(str(partition))
        return None if value is None else int(value)

    def kill(self, why: str = "") -> None:
        if self.running():
            if why:
                self.killed.append(why)
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.process is not None:
            self.process.wait(10)

    def stop(self, timeout_s: float, idle: Callable[[float], None] = time.sleep) -> bool:
        """SIGTERM to the driver, which lets the running batch finish and stops the query; SIGKILL to the whole
        group after `timeout_s`. True when it stopped by itself."""
        if not self.running():
            return True
        self.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while self.running():
            if time.monotonic() > deadline:
                self.kill(f"the stream did not stop within {timeout_s * 1000:.0f} ms of SIGTERM")
                return False
            idle(0.2)
        return True

    def error(self) -> str | None:
        """Why the stream failed (its query's error, or a kill the runner had to make), None when it did not."""
        status = self.status()
        if status.get("state") == "failed":
            return status.get("error") or "the stream failed"
        return self.killed[0] if self.killed else None

    def result(self) -> Read:
        """What the sink holds, for the checker: a read of [0, end) of each partition its last committed batch
        ended in (the stream started at the earliest offsets), with the rows of every file its metadata log names."""
        from consumer.spark.stream_ingest import batch_end_offsets, sink_files

        last, files = sink_files(output_dir(self.directory, self.name))
        end = batch_end_offsets(checkpoint_dir(self.directory, self.name), last) if last is not None else None
        ranges = {TopicPartition(t, int(p)): (0, int(o)) for t, parts in (end or {}).items() for p, o in parts.items()}
        return Read(self.name, ranges, sink_rows(files), sink=True)


def sink_rows(files: list[Path]) -> list[tuple[str, int, int, bytes | None]]:
    """The rows (topic, partition, offset, value) of the sink's Parquet files."""
    import pyarrow.parquet as pq

    rows = []
    for path in files:
        table = pq.read_table(path, columns=["topic", "partition", "offset", "value"]).to_pydict()
        rows += zip(table["topic"], table["partition"], table["offset"], table["value"])
    return sorted(rows, key=lambda r: (r[0], r[1], r[2]))


# ---- the stream's own process -----------------------------------------------------------------------------------


def _write_status(path: Path, **status) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(status))
    os.replace(tmp, path)


def _offsets(value) -> dict:
    """A source's offsets in Spark's progress report (Spark's Kafka JSON, a string or parsed; "null": none)."""
    parsed = json.loads(value) if isinstance(value, str) else value
    return parsed if isinstance(parsed, dict) else {}


def batch_event(progress: dict) -> dict:
    """The fields of a `stream_batch` timeline event, from one batch of the query's progress report."""
    source = progress["sources"][0] if progress.get("sources") else {}
    start, end, latest = (_offsets(source.get(key)) for key in ("startOffset", "endOffset", "latestOffset"))
    behind = sum(max(0, o - end.get(t, {}).get(p, 0)) for t, parts in latest.items() for p, o in parts.items())
    return {"batch": progress["batchId"], "rows": progress["numInputRows"],
            "rows_per_s": round(progress.get("processedRowsPerSecond") or 0.0, 1), "start": start, "end": end,
            "latest": latest, "behind": behind}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zkbroker.lab.spark_stream", description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--zookeeper", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--trigger", default="processing-time=500ms")
    parser.add_argument("--master", default="local[1]")
    parser.add_argument("--option", action="append", default=[], help="a zkkafka source option, KEY=VALUE")
    args = parser.parse_args(argv)
    status = status_file(args.dir, args.name)
    events = timeline.path_in(args.dir)
    source = f"client:{args.name}"
    previous = SparkStream(args.name, args.topic, args.dir, []).status()  # a restart keeps where it had got to
    state = {"state": "starting", "batches": 0, "rows": 0, "offsets": previous.get("offsets", {}),
             "latest": previous.get("latest", {}), "error": None}
    _write_status(status, **state)

    from consumer.spark.session import spark_session
    from consumer.spark.stream_ingest import StreamIngestConfig, run_stream_ingest

    spark = spark_session(args.master, log_file(args.dir, args.name))
    config = StreamIngestConfig(
        zookeeper=args.zookeeper, group=group_of(args.name), output=output_dir(args.dir, args.name),
        checkpoint=checkpoint_dir(args.dir, args.name), topic=args.topic, master=args.master, trigger=args.trigger,
        source_options=tuple(tuple(o.partition("=")[::2]) for o in args.option))
    timeline.append(events, source, "stream_started", stream=args.name, topic=args.topic, group=config.group,
                    trigger=args.trigger, checkpoint=str(config.checkpoint))
    state["state"] = "running"
    _write_status(status, **state)

    def on_batch(progress: dict) -> None:
        event = batch_event(progress)
        state.update(batches=state["batches"] + 1, rows=state["rows"] + event["rows"], offsets=event["end"],
                     latest=event["latest"])
        _write_status(status, **state)
        timeline.append(events, source, "stream_batch", stream=args.name, **event)

    try:
        result = run_stream_ingest(config, spark, sys.stderr, on_batch)
    except Exception as e:  # the query failed (data loss with failOnDataLoss, a bad option): its status says why
        error = str(e).strip().splitlines()[0][:1000] if str(e).strip() else type(e).__name__
        state.update(state="failed", error=error)
        _write_status(status, **state)
        timeline.append(events, source, "stream_failed", stream=args.name, error=error)
        code = 1
    else:
        state["state"] = "stopped"
        _write_status(status, **state)
        timeline.append(events, source, "stream_stopped", stream=args.name, batches=result.batches,
                        rows=result.records)
        code = 0
    spark.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
