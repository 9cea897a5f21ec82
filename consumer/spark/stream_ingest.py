"""`zkbroker spark-ingest --stream`: a Structured Streaming ingest of topics into files, exactly once across kills.

    zkbroker spark-ingest --stream --zookeeper ZK (--topic T | --whitelist RE) --group G --output PATH
                          --checkpoint DIR [--trigger available-now|processing-time=10s]
                          [--max-offsets-per-trigger N] [--format parquet] [--master ...] [--conf k=v ...]

A streaming query `readStream.format("zkkafka")` -> `writeStream.format(parquet)` with a checkpoint (DESIGN §21).
Where the records land exactly once is Spark's business, as for any file-sink query: the checkpoint's offsets
log says which offsets each micro-batch covers before it runs, the sink's metadata log (`PATH/_spark_metadata`)
names the files of each committed batch, and a restarted query re-runs the batch it was in over the same
offsets. Readers of PATH through Spark see only committed files.

What this command adds around the query:

* a new checkpoint starts where group G's offsets in ZooKeeper are (`/consumers/G/offsets/<t>/<p>`; the earliest
  offset of a partition without one), as the batch `spark-ingest` does -- a restarted one goes on from itself;
* after each batch it commits the batch's end offsets to those znodes, so `consumer-offset-checker` shows the
  stream's lag; when it starts on an existing checkpoint it first commits the offsets of the last batch the
  checkpoint holds as committed (a kill between a batch and its ZooKeeper commit loses no progress there);
* a progress line per batch: rows, rows/s, and the offsets behind the latest (total, min/avg/max over partitions);
* Ctrl-C (SIGINT) or SIGTERM lets the running batch finish, then stops the query.

The stream registers no owner znodes: it reads every partition of its subscription, so it should be the
group's only member (a batch `spark-ingest` of the same group would read the same partitions).
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zkbroker.topic_partition import TopicPartition

from .session import has_spark_context, spark_session

__all__ = ["StreamIngestConfig", "StreamIngestResult", "batch_end_offsets", "checkpoint_committed_offsets",
           "parse_trigger", "progress_line", "run_stream_ingest", "sink_files"]

log = logging.getLogger("consumer.spark_ingest")

POLL_S = 0.2  # how often the driver looks at the query's progress


@dataclass(frozen=True)
class StreamIngestConfig:
    zookeeper: str
    group: str
    output: Path
    checkpoint: Path
    topic: str | None = None
    whitelist: str | None = None
    format: str = "parquet"
    master: str = "local[2]"
    conf: tuple[tuple[str, str], ...] = ()
    fail_on_data_loss: bool = True
    trigger: str = "processing-time=10s"
    max_offsets_per_trigger: int | None = None
    source_options: tuple[tuple[str, str], ...] = ()  # further zkkafka source options, e.g. kafkaConsumer.pollTimeoutMs


@dataclass(frozen=True)
class StreamIngestResult:
    batches: int
    records: int
    seconds: float

    def summary(self) -> str:
        return (f"spark-ingest --stream: {self.records} records in {self.batches} batches, {self.seconds:.1f} s")


def parse_trigger(text: str) -> dict:
    """`available-now` or `processing-time=<interval>` as the keyword DataStreamWriter.trigger takes."""
    if text == "available-now":
        return {"availableNow": True}
    kind, sep, interval = text.partition("=")
    if kind == "processing-time" and sep and interval.strip():
        interval = interval.strip()
        if interval[-2:] == "ms" and interval[:-2].isdigit():
            return {"processingTime": f"{interval[:-2]} milliseconds"}
        if interval[-1:] == "s" and interval[:-1].isdigit():
            return {"processingTime": f"{interval[:-1]} seconds"}
    raise ValueError(f"--trigger must be available-now or processing-time=<N>s|<N>ms, got {text}")


def checkpoint_committed_offsets(checkpoint: Path) -> dict | None:
    """The end offsets (Spark's Kafka JSON) of the last batch the checkpoint holds as committed, or None.

    A checkpoint keeps `offsets/<batch>` (written before the batch runs) and `commits/<batch>` (written once the sink
    committed it)."""
    commits = checkpoint / "commits"
    done = sorted((int(p.name) for p in commits.iterdir() if p.name.isdigit()), reverse=True) \
        if commits.is_dir() else []
    for batch in done:
        offsets = batch_end_offsets(checkpoint, batch)
        if offsets is not None:
            return offsets
    return None


def batch_end_offsets(checkpoint: Path, batch: int) -> dict | None:
    """The end offsets (Spark's Kafka JSON) the checkpoint's offsets log gives batch `batch`, or None without it:
    `offsets/<batch>` holds a version line, the query's metadata, then one line of offsets per source."""
    try:
        lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    except FileNotFoundError:
        return None
    return json.loads(lines[2]) if len(lines) >= 3 else None


def sink_files(output: Path) -> tuple[int | None, list[Path]]:
    """The last batch a file sink committed and the files its metadata log names (`PATH/_spark_metadata`: one file
    per batch, `<batch>`, and every compactInterval batches `<batch>.compact` with every live entry so far; each a
    version line, then one JSON entry a line, action `add` or `delete`). What readers through Spark see."""
    log_dir = output / "_spark_metadata"
    batches: dict[int, Path] = {}
    compacted: dict[int, Path] = {}
    for entry in log_dir.iterdir() if log_dir.is_dir() else ():
        stem, _, suffix = entry.name.partition(".")
        if stem.isdigit() and suffix in ("", "compact"):
            (compacted if suffix else batches)[int(stem)] = entry
    base = max(compacted, default=None)
    live: dict[str, bool] = {}
    for path in [compacted[base]] if base is not None else []:
        _apply(path, live)
    for batch in sorted(b for b in batches if base is None or b > base):
        _apply(batches[batch], live)
    last = max([*batches, *compacted], default=None)
    return last, [Path(p.removeprefix("file://")) for p, kept in live.items() if kept]


def _apply(path: Path, live: dict[str, bool]) -> None:
    for line in path.read_text().splitlines()[1:]:
        if line.strip():
            entry = json.loads(line)
            live[entry["path"]] = entry.get("action", "add") == "add"


def progress_line(progress: dict) -> str:
    """One line for one finished batch of the query's progress report."""
    source = progress["sources"][0] if progress.get("sources") else {}
    end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
    behind = [max(0, latest[t][p] - end.get(t, {}).get(p, 0)) for t in latest for p in latest[t]]
    rate = progress.get("processedRowsPerSecond") or 0.0
    line = f"batch {progress['batchId']}: {progress['numInputRows']} rows, {rate:,.0f} rows/s"
    if behind:
        line += (f", {sum(behind)} offsets behind the latest (per partition min {min(behind)} / avg "
                 f"{sum(behind) / len(behind):.0f} / max {max(behind)})")
    return line


def _offsets(value) -> dict:
    """A source's offsets in a progress report: Spark's Kafka JSON as a string (`"null"` when the source reported
    none, e.g. no latest offset yet), or already parsed."""
    parsed = json.loads(value) if isinstance(value, str) else value
    return parsed if isinstance(parsed, dict) else {}


class _Stopper:
    """SIGINT and SIGTERM ask the query to stop once the batch it runs has finished."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self._previous = {}

    def __enter__(self) -> _Stopper:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested.is_set():  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.requested.set()
        print("spark-ingest --stream: stopping after the running batch (Ctrl-C again to stop at once)",
              file=sys.stderr, flush=True)

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


BatchListener = Callable[[dict], None]

# Spark waits a fixed 10 s (not configurable in Spark 4.3) for the Python worker that plans a Python data
# source's micro-batches to connect back; on a machine busy enough to take longer the query fails before
# its first batch. That failure is the only one worth a retry: the worker never ran, nothing was written.
TRANSIENT = "Python worker failed to connect back"
MAX_RESTARTS = 3


def is_transient(failure: str) -> bool:
    return TRANSIENT in failure


class StreamIngest:
    def __init__(self, config: StreamIngestConfig, spark, err=None, on_batch: BatchListener | None = None) -> None:
        self.config = config
        self.spark = spark
        self.err = err or sys.stderr
        self.on_batch = on_batch  # told of each batch's progress once its offsets are in ZooKeeper

    def run(self) -> StreamIngestResult:
        from consumer.offsets import ZkOffsetStore
        from zkbroker.zk.client import ZkClient

        c = self.config
        started = time.monotonic()
        zk = ZkClient(c.zookeeper, name="spark-ingest-stream")
        zk.start()
        try:
            offsets = ZkOffsetStore(zk, c.group)
            resumed = checkpoint_committed_offsets(c.checkpoint)
            if resumed:
                self._commit(offsets, resumed)
            self._batches = self._records = 0
            self._seen = -1
            restarts = 0
            with _Stopper() as stopper:
                while True:
                    query = self._start()
                    self._follow(query, offsets, stopper)
                    failure = query.exception()
                    if failure is None:
                        break
                    if not is_transient(str(failure)) or restarts >= MAX_RESTARTS or stopper.requested.is_set():
                        raise RuntimeError(f"the streaming query failed: {failure}")
                    # Restarting from the checkpoint is what a user would do by hand, and exactly once holds
                    # across it as across a SIGKILL: the checkpoint, not this process, knows what was written.
                    restarts += 1
                    print(f"spark-ingest --stream: {TRANSIENT} (a loaded machine); restarting the query from "
                          f"its checkpoint ({restarts} of {MAX_RESTARTS})", file=self.err, flush=True)
            return StreamIngestResult(self._batches, self._records, time.monotonic() - started)
        finally:
            zk.close()

    def _follow(self, query, offsets, stopper: _Stopper) -> None:
        """Until the query ends: each new batch's end offsets into ZooKeeper and a progress line; a stop
        request stops the query between batches."""
        while True:
            for progress in query.recentProgress:
                if progress["batchId"] <= self._seen:
                    continue
                self._seen = progress["batchId"]
                if progress["numInputRows"] or _offsets(progress["sources"][0].get("endOffset")):
                    self._commit(offsets, _offsets(progress["sources"][0]["endOffset"]))
                    self._batches += 1
                    self._records += progress["numInputRows"]
                    print(progress_line(progress), file=self.err, flush=True)
                    if self.on_batch is not None:
                        self.on_batch(progress)
            if not query.isActive:
                return
            if stopper.requested.is_set() and not query.status["isTriggerActive"]:
                query.stop()
                continue
            time.sleep(POLL_S)

    def _start(self):
        c = self.config
        reader = (self.spark.readStream.format("zkkafka")
                  .option("zookeeper.connect", c.zookeeper)
                  .option("startingOffsets", "group").option("group.id", c.group)  # a new checkpoint only
                  .option("failOnDataLoss", str(c.fail_on_data_loss).lower()))
        reader = reader.option("subscribe", c.topic) if c.topic is not None \
            else reader.option("subscribePattern", c.whitelist)
        if c.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(c.max_offsets_per_trigger))
        for key, value in c.source_options:
            reader = reader.option(key, value)
        return (reader.load().writeStream.format(c.format)
                .option("path", str(c.output)).option("checkpointLocation", str(c.checkpoint))
                .queryName(f"spark-ingest-{c.group}")
                .trigger(**parse_trigger(c.trigger)).start())

    def _commit(self, store, end: dict) -> None:
        """The batch's end offsets -- the next offset to read of each partition, as 0.8.2 commits -- into the
        group's znodes."""
        store.commit({TopicPartition(t, int(p)): int(o) for t, parts in end.items() for p, o in parts.items()})


def run_stream_ingest(config: StreamIngestConfig, spark=None, err=None,
                      on_batch: BatchListener | None = None) -> StreamIngestResult:
    if (config.topic is None) == (config.whitelist is None):
        raise ValueError("exactly one of --topic and --whitelist is required")
    parse_trigger(config.trigger)  # a bad trigger fails before Spark starts
    own_session = spark is None and not has_spark_context()
    spark = spark or spark_session(config.master, conf=dict(config.conf))
    try:
        return StreamIngest(config, spark, err, on_batch).run()
    finally:
        if own_session:
            spark.stop()
