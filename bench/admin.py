"""The Admin API over the wire (issue 23), beside the ZooKeeper write floor measured in the same run.

1. Topics created per second through CreateTopics (our AdminClient, one connection to the controller), counted
   when the answer comes, i.e. once every partition has a leader (DelayedCreatePartitions):
   - 1,000 topics of 1 partition in one request;
   - 100 topics of 1 partition, one request each (each waits for its leader), as `topics --bootstrap-server`
     creates them;
   - 1 topic of 10,000 partitions.
   Reference: the ZooKeeper floor -- the two znodes a topic's creation writes (`/config/topics/T`,
   `/brokers/topics/T`), created one after the other as zkbroker.admin writes them, in the same ZooKeeper, in
   the same run: no creation over the wire can be faster than its own writes.
2. A dynamic config change in force on every broker: IncrementalAlterConfigs of a topic's retention.ms (the topic
   has a replica on each broker) and of the cluster-default message.max.bytes, measured from the request to the
   last broker's `config_changed` event in the lab's timeline (written once the broker's logs have the new
   settings). Reference: ZooKeeper's watch delivery, which the notification travels by.

Everything runs on 127.0.0.1: a ZooKeeper of its own and a 3-broker lab cluster, stopped at the end.

Usage: python bench/admin.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zkbroker.client.admin_client import BROKER, TOPIC, AdminClient  # noqa: E402
from zkbroker.lab.cluster import LabCluster  # noqa: E402
from zkbroker.lab.zookeeper import ZooKeeperServer  # noqa: E402
from zkbroker.protocol.errors import ErrorCode  # noqa: E402
from zkbroker.timeline import path_in  # noqa: E402
from zkbroker.zk.client import ZkClient  # noqa: E402
from zkbroker.zk.znodes import EntityConfig, TopicAssignment  # noqa: E402


def zookeeper_floor(zk_connect: str, topics: int) -> float:
    """Topics per second if creating one cost only its two znodes, written one after the other."""
    zk = ZkClient(zk_connect, name="bench-floor")
    zk.start()
    try:
        zk.ensure_path("/bench-floor/config")
        zk.ensure_path("/bench-floor/topics")
        config, assignment = EntityConfig({}).encode(), TopicAssignment({0: (1,)}).encode()
        started = time.monotonic()
        for i in range(topics):
            zk.kazoo.create(f"/bench-floor/config/t{i}", config)
            zk.kazoo.create(f"/bench-floor/topics/t{i}", assignment)
        return topics / (time.monotonic() - started)
    finally:
        zk.kazoo.delete("/bench-floor", recursive=True)
        zk.close()


def _created(results: dict) -> None:
    failed = {n: r for n, r in results.items() if r[0] != ErrorCode.NONE}
    if failed:
        name, (code, message) = next(iter(failed.items()))
        raise RuntimeError(f"{len(failed)} topics not created, e.g. {name}: {ErrorCode(code).name} {message or ''}")


def bench_create(client: AdminClient, report: list, quick: bool, floor: float) -> None:
    many = 200 if quick else 1000
    started = time.monotonic()
    _created(client.create_topics([{"name": f"many-{i}", "num_partitions": 1, "replication_factor": 1}
                                   for i in range(many)], timeout_ms=300_000))
    elapsed = time.monotonic() - started
    report.append((f"CreateTopics, {many:,} topics of 1 partition in one request", f"{many / elapsed:,.0f} topics/s",
                   f"ZooKeeper floor {floor:,.0f} topics/s ({elapsed:.1f} s in all)"))
    singles = 20 if quick else 100
    started = time.monotonic()
    for i in range(singles):
        _created(client.create_topics([{"name": f"one-{i}", "num_partitions": 1, "replication_factor": 1}],
                                      timeout_ms=60_000))
    elapsed = time.monotonic() - started
    report.append((f"CreateTopics, {singles} topics one request each", f"{singles / elapsed:,.0f} topics/s",
                   f"{elapsed / singles * 1000:.0f} ms per topic to its leader"))
    partitions = 2000 if quick else 10_000
    started = time.monotonic()
    _created(client.create_topics([{"name": "wide", "num_partitions": partitions, "replication_factor": 1}],
                                  timeout_ms=600_000))
    elapsed = time.monotonic() - started
    report.append((f"CreateTopics, 1 topic of {partitions:,} partitions", f"{elapsed:.1f} s",
                   f"{partitions / elapsed:,.0f} partitions/s to their leaders"))


def _applied(timeline: Path, entity: str, start: int, brokers: int) -> float | None:
    """When the last broker recorded the change of `entity` in the timeline after byte `start`, or None yet.
    Only what was written since the change is read: after 10,000 partitions the whole file takes longer to parse
    than a change takes to apply (the first full run gave up at 30 s reading it)."""
    last: dict[str, float] = {}
    with timeline.open("rb") as f:
        f.seek(start)
        for line in f.read().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line being written
            if event["kind"] == "config_changed" and f"{event['entity_type']}/{event['entity_name']}" == entity:
                last[event["source"]] = max(last.get(event["source"], 0), event["ts"])
    return max(last.values()) if len(last) == brokers else None


def bench_config_change(client: AdminClient, timeline: Path, report: list, quick: bool) -> None:
    _created(client.create_topics([{"name": "tuned", "num_partitions": 3, "replication_factor": 3}]))
    changes = 5 if quick else 20
    for label, rtype, name, entity, key, values in (
            ("a topic's retention.ms", TOPIC, "tuned", "topics/tuned", "retention.ms", ("600000", "700000")),
            ("the cluster-default message.max.bytes", BROKER, "", "brokers/<default>", "message.max.bytes",
             ("900000", "1000012"))):
        took = []
        for i in range(changes):
            start = timeline.stat().st_size
            since = time.time() * 1000
            client.alter_configs(rtype, name, {key: values[i % 2]}, incremental_ops={key: 0})
            deadline = time.monotonic() + 30
            while (done := _applied(timeline, entity, start, 3)) is None and time.monotonic() < deadline:
                time.sleep(0.005)
            if done is None:
                raise RuntimeError(f"the change of {key} was not applied by every broker within 30 s")
            took.append(done - since)
        report.append((f"IncrementalAlterConfigs, {label}, in force on all 3 brokers",
                       f"median {statistics.median(took):.0f} ms, max {max(took):.0f} ms",
                       f"{changes} changes; through /config/changes and each broker's watch"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 topics, 20 singles, 2,000 partitions, 5 changes")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="zkbroker-bench-admin-"))
    zookeeper = ZooKeeperServer(tick_time_ms=200, data_dir=workdir / "zookeeper")
    lab = LabCluster(workdir / "lab")
    report: list[tuple[str, str, str]] = []
    try:
        zookeeper.start()
        cluster = lab.up(brokers=3, zookeeper=zookeeper.connect_string,
                         config=["log.index.size.max.bytes=65536", "delete.topic.enable=true"])
        floor = zookeeper_floor(cluster.zookeeper, 200 if args.quick else 1000)
        bootstrap = ",".join(f"{b.host}:{b.port}" for b in cluster.brokers)
        with AdminClient(bootstrap, client_id="bench-admin", timeout_s=600) as client:
            bench_create(client, report, args.quick, floor)
            bench_config_change(client, path_in(workdir / "lab"), report, args.quick)
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
    print(f"\nthe Admin API, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
          f"{' (--quick)' if quick else ''}")
    for name, value, reference in report:
        print(f"{name:<{width}}  {value:>28}  {reference}")


if __name__ == "__main__":
    sys.exit(main())
