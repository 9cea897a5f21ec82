"""Replication: throughput by replication factor and acks, replication lag, and the unavailability window (issue 5).

Three brokers on this machine (a lab cluster with its own ZooKeeper, tickTime 200 ms), confluent-kafka, 100-byte
values. Printed in one run, each beside its reference:

1. Throughput of one producer (one process, as Kreps's one producer thread) into 6 partitions whose leaders are
   spread over the 3 brokers: RF=1 acks=1, RF=3 acks=1, RF=3 acks=-1, beside Kreps 2014 (821,557 / 786,980 /
   421,823 records/s; 6-core machines, one per broker, 1 GbE). Target: RF=3 acks=-1 >= 421,823 records/s.
2. Replication lag under the RF=3 load: sampled every 20 ms from each partition's leader as its log end offset
   minus its high watermark (ListOffsets as a replica and as a consumer): the records the leader has that some
   ISR member has not confirmed yet. p50 / p99 / max in records, and in ms at the partition's measured rate.
   ISR shrinks and expansions logged meanwhile are counted (0.8.2 drops a follower that is more than
   replica.lag.max.messages = 4,000 records behind at the moment of its check, or silent for 10 s).
3. Unavailability window: RF=3, one partition led by a broker that is not the controller; a producer writes
   1,000 records/s with acks=-1 and the leader's broker is SIGKILLed. Window = SIGKILL -> the first record
   acknowledged after it (necessarily by the new leader), beside zookeeper.session.timeout.ms (target: session
   timeout + <= 500 ms). The controller's log splits it: SIGKILL -> BrokerChange (ZooKeeper expires the session),
   -> LeaderAndIsr acknowledged, and the rest is the producer finding the new leader. Several trials, the broker
   restarted and its leadership given back between them.

`--profile` samples every broker with py-spy (pip install py-spy) during the RF=3 acks=-1 run and prints where
each spends its time.

Usage: python bench/replication.py [--records 2000000] [--session-timeout-ms 6000] [--trials 3] [--profile]
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kazoo.exceptions import NoNodeError  # noqa: E402

from zkbroker import admin  # noqa: E402
from zkbroker.client.connection import BrokerConnection  # noqa: E402
from zkbroker.lab.cluster import LabCluster  # noqa: E402
from zkbroker.lab.zookeeper import ZooKeeperServer  # noqa: E402
from zkbroker.protocol.api import ApiKey  # noqa: E402
from zkbroker.zk import paths  # noqa: E402
from zkbroker.zk.client import ZkClient  # noqa: E402
from zkbroker.zk.znodes import LeaderIsrState, encode_preferred_election  # noqa: E402

# topic -> (row, replication factor, acks)
TOPICS = {"rf1-acks1": ("RF=1 acks=1", 1, 1), "rf3-acks1": ("RF=3 acks=1", 3, 1),
          "rf3-acksall": ("RF=3 acks=-1", 3, -1)}
KREPS = {"RF=1 acks=1": 821_557, "RF=3 acks=1": 786_980, "RF=3 acks=-1": 421_823}
TARGET = 421_823
PARTITIONS = 6
VALUE_BYTES = 100
BROKERS = (1, 2, 3)
LAG_SAMPLE_S = 0.02
AVAILABILITY_RATE = 1000  # records/s during the unavailability trials
WINDOW_SLACK_MS = 500
# librdkafka re-reads the metadata of a partition whose leader is down once a second (a fixed timer), and the
# answer that names the new leader also drops the dead broker, which sends the partition back to "no leader" for
# one more round. A producer that wants to fail over faster can ask for metadata more often:
FAST_REFRESH_MS = 100

PRODUCER_CONFIG = {"linger.ms": 5, "batch.num.messages": 10_000, "batch.size": 1_000_000,
                   "compression.codec": "none", "queue.buffering.max.messages": 1_000_000,
                   "queue.buffering.max.kbytes": 1_048_576, "message.timeout.ms": 120_000}


# ---- producers (child processes: the bench's own threads must not take the producer's GIL) --------------------


def throughput_main(bootstrap: str, topic: str, count: int, acks: int, out) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, **PRODUCER_CONFIG})
    value = bytes(range(VALUE_BYTES))
    failed = [0]

    def report(err, msg) -> None:
        if err is not None:
            failed[0] += 1

    send, poll = producer.produce, producer.poll
    cpu = os.times()
    started = time.monotonic()
    i = 0
    while i < count:
        try:
            send(topic, value, on_delivery=report)
            i += 1
        except BufferError:
            poll(0.001)
    left = producer.flush(300)
    ended = time.monotonic()
    cpu_end = os.times()
    out.send((started, ended, left, failed[0], cpu_end.user + cpu_end.system - cpu.user - cpu.system))


def steady_main(bootstrap: str, topic: str, rate: int, stop_file: str, extra: dict, out) -> None:
    """Produce `rate` records/s (acks=-1) until `stop_file` exists; send back every acknowledgement's time."""
    from confluent_kafka import Producer

    config = {"bootstrap.servers": bootstrap, "acks": -1, "linger.ms": 0, "retries": 1_000_000,
              "message.timeout.ms": 120_000, "retry.backoff.ms": 50, **extra}
    if os.environ.get("BENCH_RDKAFKA_DEBUG"):
        config["debug"] = os.environ["BENCH_RDKAFKA_DEBUG"]
    producer = Producer(config)
    acked: list[float] = []
    errors: list[str] = []

    def report(err, msg) -> None:
        if err is None:
            acked.append(time.monotonic())
        else:
            errors.append(str(err))

    interval = 1.0 / rate
    next_at = time.monotonic()
    i = 0
    while not os.path.exists(stop_file):
        producer.produce(topic, b"%d" % i, on_delivery=report)
        i += 1
        next_at += interval
        while True:
            producer.poll(0)
            wait = next_at - time.monotonic()
            if wait <= 0:
                break
            time.sleep(min(wait, 0.001))
    producer.flush(60)
    out.send((acked, errors[:5], len(errors)))


def _run_child(target, *args) -> multiprocessing.Process:
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(*args, send), daemon=True)
    proc.start()
    proc.receive = receive  # type: ignore[attr-defined]
    return proc


# ---- the cluster ------------------------------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.zookeeper = ZooKeeperServer(tick_time_ms=200, data_dir=workdir / "zookeeper")
        self.lab = LabCluster(workdir / "lab")
        self.zk: ZkClient | None = None
        self.log_offsets: dict[int, int] = {}

    def __enter__(self) -> Bench:
        self.zookeeper.start()
        config = [f"zookeeper.session.timeout.ms={self.args.session_timeout_ms}",
                  "auto.leader.rebalance.enable=false"]
        self.cluster = self.lab.up(brokers=len(BROKERS), zookeeper=self.zookeeper.connect_string, config=config)
        self.zk = ZkClient(self.cluster.zookeeper, name="bench")
        self.zk.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.zk is not None:
            self.zk.close()
        try:
            self.lab.down()
        finally:
            self.zookeeper.stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self.lab.load().brokers)

    def entry(self, broker_id: int):
        return self.lab.load().broker(broker_id)

    def controller_id(self) -> int:
        return json.loads(self.zk.kazoo.get(paths.CONTROLLER)[0])["brokerid"]

    def pid(self, broker_id: int) -> int:
        return self.entry(broker_id).pid

    def create_topic(self, topic: str, partitions: int, rf: int, first_leader: int = 1) -> dict[int, tuple]:
        """Leaders round robin from `first_leader`, followers the next brokers."""
        start = BROKERS.index(first_leader)
        assignment = {p: tuple(BROKERS[(start + p + j) % len(BROKERS)] for j in range(rf)) for p in range(partitions)}
        admin.write_topic(self.zk, topic, assignment, {})
        self.wait_states(topic, assignment, lambda p, s: s.leader == assignment[p][0] and len(s.isr) == rf)
        self.wait_leaders(topic, partitions)
        return assignment

    def states(self, topic: str, partitions) -> dict[int, LeaderIsrState]:
        # pipelined reads: one round trip's wait for all of them
        pending = [(p, self.zk.kazoo.get_async(paths.partition_state_path(topic, p))) for p in partitions]
        states = {}
        for p, result in pending:
            try:
                states[p] = LeaderIsrState.decode(result.get(timeout=10)[0])
            except NoNodeError:
                pass
        return states

    def wait_states(self, topic: str, assignment: dict, ok, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            states = self.states(topic, list(assignment))
            if len(states) == len(assignment) and all(ok(p, s) for p, s in states.items()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: partitions did not reach the expected state: {states}")
            time.sleep(0.1)

    def wait_leaders(self, topic: str, partitions: int, timeout_s: float = 60) -> None:
        """Until every broker's metadata names a leader for every partition (clients can produce)."""
        deadline = time.monotonic() + timeout_s
        for broker in self.lab.load().brokers:
            while True:
                try:
                    with BrokerConnection(broker.host, broker.port, timeout_s=10) as conn:
                        response = conn.send(ApiKey.METADATA, 0, {"topics": [topic]})
                    rows = response.topics[0].partitions
                    if len(rows) == partitions and all(r.leader >= 0 for r in rows):
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"broker {broker.id} does not know the leaders of {topic}")
                time.sleep(0.05)

    # ---- the brokers' logs ----------------------------------------------------------------------------------

    def mark_logs(self) -> None:
        self.log_offsets = {b: self._log(b).stat().st_size for b in BROKERS}

    def new_log_lines(self) -> list[str]:
        lines = []
        for b in BROKERS:
            with open(self._log(b), "rb") as f:
                f.seek(self.log_offsets.get(b, 0))
                lines += f.read().decode(errors="replace").splitlines()
        return lines

    def _log(self, broker_id: int) -> Path:
        return Path(self.entry(broker_id).config).parent / "server.log"


# ---- 1 and 2: throughput and lag ----------------------------------------------------------------------------------


class LagSampler(threading.Thread):
    """Every 20 ms, each partition's log end offset minus its high watermark, asked of its leader."""

    def __init__(self, bench: Bench, topic: str, leaders: dict[int, int]) -> None:
        super().__init__(daemon=True)
        self.bench, self.topic = bench, topic
        self.by_leader: dict[int, list[int]] = collections.defaultdict(list)
        for partition, leader in leaders.items():
            self.by_leader[leader].append(partition)
        self.samples: dict[int, list[int]] = collections.defaultdict(list)
        self._halt = threading.Event()

    def run(self) -> None:
        connections = {b: BrokerConnection(self.bench.entry(b).host, self.bench.entry(b).port, timeout_s=10)
                       for b in self.by_leader}
        try:
            while not self._halt.wait(LAG_SAMPLE_S):
                for broker, partitions in self.by_leader.items():
                    ends = self._offsets(connections[broker], partitions, replica_id=99)
                    hws = self._offsets(connections[broker], partitions, replica_id=-1)
                    for p in partitions:
                        if p in ends and p in hws:
                            self.samples[p].append(max(ends[p] - hws[p], 0))
        finally:
            for conn in connections.values():
                conn.close()

    def _offsets(self, conn: BrokerConnection, partitions: list[int], replica_id: int) -> dict[int, int]:
        response = conn.send(ApiKey.LIST_OFFSETS, 0, {"replica_id": replica_id, "topics": [{
            "topic": self.topic, "partitions": [{"partition": p, "timestamp": -1, "max_num_offsets": 1}
                                                for p in partitions]}]})
        return {r.partition: r.offsets[0] for r in response.topics[0].partitions if not r.error_code and r.offsets}

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


def throughput(bench: Bench, topic: str, rf: int, acks: int, count: int, profile: bool) -> dict:
    assignment = bench.create_topic(topic, PARTITIONS, rf)
    sampler = LagSampler(bench, topic, {p: r[0] for p, r in assignment.items()}) if rf > 1 else None
    profilers = start_profilers(bench, topic) if profile else []
    bench.mark_logs()
    if sampler is not None:
        sampler.start()
    broker_cpu = {b: _cpu_seconds(bench.pid(b)) for b in BROKERS}
    child = _run_child(throughput_main, bench.bootstrap, topic, count, acks)
    started, ended, left, failed, producer_cpu = child.receive.recv()
    broker_cpu = {b: _cpu_seconds(bench.pid(b)) - broker_cpu[b] for b in BROKERS}
    child.join(10)
    if sampler is not None:
        sampler.stop()
    lines = bench.new_log_lines()
    for proc in profilers:
        proc.wait(60)
    if left or failed:
        raise RuntimeError(f"{topic}: {left} records undelivered, {failed} failed")
    seconds = ended - started
    out = {"rate": count / seconds, "seconds": seconds,
           "shrinks": sum("Shrinking ISR" in line for line in lines),
           "expands": sum("Expanding ISR" in line for line in lines),
           # CPU per record in microseconds: where the machine's cores went (the brokers' figure includes
           # a little before and after the producer's run: the producer's setup and its last acknowledgements)
           "broker_us": sum(broker_cpu.values()) / count * 1e6, "producer_us": producer_cpu / count * 1e6,
           "capacity_us": (os.cpu_count() or 1) * seconds / count * 1e6}
    if sampler is not None:
        lags = sorted(v for values in sampler.samples.values() for v in values)
        per_partition_rate = out["rate"] / PARTITIONS
        out["lag"] = {q: pct(lags, q) for q in (50, 99, 100)}
        out["lag_ms"] = {q: v / per_partition_rate * 1000 for q, v in out["lag"].items()}
        out["lag_samples"] = len(lags)
    return out


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(ordered: list[int], q: float) -> int:
    if not ordered:
        return 0
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def start_profilers(bench: Bench, topic: str) -> list[subprocess.Popen]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.path.exists(spy):
        print("  (py-spy not found: no profile)")
        return []
    procs = []
    for b in BROKERS:
        out = bench.workdir / f"profile-{topic}-broker-{b}.txt"
        procs.append(subprocess.Popen([spy, "record", "--pid", str(bench.pid(b)), "--duration", "12", "--rate", "200",
                                       "--gil", "--format", "raw", "-o", str(out)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs


def summarize_profile(path: Path, top: int = 10) -> list[str]:
    """Where a broker held the GIL: the frames with the most samples below the event loop (inclusive)."""
    inclusive: collections.Counter = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        for frame in set(stack.split(";")):
            if "zkbroker/" in frame or "controller/" in frame:
                inclusive[frame] += n
    skip = ("cli.py", "__main__", "kafka_server.py:")
    rows = [(f, n) for f, n in inclusive.most_common(top + 8) if not any(s in f for s in skip)][:top]
    return [f"{n / max(total, 1):6.1%}  {f}" for f, n in rows]


# ---- 3: the unavailability window -------------------------------------------------------------------------------

_ACKED = re.compile(r"\[Controller \d+\]: BrokerChange: LeaderAndIsr \(\d+ partition states\) acknowledged by "
                    r"brokers [\d,]+ (\d+) ms after the event began")


def unavailability(bench: Bench, trials: int, topic: str, client: dict) -> list[dict]:
    controller = bench.controller_id()
    victim = next(b for b in (2, 3, 1) if b != controller)
    assignment = bench.create_topic(topic, 1, 3, first_leader=victim)
    results = []
    for trial in range(trials):
        stop_file = bench.workdir / f"stop-{topic}-{trial}"
        child = _run_child(steady_main, bench.bootstrap, topic, AVAILABILITY_RATE, str(stop_file), client)
        time.sleep(3.0)  # steady state: metadata known, acknowledgements flowing
        bench.mark_logs()
        killed_at = time.monotonic()
        bench.lab.kill(victim)
        deadline = killed_at + bench.args.session_timeout_ms / 1000 + 30
        seen_change = None
        while time.monotonic() < deadline:
            lines = bench.new_log_lines()
            if seen_change is None:
                seen_change = next((line for line in lines if "deleted brokers: " + str(victim) in line), None)
            acked = [m for line in lines if (m := _ACKED.search(line))]
            if acked:
                break
            time.sleep(0.05)
        time.sleep(2.0)
        stop_file.touch()
        acks, errors, error_count = child.receive.recv()
        child.join(10)
        after = [t for t in acks if t > killed_at + 0.05]
        if not after:
            raise RuntimeError(f"trial {trial + 1}: no record acknowledged after the SIGKILL ({error_count} errors: "
                               f"{errors})")
        window_ms = (after[0] - killed_at) * 1000
        detected_ms = _log_time_ms(seen_change, killed_at) if seen_change else None
        elected_ms = float(acked[0][1]) if acked else None
        results.append({"window_ms": window_ms, "detected_ms": detected_ms, "leader_and_isr_ms": elected_ms,
                        "errors": error_count})
        line = f"  trial {trial + 1}: broker {victim} killed; first acknowledged write after {window_ms:.0f} ms"
        if detected_ms is not None:
            line += f" (controller saw the broker gone after ~{detected_ms:.0f} ms"
            if elected_ms is not None:
                line += f", new leader's LeaderAndIsr acknowledged {elected_ms:.0f} ms later"
            line += ")"
        print(line, flush=True)
        # give the leadership back for the next trial
        bench.lab.start(victim)
        bench.wait_states(topic, assignment, lambda p, s: len(s.isr) == 3)
        bench.zk.kazoo.create(paths.PREFERRED_REPLICA_ELECTION, encode_preferred_election([(topic, 0)]))
        bench.wait_states(topic, assignment, lambda p, s: s.leader == victim)
        bench.wait_leaders(topic, 1)
        time.sleep(1.0)
    return results


def _log_time_ms(line: str, killed_at: float) -> float:
    """ms from the SIGKILL to a log line's timestamp (wall clock, read against ours now)."""
    stamp = line[1:24]  # [2026-11-22 12:00:00,123]
    wall = time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")) + int(stamp[20:23]) / 1000
    offset = time.time() - time.monotonic()
    return (wall - (killed_at + offset)) * 1000


# ---- main -----------------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--only", action="append", choices=(*TOPICS, "unavailability"),
                        help="run only this part (repeatable); the default is all")
    args = parser.parse_args()
    only = set(args.only or (*TOPICS, "unavailability"))
    workdir = Path(tempfile.mkdtemp(prefix="zkbroker-bench-replication-"))
    print(f"3 brokers, {os.cpu_count()} CPUs, confluent-kafka, {VALUE_BYTES}-byte values; working in {workdir}",
          flush=True)
    rows = {}
    with Bench(args, workdir) as bench:
        for topic, (name, rf, acks) in TOPICS.items():
            if topic in only:
                rows[name] = throughput(bench, topic, rf, acks, args.records, args.profile and acks == -1)
                print(f"  {name}: {rows[name]['rate']:,.0f} records/s", flush=True)
        windows = fast_windows = []
        if "unavailability" in only:
            print("  unavailability, librdkafka's defaults:", flush=True)
            windows = unavailability(bench, args.trials, "availability", {})
            print(f"  unavailability, topic.metadata.refresh.interval.ms={FAST_REFRESH_MS}:", flush=True)
            fast_windows = unavailability(bench, args.trials, "availability-fast",
                                          {"topic.metadata.refresh.interval.ms": FAST_REFRESH_MS})

    print()
    if rows:
        print(f"Throughput, one producer process, {PARTITIONS} partitions, {args.records:,} records of "
              f"{VALUE_BYTES} B each")
        print(f"{'':<14} {'records/s':>10} {'MB/s':>6}   {'Kreps 2014':>10}   {'ratio':>5}   ISR shrinks/expands   "
              "CPU us/record: brokers + producer of cores x time")
        for name, row in rows.items():
            print(f"{name:<14} {row['rate']:10,.0f} {row['rate'] * VALUE_BYTES / 2**20:6.1f}   {KREPS[name]:10,}   "
                  f"{row['rate'] / KREPS[name]:5.2f}   {row['shrinks']:>7}/{row['expands']:<11} "
                  f"{row['broker_us']:.2f} + {row['producer_us']:.2f} of {row['capacity_us']:.2f}")
        if "RF=3 acks=-1" in rows:
            best = rows["RF=3 acks=-1"]["rate"]
            print(f"RF=3 acks=-1 {'meets' if best >= TARGET else 'MISSES'} the target of {TARGET:,} records/s")
        for name in ("RF=3 acks=1", "RF=3 acks=-1"):
            row = rows.get(name)
            if row is None:
                continue
            print(f"Replication lag ({name}, leader's log end - high watermark, {row['lag_samples']:,} samples): "
                  f"p50 {row['lag'][50]:,} / p99 {row['lag'][99]:,} / max {row['lag'][100]:,} records = "
                  f"{row['lag_ms'][50]:.1f} / {row['lag_ms'][99]:.1f} / {row['lag_ms'][100]:.1f} ms at "
                  f"{row['rate'] / PARTITIONS:,.0f} records/s per partition")
        if args.profile:
            for b in BROKERS:
                path = workdir / f"profile-rf3-acksall-broker-{b}.txt"
                if path.exists():
                    print(f"broker {b} (RF=3 acks=-1), share of GIL-holding samples:")
                    for line in summarize_profile(path):
                        print("   " + line)
    if not windows:
        return 0
    session = args.session_timeout_ms
    print(f"Unavailability window, SIGKILL of the leader's broker -> first acknowledged write on the new leader "
          f"({args.trials} trials each, {AVAILABILITY_RATE:,} records/s, acks=-1); zookeeper.session.timeout.ms = "
          f"{session:,} ms; target <= {session + WINDOW_SLACK_MS:,} ms")
    for name, found in (("librdkafka's defaults", windows),
                        (f"topic.metadata.refresh.interval.ms={FAST_REFRESH_MS}", fast_windows)):
        values = [w["window_ms"] for w in found]
        detected = [w["detected_ms"] for w in found if w["detected_ms"] is not None]
        elected = [w["leader_and_isr_ms"] for w in found if w["leader_and_isr_ms"] is not None]
        print(f"  {name}: median {statistics.median(values):,.0f} ms, max {max(values):,.0f} ms -> "
              f"{'meets' if max(values) <= session + WINDOW_SLACK_MS else 'MISSES'}")
        if detected and elected:
            print(f"    of which: SIGKILL -> the controller's BrokerChange (ZooKeeper expiring the session, counted "
                  f"from its last heartbeat) median {statistics.median(detected):,.0f} ms; -> the new leader's "
                  f"LeaderAndIsr acknowledged median {statistics.median(elected):,.0f} ms; the rest is the producer "
                  "finding the new leader")
    return 0


if __name__ == "__main__":
    sys.exit(main())
