"""The quorum controller on three real controller processes (started from the CLI alone, no ZooKeeper): stand-in
brokers, speaking the wire through the client codec, register, heartbeat and create a topic; only the active
controller answers (the others say NOT_CONTROLLER); a broker that stops heartbeating is fenced after
broker.session.timeout.ms and its leadership moves (its AlterPartition on the old leader epoch is refused); and
after the active controller is killed, the new one holds the same brokers and topics without loading anything."""

from __future__ import annotations

import pytest

from tests.integration.harness import wait_for
from tests.integration.kraft_support import leader_of, make_quorum
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode

pytestmark = pytest.mark.integration

SESSION_MS = 3000
CLUSTER_ID_FILE = "meta.properties"


@pytest.fixture
def quorum(tmp_path):
    controllers = make_quorum(tmp_path, broker_session_timeout_ms=SESSION_MS)
    for controller in controllers:
        controller.start()
    yield controllers
    for controller in controllers:
        controller.cleanup()


def _cluster_id(controller) -> str:
    text = (controller.dir / "data" / CLUSTER_ID_FILE).read_text()
    return next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("cluster.id="))


def _registration(broker_id: int, cluster_id: str) -> dict:
    return {"broker_id": broker_id, "cluster_id": cluster_id, "incarnation_id": bytes([broker_id]) * 16,
            "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9000 + broker_id,
                           "security_protocol": 0}],
            "features": [{"name": "metadata.version", "min_supported_version": 1, "max_supported_version": 19}],
            "rack": None}


def _heartbeat(conn, broker_id: int, epoch: int):
    return conn.send(ApiKey.BROKER_HEARTBEAT, 0, {"broker_id": broker_id, "broker_epoch": epoch,
                                                  "current_metadata_offset": 1 << 40, "want_fence": False,
                                                  "want_shut_down": False})


def _active(quorum, leader: int):
    """The leader's connection, once it answers as the active controller (it catches up to lead first)."""
    controller = next(c for c in quorum if c.id == leader)
    conn = controller.connection()
    probe = {"topics": [], "timeout_ms": 1000, "validate_only": True}

    def answers():
        return conn.send(ApiKey.CREATE_TOPICS, 5, probe) is not None

    wait_for(answers, 30, f"controller {leader} to answer")
    return conn


def test_stand_in_brokers_register_heartbeat_create_a_topic_and_are_fenced_by_the_active_controller(quorum):
    leader, epoch = leader_of(quorum)
    cluster_id = _cluster_id(quorum[0])
    conn = _active(quorum, leader)
    standby = next(c for c in quorum if c.id != leader).connection()
    refused = standby.send(ApiKey.BROKER_REGISTRATION, 0, _registration(1, cluster_id))
    assert refused.error_code == ErrorCode.NOT_CONTROLLER

    epochs = {}
    for broker_id in (1, 2):
        answer = wait_for(lambda b=broker_id: (lambda a: a if a.error_code == 0 else None)(
            conn.send(ApiKey.BROKER_REGISTRATION, 0, _registration(b, cluster_id))), 30, "a registration")
        epochs[broker_id] = answer.broker_epoch
        beat = _heartbeat(conn, broker_id, answer.broker_epoch)
        assert (beat.error_code, beat.is_caught_up, beat.is_fenced) == (0, True, False)
    wrong = conn.send(ApiKey.BROKER_REGISTRATION, 0, _registration(3, "AAAAAAAAAAAAAAAAAAAAAA"))
    assert wrong.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID

    create = {"topics": [{"name": "t", "num_partitions": -1, "replication_factor": -1,
                          "assignments": [{"partition_index": 0, "broker_ids": [1, 2]},
                                          {"partition_index": 1, "broker_ids": [2, 1]}], "configs": []}],
              "timeout_ms": 5000, "validate_only": False}
    [created] = conn.send(ApiKey.CREATE_TOPICS, 5, create).topics
    assert (created.name, created.error_code, created.num_partitions, created.replication_factor) == ("t", 0, 2, 2)

    # Broker 2 stops heartbeating: fenced after the session, partition 1's leadership moves to broker 1, and
    # broker 2's AlterPartition on the old leader epoch is refused (until then it changes nothing: the same ISR).
    def broker_2_fenced():
        assert _heartbeat(conn, 1, epochs[1]).error_code == 0
        alter = conn.send(ApiKey.ALTER_PARTITION, 1, {"broker_id": 2, "broker_epoch": epochs[2], "topics": [
            {"topic_name": "t", "partitions": [{"partition_index": 1, "leader_epoch": 0, "new_isr": [2, 1],
                                                "leader_recovery_state": 0, "partition_epoch": 0}]}]})
        return alter.topics[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH

    wait_for(broker_2_fenced, 30, "broker 2 to be fenced and its leadership moved", interval_s=0.5)
    alter = conn.send(ApiKey.ALTER_PARTITION, 1, {"broker_id": 1, "broker_epoch": epochs[1], "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 1, "leader_epoch": 1, "new_isr": [1],
                                            "leader_recovery_state": 0, "partition_epoch": 1}]}]})
    [partition] = alter.topics[0].partitions
    assert (partition.error_code, partition.leader_id, partition.leader_epoch, list(partition.isr)) == (0, 1, 1, [1])

    # The active controller dies: the new one answers with the same state, replayed, not loaded.
    next(c for c in quorum if c.id == leader).kill()
    survivors = [c for c in quorum if c.id != leader]
    new_leader, _ = leader_of(survivors, above_epoch=epoch)
    conn = _active(survivors, new_leader)
    beat = _heartbeat(conn, 1, epochs[1])
    assert (beat.error_code, beat.is_fenced) == (0, False)  # the same registration, the same epoch
    [again] = conn.send(ApiKey.CREATE_TOPICS, 5, create).topics
    assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    stale = _heartbeat(conn, 2, epochs[2] - 1)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH


def test_a_single_controller_answers_once_its_own_append_commits_at_once(tmp_path):
    [controller] = make_quorum(tmp_path, count=1)
    controller.start()
    try:
        leader, _ = leader_of([controller])
        conn = _active([controller], leader)
        answer = conn.send(ApiKey.BROKER_REGISTRATION, 0, _registration(1, _cluster_id(controller)))
        assert answer.error_code == 0
        starts = [conn.send(ApiKey.ALLOCATE_PRODUCER_IDS, 0, {"broker_id": 1, "broker_epoch": answer.broker_epoch})
                  for _ in range(2)]
        assert [(s.error_code, s.producer_id_start, s.producer_id_len) for s in starts] == [(0, 0, 1000),
                                                                                           (0, 1000, 1000)]
    finally:
        controller.cleanup()
