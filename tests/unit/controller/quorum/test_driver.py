"""The quorum controller's driver on an asyncio loop (unit test, in-memory log): a request's wire answer comes
once its records commit, shaped as its version's response; a standby answers NOT_CONTROLLER where the request's
errors go; the snapshot trigger writes the controller's state when the policy says so."""

from __future__ import annotations

import asyncio

from controller.quorum.driver import QUORUM_CONTROLLER_VERSIONS, QuorumControllerDriver, SnapshotTrigger
from tests.unit.controller.quorum.helpers import (
    MemoryLog,
    create_topics,
    heartbeat,
    lead,
    make_controller,
    registration,
    wire,
)
from zkbroker.protocol.api import RESPONSE_SCHEMAS, ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.raft.snapshot_policy import SnapshotPolicy


async def _committing(log: MemoryLog, driver: QuorumControllerDriver, api_key: int, version: int, request):
    """The driver's answer while the log commits in the background, as a quorum would."""
    async def commit_soon():
        while True:
            await asyncio.sleep(0.001)
            log.commit()

    committer = asyncio.get_running_loop().create_task(commit_soon())
    try:
        answer = await asyncio.wait_for(driver.handle(api_key, version, request), 5)
    finally:
        committer.cancel()
    RESPONSE_SCHEMAS[(api_key, version)].encode(answer)  # it is a body the wire can carry
    return answer


def test_the_driver_answers_registration_heartbeat_and_create_topics_once_committed():
    log = MemoryLog()
    controller = make_controller(log)
    lead(log, controller)
    driver = QuorumControllerDriver(controller, clock=lambda: 0)

    async def scenario():
        registered = await _committing(log, driver, ApiKey.BROKER_REGISTRATION, 0, registration(1))
        assert registered["error_code"] == 0 and registered["broker_epoch"] >= 0
        beat = await _committing(log, driver, ApiKey.BROKER_HEARTBEAT, 0,
                                 heartbeat(1, registered["broker_epoch"], log.end_offset))
        assert beat == {"throttle_time_ms": 0, "error_code": 0, "is_caught_up": True, "is_fenced": False,
                        "should_shut_down": False}
        created = await _committing(log, driver, ApiKey.CREATE_TOPICS, 5, create_topics(("t", 2, 1)))
        assert [(t["name"], t["error_code"], t["num_partitions"]) for t in created["topics"]] == [("t", 0, 2)]

    asyncio.run(scenario())


def test_a_standby_driver_answers_not_controller_in_each_response_shape():
    log = MemoryLog()
    active = make_controller(log, node_id=3001)
    standby = make_controller(log, node_id=3002)
    lead(log, active)
    driver = QuorumControllerDriver(standby, clock=lambda: 0)

    async def scenario():
        registered = await driver.handle(ApiKey.BROKER_REGISTRATION, 0, registration(1))
        assert registered == {"throttle_time_ms": 0, "broker_epoch": -1, "error_code": ErrorCode.NOT_CONTROLLER}
        created = await driver.handle(ApiKey.CREATE_TOPICS, 5, create_topics(("t", 1, 1)))
        assert created["topics"][0]["error_code"] == ErrorCode.NOT_CONTROLLER
        RESPONSE_SCHEMAS[(ApiKey.CREATE_TOPICS, 5)].encode(created)

    asyncio.run(scenario())


def test_the_snapshot_trigger_writes_the_controllers_state_after_enough_committed_bytes():
    log = MemoryLog()
    controller = make_controller(log)
    client = log.clients[3001]
    trigger = SnapshotTrigger(controller, SnapshotPolicy(max_bytes=100, max_interval_ms=3_600_000), lambda: 0)
    client.register(trigger)
    lead(log, controller)
    for broker_id in range(1, 4):
        controller.register_broker(registration(broker_id))
        controller.poll(0)
        log.commit()
    assert log.snapshots
    end, (epoch, records) = max(log.snapshots.items())
    assert records and end <= log.high_watermark


def test_the_admin_requests_brokers_forward_are_answered_in_every_version_and_by_a_standby():
    log = MemoryLog()
    controller = make_controller(log)
    standby = make_controller(log, node_id=3002)
    lead(log, controller)
    driver = QuorumControllerDriver(controller, clock=lambda: 0)
    requests = {
        ApiKey.CREATE_PARTITIONS: lambda v: {"topics": [{"name": "t", "count": 3, "assignments": None}],
                                             "timeout_ms": 1, "validate_only": False},
        ApiKey.ALTER_CONFIGS: lambda v: {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [
            {"name": "retention.ms", "value": "5"}]}], "validate_only": False},
        ApiKey.INCREMENTAL_ALTER_CONFIGS: lambda v: {"resources": [{"resource_type": 2, "resource_name": "t",
                                                                    "configs": [{"name": "retention.ms",
                                                                                 "config_operation": 0,
                                                                                 "value": "6"}]}],
                                                     "validate_only": False},
        ApiKey.ELECT_LEADERS: lambda v: {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0]}],
                                         "timeout_ms": 1},
    }

    async def scenario():
        registered = await _committing(log, driver, ApiKey.BROKER_REGISTRATION, 0, registration(1))
        await _committing(log, driver, ApiKey.BROKER_HEARTBEAT, 0,
                          heartbeat(1, registered["broker_epoch"], log.end_offset))
        await _committing(log, driver, ApiKey.CREATE_TOPICS, 5, create_topics(("t", 1, 1)))
        for api_key, build in requests.items():
            low, high = QUORUM_CONTROLLER_VERSIONS[api_key]
            for version in range(low, high + 1):
                answer = await _committing(log, driver, api_key, version, wire(api_key, version, **build(version)))
                assert answer["throttle_time_ms"] == 0
                refused = await QuorumControllerDriver(standby, clock=lambda: 0).handle(
                    api_key, version, wire(api_key, version, **build(version)))
                RESPONSE_SCHEMAS[(api_key, version)].encode(refused)
        assert controller.configs.topic_config("t") == {"retention.ms": "6"}
        assert controller.replication.topics[controller.replication.topics_by_name["t"]].partitions == 3

    asyncio.run(scenario())
