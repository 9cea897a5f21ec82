"""Topics and partitions on the quorum controller: each request's records and their replay (CreateTopics,
DeleteTopics, CreatePartitions, ElectLeaders), the ZooKeeper mode's checks answering the same errors, and leader
election when a broker is fenced: clean from the ISR, unclean only where the topic allows it."""

from __future__ import annotations

from tests.unit.controller.quorum.helpers import (
    SESSION_MS,
    active_controller,
    create_topics,
    heartbeat,
    register_brokers,
    run,
    wire,
)
from zkbroker.metadata.records import CONFIG, PARTITION, RECOVERING, REMOVE_TOPIC, TOPIC
from zkbroker.protocol.errors import ErrorCode


def _cluster(*brokers: int, **config):
    log, controller = active_controller(**config)
    epochs = register_brokers(log, controller, *brokers)
    return log, controller, epochs


def _records_since(log, offset: int) -> list:
    return [rec for base, _, records in log.committed_records() for i, rec in enumerate(records)
            if base + i >= offset]


def test_create_topics_writes_a_topic_record_its_configs_and_a_partition_record_each():
    log, controller, _ = _cluster(1, 2, 3)
    start = log.end_offset
    [result] = run(log, controller, controller.create_topics(create_topics(
        ("t", 3, 2), configs={"retention.ms": "1000"})))
    assert result["error_code"] == 0 and result["num_partitions"] == 3 and result["replication_factor"] == 2
    kinds = [key for key, _, _ in _records_since(log, start)]
    assert kinds == [TOPIC, CONFIG, PARTITION, PARTITION, PARTITION]
    topic_id = controller.replication.topics_by_name["t"]
    assert topic_id == result["topic_id"]
    assert controller.configs.topic_config("t") == {"retention.ms": "1000"}
    for p in range(3):
        part = controller.replication.partitions[(topic_id, p)]
        assert part.leader == part.replicas[0] and part.isr == part.replicas and len(part.replicas) == 2


def test_create_topics_refuses_as_zookeeper_mode_does():
    log, controller, _ = _cluster(1, 2)
    run(log, controller, controller.create_topics(create_topics(("taken", 1, 1))))
    results = run(log, controller, controller.create_topics(create_topics(
        ("taken", 1, 1), ("bad name!", 1, 1), ("too.wide", 1, 3), ("dup", 1, 1), ("dup", 1, 1))))
    codes = {(r["name"], r["error_code"]) for r in results}
    assert codes == {("taken", ErrorCode.TOPIC_ALREADY_EXISTS), ("bad name!", ErrorCode.INVALID_TOPIC),
                     ("too.wide", ErrorCode.INVALID_REPLICATION_FACTOR), ("dup", ErrorCode.INVALID_REQUEST)}
    bad_config = run(log, controller, controller.create_topics(create_topics(("c", 1, 1),
                                                                             configs={"retention.ms": "x"})))
    assert bad_config[0]["error_code"] == ErrorCode.INVALID_CONFIG
    unknown_broker = run(log, controller, controller.create_topics(create_topics(("u", -1, -1),
                                                                                 assignments={0: [1, 9]})))
    assert unknown_broker[0]["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert set(controller.replication.topics_by_name) == {"taken"}


def test_validate_only_writes_nothing():
    log, controller, _ = _cluster(1)
    start = log.end_offset
    [result] = run(log, controller, controller.create_topics(create_topics(("t", 2, 1), validate_only=True)))
    assert result["error_code"] == 0 and result["num_partitions"] == 2
    assert log.end_offset == start and not controller.replication.topics


def test_new_partitions_lead_on_active_brokers_only_and_all_fenced_is_refused():
    log, controller, epochs = _cluster(1, 2)
    run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_fence=True)))
    [result] = run(log, controller, controller.create_topics(create_topics(("t", -1, -1), assignments={0: [1, 2]})))
    assert result["error_code"] == 0
    part = controller.replication.partition("t", 0)
    assert part.leader == 2 and part.isr == (2,)
    run(log, controller, controller.broker_heartbeat(heartbeat(2, epochs[2], log.end_offset, want_fence=True)))
    [refused] = run(log, controller, controller.create_topics(create_topics(("u", -1, -1), assignments={0: [1, 2]})))
    assert refused["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR


def test_delete_topics_removes_the_topic_its_partitions_and_its_configs():
    log, controller, _ = _cluster(1)
    [created] = run(log, controller, controller.create_topics(create_topics(("t", 2, 1),
                                                                            configs={"retention.ms": "5"})))
    start = log.end_offset
    results = run(log, controller, controller.delete_topics(["t", "nope"], [bytes(15) + b"\x07"]))
    assert [(r["name"], r["error_code"]) for r in results] == [
        ("t", 0), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (None, ErrorCode.UNKNOWN_TOPIC_ID)]
    assert [key for key, _, _ in _records_since(log, start)] == [REMOVE_TOPIC]
    assert not controller.replication.topics and not controller.replication.partitions
    assert controller.configs.topic_config("t") == {}
    assert results[0]["topic_id"] == created["topic_id"]


def test_create_partitions_adds_partition_records_and_checks_the_count():
    log, controller, _ = _cluster(1, 2)
    run(log, controller, controller.create_topics(create_topics(("t", 1, 2))))
    request = wire(37, 2, topics=[{"name": "t", "count": 3, "assignments": None},
                                  {"name": "t2", "count": 3, "assignments": None}], timeout_ms=1, validate_only=False)
    results = run(log, controller, controller.create_partitions(request))
    assert [(r["name"], r["error_code"]) for r in results] == [("t", 0), ("t2", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert controller.replication.topics[controller.replication.topics_by_name["t"]].partitions == 3
    assert controller.replication.partition("t", 2).replicas and len(controller.replication.partition("t", 2).isr) == 2
    fewer = wire(37, 2, topics=[{"name": "t", "count": 2, "assignments": None}], timeout_ms=1, validate_only=False)
    assert run(log, controller, controller.create_partitions(fewer))[0]["error_code"] == ErrorCode.INVALID_PARTITIONS


def test_fencing_the_last_isr_member_leaves_no_leader_unless_the_topic_allows_unclean_election():
    log, controller, epochs = _cluster(1, 2)
    run(log, controller, controller.create_topics(create_topics(("clean", -1, -1), assignments={0: [1, 2]})))
    run(log, controller, controller.create_topics(create_topics(
        ("unclean", -1, -1), assignments={0: [1, 2]}, configs={"unclean.leader.election.enable": "true"})))
    # broker 2 leaves the ISRs (fenced), then broker 1, the last member, while 2 comes back
    run(log, controller, controller.broker_heartbeat(heartbeat(2, epochs[2], log.end_offset, want_fence=True)))
    assert controller.replication.partition("clean", 0).isr == (1,)
    run(log, controller, controller.broker_heartbeat(heartbeat(2, epochs[2], log.end_offset)))
    run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_fence=True)))
    clean = controller.replication.partition("clean", 0)
    assert clean.leader == -1 and clean.isr == (1,)  # the last ISR member stays: it has every committed message
    unclean = controller.replication.partition("unclean", 0)
    assert unclean.leader == 2 and unclean.isr == (2,) and unclean.leader_recovery_state == RECOVERING


def test_an_unfenced_broker_leads_the_partitions_it_was_the_last_isr_member_of():
    log, controller, epochs = _cluster(1, 2)
    run(log, controller, controller.create_topics(create_topics(("t", -1, -1), assignments={0: [1, 2]})))
    run(log, controller, controller.broker_heartbeat(heartbeat(2, epochs[2], log.end_offset, want_fence=True)))
    controller.poll(SESSION_MS + 1)  # broker 1 never heartbeats again: fenced by the timer
    log.commit()
    assert controller.replication.partition("t", 0).leader == -1
    run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset)), now_ms=SESSION_MS + 2)
    part = controller.replication.partition("t", 0)
    assert part.leader == 1 and part.isr == (1,)


def test_elect_leaders_preferred_moves_leadership_back_to_the_first_replica():
    log, controller, epochs = _cluster(1, 2)
    run(log, controller, controller.create_topics(create_topics(("t", -1, -1), assignments={0: [1, 2]})))
    run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_fence=True)))
    assert controller.replication.partition("t", 0).leader == 2
    run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset)))
    request = wire(43, 1, election_type=0, topic_partitions=[{"topic": "t", "partitions": [0, 5]}], timeout_ms=1)
    # broker 1 is back but not in the ISR until the leader says so: not available yet
    answer = run(log, controller, controller.elect_leaders(request))
    codes = [r["error_code"] for r in answer["replica_election_results"][0]["partition_result"]]
    assert codes == [ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    part = controller.replication.partition("t", 0)
    alter = wire(56, 2, broker_id=2, broker_epoch=epochs[2], topics=[{"topic_id": controller.replication.topics_by_name[
        "t"], "partitions": [{"partition_index": 0, "leader_epoch": part.leader_epoch, "new_isr": [2, 1],
                              "leader_recovery_state": 0, "partition_epoch": part.partition_epoch}]}])
    run(log, controller, controller.alter_partition(alter, 2))
    answer = run(log, controller, controller.elect_leaders(request))
    assert answer["replica_election_results"][0]["partition_result"][0]["error_code"] == 0
    assert controller.replication.partition("t", 0).leader == 1
    again = run(log, controller, controller.elect_leaders(request))
    assert again["replica_election_results"][0]["partition_result"][0]["error_code"] == ErrorCode.ELECTION_NOT_NEEDED
