"""`zkbroker consumer-groups` (DESIGN §12) on a live coordinator group, and `consumer-offset-checker` showing
offsets from `__consumer_offsets` and from ZooKeeper, as 0.8.2's did."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid

import pytest

from tests.integration.clients import PYTHON_CLIENTS, ZOOKEEPER_OFFSETS_CLIENT
from tests.integration.group_support import Member, stop_all, wait_for_values
from tests.integration.harness import create_topic, wait_for

pytestmark = pytest.mark.integration


def zkbroker(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zkbroker", *argv], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


HEADER = re.compile(r"^GROUP +TOPIC +PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG +CONSUMER-ID +HOST +CLIENT-ID$")


def table(stdout: str) -> list[list[str]]:
    lines = stdout.splitlines()
    assert lines[0] == "" and HEADER.match(lines[1]), stdout
    return [line.split() for line in lines[2:]]


@pytest.mark.timeout(180)
def test_consumer_groups_lists_and_describes_a_group_with_and_without_members(brokers, zk_connect, tmp_path):
    (broker,) = brokers(1)
    topic = f"described-{uuid.uuid4().hex[:6]}"
    create_topic(zk_connect, topic, 3, 1, [broker])
    values = [f"v{i}" for i in range(30)]
    records = [(str(i % 3).encode(), v.encode()) for i, v in enumerate(values)]
    PYTHON_CLIENTS[2].produce(broker.bootstrap, topic, records)
    group = f"g-{uuid.uuid4().hex[:6]}"
    member = Member(tmp_path, "confluent-kafka", broker.bootstrap, group, "reader", topics=[topic])
    try:
        wait_for_values([member], set(values), 60)
        listed = zkbroker("consumer-groups", "--bootstrap-server", broker.bootstrap, "--list")
        assert listed.returncode == 0 and group in listed.stdout.splitlines(), listed

        def described():
            out = zkbroker("consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", group)
            rows = table(out.stdout)
            # A partition the keys never reached has nothing to commit: "-" for CURRENT-OFFSET and LAG.
            done = all(r[3] == r[4] or (r[3], r[4], r[5]) == ("-", "0", "-") for r in rows)
            return rows if done and len(rows) == 3 else None

        rows = wait_for(described, 30, "every partition committed to its end")
        assert [(r[0], r[1], r[2]) for r in rows] == [(group, topic, str(p)) for p in range(3)]
        assert sum(int(r[4]) for r in rows) == 30
        assert {r[6] for r in rows} == {next(iter({r[6] for r in rows}))} and rows[0][6].startswith("reader-")
        assert all(r[7] == "/127.0.0.1" and r[8] == "reader" for r in rows)
    finally:
        stop_all([member])
    empty = zkbroker("consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", group)
    assert empty.returncode == 0
    assert empty.stderr.strip() == f"Consumer group '{group}' has no active members."
    assert [r[3:] for r in table(empty.stdout)] == [[r[3], r[4], "0", "-", "-", "-"] for r in rows if r[3] != "-"]
    missing = zkbroker("consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", "nobody")
    assert missing.returncode == 1 and "Consumer group 'nobody' does not exist." in missing.stderr


@pytest.mark.timeout(120)
def test_consumer_offset_checker_shows_offsets_from_either_place(brokers, zk_connect, zk):
    (broker,) = brokers(1)
    topic = f"checked-{uuid.uuid4().hex[:6]}"
    create_topic(zk_connect, topic, 2, 1, [broker])
    PYTHON_CLIENTS[2].produce(broker.bootstrap, topic, [(b"k", b"v")] * 20)
    kafka_group, zk_group = f"k-{uuid.uuid4().hex[:6]}", f"z-{uuid.uuid4().hex[:6]}"
    PYTHON_CLIENTS[2].commit(broker.bootstrap, kafka_group, topic, {0: 4, 1: 0})  # OffsetCommit v2: the topic
    ZOOKEEPER_OFFSETS_CLIENT.commit(broker.bootstrap, zk_group, topic, {0: 3, 1: 0})  # v0: ZooKeeper
    assert zk.get(f"/consumers/{kafka_group}/offsets/{topic}/0") is None
    for group, offset in ((kafka_group, "4"), (zk_group, "3")):
        out = zkbroker("consumer-offset-checker", "--zookeeper", zk_connect, "--group", group, "--topic", topic)
        assert out.returncode == 0, out.stderr
        rows = [line.split() for line in out.stdout.splitlines()[1:]]
        assert [(r[0], r[1], r[2], r[3]) for r in rows] == [(group, topic, "0", offset), (group, topic, "1", "0")]
