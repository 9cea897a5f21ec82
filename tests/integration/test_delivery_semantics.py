"""Delivery semantics of the ZooKeeper consumer, each proven by its example program (examples/) running as
separate processes: three groups read one topic under a steady produce stream while 10 membership changes
(joins, SIGKILLs, clean closes) hit every group at once. Judged against the log itself, read back with the
simple consumer: at-least-once consumed every (partition, offset); at-most-once none twice; the SQLite
exactly-once sink holds every one exactly once."""

from __future__ import annotations

import collections
import sqlite3
import time

import pytest

from consumer.simple import SimpleConsumer
from tests.integration.consumers import ConsumerProcess, SteadyProducer, members, owners, wait_settled
from tests.integration.harness import create_topic, wait_for

pytestmark = pytest.mark.integration

TOPIC = "stream"
PARTITIONS = 6
GROUPS = {"alo": "at_least_once", "amo": "at_most_once", "eo": "sqlite_exactly_once"}
# Each step applied to every group: + starts a consumer, k SIGKILLs the oldest, t closes it cleanly.
CHANGES = ["+", "k", "+", "t", "+", "+", "k", "t", "+", "k"]


def consumed_from_file(path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    return [(int(p), int(o)) for _, p, o, _ in (line.split(" ", 3) for line in path.read_text().splitlines()
                                                   if line.count(" ") >= 3)]


def consumed_from_db(path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    db = sqlite3.connect(path, timeout=30)
    try:
        return [(p, o) for p, o in db.execute("SELECT partition, offset FROM records")]
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


@pytest.mark.timeout(300)  # ten membership changes, each waiting out a session on a machine running tests beside it
def test_at_least_once_at_most_once_and_exactly_once_through_10_membership_changes(
        tmp_path, zk, zk_connect, brokers):
    serving = brokers(1, 2)
    create_topic(zk_connect, TOPIC, PARTITIONS, 1, serving)
    bootstrap = ",".join(b.bootstrap for b in serving)
    live: dict[str, list[ConsumerProcess]] = {g: [] for g in GROUPS}
    made: list[ConsumerProcess] = []
    counter = collections.Counter()

    def start(group: str) -> None:
        counter[group] += 1
        name = f"{group}-{counter[group]}"
        sink = tmp_path / ("eo.db" if group == "eo" else f"{name}.txt")
        # A 3 s ZooKeeper session, not the fast 1 s: under a loaded suite a 1 s session expired again and again,
        # each expiry another rebalance of the whole group, and one run never settled within 90 s.
        process = ConsumerProcess(tmp_path, GROUPS[group], zk_connect, group, TOPIC, name, sink,
                                  zookeeper_session_timeout_ms=3000)
        live[group].append(process)
        made.append(process)

    producer = SteadyProducer(bootstrap, TOPIC, rate=150)
    try:
        for group in GROUPS:
            start(group)
            start(group)
        for group in GROUPS:
            wait_settled(zk, group, TOPIC, PARTITIONS, expected_members=2)
        producer.start()
        for change in CHANGES:
            for group in GROUPS:
                if change == "+":
                    start(group)
                elif change == "k":
                    live[group].pop(0).kill()
                else:
                    assert live[group].pop(0).terminate() == 0
            for group in GROUPS:
                # A killed member's session must expire first; 90 s bounds that on a busy machine.
                try:
                    wait_settled(zk, group, TOPIC, PARTITIONS, expected_members=len(live[group]), timeout_s=90,
                                 stable_s=0.3)
                except AssertionError as e:
                    raise AssertionError(f"{e} after change {change!r}: members {members(zk, group)}, owners "
                                         f"{owners(zk, group, TOPIC)}\n" + "\n".join(
                                             f"--- {p.name} (the last 30 lines of its log)\n"
                                             + "\n".join(p.log().splitlines()[-30:]) for p in live[group])) from None
        time.sleep(1.0)
        producer.stop()
        assert not producer.errors
        assert len(producer.sent) > 500

        # The log as the leaders hold it: every (partition, offset) a consumer could have been handed.
        with SimpleConsumer(bootstrap) as simple:
            log = {(p, m.offset) for p in range(PARTITIONS) for m in simple.iter_messages(TOPIC, p, 0)}
        values_in_log = len(log)
        assert values_in_log >= len(producer.sent)

        def files(group: str):
            return [tmp_path / f"{group}-{i}.txt" for i in range(1, counter[group] + 1)]

        def at_least_once_done() -> bool:
            return log <= {po for f in files("alo") for po in consumed_from_file(f)}

        def exactly_once_done() -> bool:
            return len(consumed_from_db(tmp_path / "eo.db")) >= values_in_log

        wait_for(at_least_once_done, 60, "the at-least-once group to consume the whole log")
        wait_for(exactly_once_done, 60, "the exactly-once group to store the whole log")
        time.sleep(0.5)

        alo = [po for f in files("alo") for po in consumed_from_file(f)]
        assert set(alo) == log  # nothing lost (duplicates allowed)

        amo = [po for f in files("amo") for po in consumed_from_file(f)]
        duplicates = [po for po, n in collections.Counter(amo).items() if n > 1]
        assert not duplicates, f"at-most-once processed {duplicates[:5]} twice"
        assert set(amo) <= log

        eo = consumed_from_db(tmp_path / "eo.db")
        assert len(eo) == len(set(eo)) == len(log) and set(eo) == log  # neither lost nor duplicated
        for process in made:
            assert "Traceback" not in process.log(), process.log()[-2000:]
        for group in GROUPS:
            assert len(members(zk, group)) == len(live[group])
    finally:
        if producer.is_alive():
            producer.stop()
        for process in made:
            process.cleanup()
