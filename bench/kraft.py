"""KRaft brokers on real processes (three controllers, three brokers, started from the CLI as the integration tests
start them, tests/integration/kraft_support.py): N partitions created through a broker with confluent-kafka's
AdminClient (replication factor 3), then

* controller failover as the brokers see it: SIGKILL of the active controller, then the time until the survivors
  agree on a new leader, and until a CreateTopics sent to a broker (which forwards it, KIP-590) is answered by the
  new active controller; the killed controller is restarted and the cluster settles before the next round;
* broker restart: SIGTERM of a broker (a controlled shutdown through heartbeats, timed), then its restart until it
  is unfenced (its "Unfenced: serving" line), from its own metadata snapshot (brokers snapshot every 16 KiB here)
  and log.

Medians of the rounds, beside the configured controller.quorum.fetch.timeout.ms and broker.heartbeat.interval.ms.
With --stand-ins, the controllers alone at 10,000 or 100,000 partitions (bench/kraft_vs_zk.py runs ZooKeeper mode
beside it). The brokers' open-files limit is raised for them as far as this process may (root with
CAP_SYS_RESOURCE raises the hard limit); --replication-factor 1 fits 10,000 partitions under a hard limit of 20,000.

Usage: python bench/kraft.py [--partitions 600] [--rounds 5] [--replication-factor 3] [--stand-ins] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.harness import wait_for  # noqa: E402
from tests.integration.kraft_support import Controller, leader_of, make_kraft_cluster, stop_all  # noqa: E402
from zkbroker.client.connection import BrokerConnection  # noqa: E402
from zkbroker.log.open_files import FILES_PER_PARTITION, RESERVE, files_needed  # noqa: E402
from zkbroker.logconfig import configure  # noqa: E402
from zkbroker.metadata.records import NO_LEADER_CHANGE, PARTITION, PARTITION_CHANGE, TOPIC, record  # noqa: E402
from zkbroker.protocol.api import ApiKey  # noqa: E402
from zkbroker.protocol.errors import ErrorCode  # noqa: E402
from zkbroker.raft.config import QuorumConfig  # noqa: E402
from zkbroker.raft.metadata_log import MetadataLog  # noqa: E402
from zkbroker.raft.raft_manager import RaftManager  # noqa: E402
from zkbroker.raft.snapshot_policy import SnapshotPolicy  # noqa: E402
from zkbroker.server.broker_lifecycle import BrokerLifecycle, BrokerState, Listener  # noqa: E402
from zkbroker.server.broker_server import FETCH_MAX_BYTES  # noqa: E402
from zkbroker.server.metadata_publisher import BrokerSnapshotWriter  # noqa: E402

PARTITIONS_PER_TOPIC = 100
SETTLE_S = 3.0
FETCH_TIMEOUT_MS = 2000  # controller.quorum.fetch.timeout.ms (the default)
HEARTBEAT_MS = 2000  # broker.heartbeat.interval.ms (the default)
SESSION_MS = 9000  # broker.session.timeout.ms (the default)
# A stand-in snapshots its image every 4 MiB of records committed, about the size of the image itself at 100,000
# partitions (~45 bytes a PartitionRecord), so a restart loads one image and replays at most one more. A broker's
# default, metadata.log.max.record.bytes.between.snapshots, is 20 MiB: about 600,000 records, which this
# interpreter replays in some 25 s where Kafka's JVM takes a second or two; without snapshots at all a stand-in's
# restart replayed its whole log, growing round by round (6 s in round 1, 41 s in round 4, at 100,000).
STAND_IN_SNAPSHOT_BYTES = 4 * 1024 * 1024
ISR_REPAIR_S = 1.0  # how often a stand-in leader asks for its followers back in the ISR


def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create(client, name: str, partitions: int, replication_factor: int = 3) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    for attempt in range(3):
        futures = client.create_topics([NewTopic(name, partitions, replication_factor)], operation_timeout=60,
                                       request_timeout=600)
        try:
            futures[name].result(600)  # a loaded machine, thousands of partitions: minutes, not seconds
            return
        except KafkaException as e:
            if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:  # a retried request whose answer was lost
                return
            if e.args[0].code() != KafkaError._TIMED_OUT or attempt == 2:  # e.g. a broker just restarted
                raise


def acceptance(bootstrap: str, records: int, topic: str = "acceptance") -> None:
    """Issue 25's acceptance: a topic created with confluent-kafka's AdminClient, `records` records produced with
    acks=all, read back by a subscribe() group, by kafka-python and by kcat, and by zkkafka (PySpark) through
    kafka.bootstrap.servers. Each reader's count of distinct keys must be `records`."""
    from confluent_kafka import Consumer, Producer

    create(admin(bootstrap), topic, 6)
    failed: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=b"%d" % i, value=b"record %d" % i,
                                 on_delivery=lambda err, _msg: err and failed.append(str(err)))
                break
            except BufferError:
                producer.poll(0.1)
    left = producer.flush(300)
    print(f"acceptance: {records:,} records produced with acks=all in {time.monotonic() - started:.1f} s "
          f"({len(failed)} failed, {left} unacknowledged)", flush=True)

    def report(reader: str, keys: set[bytes], since: float) -> None:
        verdict = "all" if len(keys) == records else f"MISSING {records - len(keys):,}"
        print(f"  {reader}: {len(keys):,} distinct records read in {time.monotonic() - since:.1f} s ({verdict})",
              flush=True)

    since, keys = time.monotonic(), set()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "acceptance", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    while len(keys) < records and time.monotonic() - since < 300:
        for msg in consumer.consume(10_000, 1.0):
            if not msg.error():
                keys.add(msg.key())
    consumer.close()
    report("confluent-kafka, a subscribe() group", keys, since)

    from kafka import KafkaConsumer

    since = time.monotonic()
    reader = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None,
                           consumer_timeout_ms=30_000)
    keys = {msg.key for msg in reader}
    reader.close()
    report("kafka-python", keys, since)

    since = time.monotonic()
    done = subprocess.run([shutil.which("kcat") or "kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning",
                           "-e", "-q", "-f", "%k\n"], capture_output=True, timeout=300)
    report("kcat", set(done.stdout.splitlines()), since)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from consumer.spark.session import spark_session

    since = time.monotonic()
    spark = spark_session("local[2]")
    try:
        frame = (spark.read.format("zkkafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                 .load())
        keys = {bytes(row.key) for row in frame.select("key").distinct().collect()}
    finally:
        spark.stop()
    report("zkkafka (PySpark local[2]) through kafka.bootstrap.servers", keys, since)


def unfenced(broker, before: int) -> bool:
    return len(broker.log_lines("Unfenced: serving")) > before


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, default=600)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--records", type=int, default=0,
                   help="the acceptance run: a topic created with confluent-kafka's AdminClient, this many records "
                        "produced with acks=all, read back by a subscribe() group, kafka-python and kcat")
    p.add_argument("--replication-factor", type=int, default=3, choices=(1, 2, 3),
                   help="of the bench's topics: a broker holds partitions x this / 3 logs, three files each")
    p.add_argument("--stand-ins", action="store_true",
                   help="real controllers and stand-in brokers (the controller alone, at 100,000 partitions)")
    p.add_argument("--keep", metavar="DIR", help="keep the cluster's directories here")
    args = p.parse_args(argv)
    if args.partitions < 1 or args.rounds < 1 or args.records < 0:
        p.error("--partitions and --rounds must be positive, --records not negative")
    return args


def stand_in_run(partitions: int, rounds: int, root: Path, out=print) -> dict[str, list[float]]:
    """Three controllers, three stand-ins, `partitions` partitions, `rounds` rounds of kraft_rounds."""
    with StandInCluster(root) as cluster:
        created = cluster.create(partitions)
        cluster.rebalance()
        out(f"  KRaft: {partitions:,} partitions created through the active controller in {created:.1f} s "
            f"(setup); leaderships {cluster.led()}")
        _caught_up(cluster)
        return kraft_rounds(cluster, rounds, out)


MAX_PARTS_RECORDS = 2000  # controller/quorum/events.py's MAX_RECORDS_PER_BATCH


def in_memory_handover(partitions: int, out=print, max_parts: int = 20) -> dict[str, float | None]:
    """The quorum controller alone, at partition counts no set of processes here can be given in the time (a
    million: every PartitionRecord encoded once and decoded by two followers and every broker, about a millisecond
    of Python each on this machine): a standby holding `partitions` partitions (replication factor 3 over brokers
    1-3, each leading a third; the records replayed straight into it, as its replay of the log would), elected on
    the unit tests' in-memory log (tests/unit/controller/quorum/helpers.py: each record appended is encoded, and
    decoded for the other nodes, as through the real log, whose leader gets its own records back as it appended
    them; a commit is immediate, where a real one waits for a follower's fetch). Then,
    in ms: election -> active (its NoOpRecord committed), -> the first leadership change committed (broker 1 asks
    for a controlled shutdown: the handover), -> the whole controlled shutdown (broker 1 leads nothing) if it
    takes at most `max_parts` parts, and the time a part takes."""
    import random

    from tests.unit.controller.quorum.helpers import MemoryLog, heartbeat, lead, make_controller, register_brokers
    from zkbroker.metadata.partition import PartitionRegistration

    log = MemoryLog()
    old = make_controller(log, node_id=3001)
    standby = make_controller(log, node_id=3002)
    lead(log, old)
    epochs = register_brokers(log, old, 1, 2, 3)
    offset = log.end_offset
    rng = random.Random(1)
    started = time.monotonic()
    for t, first in enumerate(range(0, partitions, 10_000)):
        topic_id = rng.randbytes(16)
        standby._replay(record(TOPIC, name=f"bench-{t}", topic_id=topic_id), offset)
        offset += 1
        for p in range(min(10_000, partitions - first)):
            replicas = tuple((p + j) % 3 + 1 for j in range(3))
            standby._replay(PartitionRegistration(replicas, replicas, replicas[0]).to_record(topic_id, p), offset)
            offset += 1
        standby.poll(0)  # the driver's tick: the heap frozen every 10,000 records, as it would be
    log.end_offset = log.high_watermark = offset
    standby.last_committed_offset = standby.last_applied_offset = offset - 1
    out(f"  in memory: a standby holding {partitions:,} partitions built in {time.monotonic() - started:.1f} s "
        f"(setup)")
    del log.clients[old.config.node_id]  # the old active controller is gone (it never had the image built here)
    elected = time.monotonic()
    log.elect(standby.config.node_id)  # the standby leads the next epoch
    standby.poll(0)  # its NoOpRecord
    log.commit()
    active = time.monotonic()
    answer = standby.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_shut_down=True))
    standby.poll(0)  # the first part: up to 2,000 leadership changes
    log.commit()
    handover = time.monotonic()
    parts = 1
    while (standby.replication.leads_any(1) or standby.has_work) and parts < max_parts:
        standby.poll(0)
        log.commit()
        parts += 1
    done = time.monotonic()
    whole = not standby.replication.leads_any(1)
    assert not whole or (answer.done and not answer.error)
    figures = {"active": (active - elected) * 1000, "handover": (handover - elected) * 1000,
               "shutdown": (done - active) * 1000 if whole else None, "per_part": (done - active) * 1000 / parts}
    shutdown = (f"controlled shutdown of {partitions // 3:,} leaderships {figures['shutdown']:.0f} ms" if whole else
                f"controlled shutdown of {partitions // 3:,} leaderships not run to its end (the first {parts} parts)")
    out(f"  in memory, {partitions:,} partitions: election -> active {figures['active']:.0f} ms, -> first leadership "
        f"change committed {figures['handover']:.0f} ms, {shutdown}: {figures['per_part']:.0f} ms a part of "
        f"{MAX_PARTS_RECORDS:,} records; load {os.getloadavg()[0]:.1f}")
    return figures


def raise_nofile_limit(need: int) -> tuple[int, int]:
    """This process's RLIMIT_NOFILE, which the brokers it starts inherit, raised to at least `need` where the hard
    limit allows or root may raise it (up to /proc/sys/fs/nr_open); returns (soft, hard) as they are then."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        try:
            ceiling = int(Path("/proc/sys/fs/nr_open").read_text())
        except (OSError, ValueError):
            ceiling = need
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, ceiling), min(need, ceiling)))
        except (ValueError, OSError):  # not root (CAP_SYS_RESOURCE): the hard limit stays
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    else:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ms (median of {len(values)})" if values else "-"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--stand-in":
        stand_in_main(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
        return 0
    args = parse_args()
    if args.stand_ins:
        root = Path(args.keep or tempfile.mkdtemp(prefix="bench-kraft-"))
        try:
            f = stand_in_run(args.partitions, args.rounds, root)
        finally:
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
        print(f"{args.partitions:,} partitions, 3 controllers and 3 stand-in brokers; load average "
              f"{os.getloadavg()[0]:.1f}")
        print(f"controller failover from the kill: {median_ms(f['from_kill'])}; the handover (election -> first "
              f"leadership change committed): {median_ms(f['handover'])} (active after {median_ms(f['active'])}; "
              f"applied by a broker after {median_ms(f['served'])})")
        print(f"controlled shutdown of a broker leading a third: {median_ms(f['shutdown'])}; restart to serving: "
              f"{median_ms(f['restart'])}")
        return 0
    # Every broker holds every partition (replication factor 3 over 3 brokers), files_needed() descriptors for
    # them: the limit its processes inherit from this one raised to fit (as root, the hard limit too; a broker
    # raises its own soft limit to the hard one at start, and says so in its log when that is too few).
    held = -(-args.partitions * args.replication_factor // 3)  # the logs a broker holds, spread over three
    need = files_needed(held)
    soft, hard = raise_nofile_limit(need)
    print(f"open-files limit (RLIMIT_NOFILE) for the brokers: {soft:,} (need about {need:,})", flush=True)
    if soft != resource.RLIM_INFINITY and need > soft:
        fits = ((soft - RESERVE) // FILES_PER_PARTITION * 3 // args.replication_factor // PARTITIONS_PER_TOPIC
                * PARTITIONS_PER_TOPIC)
        print(f"{args.partitions:,} partitions need ~{need:,} open files per broker, the limit here is {soft:,} and "
              f"cannot be raised (not root, or no CAP_SYS_RESOURCE): running {fits:,} (a lower "
              f"--replication-factor, or --stand-ins, for more)")
        args.partitions = fits
    root = Path(args.keep or tempfile.mkdtemp(prefix="bench-kraft-"))
    controllers, brokers = make_kraft_cluster(root, metadata_log_max_record_bytes_between_snapshots=16384)
    try:
        for node in (*controllers, *brokers):
            node.start()
        leader_of(controllers, timeout_s=120)
        wait_for(lambda: all(unfenced(b, 0) for b in brokers), 120, "the brokers unfenced", interval_s=0.2)
        bootstrap = ",".join(b.bootstrap for b in brokers)
        client = admin(bootstrap)
        started = time.monotonic()
        for n in range(0, args.partitions, PARTITIONS_PER_TOPIC):
            create(client, f"bench-{n // PARTITIONS_PER_TOPIC}", min(PARTITIONS_PER_TOPIC, args.partitions - n),
                   args.replication_factor)
        print(f"{args.partitions} partitions (replication factor {args.replication_factor}) created through a broker "
              f"in {time.monotonic() - started:.1f} s")

        elected, answered = [], []
        epoch = leader_of(controllers)[1]
        for r in range(args.rounds):
            leader, _ = leader_of(controllers)
            victim = next(c for c in controllers if c.id == leader)
            victim.kill()
            t0 = time.monotonic()
            _, epoch = leader_of([c for c in controllers if c.alive()], timeout_s=60, above_epoch=epoch)
            elected.append(time.monotonic() - t0)
            create(admin(brokers[r % 3].bootstrap), f"bench-failover-{r}", 1)
            answered.append(time.monotonic() - t0)
            victim.start()
            time.sleep(SETTLE_S)
        print(f"controller failover: new leader after {statistics.median(elected) * 1000:.0f} ms, a CreateTopics "
              f"through a broker answered after {statistics.median(answered) * 1000:.0f} ms (median of "
              f"{args.rounds}; controller.quorum.fetch.timeout.ms {FETCH_TIMEOUT_MS})")

        stops, restarts = [], []
        broker = brokers[2]
        for _ in range(args.rounds):
            before = len(broker.log_lines("Unfenced: serving"))
            t0 = time.monotonic()
            broker.terminate(timeout_s=900)  # thousands of leaderships moved on a loaded machine: minutes
            stops.append(time.monotonic() - t0)
            t0 = time.monotonic()
            broker.start()
            wait_for(lambda b=broker, n=before: unfenced(b, n), 900, "the restarted broker unfenced", interval_s=0.05)
            restarts.append(time.monotonic() - t0)
            time.sleep(SETTLE_S)
        from_snapshot = broker.log_lines("Starting from snapshot")
        print(f"broker restart: controlled shutdown {statistics.median(stops) * 1000:.0f} ms, start to unfenced "
              f"{statistics.median(restarts) * 1000:.0f} ms (median of {args.rounds}; {len(from_snapshot)} of the "
              f"starts from its own snapshot; broker.heartbeat.interval.ms {HEARTBEAT_MS}); load average "
              f"{os.getloadavg()[0]:.1f}")
        if from_snapshot:  # where its fetches of the metadata log began: after its snapshot and its own log
            print(f"  the last start: {from_snapshot[-1].split('] ', 1)[-1]}")
        if args.records:
            acceptance(bootstrap, args.records)
    finally:
        stop_all(brokers)
        stop_all(controllers)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


# ---- stand-in brokers (--stand-ins): the quorum controller alone, at partition counts no real broker here holds ----


class StandInCluster:
    """Three real controllers (`zkbroker server`, process.roles=controller, from the CLI) and stand-in brokers:
    this script run with `--stand-in`, each registering with the active controller and heartbeating as a KRaft
    broker does (the lifecycle state machine of zkbroker/server/broker_lifecycle.py), reporting as its metadata
    offset the quorum's high watermark (DescribeQuorum): it applies nothing, as bench/failover.py's ZooKeeper
    stand-ins answer LeaderAndIsr without applying it. The controllers, their log, their elections and every
    record are real; the brokers' own work of applying the metadata is what is left out."""

    def __init__(self, root: Path, stand_ins: int = 3, **controller_overrides: object) -> None:
        self.root = root
        self.controllers, _ = make_kraft_cluster(root, brokers=0, controller_overrides=controller_overrides)
        self.voters = ",".join(f"{c.id}@127.0.0.1:{c.port}" for c in self.controllers)
        self.ids = tuple(range(1, stand_ins + 1))
        self.stand_ins: dict[int, StandIn] = {}

    def __enter__(self) -> StandInCluster:
        for c in self.controllers:
            c.start()
        leader_of(self.controllers, timeout_s=120)
        props = (self.controllers[0].dir / "data" / "meta.properties").read_text()
        self.cluster_id = next(line.split("=", 1)[1] for line in props.splitlines() if line.startswith("cluster.id="))
        for broker_id in self.ids:
            self.start(broker_id)
        for s in self.stand_ins.values():
            s.wait("unfenced", 120)
        return self

    def __exit__(self, *exc) -> None:
        for s in self.stand_ins.values():
            s.kill()
        stop_all(self.controllers)

    def start(self, broker_id: int) -> StandIn:
        self.stand_ins[broker_id] = StandIn(broker_id, self.voters, self.cluster_id,
                                            self.root / f"stand-in-{broker_id}")
        return self.stand_ins[broker_id]

    def active(self) -> Controller:
        leader, _ = leader_of([c for c in self.controllers if c.alive()], timeout_s=120)
        return next(c for c in self.controllers if c.id == leader)

    def send(self, api_key: int, version: int, body: dict, timeout_s: float = 600) -> object:
        """A request to the active controller (retried on NOT_CONTROLLER while a new one takes over)."""
        deadline = time.monotonic() + timeout_s
        while True:
            c = self.active()
            try:
                with BrokerConnection(c.host, c.port, client_id="bench", timeout_s=timeout_s) as conn:
                    response = conn.send(api_key, version, body)
                errors = {getattr(response, "error_code", 0), *(t.error_code for t in getattr(response, "topics", ()))}
                if ErrorCode.NOT_CONTROLLER not in errors:  # CreateTopics puts it in each topic's answer
                    return response
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"no active controller answered api key {api_key}")
            time.sleep(0.2)

    def create(self, partitions: int, per_request: int = 500) -> float:
        """`partitions` partitions of replication factor 3 over the stand-ins, CreateTopics straight to the
        active controller (a broker would forward them), 500 a request: one request of 10,000 (the controller's
        bound) is one batch whose encoding held a loaded machine's leader past the fetch timeout, and each new
        leader took the retried request and lost its leadership the same way (an election storm); 1,000 a request
        did the same at 100,000 partitions at load 17 (epoch 86 before the 100,000 were created)."""
        started = time.monotonic()
        for n in range(0, partitions, per_request):
            count = min(per_request, partitions - n)
            answer = self.send(ApiKey.CREATE_TOPICS, 5, {
                "topics": [{"name": f"bench-{n // per_request}", "num_partitions": count, "replication_factor": 3,
                            "assignments": [], "configs": []}], "timeout_ms": 600_000, "validate_only": False})
            if answer.topics[0].error_code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS):  # a retry after a lost answer
                raise RuntimeError(f"CreateTopics: {answer.topics[0].error_code} {answer.topics[0].error_message}")
        return time.monotonic() - started

    def rebalance(self, timeout_s: float = 900) -> None:
        """Preferred leader elections of every partition (ElectLeaders, none named) until each stand-in leads a
        third again: a stand-in back from a shutdown leads only once its leaders have taken it back into the ISRs
        (their AlterPartition), so the election is repeated until then."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.send(ApiKey.ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": None, "timeout_ms": 600_000})
            led = self.led()
            counts = [led.get(b, 0) for b in self.ids]
            if max(counts) - min(counts) <= max(3, sum(counts) // 100):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"leaderships not balanced again: {led}")
            time.sleep(1.0)

    def led(self) -> dict[int, int]:
        """Each stand-in's leaderships, as the active controller counts them (its lab `state`)."""
        with self.active().control() as client:
            brokers = client.state()["quorum_controller"]["brokers"]
        return {b["id"]: b["leaderships"] for b in brokers}


class StandIn:
    """One stand-in broker process, driven through its stdin ("shutdown") and read through its stdout (a line per
    lifecycle event, with the ms since the process began or since the command)."""

    def __init__(self, broker_id: int, voters: str, cluster_id: str, data_dir: Path) -> None:
        self.id = broker_id
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, __file__, "--stand-in", str(broker_id), voters, cluster_id,
                                      str(data_dir)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.lines: list[str] = []

    def wait(self, word: str, timeout_s: float) -> float:
        """Until a line starting with `word`; the ms it carries."""
        deadline = time.monotonic() + timeout_s
        while True:
            for line in self.lines:
                if line.startswith(word):
                    self.lines.remove(line)
                    return float(line.split()[1])
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"stand-in {self.id}: no {word!r} within {timeout_s:.0f} s")
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"stand-in {self.id} exited (code {self.proc.wait()}) waiting for {word!r}")
            self.lines.append(line.strip())

    def shutdown(self) -> None:
        self.command("shutdown")

    def command(self, word: str) -> None:
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class StandInImage:
    """What a stand-in keeps of the metadata (a RaftListener): its topics, per partition its replicas, ISR, leader
    and epochs, and the offset applied; as records again (`to_records`) for its own snapshots, which
    BrokerSnapshotWriter writes as on a real broker (`image` is what it reads). The first leader change applied
    after `watch` is printed with its monotonic time (CLOCK_MONOTONIC: one clock for every process of the
    machine, so the bench compares it with the controller's)."""

    def __init__(self) -> None:
        self.topics: dict[bytes, str] = {}
        self.partitions: dict[tuple[bytes, int], list] = {}  # [replicas, isr, leader, leader_epoch, partition_epoch]
        self.offset = -1
        self.epoch = 0
        self.watching = False

    @property
    def image(self) -> StandInImage:
        return self

    def to_records(self) -> list:
        out = []
        for topic_id, name in self.topics.items():
            out.append(record(TOPIC, name=name, topic_id=topic_id))
        for (topic_id, partition), (replicas, isr, leader, leader_epoch, partition_epoch) in self.partitions.items():
            out.append(record(PARTITION, partition_id=partition, topic_id=topic_id, replicas=list(replicas),
                              isr=list(isr), removing_replicas=[], adding_replicas=[], leader=leader,
                              leader_epoch=leader_epoch, partition_epoch=partition_epoch, leader_recovery_state=0))
        return out

    def handle_load_snapshot(self, end_offset: int, epoch: int, records: list) -> None:
        self.topics.clear()
        self.partitions.clear()
        self._apply(records)
        self.offset, self.epoch = end_offset - 1, epoch

    def handle_commit(self, base_offset: int, last_offset: int, epoch: int, records: list) -> None:
        self._apply(records)
        self.offset, self.epoch = last_offset, epoch

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        pass

    def _apply(self, records: list) -> None:
        for api_key, _, rec in records:
            if api_key == TOPIC:
                self.topics[bytes(rec.topic_id)] = rec.name
            elif api_key == PARTITION:
                self.partitions[(bytes(rec.topic_id), rec.partition_id)] = [
                    tuple(rec.replicas), tuple(rec.isr), rec.leader, rec.leader_epoch, rec.partition_epoch]
            elif api_key == PARTITION_CHANGE:
                part = self.partitions[(bytes(rec.topic_id), rec.partition_id)]
                if rec.isr is not None:
                    part[1] = tuple(rec.isr)
                if rec.leader != NO_LEADER_CHANGE:
                    part[2], part[3] = rec.leader, part[3] + 1
                    if self.watching:
                        self.watching = False
                        print(f"applied-leader-change {time.monotonic():.3f}", flush=True)
                part[4] += 1


def stand_in_main(broker_id: int, voters: str, cluster_id: str, data_dir: str) -> None:
    """A broker that pulls the metadata log as a Raft observer (zkbroker's RaftManager, as a real KRaft broker),
    registers, heartbeats with the offset it applied, shuts down through heartbeats, and, as a leader, asks the
    controller (AlterPartition) to take back into the ISR the replicas that are out of it; it holds no data."""
    configure("WARNING")
    asyncio.run(_stand_in(broker_id, voters, cluster_id, data_dir))


async def _stand_in(broker_id: int, voters: str, cluster_id: str, data_dir: str) -> None:
    began = time.monotonic()
    addresses = {int(a.split("@")[0]): (a.split("@")[1].rsplit(":", 1)[0], int(a.rsplit(":", 1)[1]))
                 for a in voters.split(",")}
    # 64 KiB a Fetch, as a real broker's observer asks: at QuorumConfig's 8 MiB a loaded leader's answers were
    # megabytes each and a stand-in's one event loop spent seconds in each.
    raft = RaftManager(QuorumConfig(node_id=broker_id, voters=frozenset(addresses), cluster_id=cluster_id,
                                    fetch_max_bytes=FETCH_MAX_BYTES), addresses, MetadataLog(data_dir))
    raft.start()
    image = StandInImage()
    raft.register(image)
    policy = SnapshotPolicy(STAND_IN_SNAPSHOT_BYTES, 0)
    raft.register(BrokerSnapshotWriter(image, policy, raft.create_snapshot, lambda: int(time.time() * 1000)))
    lifecycle = BrokerLifecycle(broker_id, cluster_id, (Listener("PLAINTEXT", "127.0.0.1", 1),),
                                heartbeat_interval_ms=HEARTBEAT_MS)
    conns: dict[tuple[str, int], BrokerConnection] = {}
    loop = asyncio.get_running_loop()
    commands: asyncio.Queue[str] = asyncio.Queue()
    pending_input = bytearray()

    def read_commands() -> None:  # raw reads: two lines arriving together must both be seen
        data = os.read(sys.stdin.fileno(), 4096)
        if not data:  # the bench is gone: no more commands
            loop.remove_reader(sys.stdin.fileno())
            return
        pending_input.extend(data)
        while b"\n" in pending_input:
            line, _, rest = bytes(pending_input).partition(b"\n")
            pending_input[:] = rest
            commands.put_nowait(line.decode().strip())

    loop.add_reader(sys.stdin.fileno(), read_commands)
    shutdown_at: float | None = None
    last_isr_repair = 0.0

    def asker(conns: dict[tuple[str, int], BrokerConnection], timeout_s: float):
        def ask(api_key: int, version: int, body: dict) -> object | None:
            """The active controller's answer (a blocking exchange, run off the loop), or None."""
            leader = raft.leader_and_epoch()[0] if raft.node is not None else None
            for node in ([leader] if leader in addresses else []) + sorted(addresses):
                address = addresses[node]
                conn = conns.get(address)
                if conn is None:
                    conn = conns[address] = BrokerConnection(*address, timeout_s=timeout_s)
                try:
                    response = conn.send(api_key, version, body)
                except OSError:
                    conn.close()
                    del conns[address]
                    continue
                if getattr(response, "error_code", 0) != ErrorCode.NOT_CONTROLLER:
                    return response
            return None
        return ask

    # Heartbeats on connections of their own, answered within a session (a heartbeat waits for the commit of
    # what the controller appended before it, parts of a large operation included); the ISR repairs, requests
    # of thousands of partitions, on others and in a task of their own, so that heartbeats go on meanwhile (a
    # broker's heartbeats never wait for its AlterPartitions: Kafka's BrokerLifecycleManager has its own channel).
    ask = asker(conns, SESSION_MS / 1000)
    ask_isr = asker({}, 600)
    repair: asyncio.Future | None = None

    while lifecycle.state is not BrokerState.SHUTTING_DOWN:
        now = int(time.monotonic() * 1000)
        if lifecycle.due(now):
            kind, body = lifecycle.next_request()
            if kind == "registration":
                answer = await loop.run_in_executor(None, ask, ApiKey.BROKER_REGISTRATION, 0, body)
                if answer is None:
                    lifecycle.on_no_answer(now)
                else:
                    lifecycle.on_registration(int(time.monotonic() * 1000), answer.error_code, answer.broker_epoch)
            else:
                answer = await loop.run_in_executor(None, ask, ApiKey.BROKER_HEARTBEAT, 0,
                                                    lifecycle.heartbeat(image.offset))
                if answer is None:
                    lifecycle.on_no_answer(now)
                else:
                    lifecycle.on_heartbeat(int(time.monotonic() * 1000), answer.error_code, answer.is_caught_up,
                                           answer.is_fenced, answer.should_shut_down)
            for event in lifecycle.events:
                if event == "unfenced":
                    print(f"unfenced {(time.monotonic() - began) * 1000:.0f}", flush=True)
            lifecycle.events.clear()
        if (lifecycle.state is BrokerState.RUNNING and shutdown_at is None and (repair is None or repair.done())
                and time.monotonic() - last_isr_repair > ISR_REPAIR_S):
            last_isr_repair = time.monotonic()
            repair = loop.run_in_executor(None, _repair_isrs, broker_id, lifecycle.broker_epoch, image, ask_isr)
        try:
            command = await asyncio.wait_for(commands.get(), 0.05)
        except asyncio.TimeoutError:
            continue
        if command == "shutdown" and shutdown_at is None:
            shutdown_at = time.monotonic()
            lifecycle.begin_controlled_shutdown(int(shutdown_at * 1000))
        elif command == "watch":
            image.watching = True
    print(f"shutdown-done {(time.monotonic() - shutdown_at) * 1000:.0f}", flush=True)
    loop.remove_reader(sys.stdin.fileno())
    await raft.shutdown()


def _repair_isrs(broker_id: int, broker_epoch: int, image: StandInImage, ask) -> None:
    """As a leader whose followers have caught up (a stand-in's always have: it holds no data): AlterPartition
    (v2, by topic id) taking every replica back into the ISR, 2,000 partitions a request."""
    short = [(key, p) for key, p in list(image.partitions.items()) if p[2] == broker_id and len(p[1]) < len(p[0])]
    for i in range(0, len(short), 2000):
        by_topic: dict[bytes, list] = {}
        for (topic_id, index), (replicas, _, _, leader_epoch, partition_epoch) in short[i:i + 2000]:
            by_topic.setdefault(topic_id, []).append({
                "partition_index": index, "leader_epoch": leader_epoch, "new_isr": list(replicas),
                "leader_recovery_state": 0, "partition_epoch": partition_epoch})
        ask(ApiKey.ALTER_PARTITION, 2, {"broker_id": broker_id, "broker_epoch": broker_epoch,
                                        "topics": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()]})


_HANDOVER = re.compile(r"Handover: the first leadership change of epoch (\d+) committed (\d+) ms after this "
                       r"controller was elected \(active after (\d+) ms; elected at monotonic ([\d.]+)\)")


def _log_size(c: Controller) -> int:
    return c.log_path.stat().st_size if c.log_path.exists() else 0


def _handover_since(c: Controller, offset: int) -> tuple[float, float, float] | None:
    """(ms from election to the first committed leadership change, ms from election to active, the election's
    monotonic time) logged by `c` after byte `offset` of its server.log."""
    with open(c.log_path, "rb") as f:
        f.seek(offset)
        found = _HANDOVER.search(f.read().decode(errors="replace"))
    return None if found is None else (float(found[2]), float(found[3]), float(found[4]))


def _caught_up(cluster: StandInCluster, timeout_s: float = 900) -> None:
    """Until every controller has committed what the active one had when asked (a restarted one has loaded its
    snapshot and log): the next round must not begin with a voter still catching up."""
    def committed(c: Controller) -> int:
        with c.control(timeout_s=120) as client:
            return client.state()["quorum_controller"]["committed_offset"]

    target = committed(cluster.active())
    wait_for(lambda: all(committed(c) >= target for c in cluster.controllers), timeout_s,
             "every controller caught up", interval_s=0.5)


def kraft_rounds(cluster: StandInCluster, rounds: int, out=print) -> dict[str, list[float]]:
    """Each round, with each stand-in leading a third of the partitions:

    A. the active controller SIGKILLed while a stand-in leading a third asks to shut down: from the kill, and from
       the new controller's election, to the first leadership change it has committed (its "Handover" line);
       then the killed controller started again, the stand-in started again (start -> unfenced: its restart to
       serving), every partition's preferred leader elected back;
    B. a controlled shutdown of a stand-in leading a third: from its first want_shut_down heartbeat to the answer
       should_shut_down (every leadership moved and committed); restarted and rebalanced as above.
    Figures in ms."""
    figures: dict[str, list[float]] = {k: [] for k in ("from_kill", "handover", "active", "served", "shutdown",
                                                       "restart", "led")}
    for r in range(rounds):
        # A: controller failover with a leadership change waiting for the new controller
        led = cluster.led()
        victim = max(cluster.ids, key=lambda b: led.get(b, 0))
        old = cluster.active()
        marks = {c.id: _log_size(c) for c in cluster.controllers}
        for s in cluster.stand_ins.values():
            s.command("watch")
        started = time.monotonic()
        old.kill()
        cluster.stand_ins[victim].shutdown()
        survivors = [c for c in cluster.controllers if c is not old]
        deadline = started + 900
        while not any(h := _handover_since(c, marks[c.id]) for c in survivors):
            if time.monotonic() > deadline:
                raise TimeoutError("no handover logged by a new controller")
            time.sleep(0.02)
        figures["from_kill"].append((time.monotonic() - started) * 1000)
        handover, active, elected = next(h for c in survivors if (h := _handover_since(c, marks[c.id])))
        figures["handover"].append(handover)
        figures["active"].append(active)
        applied = min(s.wait("applied-leader-change", 900) for b, s in cluster.stand_ins.items() if b != victim)
        figures["served"].append((applied - elected) * 1000)
        cluster.stand_ins[victim].wait("shutdown-done", 900)
        cluster.stand_ins[victim].kill()
        old.start()
        figures["restart"].append(_restart(cluster, victim))
        cluster.rebalance()
        _caught_up(cluster)
        # B: a controlled shutdown on its own
        led = cluster.led()
        victim = max(cluster.ids, key=lambda b: led.get(b, 0))
        figures["led"].append(led.get(victim, 0))
        cluster.stand_ins[victim].shutdown()
        figures["shutdown"].append(cluster.stand_ins[victim].wait("shutdown-done", 900))
        cluster.stand_ins[victim].kill()
        figures["restart"].append(_restart(cluster, victim))
        cluster.rebalance()
        _caught_up(cluster)
        out(f"  KRaft round {r + 1}: failover from the kill {figures['from_kill'][-1]:.0f} ms, handover "
            f"{figures['handover'][-1]:.0f} ms (active after {figures['active'][-1]:.0f}, applied by a broker after "
            f"{figures['served'][-1]:.0f}), controlled shutdown of "
            f"{figures['led'][-1]:,} leaderships {figures['shutdown'][-1]:.0f} ms, restart to serving "
            f"{figures['restart'][-2]:.0f} / {figures['restart'][-1]:.0f} ms; load {os.getloadavg()[0]:.1f}")
    return figures


def _restart(cluster: StandInCluster, broker_id: int) -> float:
    """A stand-in started again: ms from the process's start to its unfencing (registration, caught up). Started
    once its old session has run out: until then the controller refuses a new incarnation of the id
    (DUPLICATE_BROKER_REGISTRATION), which would be measured instead."""
    time.sleep(SESSION_MS / 1000 + 0.5)
    started = time.monotonic()
    cluster.start(broker_id).wait("unfenced", 900)
    return (time.monotonic() - started) * 1000


if __name__ == "__main__":
    sys.exit(main())
