"""Every group coordinator error code on the wire (issue 14): raw requests through zkbroker's own BrokerConnection
to real brokers, where a client library would hide the answer behind its retries."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from tests.integration.harness import wait_for
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode as E
from zkbroker.server.group_coordinator import PAUSE_LOADING_ENV

pytestmark = pytest.mark.integration


def group_name() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def find_coordinator(broker, group: str) -> int:
    try:
        with broker.connection(timeout_s=5.0) as conn:
            response = conn.send(ApiKey.FIND_COORDINATOR, 0, {"group_id": group})
    except OSError:  # not listening yet
        return -1
    return response.node_id if response.error_code == E.NONE else -1


def coordinator_of(serving: list, group: str):
    coordinator = wait_for(lambda: find_coordinator(serving[0], group) if find_coordinator(serving[0], group) >= 0
                           else None, 60, "the group's coordinator")
    return next(b for b in serving if b.id == coordinator)


def join(conn, group: str, member_id: str = "", session: int = 10000, protocol_type: str = "consumer",
         protocols=(("range", b"sub"),)):
    return conn.send(ApiKey.JOIN_GROUP, 1, {
        "group_id": group, "session_timeout": session, "rebalance_timeout": 10000, "member_id": member_id,
        "protocol_type": protocol_type,
        "group_protocols": [{"protocol_name": n, "protocol_metadata": m} for n, m in protocols]})


def sync(conn, group: str, generation: int, member_id: str, assignments=()):
    return conn.send(ApiKey.SYNC_GROUP, 0, {"group_id": group, "generation_id": generation, "member_id": member_id,
                                             "group_assignment": [{"member_id": m, "member_assignment": a}
                                                                  for m, a in assignments]})


def heartbeat(conn, group: str, generation: int, member_id: str) -> int:
    return conn.send(ApiKey.HEARTBEAT, 0, {"group_id": group, "generation_id": generation,
                                           "member_id": member_id}).error_code


def commit(conn, group: str, generation: int, member_id: str, topic: str) -> int:
    response = conn.send(ApiKey.OFFSET_COMMIT, 2, {
        "group_id": group, "generation_id": generation, "member_id": member_id, "retention_time_ms": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "offset": 1, "metadata": ""}]}]})
    return response.topics[0].partitions[0].error_code


def stable_member(conn, group: str) -> tuple[str, int]:
    joined = join(conn, group)
    assert joined.error_code == E.NONE
    synced = sync(conn, group, joined.generation_id, joined.member_id, [(joined.member_id, b"all")])
    assert synced.error_code == E.NONE and bytes(synced.member_assignment) == b"all"
    return joined.member_id, joined.generation_id


@pytest.fixture
def one_broker(brokers):
    (broker,) = brokers(1)
    wait_for(lambda: find_coordinator(broker, "warm-up") >= 0, 60, "the offsets topic and its leaders")
    return broker


def test_unknown_member_id(one_broker):
    group = group_name()
    with one_broker.connection() as conn:
        assert join(conn, group, member_id="nobody").error_code == E.UNKNOWN_MEMBER_ID
        member, generation = stable_member(conn, group)
        assert heartbeat(conn, group, generation, "nobody") == E.UNKNOWN_MEMBER_ID
        assert sync(conn, group, generation, "nobody").error_code == E.UNKNOWN_MEMBER_ID
        assert conn.send(ApiKey.LEAVE_GROUP, 0, {"group_id": group, "member_id": "nobody"}).error_code \
            == E.UNKNOWN_MEMBER_ID
        assert conn.send(ApiKey.LEAVE_GROUP, 0, {"group_id": group, "member_id": member}).error_code == E.NONE
        assert heartbeat(conn, group, generation, member) == E.UNKNOWN_MEMBER_ID  # gone after leaving


def test_illegal_generation(one_broker, zk_connect):
    from tests.integration.harness import create_topic

    create_topic(zk_connect, "committed", 1, 1, [one_broker])
    group = group_name()
    with one_broker.connection() as conn:
        member, generation = stable_member(conn, group)
        assert heartbeat(conn, group, generation + 1, member) == E.ILLEGAL_GENERATION
        assert sync(conn, group, generation - 1, member).error_code == E.ILLEGAL_GENERATION
        assert commit(conn, group, generation + 1, member, "committed") == E.ILLEGAL_GENERATION
        assert commit(conn, group, generation, member, "committed") == E.NONE


def test_rebalance_in_progress(one_broker):
    group = group_name()
    with one_broker.connection() as first, one_broker.connection() as second:
        member, generation = stable_member(first, group)
        answers: list = []
        newcomer = threading.Thread(target=lambda: answers.append(join(second, group)), daemon=True)
        newcomer.start()  # its JoinGroup waits until the first member rejoins
        wait_for(lambda: heartbeat(first, group, generation, member) == E.REBALANCE_IN_PROGRESS, 10,
                 "the rebalance the newcomer started")
        assert sync(first, group, generation, member).error_code == E.REBALANCE_IN_PROGRESS
        rejoined = join(first, group, member_id=member)
        newcomer.join(10)
        assert rejoined.error_code == E.NONE and answers[0].error_code == E.NONE
        assert rejoined.generation_id == answers[0].generation_id == generation + 1
        assert {m.member_id for m in rejoined.members} == {member, answers[0].member_id}


def test_inconsistent_group_protocol(one_broker):
    group = group_name()
    with one_broker.connection() as conn:
        stable_member(conn, group)
        assert join(conn, group, protocols=(("sticky", b""),)).error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert join(conn, group, protocol_type="connect").error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert join(conn, group_name(), protocols=()).error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_invalid_session_timeout_uses_the_kafka_3_bounds(one_broker):
    with one_broker.connection() as conn:
        assert join(conn, group_name(), session=5999).error_code == E.INVALID_SESSION_TIMEOUT
        assert join(conn, group_name(), session=1800001).error_code == E.INVALID_SESSION_TIMEOUT
        assert join(conn, group_name(), session=45000).error_code == E.NONE  # today's clients' default


def test_offsets_topic_made_on_first_use_and_not_coordinator_from_the_other_broker(brokers, zk):
    serving = brokers(1, 2)
    group = group_name()
    wait_for(lambda: zk.registered() == {1, 2}, 30, "both brokers to register")  # the cap counts live brokers
    coordinator = coordinator_of(serving, group)
    # Created through the controller by the first FindCoordinator: 50 partitions, replication factor 3 capped to
    # the two live brokers, compacted.
    assignment = json.loads(zk.get("/brokers/topics/__consumer_offsets"))["partitions"]
    assert len(assignment) == 50 and {len(r) for r in assignment.values()} == {2}
    assert json.loads(zk.get("/config/topics/__consumer_offsets"))["config"]["cleanup.policy"] == "compact"
    other = next(b for b in serving if b is not coordinator)
    with other.connection() as conn:
        assert join(conn, group).error_code == E.NOT_COORDINATOR
        assert heartbeat(conn, group, 1, "m") == E.NOT_COORDINATOR
        described = conn.send(ApiKey.DESCRIBE_GROUPS, 0, {"group_ids": [group]})
        assert described.groups[0].error_code == E.NOT_COORDINATOR
    with coordinator.connection() as conn:
        assert join(conn, group).error_code == E.NONE


def test_coordinator_load_in_progress_while_the_offsets_partition_loads(brokers, tmp_path, monkeypatch):
    pause = tmp_path / "pause-{broker_id}"
    monkeypatch.setenv(PAUSE_LOADING_ENV, str(pause))
    (tmp_path / "pause-1").touch()
    (broker,) = brokers(1)
    group = group_name()
    wait_for(lambda: find_coordinator(broker, group) == 1, 60, "the offsets topic's leaders")
    with broker.connection() as conn:
        assert join(conn, group).error_code == E.GROUP_LOAD_IN_PROGRESS
        assert conn.send(ApiKey.LIST_GROUPS, 0, {}).error_code == E.GROUP_LOAD_IN_PROGRESS
        (tmp_path / "pause-1").unlink()
        wait_for(lambda: join(conn, group).error_code == E.NONE, 30, "the load to finish")


def test_describe_and_list_groups(one_broker):
    group = group_name()
    with one_broker.connection() as conn:
        member, _ = stable_member(conn, group)
        described = conn.send(ApiKey.DESCRIBE_GROUPS, 0, {"group_ids": [group, "never-seen"]})
        stable, unknown = described.groups
        assert (stable.error_code, stable.state, stable.protocol_type, stable.protocol) == (
            E.NONE, "Stable", "consumer", "range")
        assert [(m.member_id, m.client_id, m.client_host, bytes(m.member_assignment)) for m in stable.members] == [
            (member, "test", "/127.0.0.1", b"all")]
        assert (unknown.error_code, unknown.state) == (E.NONE, "Dead")
        listed = conn.send(ApiKey.LIST_GROUPS, 0, {})
        assert listed.error_code == E.NONE
        assert (group, "consumer") in {(g.group_id, g.protocol_type) for g in listed.groups}
