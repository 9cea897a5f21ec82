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
Not yet: the issue's 10,000/100,000-partition runs with ZooKeeper mode's figures beside (bench/failover.py).

Usage: python bench/kraft.py [--partitions 600] [--rounds 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.harness import wait_for  # noqa: E402
from tests.integration.kraft_support import leader_of, make_kraft_cluster, stop_all  # noqa: E402

PARTITIONS_PER_TOPIC = 100
SETTLE_S = 3.0
FETCH_TIMEOUT_MS = 2000  # controller.quorum.fetch.timeout.ms (the default)
HEARTBEAT_MS = 2000  # broker.heartbeat.interval.ms (the default)


def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create(client, name: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    futures = client.create_topics([NewTopic(name, partitions, 3)], operation_timeout=60, request_timeout=120)
    futures[name].result(120)


def unfenced(broker, before: int) -> bool:
    return len(broker.log_lines("Unfenced: serving")) > before


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, default=600)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--keep", metavar="DIR", help="keep the cluster's directories here")
    args = p.parse_args()
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
            create(client, f"bench-{n // PARTITIONS_PER_TOPIC}", min(PARTITIONS_PER_TOPIC, args.partitions - n))
        print(f"{args.partitions} partitions (replication factor 3) created through a broker in "
              f"{time.monotonic() - started:.1f} s")

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
            broker.terminate(timeout_s=60)
            stops.append(time.monotonic() - t0)
            t0 = time.monotonic()
            broker.start()
            wait_for(lambda b=broker, n=before: unfenced(b, n), 120, "the restarted broker unfenced", interval_s=0.05)
            restarts.append(time.monotonic() - t0)
            time.sleep(SETTLE_S)
        from_snapshot = len(broker.log_lines("Starting from snapshot"))
        print(f"broker restart: controlled shutdown {statistics.median(stops) * 1000:.0f} ms, start to unfenced "
              f"{statistics.median(restarts) * 1000:.0f} ms (median of {args.rounds}; {from_snapshot} of the "
              f"starts from its own snapshot; broker.heartbeat.interval.ms {HEARTBEAT_MS})")
    finally:
        stop_all(brokers)
        stop_all(controllers)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
