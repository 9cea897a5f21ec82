"""`zkbroker spark-ingest`: exactly-once batch ingestion of topics into files, as a member of a 0.8.2 group.

    zkbroker spark-ingest --zookeeper ZK (--topic T | --whitelist RE) --group G --output PATH
                          [--format parquet] [--master local[2]|spark://HOST:PORT|yarn] [--conf key=value ...]
                          [--fail-on-data-loss true|false] [--isolation-level read_uncommitted|read_committed]

The job joins group G through the high-level consumer (`consumer/connector.py`): it registers under
`/consumers/G/ids`, takes part in the range rebalance and owns its partitions through ephemeral
`/consumers/G/owners/<t>/<p>` znodes -- so two jobs of one group split the partitions, and no other member reads
them while it runs. For every owned partition it reads from the group's committed offset (the earliest offset
when the group has none, like the console consumer's --from-beginning) up to the high watermark at planning,
through the `zkkafka` source, and then commits in this order:

1. Spark writes the data into a staging directory, `PATH/_zkkafka/staging/<batch>/` (hidden from readers);
2. the manifest `PATH/_zkkafka/<batch>.json` -- every offset range the batch covered -- is written to a temporary
   file, fsynced and renamed into place: the one atomic commit point of the batch;
3. the staging directory is renamed to `PATH/batch=<batch>/` (readers of PATH see a `batch` column);
4. the offsets are written to `/consumers/G/offsets/<t>/<p>`, each conditional on our owner znode (a member
   that lost a partition cannot move its offset).

A crash before 2 leaves a staging directory without a manifest: the next run deletes it (once its writer is no
longer a live member) and reads the same offsets again. A crash after 2 leaves a manifest: the next run
finishes 3 and 4 from it before planning, for the partitions it owns. So a re-run after a crash at any point
neither duplicates nor skips a record. Batches are numbered 1, 2, ...; a number is reserved by creating
`_zkkafka/staging/<batch>.owner` (naming the member) atomically, so jobs sharing PATH never collide.

A rebalance while the batch is being read (a second job joins, a member leaves, partitions are added) cancels
the Spark job before this member releases its partitions; the job then plans again with its new share. Before
step 2 the job checks, with a round trip to ZooKeeper, that its session still owns every partition of the
batch. (A member frozen between that check and the rename, past its session timeout, could still write a
manifest for partitions another member took over; the window is the time of one rename.)

`--isolation-level read_committed` (DESIGN §18; read_uncommitted by default, as Spark's source) plans each
partition up to its last stable offset instead of its high watermark and reads it with zkkafka's
`kafka.isolation.level=read_committed`: only what committed transactions and plain producers wrote lands in the
output, and the offsets committed move past the aborted records and the markers.

Spark runs on `--master` (local[N], a standalone master, YARN, Kubernetes) with the `--conf` settings given; its
executors need only pyspark and pyarrow, since the session ships our code to them (`session.py`, `pyfiles.py`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from consumer.assignors import ConsumerThreadId
from zkbroker.topic_partition import TopicPartition

from .output import Manifest, OutputLayout, data_bytes
from .session import has_spark_context, spark_session

__all__ = ["IngestConfig", "IngestError", "IngestResult", "add_command", "run_ingest"]

log = logging.getLogger("consumer.spark_ingest")

FORMATS = ("parquet", "orc", "json")
RECORDS_PER_TASK = 500_000  # Spark tasks of at most this many offsets: progress steps and load balance
FETCH_BYTES = 4 * 1024 * 1024  # per fetch: a quarter of the broker's and our per-request work of 0.8.2's 1 MiB
MAX_ATTEMPTS = 10  # batches aborted by rebalances before the job gives up


class IngestError(RuntimeError):
    """The ingest job cannot go on; the message says why."""


class _Revoked(Exception):
    """A rebalance took (or may have taken) partitions of the batch being read: abort it and plan again."""


# A documented test seam (README: Spark, "Crashes"): with CRASH_AT_VARIABLE=<stage> in its environment the job
# kills itself (SIGKILL) at that step of its commit, so tests can prove a re-run recovers from a crash at each
# one. Unset, it does nothing.
CRASH_AT_VARIABLE = "ZKBROKER_TEST_CRASH_AT"
CRASH_STAGES = ("joined", "data-written", "manifest-written", "published")


def _checkpoint(stage: str) -> None:
    """One of CRASH_STAGES reached: the test seam's SIGKILL if CRASH_AT_VARIABLE names it."""
    if os.environ.get(CRASH_AT_VARIABLE) == stage:
        os.kill(os.getpid(), signal.SIGKILL)


# ---- the job -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IngestConfig:
    zookeeper: str
    group: str
    output: Path
    topic: str | None = None
    whitelist: str | None = None
    format: str = "parquet"
    master: str = "local[2]"
    conf: tuple[tuple[str, str], ...] = ()  # Spark settings, as spark-submit's --conf key=value
    fail_on_data_loss: bool = True
    isolation_level: str = "read_uncommitted"  # or read_committed: up to the last stable offset, committed only
    session_timeout_ms: int = 6000
    progress: bool | None = None  # None: when stderr is a terminal
    command_config: str | None = None  # --command-config: Kafka's client security properties (a secured cluster)

    def security_properties(self) -> dict[str, str]:
        """The --command-config file's security properties (security.protocol, sasl.*, ssl.*); none without it."""
        from zkbroker.client.security import CLIENT_SECURITY_CONFIGS
        from zkbroker.config import parse_properties

        if not self.command_config:
            return {}
        try:
            props = parse_properties(Path(self.command_config).read_text(encoding="utf-8"))
        except OSError as e:
            raise IngestError(f"Cannot read --command-config {self.command_config}: {e.strerror or e}") from None
        return {key.name: props[key.name] for key in CLIENT_SECURITY_CONFIGS if key.name in props}


@dataclass(frozen=True)
class IngestResult:
    batch: int | None  # None: nothing new to ingest
    records: int
    partitions: int
    bytes: int
    seconds: float
    path: Path | None
    recovered: tuple[str, ...] = ()  # what recovery did, one sentence each

    def summary(self) -> str:
        where = f" -> {self.path}" if self.path else " (nothing new)"
        return (f"spark-ingest: {self.records} records from {self.partitions} partitions, {self.bytes} bytes in "
                f"{self.seconds:.1f} s{where}")


class _Membership:
    """The rebalance listener: a revocation waits until the batch in flight is aborted or committed."""

    def __init__(self, job: IngestJob) -> None:
        self.job = job

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.job.revoked()

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.job.assigned()
        return None


class IngestJob:
    def __init__(self, config: IngestConfig, spark, err=None) -> None:
        self.config = config
        self.spark = spark
        self.err = err or sys.stderr
        self.layout = OutputLayout(config.output)
        self.connector = None
        self._state = threading.Condition()
        self._generation = 0
        self._phase: str | None = None  # "reading" | "committing" while a batch is in flight
        self._settled_after = -1  # a revocation was seen: wait for the connector's rebalance count to pass this
        self._job_group = f"zkbroker-spark-ingest-{id(self)}"

    # ---- the rebalance listener's side (the connector's rebalance thread) --------------------------------------

    def revoked(self) -> None:
        with self._state:
            self._generation += 1
            self._settled_after = self.connector.rebalances
            if self._phase == "reading":
                log.info("Rebalance: cancelling the Spark job of the batch in flight")
                self.spark.sparkContext.cancelJobGroup(self._job_group)
            while self._phase is not None:
                self._state.wait()

    def assigned(self) -> None:
        with self._state:
            self._generation += 1

    # ---- running ------------------------------------------------------------------------------------------

    def run(self) -> IngestResult:
        from consumer.connector import ZookeeperConsumerConnector
        from consumer.subscription import Whitelist

        c = self.config
        started = time.monotonic()
        self.connector = ZookeeperConsumerConnector({
            "zookeeper.connect": c.zookeeper, "group.id": c.group, "auto.commit.enable": False,
            "zookeeper.session.timeout.ms": c.session_timeout_ms, "client.id": "zkbroker-spark-ingest",
            # Another member's batch may hold its partitions for as long as cancelling its Spark job takes.
            "rebalance.max.retries": 10, "rebalance.owner.wait.ms": 30_000, **c.security_properties(),
        }, listener=_Membership(self))
        try:
            if c.topic is not None:
                self.connector.create_message_streams({c.topic: 1})
            else:
                self.connector.create_message_streams_by_filter(Whitelist(c.whitelist), 1)
            _checkpoint("joined")
            for _ in range(MAX_ATTEMPTS):
                try:
                    return self._batch(started)
                except _Revoked:
                    log.info("The group rebalanced while the batch was read; planning again")
            raise IngestError(f"the group rebalanced during each of {MAX_ATTEMPTS} attempts")
        finally:
            self.connector.shutdown()

    def _wait_settled(self) -> None:
        """After a revocation, wait until the rebalance that followed is done (its assignment may be empty, so no
        assignment callback says so), or has failed."""
        deadline = time.monotonic() + 120
        while self.connector.rebalances <= self._settled_after:
            if self.connector.last_rebalance_error is not None:
                raise IngestError(f"the consumer could not rebalance: {self.connector.last_rebalance_error}")
            if time.monotonic() > deadline:
                raise IngestError("the group did not finish rebalancing within 120 s")
            time.sleep(0.05)

    def _batch(self, started: float) -> IngestResult:
        self._wait_settled()
        with self._state:
            generation = self._generation
            owned = self.connector.owned_partitions()
            self._phase = "reading"
        batch = None
        try:
            recovered = self._recover(owned)
            ranges, lost = self._plan(owned)
            if not ranges:
                return IngestResult(None, 0, 0, 0, time.monotonic() - started, None, recovered)
            batch = self.layout.reserve(self.config.group, self.connector.consumer_id)
            records = self._read(batch, ranges, generation)
            _checkpoint("data-written")
            with self._state:
                if generation != self._generation:
                    raise _Revoked
                self._phase = "committing"
            if not self._still_owned([TopicPartition(t, p) for t, p, _, _ in ranges]):
                raise _Revoked
            manifest = Manifest(batch, self.config.group, self.connector.consumer_id, self.config.zookeeper,
                                self.config.format, ranges, records, lost, time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                         time.gmtime()))
            self.layout.commit_manifest(manifest)
            batch_committed = batch
            batch = None  # from here on the batch is committed: never cleaned up, only finished
            _checkpoint("manifest-written")
            self.layout.publish(batch_committed)
            _checkpoint("published")
            self._commit_offsets({TopicPartition(t, p): end for t, p, _, end in ranges})
            path = self.layout.data(batch_committed)
            return IngestResult(batch_committed, records, len({(t, p) for t, p, _, _ in ranges}), data_bytes(path),
                                time.monotonic() - started, path, recovered)
        except BaseException as e:
            if batch is not None and isinstance(e, Exception):
                self.layout.release(batch)  # not committed: nothing of it may stay
            raise
        finally:
            with self._state:
                self._phase = None
                self._state.notify_all()

    # ---- recovery -------------------------------------------------------------------------------------------

    def _recover(self, owned: list[TopicPartition]) -> tuple[str, ...]:
        """Finish what crashed runs committed and clear what they left uncommitted (module docstring)."""
        done = []
        manifests = self.layout.manifests()
        committed = {m.batch for m in manifests}
        for batch, owner in sorted(self.layout.reservations().items()):
            if batch in committed:
                if self.layout.publish(batch):
                    done.append(f"published batch {batch} committed by {owner.get('consumer')}")
            elif not self._alive(owner):
                self.layout.release(batch)
                done.append(f"removed uncommitted batch {batch} of {owner.get('consumer')}")
        latest: dict[TopicPartition, tuple[Manifest, int, int]] = {}  # the last batch of each owned partition
        for m in manifests:
            for topic, partition, start, end in m.ranges:
                tp = TopicPartition(topic, partition)
                if tp in owned and (tp not in latest or end >= latest[tp][2]):
                    latest[tp] = (m, start, end)
        missing = sorted({m.batch for m, _, _ in latest.values() if not self.layout.data(m.batch).exists()})
        for batch in missing:
            # Committed, but its data is gone: a member frozen past its session timeout wrote the manifest after
            # its staging directory was removed. Its offsets stay, so the records are read again.
            log.error("Batch %d is committed but %s is missing; its offsets are not committed", batch,
                      self.layout.data(batch))
        mine = [tp for tp, (m, _, _) in latest.items() if m.batch not in missing]
        if mine:
            offsets = self.connector.offsets.fetch(mine)
            forward = {tp: latest[tp][2] for tp in mine
                       if offsets[tp] is None or latest[tp][1] <= offsets[tp] < latest[tp][2]}
            if forward:
                self._commit_offsets(forward)
                done.append("committed offsets recorded in manifests: " + ", ".join(
                    f"{tp}={offset}" for tp, offset in sorted(forward.items())))
        for sentence in done:
            log.info("Recovery: %s", sentence)
        return tuple(done)

    def _alive(self, owner: dict) -> bool:
        from zkbroker.zk import paths

        group, consumer = owner.get("group"), owner.get("consumer")
        if not group or not consumer:
            return False
        if consumer == self.connector.consumer_id:
            return False  # ours, left by an attempt of this run that a rebalance aborted
        data, _ = self.connector.zk.get(paths.consumer_id_path(group, consumer))
        return data is not None

    # ---- planning, reading, committing ---------------------------------------------------------------------

    def _plan(self, owned: list[TopicPartition]) -> tuple[list[list], list[list]]:
        """[topic, partition, start, end] per owned partition with records to read, and the ranges lost."""
        from consumer.fetcher import live_brokers
        from consumer.simple import READ_COMMITTED, READ_UNCOMMITTED, SimpleConsumer
        from zkbroker.client.security import ClientSecurity

        if not owned:
            return [], []
        committed = self.connector.offsets.fetch(owned)
        brokers = [(b.host, b.port) for b in live_brokers(self.connector.zk)]
        if not brokers:
            raise IngestError(f"no broker is registered in {self.config.zookeeper}")
        ranges, lost = [], []
        isolation = READ_COMMITTED if self.config.isolation_level == "read_committed" else READ_UNCOMMITTED
        with SimpleConsumer(brokers, client_id="zkbroker-spark-ingest",
                            security=ClientSecurity.from_file(self.config.command_config)) as consumer:
            for tp in owned:
                earliest = consumer.earliest_offset(tp.topic, tp.partition)
                end = consumer.latest_offset(tp.topic, tp.partition, isolation)
                start = committed.get(tp)
                start = earliest if start is None else start
                if start < earliest:
                    from .planner import DataLossError, report_data_loss

                    try:
                        report_data_loss(self.config.fail_on_data_loss, tp.topic, tp.partition, start, earliest)
                    except DataLossError as e:
                        raise IngestError(f"{e} (spark-ingest: --fail-on-data-loss false)") from None
                    lost.append([tp.topic, tp.partition, start, earliest])
                    start = earliest
                if start > end:
                    log.warning("The committed offset %d of %s for group %s is past its log end %d (an unclean "
                                "leader election?); nothing to read there", start, tp, self.config.group, end)
                    continue
                if start < end:
                    ranges.append([tp.topic, tp.partition, start, end])
        return ranges, lost

    def _read(self, batch: int, ranges: list[list], generation: int) -> int:
        """Run the Spark job: zkkafka over exactly these ranges, written to the batch's staging directory."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        assign, starting, ending = {}, {}, {}
        for topic, partition, start, end in ranges:
            assign.setdefault(topic, []).append(partition)
            starting.setdefault(topic, {})[str(partition)] = start
            ending.setdefault(topic, {})[str(partition)] = end
        total = sum(end - start for _, _, start, end in ranges)
        df = (self.spark.read.format("zkkafka")
              .option("zookeeper.connect", self.config.zookeeper)
              .option("assign", json.dumps(assign))
              .option("startingOffsets", json.dumps(starting))
              .option("endingOffsets", json.dumps(ending))
              .option("failOnDataLoss", str(self.config.fail_on_data_loss).lower())
              .option("kafka.isolation.level", self.config.isolation_level)
              .option("minPartitions", str(self.spark.sparkContext.defaultParallelism))
              .option("maxRecordsPerPartition", str(RECORDS_PER_TASK))
              .option("fetch.message.max.bytes", str(FETCH_BYTES))
              .option("kafka.consumer.config", self.config.command_config or "")
              .load())
        observation = Observation(f"batch-{batch}")
        df = df.observe(observation, F.count(F.lit(1)).alias("records"))
        sc = self.spark.sparkContext
        sc.setJobGroup(self._job_group, f"spark-ingest batch {batch} of group {self.config.group}",
                       interruptOnCancel=True)
        progress = _Progress(sc, self._job_group, total, self.err, self.config.progress)
        try:
            with self._state:
                if generation != self._generation:
                    raise _Revoked
            progress.start()
            writer = df.write.format(self.config.format)
            if self.config.format == "parquet":
                # Payloads rarely repeat and nobody filters on their byte order: no dictionary (Parquet would try
                # one for every column chunk, then give up) and no min/max statistics for the value column.
                writer = (writer.option("parquet.enable.dictionary#value", "false")
                          .option("parquet.column.statistics.enabled#value", "false"))
            writer.save(str(self.layout.staging(batch)))
        except Exception as e:
            with self._state:
                if generation != self._generation:
                    raise _Revoked from e
            raise
        finally:
            progress.stop()
            sc.setLocalProperty("spark.jobGroup.id", None)
        return int(observation.get["records"])

    def _still_owned(self, tps: Iterable[TopicPartition]) -> bool:
        """Our session is alive (a round trip says so) and holds the owner znode of every partition."""
        from zkbroker.zk import paths

        zk = self.connector.zk
        if not zk.confirm_session():
            return False
        mine = str(ConsumerThreadId(self.connector.consumer_id, 0))
        for tp in tps:
            data, stat = zk.get(paths.consumer_owner_path(self.config.group, tp.topic, tp.partition))
            if data is None or data.decode(errors="replace") != mine or stat.ephemeralOwner != zk.session_id:
                return False
        return True

    def _commit_offsets(self, offsets: dict[TopicPartition, int]) -> None:
        mine = str(ConsumerThreadId(self.connector.consumer_id, 0))
        skipped = self.connector.offsets.commit_owned(offsets, dict.fromkeys(offsets, mine),
                                                      self.connector.zk.session_id)
        if skipped:
            log.warning("Lost %s before committing their offsets; their next owner commits them from the manifest",
                        ", ".join(map(str, skipped)))


class _Progress(threading.Thread):
    """A one-line progress bar of the batch's Spark job on a terminal: tasks done, records (tasks are ranges of
    near-equal size, so records done ~ total x tasks done / tasks), seconds."""

    def __init__(self, sc, job_group: str, total_records: int, stream, enabled: bool | None) -> None:
        super().__init__(daemon=True, name="spark-ingest-progress")
        self.sc = sc
        self.job_group = job_group
        self.total = total_records
        self.stream = stream
        self.enabled = stream.isatty() if enabled is None else enabled
        self._stop_event = threading.Event()
        self._started = time.monotonic()

    def start(self) -> None:
        if self.enabled:
            super().start()

    def run(self) -> None:
        while not self._stop_event.wait(0.25):
            self._draw()

    def stop(self) -> None:
        if self.enabled and self.is_alive():
            self._stop_event.set()
            self.join()
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self) -> None:
        tracker = self.sc.statusTracker()
        done = tasks = 0
        for job_id in tracker.getJobIdsForGroup(self.job_group):
            job = tracker.getJobInfo(job_id)
            for stage_id in (job.stageIds if job else ()):
                stage = tracker.getStageInfo(stage_id)
                if stage:
                    done += stage.numCompletedTasks
                    tasks += stage.numTasks
        share = done / tasks if tasks else 0.0
        width = 30
        bar = "#" * int(share * width) + "-" * (width - int(share * width))
        self.stream.write(f"\r[{bar}] {done}/{tasks} tasks, ~{int(self.total * share)}/{self.total} records, "
                          f"{time.monotonic() - self._started:.0f} s ")
        self.stream.flush()


def run_ingest(config: IngestConfig, spark=None, err=None) -> IngestResult:
    """Run one ingest batch (see the module docstring). `spark`: a session to use (default: spark_session)."""
    if (config.topic is None) == (config.whitelist is None):
        raise IngestError("exactly one of --topic and --whitelist is required")
    if config.format not in FORMATS:
        raise IngestError(f"--format must be one of {', '.join(FORMATS)}, got {config.format}")
    started = time.monotonic()
    own_session = spark is None and not has_spark_context()
    spark = spark or spark_session(config.master, conf=dict(config.conf))
    try:
        result = IngestJob(config, spark, err).run()
    finally:
        if own_session:
            spark.stop()
    return IngestResult(result.batch, result.records, result.partitions, result.bytes, time.monotonic() - started,
                        result.path, result.recovered)


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text}")
    return text.lower() == "true"


def _spark_setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text}")
    return key.strip(), value


def _run(args: argparse.Namespace) -> int:
    from zkbroker import logconfig

    logconfig.configure("DEBUG" if args.verbose else "WARNING")
    if args.stream:
        return _run_stream(args)
    for flag, value in (("--checkpoint", args.checkpoint), ("--trigger", args.trigger),
                        ("--max-offsets-per-trigger", args.max_offsets_per_trigger)):
        if value is not None:
            raise SystemExit(f"zkbroker spark-ingest: {flag} goes with --stream")
    config = IngestConfig(zookeeper=args.zookeeper, group=args.group, output=Path(args.output), topic=args.topic,
                          whitelist=args.whitelist, format=args.format, master=args.master,
                          conf=tuple(args.conf), fail_on_data_loss=args.fail_on_data_loss,
                          isolation_level=args.isolation_level, command_config=args.command_config)
    result = run_ingest(config)
    print(result.summary(), flush=True)
    return 0


def _run_stream(args: argparse.Namespace) -> int:
    from .stream_ingest import StreamIngestConfig, parse_trigger, run_stream_ingest

    if args.checkpoint is None:
        raise SystemExit("zkbroker spark-ingest: --stream needs --checkpoint DIR (where the query keeps its offsets)")
    trigger = args.trigger or "processing-time=10s"
    try:
        parse_trigger(trigger)
    except ValueError as e:
        raise SystemExit(f"zkbroker spark-ingest: {e}") from None
    config = StreamIngestConfig(zookeeper=args.zookeeper, group=args.group, output=Path(args.output),
                                checkpoint=Path(args.checkpoint), topic=args.topic, whitelist=args.whitelist,
                                format=args.format, master=args.master, conf=tuple(args.conf),
                                fail_on_data_loss=args.fail_on_data_loss, trigger=trigger,
                                max_offsets_per_trigger=args.max_offsets_per_trigger,
                                source_options=(("kafka.isolation.level", args.isolation_level),
                                                *((("kafka.consumer.config", args.command_config),)
                                                  if args.command_config else ())))
    result = run_stream_ingest(config)
    print(result.summary(), flush=True)
    return 0


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return int(text)


def add_command(commands) -> None:
    parser = commands.add_parser("spark-ingest", help="ingest topics into files with Spark, exactly once, as a "
                                                      "member of a consumer group")
    parser.add_argument("--zookeeper", required=True, metavar="ZK", help="ZooKeeper connect string host:port[/chroot]")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", metavar="T", help="the topic to ingest")
    which.add_argument("--whitelist", metavar="RE", help="ingest every topic this regex matches")
    parser.add_argument("--group", required=True, metavar="G", help="the consumer group the job joins")
    parser.add_argument("--output", required=True, metavar="PATH", help="the output directory")
    parser.add_argument("--format", default="parquet", choices=FORMATS, help="the output format (default parquet)")
    parser.add_argument("--master", default="local[2]", metavar="MASTER",
                        help="the Spark master: local[N], spark://HOST:PORT, yarn, k8s://https://HOST:PORT "
                             "(default local[2])")
    parser.add_argument("--conf", action="append", default=[], type=_spark_setting, metavar="KEY=VALUE",
                        help="a Spark setting, as spark-submit's --conf (repeatable)")
    parser.add_argument("--fail-on-data-loss", default=True, type=_boolean, metavar="true|false",
                        help="fail when offsets to ingest were deleted by retention (default true); false skips "
                             "them with a warning")
    parser.add_argument("--isolation-level", default="read_uncommitted",
                        choices=("read_uncommitted", "read_committed"),
                        help="read_committed ingests only what committed transactions (and plain producers) wrote, "
                             "up to the last stable offset (default read_uncommitted, as Spark's source)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="Kafka's client security properties (security.protocol, sasl.*, ssl.* with PEM "
                             "files) for a secured cluster, as the other tools' --command-config")
    parser.add_argument("--stream", action="store_true",
                        help="run as a Structured Streaming query that keeps ingesting (needs --checkpoint)")
    parser.add_argument("--checkpoint", metavar="DIR", help="with --stream: the query's checkpoint directory")
    parser.add_argument("--trigger", metavar="available-now|processing-time=10s",
                        help="with --stream: when micro-batches run (default processing-time=10s)")
    parser.add_argument("--max-offsets-per-trigger", type=_positive_int, metavar="N",
                        help="with --stream: at most N offsets a micro-batch")
    parser.set_defaults(run=_run)
