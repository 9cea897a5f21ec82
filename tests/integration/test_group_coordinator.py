"""The group coordinator with unmodified real clients (issue 14's Done-when): confluent-kafka's subscribe()
(range and roundrobin), kafka-python's KafkaConsumer with a group, and KafkaJS (tests/node/), each member its own
process (tests/integration/group_member.py)."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.clients import PYTHON_CLIENTS
from tests.integration.group_support import Member, read_values, stop_all, wait_for_assignments, wait_for_values
from tests.integration.harness import create_topic

pytestmark = pytest.mark.integration

CONFLUENT = PYTHON_CLIENTS[2]


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce_values(bootstrap: str, topic: str, count: int, tag: str = "") -> set[str]:
    values = [f"{tag}{topic}-{i}" for i in range(count)]
    CONFLUENT.produce(bootstrap, topic, [(str(i).encode(), v.encode()) for i, v in enumerate(values)], timeout_s=60)
    return set(values)


PY_GROUP_CLIENTS = [("confluent-kafka", "range"), ("confluent-kafka", "roundrobin"), ("kafka-python", "range")]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("client", "assignor"), PY_GROUP_CLIENTS, ids=lambda v: v)
def test_three_members_own_twelve_partitions_exactly_once_and_read_every_record(client, assignor, brokers,
                                                                                zk_connect, tmp_path):
    (broker,) = brokers(1)
    topic = new_name("twelve")
    create_topic(zk_connect, topic, 12, 1, [broker])
    expected = produce_values(broker.bootstrap, topic, 1200)
    group = new_name("g")
    members = [Member(tmp_path, client, broker.bootstrap, group, f"m{i}", topics=[topic], assignor=assignor)
               for i in range(3)]
    try:
        wait_for_assignments(members, {(topic, p) for p in range(12)}, 90)
        assert all(len(m.assignment()) == 4 for m in members), [sorted(m.assignment()) for m in members]
        wait_for_values(members, expected, 60)
        assert set(read_values(members).values()) == expected
    finally:
        stop_all(members)
