"""The quorum controller's smaller managers, request -> records -> replay: ConfigurationControlManager
(IncrementalAlterConfigs and AlterConfigs checked by the one config table, as in ZooKeeper mode),
FeatureControlManager (metadata.version) and ProducerIdControlManager (blocks of 1000 ids)."""

from __future__ import annotations

from tests.unit.controller.quorum.helpers import active_controller, create_topics, register_brokers, run, wire
from zkbroker.metadata.records import CONFIG, FEATURE_LEVEL, NO_OP, PRODUCER_IDS
from zkbroker.protocol.errors import ErrorCode

SET, DELETE, APPEND = 0, 1, 2


def _incremental(*resources, validate_only=False):
    return wire(44, 1, resources=[{"resource_type": t, "resource_name": n, "configs": [
        {"name": k, "config_operation": op, "value": v} for k, op, v in ops]} for t, n, ops in resources],
        validate_only=validate_only)


def _new_records(log, start):
    return [rec for base, _, records in log.committed_records() for i, rec in enumerate(records) if base + i >= start]


def test_incremental_alter_configs_writes_one_config_record_per_changed_key():
    log, controller = active_controller()
    register_brokers(log, controller, 1)
    run(log, controller, controller.create_topics(create_topics(("t", 1, 1), configs={"retention.ms": "10"})))
    start = log.end_offset
    answer = run(log, controller, controller.incremental_alter_configs(_incremental(
        (2, "t", [("retention.ms", DELETE, None), ("cleanup.policy", SET, "compact")]),
        (4, "", [("log.retention.ms", SET, "1000")]))))
    assert [r["error_code"] for r in answer] == [0, 0]
    records = _new_records(log, start)
    assert {(r.resource_name, r.name, r.value) for key, _, r in records if key == CONFIG} == {
        ("t", "cleanup.policy", "compact"), ("t", "retention.ms", None), ("", "log.retention.ms", "1000")}
    assert controller.configs.topic_config("t") == {"cleanup.policy": "compact"}
    assert controller.configs.get((4, "")) == {"log.retention.ms": "1000"}


def test_alter_configs_refusals_name_the_resource_and_write_nothing():
    log, controller = active_controller()
    register_brokers(log, controller, 1)
    run(log, controller, controller.create_topics(create_topics(("t", 1, 1))))
    start = log.end_offset
    answer = run(log, controller, controller.incremental_alter_configs(_incremental(
        (2, "nope", [("retention.ms", SET, "1")]),
        (2, "t", [("retention.ms", SET, "soon")]),
        (4, "x", [("log.retention.ms", SET, "1")]),
        (4, "1", [("broker.id", SET, "7")]),
        (2, "t", [("cleanup.policy", APPEND, "compact"), ("cleanup.policy", SET, "x")]))))
    assert [r["error_code"] for r in answer] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_REQUEST,
                                                 ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST,
                                                 ErrorCode.INVALID_REQUEST]
    assert "retention.ms" in answer[1]["error_message"] and "'t'" in answer[1]["error_message"]
    assert "broker.id" in answer[3]["error_message"]
    assert _new_records(log, start) == []


def test_legacy_alter_configs_replaces_the_whole_set():
    log, controller = active_controller()
    register_brokers(log, controller, 1)
    run(log, controller, controller.create_topics(create_topics(("t", 1, 1), configs={"retention.ms": "10"})))
    request = wire(33, 1, resources=[{"resource_type": 2, "resource_name": "t", "configs": [
        {"name": "segment.ms", "value": "100"}]}], validate_only=False)
    assert run(log, controller, controller.alter_configs(request))[0]["error_code"] == 0
    assert controller.configs.topic_config("t") == {"segment.ms": "100"}


def test_validate_only_alters_nothing():
    log, controller = active_controller()
    start = log.end_offset
    answer = run(log, controller, controller.incremental_alter_configs(_incremental(
        (4, "", [("log.retention.ms", SET, "1000")]), validate_only=True)))
    assert answer[0]["error_code"] == 0 and _new_records(log, start) == []


def test_metadata_version_is_bootstrapped_and_only_raised():
    log, controller = active_controller()
    [(key, _, rec)] = [r for base, _, records in log.committed_records() for r in records if r[0] != NO_OP]
    assert key == FEATURE_LEVEL and (rec.name, rec.feature_level) == ("metadata.version", 19)
    down = run(log, controller, controller.update_feature("metadata.version", 7))
    assert down["error_code"] == ErrorCode.INVALID_UPDATE_VERSION and "downgrade" in down["error_message"]
    beyond = run(log, controller, controller.update_feature("metadata.version", 20))
    assert beyond["error_code"] == ErrorCode.INVALID_UPDATE_VERSION
    same = run(log, controller, controller.update_feature("metadata.version", 19))
    assert same == {"error_code": 0, "error_message": None}


def test_producer_id_blocks_never_overlap_and_survive_in_the_log():
    log, controller = active_controller()
    epochs = register_brokers(log, controller, 1, 2)
    first = run(log, controller, controller.allocate_producer_ids(wire(67, 0, broker_id=1, broker_epoch=epochs[1])))
    second = run(log, controller, controller.allocate_producer_ids(wire(67, 0, broker_id=2, broker_epoch=epochs[2])))
    assert (first["producer_id_start"], first["producer_id_len"]) == (0, 1000)
    assert (second["producer_id_start"], second["producer_id_len"]) == (1000, 1000)
    stale = run(log, controller, controller.allocate_producer_ids(wire(67, 0, broker_id=2, broker_epoch=1)))
    assert stale["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    kinds = [key for _, _, records in log.committed_records() for key, _, _ in records]
    assert kinds.count(PRODUCER_IDS) == 2 and controller.producer_ids.next_producer_id == 2000
