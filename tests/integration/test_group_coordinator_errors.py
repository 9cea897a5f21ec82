"""Every group coordinator error code on the wire (issue 14): raw requests through zkbroker's own BrokerConnection
to real brokers, where a client library would hide the answer behind its retries."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from tests.integration.harness import wait_for
from zkbroker.control_protocol import fault_request
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode as E

pytestmark = pytest.mark.integration


#: The request versions a test speaks: the group APIs at Kafka 0.10.1's versions (what every client picked before
#: the broker advertised more) and at Kafka 2.1's maxima (what it advertises now; throttle_time_ms in every answer,
#: OffsetCommit without retention_time and with leader epochs, OffsetFetch with a top-level error code).
VERSIONS = {
    "0.10.1": {ApiKey.FIND_COORDINATOR: 0, ApiKey.JOIN_GROUP: 1, ApiKey.SYNC_GROUP: 0, ApiKey.HEARTBEAT: 0,
               ApiKey.LEAVE_GROUP: 0, ApiKey.DESCRIBE_GROUPS: 0, ApiKey.LIST_GROUPS: 0, ApiKey.OFFSET_COMMIT: 2,
               ApiKey.OFFSET_FETCH: 1},
    "2.1": {ApiKey.FIND_COORDINATOR: 2, ApiKey.JOIN_GROUP: 3, ApiKey.SYNC_GROUP: 2, ApiKey.HEARTBEAT: 2,
            ApiKey.LEAVE_GROUP: 2, ApiKey.DESCRIBE_GROUPS: 2, ApiKey.LIST_GROUPS: 2, ApiKey.OFFSET_COMMIT: 6,
            ApiKey.OFFSET_FETCH: 5},
}


def group_name() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


class Wire:
    """Raw group requests over one connection, at one set of versions."""

    def __init__(self, conn, versions: dict[int, int]) -> None:
        self.conn = conn
        self.versions = versions

    def send(self, api_key: int, body: dict):
        response = self.conn.send(api_key, self.versions[api_key], body)
        if self.versions[api_key] >= (2 if api_key == ApiKey.JOIN_GROUP else 3 if api_key in (
                ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH) else 1):
            assert response.throttle_time_ms == 0
        return response

    def find_coordinator(self, key: str, key_type: int = 0):
        return self.send(ApiKey.FIND_COORDINATOR, {"group_id": key, "coordinator_key": key,
                                                   "coordinator_type": key_type})

    def join(self, group: str, member_id: str = "", session: int = 10000, protocol_type: str = "consumer",
             protocols=(("range", b"sub"),)):
        return self.send(ApiKey.JOIN_GROUP, {
            "group_id": group, "session_timeout": session, "rebalance_timeout": 10000, "member_id": member_id,
            "protocol_type": protocol_type,
            "group_protocols": [{"protocol_name": n, "protocol_metadata": m} for n, m in protocols]})

    def sync(self, group: str, generation: int, member_id: str, assignments=()):
        return self.send(ApiKey.SYNC_GROUP, {"group_id": group, "generation_id": generation, "member_id": member_id,
                                             "group_assignment": [{"member_id": m, "member_assignment": a}
                                                                  for m, a in assignments]})

    def heartbeat(self, group: str, generation: int, member_id: str) -> int:
        return self.send(ApiKey.HEARTBEAT, {"group_id": group, "generation_id": generation,
                                            "member_id": member_id}).error_code

    def leave(self, group: str, member_id: str) -> int:
        return self.send(ApiKey.LEAVE_GROUP, {"group_id": group, "member_id": member_id}).error_code

    def commit(self, group: str, generation: int, member_id: str, topic: str, partitions=(0,), offset: int = 1,
               leader_epoch: int = -1) -> list[int]:
        response = self.send(ApiKey.OFFSET_COMMIT, {
            "group_id": group, "generation_id": generation, "member_id": member_id, "retention_time_ms": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "offset": offset, "committed_leader_epoch": leader_epoch, "metadata": ""}
                for p in partitions]}]})
        return [p.error_code for p in response.topics[0].partitions]

    def fetch(self, group: str, topics: dict[str, list[int]] | None):
        return self.send(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": None if topics is None else [
            {"topic": t, "partitions": ps} for t, ps in topics.items()]})

    def describe(self, *groups: str):
        return self.send(ApiKey.DESCRIBE_GROUPS, {"group_ids": list(groups)})

    def list(self):
        return self.send(ApiKey.LIST_GROUPS, {})

    def stable_member(self, group: str) -> tuple[str, int]:
        joined = self.join(group)
        assert joined.error_code == E.NONE
        synced = self.sync(group, joined.generation_id, joined.member_id, [(joined.member_id, b"all")])
        assert synced.error_code == E.NONE and bytes(synced.member_assignment) == b"all"
        return joined.member_id, joined.generation_id


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


@pytest.fixture(params=sorted(VERSIONS))
def versions(request) -> dict[int, int]:
    return VERSIONS[request.param]


def fetch_error(fetched, version: int) -> int:
    """OffsetFetch's group-level error: in every partition for v0-v1, once at the top (with no partitions) from v2."""
    if version >= 2:
        assert fetched.topics == []
        return fetched.error_code
    (error,) = {p.error_code for t in fetched.topics for p in t.partitions}
    return error


@pytest.fixture
def one_broker(brokers):
    (broker,) = brokers(1)
    wait_for(lambda: find_coordinator(broker, "warm-up") >= 0, 60, "the offsets topic and its leaders")
    return broker


def test_unknown_member_id(one_broker, versions):
    group = group_name()
    with one_broker.connection() as conn:
        wire = Wire(conn, versions)
        assert wire.join(group, member_id="nobody").error_code == E.UNKNOWN_MEMBER_ID
        member, generation = wire.stable_member(group)
        assert wire.heartbeat(group, generation, "nobody") == E.UNKNOWN_MEMBER_ID
        assert wire.sync(group, generation, "nobody").error_code == E.UNKNOWN_MEMBER_ID
        assert wire.leave(group, "nobody") == E.UNKNOWN_MEMBER_ID
        assert wire.leave(group, member) == E.NONE
        assert wire.heartbeat(group, generation, member) == E.UNKNOWN_MEMBER_ID  # gone after leaving


def test_illegal_generation(one_broker, zk_connect, versions):
    from tests.integration.harness import create_topic

    create_topic(zk_connect, "committed", 1, 1, [one_broker])
    group = group_name()
    with one_broker.connection() as conn:
        wire = Wire(conn, versions)
        member, generation = wire.stable_member(group)
        assert wire.heartbeat(group, generation + 1, member) == E.ILLEGAL_GENERATION
        assert wire.sync(group, generation - 1, member).error_code == E.ILLEGAL_GENERATION
        assert wire.commit(group, generation + 1, member, "committed") == [E.ILLEGAL_GENERATION]
        assert wire.commit(group, generation, member, "committed") == [E.NONE]


def test_rebalance_in_progress(one_broker, versions):
    group = group_name()
    with one_broker.connection() as first, one_broker.connection() as second:
        wire, other = Wire(first, versions), Wire(second, versions)
        member, generation = wire.stable_member(group)
        answers: list = []
        newcomer = threading.Thread(target=lambda: answers.append(other.join(group)), daemon=True)
        newcomer.start()  # its JoinGroup waits until the first member rejoins
        wait_for(lambda: wire.heartbeat(group, generation, member) == E.REBALANCE_IN_PROGRESS, 10,
                 "the rebalance the newcomer started")
        assert wire.sync(group, generation, member).error_code == E.REBALANCE_IN_PROGRESS
        rejoined = wire.join(group, member_id=member)
        newcomer.join(10)
        assert rejoined.error_code == E.NONE and answers[0].error_code == E.NONE
        assert rejoined.generation_id == answers[0].generation_id == generation + 1
        assert {m.member_id for m in rejoined.members} == {member, answers[0].member_id}


def test_inconsistent_group_protocol(one_broker, versions):
    group = group_name()
    with one_broker.connection() as conn:
        wire = Wire(conn, versions)
        wire.stable_member(group)
        assert wire.join(group, protocols=(("sticky", b""),)).error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert wire.join(group, protocol_type="connect").error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert wire.join(group_name(), protocols=()).error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_invalid_session_timeout_uses_the_kafka_3_bounds(one_broker, versions):
    with one_broker.connection() as conn:
        wire = Wire(conn, versions)
        assert wire.join(group_name(), session=5999).error_code == E.INVALID_SESSION_TIMEOUT
        assert wire.join(group_name(), session=1800001).error_code == E.INVALID_SESSION_TIMEOUT
        assert wire.join(group_name(), session=45000).error_code == E.NONE  # today's clients' default


def test_offsets_topic_made_on_first_use_and_not_coordinator_from_the_other_broker(brokers, zk, versions):
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
        wire = Wire(conn, versions)
        found = wire.find_coordinator(group)
        assert (found.error_code, found.node_id) == (E.NONE, coordinator.id)
        assert wire.join(group).error_code == E.NOT_COORDINATOR
        assert wire.heartbeat(group, 1, "m") == E.NOT_COORDINATOR
        assert wire.describe(group).groups[0].error_code == E.NOT_COORDINATOR
        assert wire.commit(group, 1, "m", "__consumer_offsets") == [E.NOT_COORDINATOR]
        fetched = wire.fetch(group, {"__consumer_offsets": [0, 1]})
        assert fetch_error(fetched, versions[ApiKey.OFFSET_FETCH]) == E.NOT_COORDINATOR
    with coordinator.connection() as conn:
        assert Wire(conn, versions).join(group).error_code == E.NONE


def test_coordinator_load_in_progress_while_the_offsets_partition_loads(brokers, versions):
    (broker,) = brokers(1, start=False, control=True)
    broker.start(faults=[fault_request("hold_group_loading")])  # the lab's fault point, from the first instant
    group = group_name()
    wait_for(lambda: find_coordinator(broker, group) == 1, 60, "the offsets topic's leaders")
    with broker.connection() as conn, broker.control() as control:
        wire = Wire(conn, versions)
        assert wire.join(group).error_code == E.GROUP_LOAD_IN_PROGRESS
        assert wire.list().error_code == E.GROUP_LOAD_IN_PROGRESS
        fetched = wire.fetch(group, {"__consumer_offsets": [0]})
        assert fetch_error(fetched, versions[ApiKey.OFFSET_FETCH]) == E.GROUP_LOAD_IN_PROGRESS
        control.fault("release_group_loading")
        wait_for(lambda: wire.join(group).error_code == E.NONE, 30, "the load to finish")


def test_describe_and_list_groups(one_broker, versions):
    group = group_name()
    with one_broker.connection() as conn:
        wire = Wire(conn, versions)
        member, _ = wire.stable_member(group)
        stable, unknown = wire.describe(group, "never-seen").groups
        assert (stable.error_code, stable.state, stable.protocol_type, stable.protocol) == (
            E.NONE, "Stable", "consumer", "range")
        assert [(m.member_id, m.client_id, m.client_host, bytes(m.member_assignment)) for m in stable.members] == [
            (member, "test", "/127.0.0.1", b"all")]
        assert (unknown.error_code, unknown.state) == (E.NONE, "Dead")
        listed = wire.list()
        assert listed.error_code == E.NONE
        assert (group, "consumer") in {(g.group_id, g.protocol_type) for g in listed.groups}


def test_find_coordinator_v1_finds_a_transaction_coordinator_and_refuses_an_unknown_type(one_broker):
    """Key type 1 (a transactional id): COORDINATOR_NOT_AVAILABLE while `__transaction_state` is created on
    this first use, then the leader of the id's partition (DESIGN §18); an unknown type is INVALID_REQUEST."""
    with one_broker.connection() as conn:
        for version in (1, 2):
            def find(version=version):
                found = conn.send(ApiKey.FIND_COORDINATOR, version, {"coordinator_key": "tx", "coordinator_type": 1})
                assert found.error_code in (E.NONE, E.GROUP_COORDINATOR_NOT_AVAILABLE), found
                return found if found.error_code == E.NONE else None

            found = wait_for(find, 60, "the transaction coordinator")
            assert (found.node_id, found.port) == (one_broker.id, one_broker.port)
            found = conn.send(ApiKey.FIND_COORDINATOR, version, {"coordinator_key": "x", "coordinator_type": 7})
            assert found.error_code == E.INVALID_REQUEST


def test_offset_fetch_v2_null_topics_and_v5_leader_epochs(one_broker, zk_connect):
    """Kafka 2.1's offsets: OffsetCommit v6 stores each partition's leader epoch, OffsetFetch v5 returns it, and
    from v2 null topics answer every offset the group has."""
    from tests.integration.harness import create_topic

    create_topic(zk_connect, "epochs", 3, 1, [one_broker])
    group = group_name()
    with one_broker.connection() as conn:
        wire = Wire(conn, VERSIONS["2.1"])
        member, generation = wire.stable_member(group)
        assert wire.commit(group, generation, member, "epochs", partitions=(0, 2), offset=7, leader_epoch=4) == [
            E.NONE, E.NONE]
        every = wire.fetch(group, None)
        assert every.error_code == E.NONE
        assert [(t.topic, p.partition, p.offset, p.committed_leader_epoch, p.metadata, p.error_code)
                for t in every.topics for p in t.partitions] == [
            ("epochs", 0, 7, 4, "", E.NONE), ("epochs", 2, 7, 4, "", E.NONE)]
        asked = wire.fetch(group, {"epochs": [1, 2]})
        assert [(p.partition, p.offset, p.committed_leader_epoch) for p in asked.topics[0].partitions] == [
            (1, -1, -1), (2, 7, 4)]
        for version in (2, 3, 4):
            older = conn.send(ApiKey.OFFSET_FETCH, version, {"group_id": group, "topics": None})
            assert [(p.partition, p.offset) for t in older.topics for p in t.partitions] == [(0, 7), (2, 7)]
        # v5 and v6 have no retention_time (the broker's offsets.retention.minutes); v2-v4 still carry it
        assert wire.commit(group, generation, member, "epochs", partitions=(1,), offset=9) == [E.NONE]
        retained = conn.send(ApiKey.OFFSET_COMMIT, 4, {
            "group_id": group, "generation_id": generation, "member_id": member, "retention_time_ms": 3600000,
            "topics": [{"topic": "epochs", "partitions": [{"partition": 2, "offset": 8, "metadata": "m"}]}]})
        assert retained.topics[0].partitions[0].error_code == E.NONE
        after = wire.fetch(group, {"epochs": [0, 1, 2]})
        assert [(p.partition, p.offset, p.committed_leader_epoch, p.metadata) for p in after.topics[0].partitions] \
            == [(0, 7, 4, ""), (1, 9, -1, ""), (2, 8, -1, "m")]
