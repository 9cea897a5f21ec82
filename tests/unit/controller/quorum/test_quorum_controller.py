"""The quorum controller end to end on an in-memory log (unit tests only): answers wait for their records'
commit; a standby refuses requests and holds, by replay alone, the same state as the active; losing the
leadership reverts what did not commit; and, as a property over random request sequences, replaying the log on
a fresh controller, and loading the active's snapshot, give the active's state."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.controller.quorum.helpers import (
    SESSION_MS,
    MemoryLog,
    active_controller,
    create_topics,
    heartbeat,
    lead,
    make_controller,
    register_brokers,
    registration,
    run,
    wire,
)
from zkbroker.protocol.errors import ErrorCode


def _state(controller) -> list:
    return controller.snapshot_records()


def test_an_answer_waits_until_its_records_are_committed():
    log, controller = active_controller()
    pending = controller.register_broker(registration(1))
    controller.poll(0)
    assert not pending.done and 1 in controller.cluster.brokers  # replayed at once, answered at commit
    log.commit()
    assert pending.done and pending.response["error_code"] == 0


def test_a_read_after_an_uncommitted_write_waits_for_that_write():
    log, controller = active_controller()
    register_brokers(log, controller, 1)
    write = controller.create_topics(create_topics(("t", 1, 1)))
    refused = controller.create_topics(create_topics(("t", 1, 1)))  # sees the first, answers nothing new
    controller.poll(0)
    assert not write.done and not refused.done
    log.commit()
    assert refused.response[0]["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS


def test_a_standby_refuses_requests_and_replays_the_same_state():
    log, active = active_controller()
    standby = make_controller(log, node_id=3002)
    register_brokers(log, active, 1, 2)
    run(log, active, active.create_topics(create_topics(("t", 4, 2), configs={"cleanup.policy": "compact"})))
    refused = standby.create_topics(create_topics(("u", 1, 1)))
    standby.poll(0)
    assert refused.done and refused.error == ErrorCode.NOT_CONTROLLER
    assert _state(standby) == _state(active)
    assert standby.cluster.registration_offsets.items() == active.cluster.registration_offsets.items()


def test_losing_the_leadership_reverts_uncommitted_records_and_fails_their_answers():
    log, first = active_controller()
    second = make_controller(log, node_id=3002)
    register_brokers(log, first, 1)
    committed = _state(first)
    pending = first.create_topics(create_topics(("t", 2, 1)))
    first.poll(0)
    assert "t" in first.replication.topics_by_name
    lead(log, second, truncate_uncommitted=True)  # the new leader never had the batch
    assert pending.done and pending.error == ErrorCode.NOT_CONTROLLER
    assert not first.is_active and _state(first) == committed
    [result] = run(log, second, second.create_topics(create_topics(("t", 2, 1))))
    assert result["error_code"] == 0
    assert _state(first) == _state(second)


def test_a_write_after_the_epoch_moved_on_is_refused_as_not_controller():
    log, controller = active_controller()
    pending = controller.register_broker(registration(1))
    log.epoch += 1  # the log moved to a later epoch the controller has not heard of yet
    controller.poll(0)
    assert pending.error == ErrorCode.NOT_CONTROLLER and not controller.is_active


def test_a_new_cluster_is_bootstrapped_with_metadata_version_once():
    log, controller = active_controller()
    assert controller.features.metadata_version == 19
    end = log.end_offset
    log.elect(None)
    lead(log, controller)
    assert log.end_offset == end + 2  # the LeaderChange record and the NoOpRecord: no second bootstrap


def test_snapshot_written_through_the_log_loads_back_into_the_same_state():
    log, controller = active_controller()
    register_brokers(log, controller, 1, 2)
    run(log, controller, controller.create_topics(create_topics(("t", 3, 2))))
    run(log, controller, controller.allocate_producer_ids(wire(67, 0, broker_id=1,
                                                               broker_epoch=controller.cluster.brokers[1].epoch)))
    end = controller.write_snapshot()
    assert end == log.high_watermark
    epoch, records = log.snapshots[end]
    fresh = make_controller(MemoryLog(), node_id=3003)
    fresh.handle_load_snapshot(end, epoch, records)
    assert _state(fresh) == _state(controller)
    assert fresh.last_committed_offset == end - 1


def test_no_snapshot_while_records_wait_for_their_commit():
    log, controller = active_controller()
    controller.register_broker(registration(1))
    controller.poll(0)
    assert controller.write_snapshot() is None


# ---- the property ---------------------------------------------------------------------------------------------

#: Weighted by repetition: brokers mostly heartbeat, so topics get created and partitions move.
OPS = ("register", "heartbeat", "heartbeat", "heartbeat", "heartbeat", "fence", "shutdown", "create", "create",
       "create", "delete", "partitions", "partitions", "config", "pids", "elect", "expire", "commit", "commit",
       "alter", "alter")


def _apply(op: str, a: int, b: int, log: MemoryLog, controller, clock: list[int]) -> None:
    brokers = controller.cluster.brokers
    broker_id = 1 + a % 4
    epoch = brokers[broker_id].epoch if broker_id in brokers else 0
    topics = sorted(controller.replication.topics_by_name)
    topic = topics[b % len(topics)] if topics else "none"
    if op == "register":  # a new broker, or one that restarted after a shutdown or a fencing
        for candidate in range(1, 5):
            known = brokers.get(candidate)
            if known is None or known.fenced or known.in_controlled_shutdown:
                incarnation = b if known is None or b % 2 else known.incarnation_id[1]
                controller.register_broker(registration(candidate, incarnation=incarnation))
                break
    elif op == "heartbeat":
        for broker in brokers.values():
            controller.broker_heartbeat(heartbeat(broker.id, broker.epoch, log.end_offset))
    elif op == "fence":
        controller.broker_heartbeat(heartbeat(broker_id, epoch, log.end_offset, want_fence=True))
    elif op == "shutdown":
        controller.broker_heartbeat(heartbeat(broker_id, epoch, log.end_offset, want_shut_down=True))
    elif op == "create":
        controller.create_topics(create_topics((f"t{b}", 1 + a % 3, 1 + b % 2),
                                               configs={"unclean.leader.election.enable": "true"} if a % 2 else {}))
    elif op == "delete":
        controller.delete_topics([topic])
    elif op == "partitions":
        count = controller.replication.topics[controller.replication.topics_by_name[topic]].partitions + 1 \
            if topic in topics else 2
        controller.create_partitions(wire(37, 2, topics=[{"name": topic, "count": count, "assignments": None}],
                                          timeout_ms=1, validate_only=False))
    elif op == "config":
        controller.incremental_alter_configs(wire(44, 1, resources=[
            {"resource_type": 2, "resource_name": topic, "configs": [
                {"name": "retention.ms", "config_operation": b % 2, "value": str(a)}]},
            {"resource_type": 4, "resource_name": "", "configs": [
                {"name": "log.retention.ms", "config_operation": 0, "value": str(b + 1)}]}], validate_only=False))
    elif op == "pids":
        controller.allocate_producer_ids(wire(67, 0, broker_id=broker_id, broker_epoch=epoch))
    elif op == "elect":
        controller.elect_leaders(wire(43, 1, election_type=b % 2, topic_partitions=None, timeout_ms=1))
    elif op == "alter" and topic in topics:
        part = controller.replication.partition(topic, 0)
        controller.alter_partition(wire(56, 2, broker_id=part.leader, broker_epoch=brokers[part.leader].epoch
                                        if part.leader in brokers else 0, topics=[{
                                            "topic_id": controller.replication.topics_by_name[topic], "partitions": [{
                                                "partition_index": 0, "leader_epoch": part.leader_epoch,
                                                "new_isr": list(part.replicas[:1 + a % len(part.replicas)]),
                                                "leader_recovery_state": 0,
                                                "partition_epoch": part.partition_epoch}]}]), 2)
    elif op == "expire":
        clock[0] += SESSION_MS // 2 + a * 1000
    elif op == "commit":
        log.commit()
    controller.poll(clock[0])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 7), st.integers(0, 7)), max_size=60),
       st.integers(0, 60))
def test_replaying_the_log_or_loading_the_snapshot_gives_the_active_controllers_state(ops, failover_at):
    log = MemoryLog()
    active = make_controller(log, node_id=3001, seed=5)
    standby = make_controller(log, node_id=3002, seed=6)
    lead(log, active)
    clock = [0]
    for i, (op, a, b) in enumerate(ops):
        if i == failover_at:  # the standby takes over; the old active's uncommitted tail is lost
            standby.now_ms = clock[0]
            lead(log, standby, truncate_uncommitted=True)
            active, standby = standby, active
        _apply(op, a, b, log, active, clock)
    log.commit()
    assert _state(standby) == _state(active)
    replayed = make_controller(log, node_id=3003)
    assert _state(replayed) == _state(active)
    end = active.write_snapshot()
    loaded = make_controller(MemoryLog(), node_id=3004)
    loaded.handle_load_snapshot(end, log.snapshots[end][0], log.snapshots[end][1])
    assert _state(loaded) == _state(active)
    for controller in (standby, replayed, loaded):
        assert controller.cluster.active_brokers() == active.cluster.active_brokers()
        assert dict(controller.replication.partitions.items()) == dict(active.replication.partitions.items())


def test_seeded_long_run_keeps_standby_and_active_equal():
    rng = random.Random(11)
    log = MemoryLog()
    active = make_controller(log, node_id=3001)
    standby = make_controller(log, node_id=3002)
    lead(log, active)
    clock = [0]
    most_partitions = leaders_moved = fencings = 0
    for _ in range(400):
        _apply(rng.choice(OPS), rng.randrange(8), rng.randrange(8), log, active, clock)
        most_partitions = max(most_partitions, len(active.replication.partitions))
        leaders_moved = max([leaders_moved, *(p.leader_epoch for p in active.replication.partitions.values())])
        fencings += sum(b.fenced for b in active.cluster.brokers.values())
    log.commit()
    assert _state(standby) == _state(active)
    # the run did exercise what it claims to: partitions, moved leaders, fenced brokers, producer id blocks
    assert most_partitions >= 3 and leaders_moved >= 1 and fencings and active.producer_ids.next_producer_id


def test_a_new_leader_queues_requests_until_the_log_before_its_epoch_is_replayed():
    log, first = active_controller()
    second = make_controller(log, node_id=3002)
    register_brokers(log, first, 1)
    first.create_topics(create_topics(("t", 1, 1)))
    first.poll(0)  # appended, not committed
    log.elect(3002)  # the new leader has the batch: it commits in the new epoch
    early = second.create_topics(create_topics(("t", 1, 1)))
    second.poll(0)
    assert not early.done and not second.is_active and "t" not in second.replication.topics_by_name
    log.commit()  # the earlier epoch's batch and the NoOpRecord commit: caught up, active
    assert second.is_active and "t" in second.replication.topics_by_name
    second.poll(0)
    log.commit()
    assert early.response[0]["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
    assert _state(first) == _state(second)


def test_a_log_that_commits_inside_the_append_replays_each_record_once_and_answers_at_once():
    log = MemoryLog(commit_on_append=True)  # a quorum of one voter
    controller = make_controller(log)
    log.elect(3001)
    controller.poll(0)
    assert controller.is_active
    controller.poll(0)  # the bootstrap
    registered = controller.register_broker(registration(1))
    controller.poll(0)
    assert registered.done and registered.response["error_code"] == 0
    epoch = registered.response["broker_epoch"]
    blocks = [controller.allocate_producer_ids(wire(67, 0, broker_id=1, broker_epoch=epoch)) for _ in range(2)]
    controller.poll(0)
    assert [b.response["producer_id_start"] for b in blocks] == [0, 1000]  # a replay twice would have refused
    replayed = make_controller(log, node_id=3002)
    assert _state(replayed) == _state(controller)


def test_a_new_active_controller_logs_its_handover_once_its_first_leadership_change_commits(caplog):
    import logging

    from tests.unit.controller.quorum.helpers import heartbeat, register_brokers

    log, first = active_controller()
    second = make_controller(log, node_id=3002)
    epochs = register_brokers(log, first, 1, 2)
    run(log, first, first.create_topics(create_topics(("t", 4, 2))))
    caplog.set_level(logging.INFO, logger="controller.quorum.QuorumController")
    lead(log, second)
    assert not [r for r in caplog.records if "Handover" in r.getMessage()]  # active, no leadership change yet
    run(log, second, second.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_shut_down=True)))
    run(log, second, second.broker_heartbeat(heartbeat(2, epochs[2], log.end_offset, want_shut_down=True)))
    handovers = [r.getMessage() for r in caplog.records if "Handover" in r.getMessage()]
    assert len(handovers) == 1 and "id=3002" in handovers[0] and "after this controller was elected" in handovers[0]
