"""Transactions beside idempotent produce, in one run (issue 27, DESIGN §18).

One confluent-kafka producer (acks=all, linger.ms 5, 100-byte values) writes to a 6-partition topic of
replication factor 3 on a 3-broker lab cluster:
1. idempotent (enable.idempotence, no transactions): records/s;
2. transactional, commits every 100 records: records/s, and the commit latency (commit_transaction's
   duration: EndTxn, PrepareCommit written to the ISR of `__transaction_state`) p50 / p99;
3. transactional, commits every 10,000 records: records/s, commit latency p50 / p99.
References: KIP-98's design measured ~3% of throughput lost with 1 KB records committed every 100 ms, and the
idempotent run of the same invocation (the machine, its load and the cluster are the same).
4. Kafka's transactions system test in its 100,000-record form (zkbroker.lab.txn_copier): confluent-kafka
   copiers from an input topic to a 3-partition output topic (RF 3, min.insync.replicas 2) while each broker
   in turn is hard-killed and restarted, then each copier; with 2 input partitions, then with 1 (whose output
   must be wholly in input order). Prints the time, records/s copied, transactions, and what the concurrent
   read_committed reader and the final read found wrong (nothing, when it passes). The copiers log librdkafka's
   eos debug lines; a copier that dies of a fatal error leaves its log and the brokers' behind (the path is
   printed).

Everything runs on 127.0.0.1: a ZooKeeper of its own and a 3-broker lab cluster, stopped at the end.

Usage: python bench/transactions.py [--quick] [--records N] [--part produce|system-test|all]
                                    [--system-test-records N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zkbroker import admin  # noqa: E402
from zkbroker.client.connection import BrokerConnection  # noqa: E402
from zkbroker.lab import txn_copier  # noqa: E402
from zkbroker.lab.cluster import LabCluster  # noqa: E402
from zkbroker.lab.zookeeper import ZooKeeperServer  # noqa: E402
from zkbroker.protocol.api import ApiKey  # noqa: E402
from zkbroker.zk.client import ZkClient  # noqa: E402

TOPIC, PARTITIONS = "txn-bench", 6
VALUE = b"v" * 100


def _producer(bootstrap: str, **extra):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000,
                     "queue.buffering.max.messages": 200_000, **extra})


def _send(producer, n: int, start: int) -> None:
    for i in range(start, start + n):
        while True:
            try:
                producer.produce(TOPIC, value=VALUE, key=str(i).encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)


def bench_idempotent(bootstrap: str, records: int, report: list) -> float:
    producer = _producer(bootstrap, **{"enable.idempotence": True})
    _send(producer, 1000, 0)  # warm up: metadata, producer id, connections
    producer.flush(60)
    started = time.monotonic()
    _send(producer, records, 1000)
    if producer.flush(120):
        raise RuntimeError("idempotent records left unsent after 120 s")
    rate = records / (time.monotonic() - started)
    report.append(("idempotent produce", f"{rate:,.0f} records/s", "the reference for the rows below"))
    return rate


def bench_transactional(bootstrap: str, records: int, per_transaction: int, idempotent_rate: float,
                        report: list) -> None:
    producer = _producer(bootstrap, **{"transactional.id": f"bench-{per_transaction}"})
    producer.init_transactions(60)
    commits: list[float] = []
    started = time.monotonic()
    sent = 0
    while sent < records:
        n = min(per_transaction, records - sent)
        producer.begin_transaction()
        _send(producer, n, sent)
        t0 = time.monotonic()
        producer.commit_transaction(60)  # flushes what is unsent, then EndTxn
        commits.append(time.monotonic() - t0)
        sent += n
    rate = records / (time.monotonic() - started)
    commits.sort()
    p50 = statistics.median(commits)
    p99 = commits[min(len(commits) - 1, int(0.99 * len(commits)))]
    report.append((f"transactional, {per_transaction:,} records per transaction",
                   f"{rate:,.0f} records/s", f"{100 * rate / idempotent_rate:.0f}% of idempotent; KIP-98 ~97% "
                                             f"(1 KB records, 100 ms transactions)"))
    report.append((f"  commit latency p50 / p99 ({len(commits)} commits)",
                   f"{1000 * p50:.1f} / {1000 * p99:.1f} ms", "commit_transaction: unsent records, EndTxn"))


def bench_system_test(lab: LabCluster, cluster, records: int, input_partitions: int, report: list) -> None:
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in cluster.brokers)
    bounces = [(lambda i=b.id: lab.kill(i), lambda i=b.id: lab.start(i)) for b in cluster.brokers]
    with tempfile.TemporaryDirectory(prefix="zkbroker-bench-copiers-") as workdir:
        outcome = txn_copier.run(Path(workdir), bootstrap,
                                 lambda name, n: _create(cluster.zookeeper, cluster.brokers, name, n),
                                 bounces, records, input_partitions=input_partitions, transaction_size=500,
                                 timeout_s=900, topics=(f"in-{input_partitions}", f"out-{input_partitions}"),
                                 librdkafka_debug="eos")
        kept = _keep_logs(outcome.copier_logs, lab)
    verdict = "; ".join(outcome.problems) or "every record once, in input order per partition"
    report.append((f"system test, {input_partitions} input partition(s) -> 3, {records:,} records",
                   f"{outcome.seconds:.1f} s, {records / outcome.seconds:,.0f} records/s", verdict))
    report.append((f"  {outcome.broker_bounces} broker and {outcome.copier_bounces} copier hard kills",
                   f"{outcome.commits} transactions", f"{outcome.bounced_while_copying} kills while copying"))
    for error in outcome.fatal_errors:
        report.append(("  a copier died, restarted", "", error[:200]))
    if kept is not None:
        report.append(("  its librdkafka eos log and the brokers' logs", "", str(kept)))


def _keep_logs(copier_logs: list[Path], lab: LabCluster) -> Path | None:
    """A copier that died of a fatal error is a finding to explain: its log (librdkafka's eos debug lines) and the
    brokers' server.log so far, copied to a directory the bench leaves behind."""
    if not copier_logs:
        return None
    kept = Path(tempfile.mkdtemp(prefix="zkbroker-bench-copier-death-"))
    for log in copier_logs:
        shutil.copy(log, kept / log.name)
    for log in lab.dir.glob("broker-*/server.log"):
        shutil.copy(log, kept / f"{log.parent.name}-server.log")
    return kept


def _create(zk_connect: str, brokers, topic: str = TOPIC, partitions: int = PARTITIONS) -> None:
    zk = ZkClient(zk_connect, name="bench-admin")
    zk.start()
    try:
        admin.create_topic(zk, topic, partitions, 3, {"min.insync.replicas": "2"})
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
    parser.add_argument("--quick", action="store_true", help="50,000 records per run")
    parser.add_argument("--records", type=int, help="records per run (default 200,000)")
    parser.add_argument("--part", choices=("produce", "system-test", "all"), default="all")
    parser.add_argument("--system-test-records", type=int, default=100_000)
    args = parser.parse_args()
    records = args.records or (50_000 if args.quick else 200_000)
    workdir = Path(tempfile.mkdtemp(prefix="zkbroker-bench-transactions-"))
    zookeeper = ZooKeeperServer(tick_time_ms=200, data_dir=workdir / "zookeeper")
    lab = LabCluster(workdir / "lab")
    report: list[tuple[str, str, str]] = []
    try:
        zookeeper.start()
        cluster = lab.up(brokers=3, zookeeper=zookeeper.connect_string,
                         config=["transaction.state.log.num.partitions=6", "offsets.topic.num.partitions=6"])
        if args.part in ("produce", "all"):
            _create(cluster.zookeeper, cluster.brokers)
            bootstrap = ",".join(f"{b.host}:{b.port}" for b in cluster.brokers)
            idempotent = bench_idempotent(bootstrap, records, report)
            for per_transaction in (100, 10_000):
                bench_transactional(bootstrap, records, per_transaction, idempotent, report)
        if args.part in ("system-test", "all"):
            for input_partitions in (2, 1):
                bench_system_test(lab, cluster, args.system_test_records, input_partitions, report)
    finally:
        try:
            lab.down()
        finally:
            zookeeper.stop()
            shutil.rmtree(workdir, ignore_errors=True)
            _print(report, records if args.part != "system-test" else None)
    return 0


def _print(report: list, records: int | None) -> None:
    if not report:
        return
    width = max(len(r[0]) for r in report)
    runs = f"{records:,} records of 100 bytes per run, " if records is not None else ""
    print(f"\ntransactions, {runs}RF 3, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    for name, value, reference in report:
        print(f"{name:<{width}}  {value:>20}  {reference}")


if __name__ == "__main__":
    sys.exit(main())
