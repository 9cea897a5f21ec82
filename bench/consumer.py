"""Consumer-group rebalances and client throughput, beside their references, in one run.

1. Rebalance: 20 consumer processes in one group on a 1,000-partition topic; one consumer joins or leaves
   (a clean close), 20 changes in all. Measured from the membership change (a ZooKeeper watch on the group's
   ids, in this process) to every partition owned under the new membership and every consumer fetching again
   (each consumer reports the moment all its partitions have a fetcher), plus the failed rebalance attempts.
   Twice: with 0.8.2's defaults (rebalance.backoff.ms 2000, rebalance.max.retries 4: a collision costs 2 s)
   and with `rebalance.owner.wait.ms` (wait for the previous owner to let go instead of failing the attempt)
   and `rebalance.backoff.jitter.ms`. References: 0.8.2's 4 x 2 s retry window; KIP-848's published 5 s for
   10 consumers adding 900 partitions (103 s with the classic protocol). Target: <= 2 s and zero failed
   rebalances over the 20 changes.
2. Throughput against one broker in the same run: our producer and confluent-kafka's (100-byte records,
   acks=1, linger 5 ms, 1 MB batches), then our high-level consumer and confluent-kafka's reading them all.
   References: Activision 2016 (kafka-python 15k / 38k msg/s, confluent-kafka 183k / 261k). Target: ours
   within 2x of confluent-kafka.

Everything runs on 127.0.0.1: a ZooKeeper of its own and a lab cluster, stopped at the end.

Usage: python bench/consumer.py [--quick] [--only rebalance|throughput]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kazoo.client import KazooClient  # noqa: E402

from zkbroker import admin  # noqa: E402
from zkbroker.client.connection import BrokerConnection  # noqa: E402
from zkbroker.lab.cluster import LabCluster  # noqa: E402
from zkbroker.lab.zookeeper import ZooKeeperServer  # noqa: E402
from zkbroker.zk.client import ZkClient  # noqa: E402

GROUP = "bench"
REBALANCE_TOPIC = "wide"
THROUGHPUT_TOPIC = "flow"
TARGET_REBALANCE_S = 2.0
KIP848_S = 5.0
RETRY_WINDOW_S = 4 * 2.0
UNSETTLED_AFTER_S = 30.0
ACTIVISION = {"kafka-python": (14_737, 37_668), "confluent-kafka": (183_456, 261_408)}
VALUE = b"x" * 100

MODES = {
    "0.8.2 defaults": {},
    "owner wait + jitter": {"rebalance.owner.wait.ms": 10000, "rebalance.backoff.jitter.ms": 500},
}
# Offsets are committed every second, so the changes measured are those of a group in its steady state (the
# first rebalance after start-up otherwise also commits every partition's first offset).
COMMON = {"zookeeper.session.timeout.ms": 6000, "auto.offset.reset": "largest", "rebalance.max.retries": 4,
          "auto.commit.interval.ms": 1000}


# ---- the consumer process ---------------------------------------------------------------------------------------


def worker_main(zk_connect: str, config_json: str) -> None:
    """One group member: reports `FETCHING <epoch s> <rebalances> <partitions>` on stdout each time a rebalance
    completes and every partition it owns has a fetcher, and `ATTEMPTS <n>` when its failed attempts change."""
    from consumer.connector import ConsumerRebalanceFailed, ZookeeperConsumerConnector
    from zkbroker import logconfig

    logconfig.configure("INFO")
    config = json.loads(config_json) | {"zookeeper.connect": zk_connect, "group.id": GROUP}
    connector = ZookeeperConsumerConnector(config)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stream = connector.create_message_streams({REBALANCE_TOPIC: 1})[REBALANCE_TOPIC][0]
    except ConsumerRebalanceFailed:
        stream = None

    def drain() -> None:
        while stream is not None and not stop.is_set():
            try:
                for _ in stream:
                    pass
            except Exception:
                continue

    threading.Thread(target=drain, daemon=True).start()
    reported, attempts = -1, 0
    while not stop.is_set():
        done = connector.rebalances
        if done != reported and connector.fetcher.fetching.wait(0.01) and connector.rebalances == done:
            reported = done
            print(f"FETCHING {time.time():.4f} {done} {len(connector.owned_partitions())}", flush=True)
        if connector.failed_attempts != attempts:
            attempts = connector.failed_attempts
            print(f"ATTEMPTS {attempts}", flush=True)
        stop.wait(0.01)
    connector.shutdown()


class Worker:
    def __init__(self, zk_connect: str, config: dict, logdir: Path, n: int) -> None:
        self.reports: list[tuple[float, int, int]] = []  # (epoch s, rebalances, partitions owned)
        self.failed_attempts = 0
        self.log = open(logdir / f"consumer-{n}.log", "wb")
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", zk_connect, json.dumps(config)],
                                     stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            fields = line.decode().split()
            if fields and fields[0] == "FETCHING":
                self.reports.append((float(fields[1]), int(fields[2]), int(fields[3])))
            elif fields and fields[0] == "ATTEMPTS":
                self.failed_attempts = int(fields[1])

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


# ---- the rebalance benchmark ------------------------------------------------------------------------------------


class Membership:
    """Times of every change of /consumers/<g>/ids, seen through a ZooKeeper watch."""

    def __init__(self, zk: KazooClient) -> None:
        self.events: list[tuple[float, int]] = []
        zk.ensure_path(f"/consumers/{GROUP}/ids")
        zk.ChildrenWatch(f"/consumers/{GROUP}/ids", self._changed)

    def _changed(self, children) -> None:
        self.events.append((time.time(), len(children)))

    def wait_count(self, count: int, after: float, timeout_s: float = 60) -> float:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for at, n in self.events:
                if at >= after and n == count:
                    return at
            time.sleep(0.005)
        raise RuntimeError(f"the group did not reach {count} members")


def owners_settled(zk: KazooClient, partitions: int, members: list[str]) -> bool:
    path = f"/consumers/{GROUP}/owners/{REBALANCE_TOPIC}"
    try:
        children = zk.get_children(path)
    except Exception:
        return False
    if len(children) != partitions:
        return False
    results = [zk.get_async(f"{path}/{c}") for c in children]
    counts = dict.fromkeys(members, 0)
    for result in results:
        try:
            owner = result.get()[0].decode().rsplit("-", 1)[0]
        except Exception:
            return False
        if owner not in counts:
            return False
        counts[owner] += 1
    share = partitions // len(members)
    return all(share <= n <= share + 1 for n in counts.values())


def bench_rebalance(zk_connect: str, workdir: Path, consumers: int, partitions: int, changes: int,
                    mode: str, settings: dict, report: list) -> None:
    zk = KazooClient(hosts=zk_connect, timeout=30)
    zk.start(30)
    try:
        if zk.exists(f"/consumers/{GROUP}"):
            zk.delete(f"/consumers/{GROUP}", recursive=True)
        membership = Membership(zk)
        config = COMMON | settings
        logdir = workdir / mode.replace(" ", "_").replace("+", "")
        logdir.mkdir(parents=True, exist_ok=True)
        workers: list[Worker] = []
        started = time.time()
        for n in range(consumers):
            workers.append(Worker(zk_connect, config, logdir, n))
        membership.wait_count(consumers, started, 120)
        if _wait_quiet(zk, workers, partitions, 120) is None:
            raise RuntimeError(f"[{mode}] the group of {consumers} did not settle at start-up")
        failed_before = sum(w.failed_attempts for w in workers)
        times, failed = [], []
        unsettled = 0
        for change in range(changes):
            before = {id(w): w.failed_attempts for w in workers}
            if change % 2 == 0:
                t0 = time.time()
                workers.append(Worker(zk_connect, config, logdir, consumers + change))
                at = membership.wait_count(consumers + 1, t0)
            else:
                t0 = time.time()
                leaving = workers.pop(0)
                threading.Thread(target=leaving.stop, daemon=True).start()
                at = membership.wait_count(consumers, t0)
            done = _wait_quiet(zk, workers, partitions, UNSETTLED_AFTER_S, since=at)
            failed.append(sum(w.failed_attempts - before.get(id(w), 0) for w in workers))
            if done is None:
                unsettled += 1
                times.append(float("inf"))
                outcome = f"not settled after {UNSETTLED_AFTER_S:.0f} s (partitions left unowned)"
            else:
                times.append(done - at)
                outcome = f"{done - at:.2f} s"
            print(f"  [{mode}] change {change + 1:2d} ({'join' if change % 2 == 0 else 'leave'}): {outcome}, "
                  f"{failed[-1]} failed attempts", flush=True)
        for worker in workers:
            worker.stop()
        total_failed = sum(failed)
        settled_times = [t for t in times if t != float("inf")] or [float("inf")]
        worst = "never" if unsettled else f"{max(times):.2f} s"
        report.append((f"rebalance, {mode}: median / max over {changes} changes",
                       f"{statistics.median(settled_times):.2f} s / {worst}",
                       f"target <= {TARGET_REBALANCE_S:.0f} s: {_met(max(times) <= TARGET_REBALANCE_S)}; "
                       f"0.8.2 retry window {RETRY_WINDOW_S:.0f} s; KIP-848 {KIP848_S:.0f} s"))
        report.append((f"rebalance, {mode}: failed attempts over {changes} changes",
                       f"{total_failed} (start-up: {failed_before})",
                       f"target 0: {_met(total_failed == 0)}; changes never settled: {unsettled}"))
    finally:
        zk.stop()
        zk.close()


def _wait_quiet(zk: KazooClient, workers: list[Worker], partitions: int, timeout_s: float,
                since: float | None = None) -> float:
    """Wait until the owners match the membership and every worker has reported fetching after `since` with
    nothing new for a second; returns the time of the last report."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        members = sorted(zk.get_children(f"/consumers/{GROUP}/ids"))
        reports = [w.reports[-1][0] if w.reports else 0.0 for w in workers]
        fresh = since is None or all(r >= since for r in reports)
        if len(members) == len(workers) and fresh and reports and all(reports) and \
                owners_settled(zk, partitions, members) and \
                sum(w.reports[-1][2] for w in workers) == partitions:
            last = max(reports)
            time.sleep(1.0)
            if [w.reports[-1][0] for w in workers] == reports:
                return last
        time.sleep(0.05)
    return None


# ---- the throughput benchmark -----------------------------------------------------------------------------------


def bench_throughput(cluster, zk_connect: str, records: int, report: list) -> None:
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import Producer as ConfluentProducer
    from confluent_kafka import TopicPartition

    from consumer.connector import ZookeeperConsumerConnector
    from consumer.stream import ConsumerTimeout
    from zkbroker.client.producer import Producer

    broker = cluster.brokers[0]
    bootstrap = f"{broker.host}:{broker.port}"
    partitions = 6
    for topic in ("flow-ours", "flow-theirs"):
        _create(zk_connect, topic, partitions, [broker])

    started = time.perf_counter()
    with Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1_000_000}) as ours:
        for _ in range(records):
            ours.send("flow-ours", VALUE)
        ours.flush()
    ours_rate = records / (time.perf_counter() - started)

    theirs = ConfluentProducer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                                "queue.buffering.max.messages": 1_000_000, "log_level": 0})
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                theirs.produce("flow-theirs", VALUE)
                break
            except BufferError:
                theirs.poll(0.005)
        if i % 10_000 == 0:
            theirs.poll(0)
    theirs.flush()
    theirs_rate = records / (time.perf_counter() - started)
    _check_log(broker, "flow-ours", partitions, records)
    _check_log(broker, "flow-theirs", partitions, records)
    report.append((f"produce {records:,} x 100 B, acks=1: ours", f"{ours_rate:,.0f} rec/s",
                   f"confluent-kafka same run {theirs_rate:,.0f} rec/s (ratio {theirs_rate / ours_rate:.2f}x; "
                   f"target <= 2x: {_met(theirs_rate / ours_rate <= 2)}); Activision 2016: confluent "
                   f"{ACTIVISION['confluent-kafka'][0]:,}, kafka-python {ACTIVISION['kafka-python'][0]:,}"))

    connector = ZookeeperConsumerConnector({"zookeeper.connect": zk_connect, "group.id": "throughput",
                                            "auto.offset.reset": "smallest", "consumer.timeout.ms": 3000,
                                            "auto.commit.enable": False, "queued.max.message.chunks": 10})
    try:
        stream = connector.create_message_streams({"flow-ours": 1})["flow-ours"][0]
        count = 0
        started = time.perf_counter()
        try:
            for _ in stream:
                count += 1
                if count == records:
                    break
        except ConsumerTimeout:
            pass
        ours_rate = count / (time.perf_counter() - started)
    finally:
        connector.shutdown()
    if count != records:
        raise RuntimeError(f"our consumer read {count} of {records} records")

    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": "throughput-theirs",
                                  "enable.auto.commit": False, "enable.partition.eof": False, "log_level": 0,
                                  "fetch.wait.max.ms": 100, "queued.min.messages": 1_000_000,
                                  "fetch.queue.backoff.ms": 1})
    consumer.assign([TopicPartition("flow-theirs", p, 0) for p in range(partitions)])
    got = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(10_000, timeout=1.0) if m.error() is None)
    theirs_rate = got / (time.perf_counter() - started)
    consumer.close()
    report.append((f"consume {records:,} x 100 B from the log start: ours (high-level, 1 stream)",
                   f"{ours_rate:,.0f} rec/s",
                   f"confluent-kafka same run {theirs_rate:,.0f} rec/s (ratio {theirs_rate / ours_rate:.2f}x; "
                   f"target <= 2x: {_met(theirs_rate / ours_rate <= 2)}); Activision 2016: confluent "
                   f"{ACTIVISION['confluent-kafka'][1]:,}, kafka-python {ACTIVISION['kafka-python'][1]:,}"))


def _create(zk_connect: str, topic: str, partitions: int, brokers) -> None:
    zk = ZkClient(zk_connect, name="bench-admin")
    zk.start()
    try:
        admin.create_topic(zk, topic, partitions, 1)
    finally:
        zk.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready = True
        for broker in brokers:
            with BrokerConnection(broker.host, broker.port, timeout_s=10) as conn:
                response = conn.send(3, 0, {"topics": [topic]})
            parts = response.topics[0].partitions if response.topics else []
            ready = ready and len(parts) == partitions and all(p.leader >= 0 for p in parts)
        if ready:
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} got no leaders within 60 s")


def _check_log(broker, topic: str, partitions: int, records: int) -> None:
    with BrokerConnection(broker.host, broker.port, timeout_s=10) as conn:
        response = conn.send(2, 0, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": p, "timestamp": -1, "max_num_offsets": 1} for p in range(partitions)]}]})
    total = sum(row.offsets[0] for row in response.topics[0].partitions)
    if total != records:
        raise RuntimeError(f"{topic} holds {total} records, not {records}")


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 changes, 200k records")
    parser.add_argument("--only", choices=("rebalance", "throughput"))
    parser.add_argument("--logs", metavar="DIR", help="keep the consumers' logs in DIR")
    parser.add_argument("--mode", choices=tuple(MODES), help="only this rebalance mode")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(*args.worker)
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="zkbroker-bench-consumer-"))
    zookeeper = ZooKeeperServer(tick_time_ms=200, data_dir=workdir / "zookeeper")
    lab = LabCluster(workdir / "lab")
    report: list[tuple[str, str, str]] = []
    try:
        zookeeper.start()
        cluster = lab.up(brokers=1, zookeeper=zookeeper.connect_string,
                         config=["log.index.size.max.bytes=65536", "num.partitions=1"])
        zk_connect = cluster.zookeeper
        if args.only in (None, "throughput"):
            bench_throughput(cluster, zk_connect, 200_000 if args.quick else 1_000_000, report)
        if args.only in (None, "rebalance"):
            _create(zk_connect, REBALANCE_TOPIC, 1000, cluster.brokers)
            for mode, settings in MODES.items():
                if args.mode and mode != args.mode:
                    continue
                bench_rebalance(zk_connect, Path(args.logs) if args.logs else workdir, 20, 1000,
                                5 if args.quick else 20, mode, settings, report)
    finally:
        try:
            lab.down()
        finally:
            zookeeper.stop()
            shutil.rmtree(workdir, ignore_errors=True)
    width = max(len(r[0]) for r in report)
    print(f"\nconsumer groups and client throughput, {os.cpu_count()} cores{' (--quick)' if args.quick else ''}")
    for name, value, reference in report:
        print(f"{name:<{width}}  {value:>22}  {reference}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
