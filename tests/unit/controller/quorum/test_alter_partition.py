"""AlterPartition (56) on the quorum controller, KIP-497's epoch checks: a leader's ISR change is accepted only
when it names the partition's current leader epoch and partition epoch; each refusal says which view was
stale, and an accepted change answers the partition's state after it (partition epoch + 1)."""

from __future__ import annotations

import pytest

from tests.unit.controller.quorum.helpers import (
    active_controller,
    create_topics,
    heartbeat,
    register_brokers,
    run,
    wire,
)
from zkbroker.protocol.errors import ErrorCode


@pytest.fixture
def cluster():
    log, controller = active_controller()
    epochs = register_brokers(log, controller, 1, 2, 3)
    run(log, controller, controller.create_topics(create_topics(("t", -1, -1), assignments={0: [1, 2, 3]})))
    return log, controller, epochs


def _alter(controller, epochs, isr, *, broker=1, leader_epoch=None, partition_epoch=None, version=2, **extra):
    part = controller.replication.partition("t", 0)
    data = {"partition_index": 0, "leader_epoch": part.leader_epoch if leader_epoch is None else leader_epoch,
            "partition_epoch": part.partition_epoch if partition_epoch is None else partition_epoch, **extra}
    if version >= 3:
        data["new_isr_with_epochs"] = [{"broker_id": b, "broker_epoch": epochs.get(b, -1)} for b in isr]
    else:
        data["new_isr"] = isr
    if version >= 1:
        data.setdefault("leader_recovery_state", 0)
    topic = {"topic_id": controller.replication.topics_by_name["t"]} if version >= 2 else {"topic_name": "t"}
    return wire(56, version, broker_id=broker, broker_epoch=epochs.get(broker, 0),
                topics=[{**topic, "partitions": [data]}])


def _partition_answer(log, controller, request, version=2):
    answer = run(log, controller, controller.alter_partition(request, version))
    return answer["topics"][0]["partitions"][0]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_shrink_with_current_epochs_is_accepted_and_bumps_the_partition_epoch(cluster, version):
    log, controller, epochs = cluster
    before = controller.replication.partition("t", 0)
    answer = _partition_answer(log, controller, _alter(controller, epochs, [1, 2], version=version), version)
    assert answer["error_code"] == 0 and answer["isr"] == [1, 2]
    assert answer["partition_epoch"] == before.partition_epoch + 1 and answer["leader_epoch"] == before.leader_epoch
    after = controller.replication.partition("t", 0)
    assert after.isr == (1, 2) and after.partition_epoch == before.partition_epoch + 1


def test_a_stale_partition_epoch_is_invalid_update_version(cluster):
    log, controller, epochs = cluster
    stale = controller.replication.partition("t", 0).partition_epoch
    _partition_answer(log, controller, _alter(controller, epochs, [1, 2]))
    answer = _partition_answer(log, controller, _alter(controller, epochs, [1], partition_epoch=stale))
    assert answer["error_code"] == ErrorCode.INVALID_UPDATE_VERSION
    assert controller.replication.partition("t", 0).isr == (1, 2)


def test_a_stale_leader_epoch_is_fenced_leader_epoch(cluster):
    log, controller, epochs = cluster
    old_epoch = controller.replication.partition("t", 0).leader_epoch
    run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_fence=True)))
    assert controller.replication.partition("t", 0).leader == 2
    answer = _partition_answer(log, controller, _alter(controller, epochs, [1, 2], leader_epoch=old_epoch))
    assert answer["error_code"] == ErrorCode.FENCED_LEADER_EPOCH


def test_epochs_ahead_of_the_controller_answer_not_controller(cluster):
    log, controller, epochs = cluster
    answer = _partition_answer(log, controller, _alter(controller, epochs, [1, 2], partition_epoch=99))
    assert answer["error_code"] == ErrorCode.NOT_CONTROLLER


def test_only_the_leader_may_alter_and_the_isr_must_hold_it(cluster):
    log, controller, epochs = cluster
    assert _partition_answer(log, controller, _alter(controller, epochs, [2, 3], broker=2))["error_code"] == \
        ErrorCode.NOT_LEADER_FOR_PARTITION
    assert _partition_answer(log, controller, _alter(controller, epochs, [2, 3]))["error_code"] == \
        ErrorCode.INVALID_REQUEST


def test_a_fenced_broker_may_not_join_the_isr(cluster):
    log, controller, epochs = cluster
    _partition_answer(log, controller, _alter(controller, epochs, [1]))
    run(log, controller, controller.broker_heartbeat(heartbeat(3, epochs[3], log.end_offset, want_fence=True)))
    answer = _partition_answer(log, controller, _alter(controller, epochs, [1, 3]))
    assert answer["error_code"] == ErrorCode.INELIGIBLE_REPLICA
    answer_v1 = _partition_answer(log, controller, _alter(controller, epochs, [1, 3], version=1), version=1)
    assert answer_v1["error_code"] == ErrorCode.OPERATION_NOT_ATTEMPTED


def test_a_stale_broker_epoch_in_the_isr_is_ineligible_in_version_3(cluster):
    log, controller, epochs = cluster
    request = _alter(controller, {**epochs, 2: epochs[2] - 1}, [1, 2], version=3)
    assert _partition_answer(log, controller, request, version=3)["error_code"] == ErrorCode.INELIGIBLE_REPLICA


def test_a_request_from_a_stale_broker_epoch_is_refused_whole(cluster):
    log, controller, epochs = cluster
    answer = run(log, controller, controller.alter_partition(_alter(controller, {**epochs, 1: 0}, [1, 2]), 2))
    assert answer == {"error_code": ErrorCode.STALE_BROKER_EPOCH, "topics": []}


def test_an_unknown_topic_id_is_named_so(cluster):
    log, controller, epochs = cluster
    request = wire(56, 2, broker_id=1, broker_epoch=epochs[1], topics=[{"topic_id": bytes(16), "partitions": [
        {"partition_index": 0, "leader_epoch": 0, "new_isr": [1], "leader_recovery_state": 0,
         "partition_epoch": 0}]}])
    assert _partition_answer(log, controller, request)["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
