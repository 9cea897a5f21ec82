"""The group coordinator, beside its references and beside 0.8.2's ZooKeeper group, in one run.

1. Rebalance: 20 confluent-kafka consumers (threads of this process, heartbeat.interval.ms 300, range) in one
   group on a 1,000-partition topic; one consumer joins or leaves (a clean close), 20 changes in all, with
   group.initial.rebalance.delay.ms 0. Measured from the membership change (subscribe, or close) to every
   partition assigned exactly once under the new membership (the last on_assign callback). Target: median
   <= 1 s, max <= 3 s. References: KIP-848's 5 s for 10 consumers over 900 partitions; 0.8.2's 4 x 2 s retry
   window; and, unless --no-zookeeper-group, bench/consumer.py's ZooKeeper group measured in the same run.
2. Offset commits per second from one client (one connection, OffsetCommit v2, each answered before the next
   is sent) with acks=-1 on an offsets topic of replication factor 3, counted as Kafka's own offset-commit-rate
   counts them (GroupMetadataManager records one commit per partition offset written): 100 partitions per
   request. Target >= 10,000. One partition per request gives the round trip of one acks=-1 commit.
3. Coordinator failover: 3 consumers on a 12-partition topic of replication factor 3 while a producer writes;
   the coordinator's broker is SIGKILLed; measured until the group consumes again (a record produced after the
   kill is read) and until every partition has. Reference: zookeeper.session.timeout.ms, after which the
   controller learns of the death.

Everything runs on 127.0.0.1: a ZooKeeper of its own and a 3-broker lab cluster, stopped at the end.

Usage: python bench/coordinator.py [--quick] [--only rebalance|commits|failover] [--no-zookeeper-group]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
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
from zkbroker.protocol.api import ApiKey  # noqa: E402
from zkbroker.zk.client import ZkClient  # noqa: E402

TARGET_MEDIAN_S, TARGET_MAX_S = 1.0, 3.0
KIP848_S = 5.0
RETRY_WINDOW_S = 4 * 2.0
TARGET_COMMITS = 10_000
SESSION_TIMEOUT_MS = 6000  # the lab brokers' zookeeper.session.timeout.ms (0.8.2's default)


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


class GroupMember:
    """A confluent-kafka consumer in a thread; `assigned` holds (time, partitions) of each on_assign."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, record_reads: bool = False) -> None:
        from confluent_kafka import Consumer

        self.assigned: list[tuple[float, set[int]]] = []
        self.reads: list[tuple[float, int, bytes]] = []
        self.record_reads = record_reads
        self._stop = threading.Event()
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "enable.auto.commit": True,
            "auto.commit.interval.ms": 200, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300, "partition.assignment.strategy": "range", "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000})
        self.consumer.subscribe([topic], on_assign=self._on_assign)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_assign(self, consumer, partitions) -> None:
        self.assigned.append((time.monotonic(), {p.partition for p in partitions}))

    def _run(self) -> None:
        while not self._stop.is_set():
            for m in self.consumer.consume(num_messages=1000, timeout=0.05):
                if self.record_reads and m.error() is None:
                    self.reads.append((time.monotonic(), m.partition(), m.value()))
        self.consumer.close()

    def current(self) -> set[int]:
        return self.assigned[-1][1] if self.assigned else set()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)


def _settled(members: list[GroupMember], partitions: int, since: float) -> float | None:
    """The time of the last assignment, once every member has one after `since` and together they own each
    partition exactly once."""
    if not members or any(not m.assigned or m.assigned[-1][0] < since for m in members):
        return None
    owned = [p for m in members for p in m.current()]
    if len(owned) != partitions or len(set(owned)) != partitions:
        return None
    return max(m.assigned[-1][0] for m in members)


def _wait_settled(members: list[GroupMember], partitions: int, since: float, timeout_s: float) -> float | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = _settled(members, partitions, since)
        if done is not None:
            time.sleep(0.5)  # nothing newer meanwhile: the group is quiet
            if _settled(members, partitions, since) == done:
                return done
        time.sleep(0.02)
    return None


def bench_rebalance(bootstrap: str, topic: str, partitions: int, consumers: int, changes: int, report: list) -> None:
    group = "bench-coordinator"
    members = [GroupMember(bootstrap, group, topic, f"c{n}") for n in range(consumers)]
    if _wait_settled(members, partitions, 0.0, 180) is None:
        raise RuntimeError(f"the group of {consumers} did not settle at start-up")
    times: list[float] = []
    for change in range(changes):
        t0 = time.monotonic()
        if change % 2 == 0:
            members.append(GroupMember(bootstrap, group, topic, f"c{consumers + change}"))
        else:
            leaving = members.pop(0)
            leaving.stop()  # close(): LeaveGroup
        done = _wait_settled(members, partitions, t0, 60)
        times.append(float("inf") if done is None else done - t0)
        print(f"  [coordinator] change {change + 1:2d} ({'join' if change % 2 == 0 else 'leave'}): "
              f"{'not settled in 60 s' if done is None else f'{done - t0:.2f} s'}", flush=True)
    for member in members:
        member.stop()
    finite = [t for t in times if t != float("inf")] or [float("inf")]
    median, worst = statistics.median(finite), max(times)
    report.append((f"rebalance, coordinator: median / max over {changes} changes", f"{median:.2f} s / {worst:.2f} s",
                   f"target median <= {TARGET_MEDIAN_S:.0f} s: {_met(median <= TARGET_MEDIAN_S)}, max <= "
                   f"{TARGET_MAX_S:.0f} s: {_met(worst <= TARGET_MAX_S)}; KIP-848 {KIP848_S:.0f} s; 0.8.2 retry "
                   f"window {RETRY_WINDOW_S:.0f} s"))


def bench_zookeeper_group(zk_connect: str, workdir: Path, topic: str, changes: int, report: list) -> None:
    """bench/consumer.py's ZooKeeper group (0.8.2's defaults) on the same cluster and topic."""
    spec = importlib.util.spec_from_file_location("bench_consumer", Path(__file__).with_name("consumer.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert topic == module.REBALANCE_TOPIC  # its consumer processes read that topic
    module.bench_rebalance(zk_connect, workdir, 20, 1000, changes, "0.8.2 defaults", {}, report)


def bench_commits(bootstrap_hosts: list[tuple[str, int]], topic: str, seconds: float, report: list) -> None:
    host, port = bootstrap_hosts[0]
    group = "bench-commits"
    coordinator = _coordinator(host, port, group)
    with BrokerConnection(*coordinator, client_id="bench-commits", timeout_s=30) as conn:
        for per_request in (1, 100):
            sent = committed = 0
            deadline = time.monotonic() + seconds
            started = time.monotonic()
            while time.monotonic() < deadline:
                sent += 1
                response = conn.send(ApiKey.OFFSET_COMMIT, 2, {
                    "group_id": group, "generation_id": -1, "member_id": "", "retention_time_ms": -1,
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": p, "offset": sent, "metadata": ""} for p in range(per_request)]}]})
                errors = {p.error_code for t in response.topics for p in t.partitions}
                if errors != {0}:
                    raise RuntimeError(f"offset commit failed: {errors}")
                committed += per_request
            elapsed = time.monotonic() - started
            rate = committed / elapsed
            if per_request == 1:
                # One offset per request, each answered before the next: this is the latency of an acks=-1
                # write replicated to two followers, not a throughput any client is limited to.
                report.append(("offset commit round trip, acks=-1 RF 3, 1 partition per request",
                               f"{1000 * elapsed / sent:.1f} ms ({sent / elapsed:,.0f} req/s)",
                               "a leader append, both followers' fetches and their next fetch"))
            else:
                report.append((f"offset commits/s, acks=-1 RF 3, {per_request} partitions per request",
                               f"{rate:,.0f} offsets/s ({sent / elapsed:,.0f} req/s)",
                               f"target >= {TARGET_COMMITS:,}: {_met(rate >= TARGET_COMMITS)}"))


def _coordinator(host: str, port: int, group: str) -> tuple[str, int]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with BrokerConnection(host, port, timeout_s=10) as conn:
            response = conn.send(ApiKey.FIND_COORDINATOR, 0, {"group_id": group})
        if response.error_code == 0:
            return response.host, response.port
        time.sleep(0.2)
    raise RuntimeError("no coordinator within 60 s")


def bench_failover(lab: LabCluster, cluster, topic: str, report: list) -> None:
    from confluent_kafka import Producer

    bootstrap = ",".join(f"{b.host}:{b.port}" for b in cluster.brokers)
    group = "bench-failover"
    members = [GroupMember(bootstrap, group, topic, f"f{n}", record_reads=True) for n in range(3)]
    if _wait_settled(members, 12, 0.0, 120) is None:
        raise RuntimeError("the failover group did not settle")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 60000})
    stop = threading.Event()
    killed_at = [None]

    def produce() -> None:
        n = 0
        while not stop.is_set():
            tag = b"after" if killed_at[0] is not None else b"before"
            producer.produce(topic, key=str(n).encode(), value=tag + b"-" + str(n).encode())
            producer.poll(0)
            n += 1
            time.sleep(0.002)
        producer.flush(30)

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    time.sleep(3)
    host, port = _coordinator(cluster.brokers[0].host, cluster.brokers[0].port, group)
    victim = next(b for b in cluster.brokers if (b.host, b.port) == (host, port))
    killed_at[0] = time.monotonic()
    lab.kill(victim.id)
    first = every = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and every is None:
        after = [(t, p) for m in members for t, p, v in list(m.reads) if v.startswith(b"after")]
        if after and first is None:
            first = min(t for t, _ in after) - killed_at[0]
        seen: dict[int, float] = {}
        for t, p in after:
            seen[p] = min(seen.get(p, t), t)
        if len(seen) == 12:
            every = max(seen.values()) - killed_at[0]
        time.sleep(0.1)
    stop.set()
    writer.join(60)
    for member in members:
        member.stop()
    report.append(("coordinator SIGKILL -> the group consuming again (first record / every partition)",
                   f"{first:.2f} s / {every:.2f} s" if first is not None and every is not None
                   else f"{first} / {every} (not within 90 s)",
                   f"zookeeper.session.timeout.ms {SESSION_TIMEOUT_MS / 1000:.0f} s"))


def _create(zk_connect: str, topic: str, partitions: int, replication: int, brokers) -> None:
    zk = ZkClient(zk_connect, name="bench-admin")
    zk.start()
    try:
        admin.create_topic(zk, topic, partitions, replication)
    finally:
        zk.close()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with BrokerConnection(brokers[0].host, brokers[0].port, timeout_s=10) as conn:
            response = conn.send(ApiKey.METADATA, 0, {"topics": [topic]})
        parts = response.topics[0].partitions if response.topics else []
        if len(parts) == partitions and all(p.leader >= 0 for p in parts):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic} got no leaders within 120 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 changes, 3 s of commits")
    parser.add_argument("--only", choices=("rebalance", "commits", "failover"))
    parser.add_argument("--no-zookeeper-group", action="store_true", help="skip bench/consumer.py's ZooKeeper group")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="zkbroker-bench-coordinator-"))
    zookeeper = ZooKeeperServer(tick_time_ms=200, data_dir=workdir / "zookeeper")
    lab = LabCluster(workdir / "lab")
    report: list[tuple[str, str, str]] = []
    changes = 6 if args.quick else 20
    try:
        zookeeper.start()
        cluster = lab.up(brokers=3, zookeeper=zookeeper.connect_string,
                         config=["log.index.size.max.bytes=65536", "group.initial.rebalance.delay.ms=0"])
        zk_connect = cluster.zookeeper
        bootstrap = ",".join(f"{b.host}:{b.port}" for b in cluster.brokers)
        if args.only in (None, "commits"):
            _create(zk_connect, "committed", 100, 1, cluster.brokers)
            bench_commits([(b.host, b.port) for b in cluster.brokers], "committed", 3 if args.quick else 10, report)
        if args.only in (None, "rebalance"):
            _create(zk_connect, "wide", 1000, 1, cluster.brokers)
            bench_rebalance(bootstrap, "wide", 1000, 20, changes, report)
            if not args.no_zookeeper_group:
                try:
                    bench_zookeeper_group(zk_connect, workdir, "wide", changes, report)
                except RuntimeError as e:  # a loaded machine may keep 0.8.2's group from settling at all
                    report.append(("rebalance, ZooKeeper group (bench/consumer.py, 0.8.2 defaults)", "failed", str(e)))
        if args.only in (None, "failover"):
            _create(zk_connect, "moving", 12, 3, cluster.brokers)
            bench_failover(lab, cluster, "moving", report)
    finally:
        try:
            lab.down()
        finally:
            zookeeper.stop()
            shutil.rmtree(workdir, ignore_errors=True)
            _print(report, args.quick)
    return 0


def _print(report: list, quick: bool) -> None:
    if not report:
        return
    width = max(len(r[0]) for r in report)
    print(f"\ngroup coordinator, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
          f"{' (--quick)' if quick else ''}")
    for name, value, reference in report:
        print(f"{name:<{width}}  {value:>28}  {reference}")


if __name__ == "__main__":
    sys.exit(main())
