"""Large operations in parts (controller/quorum/events.py, MAX_RECORDS_PER_BATCH): a broker fenced, shut down or
unfenced with more partitions than one batch holds moves them one batch per turn of the queue, each batch
computed afresh, so requests that arrive meanwhile (heartbeats) are answered between the batches; the final batch
carries the fencing; a standby replaying the batches holds the same state. A large snapshot loads in parts too,
the commits that arrive meanwhile held until it is loaded. A request's own records are bounded
instead (CreateTopics: 10,000 partition records)."""

from __future__ import annotations

import pytest

from controller.quorum import controller as quorum_controller
from controller.quorum import replication_control
from tests.unit.controller.quorum.helpers import (
    SESSION_MS,
    MemoryLog,
    active_controller,
    create_topics,
    heartbeat,
    lead,
    make_controller,
    register_brokers,
    run,
)

BATCH = 10


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    monkeypatch.setattr(replication_control, "MAX_RECORDS_PER_BATCH", BATCH)
    monkeypatch.setattr(quorum_controller, "MAX_RECORDS_PER_BATCH", BATCH)


def _cluster(partitions: int = 45):
    log, controller = active_controller()
    standby = make_controller(log, node_id=3002)
    epochs = register_brokers(log, controller, 1, 2, 3)
    run(log, controller, controller.create_topics(create_topics(("t", partitions, 2))))
    return log, controller, standby, epochs


def _led_or_in_isr(controller, broker_id: int) -> int:
    return sum(broker_id == p.leader or (broker_id in p.isr and len(p.isr) > 1)
               for p in controller.replication.partitions.values())


def test_a_fenced_broker_leaves_its_partitions_one_bounded_batch_per_poll_with_heartbeats_answered_between():
    log, controller, standby, epochs = _cluster()
    assert _led_or_in_isr(controller, 1) == 30  # rf 2 over 3 brokers: two thirds of the partitions
    now = SESSION_MS + 1
    for b in (2, 3):  # brokers 2 and 3 stay alive
        run(log, controller, controller.broker_heartbeat(heartbeat(b, epochs[b], log.end_offset)), now - 1)
    end = log.end_offset
    controller.poll(now)  # broker 1's session has expired: the first part
    log.commit()
    assert log.end_offset - end == BATCH
    assert not controller.cluster.brokers[1].fenced
    answer = controller.broker_heartbeat(heartbeat(2, epochs[2], log.end_offset))  # arrives in the middle
    polls = 1
    while not controller.cluster.brokers[1].fenced:
        controller.poll(now)  # the session check again: the fencing under way is not started twice
        log.commit()
        polls += 1
        assert polls < 10
    assert answer.done and answer.response["is_fenced"] is False
    batches = [b for b in log.batches if b[0] >= end]
    assert all(last - base + 1 <= BATCH + 1 for base, last, _, _ in batches)  # the last one: ten and the fencing
    assert len(batches) == 4  # 30 partitions in parts of 10, then the fencing (and the heartbeat's nothing)
    assert _led_or_in_isr(controller, 1) == 0
    assert standby.snapshot_records() == controller.snapshot_records()


def test_a_controlled_shutdown_moves_leaderships_in_parts_and_ends_only_once_none_is_left():
    log, controller, standby, epochs = _cluster()
    first = controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_shut_down=True))
    for _ in range(5):  # the answer goes out with the last part
        controller.poll(controller.now_ms)
        log.commit()
    assert first.done and first.response["should_shut_down"] is False
    assert not any(p.leader == 1 for p in controller.replication.partitions.values())
    done = run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset,
                                                                       want_shut_down=True)))
    assert done["should_shut_down"] is True
    assert standby.snapshot_records() == controller.snapshot_records()


def test_an_unfenced_broker_takes_the_leaderless_partitions_in_parts():
    log, controller, standby, epochs = _cluster(partitions=25)
    for b in (2, 3, 1):  # broker 1 last: the last ISR member of its partitions
        fenced = controller.broker_heartbeat(heartbeat(b, epochs[b], log.end_offset, want_fence=True))
        for _ in range(5):
            controller.poll(controller.now_ms)
            log.commit()
        assert fenced.done and fenced.response["is_fenced"] is True
    assert all(p.leader == -1 for p in controller.replication.partitions.values())
    answer = controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset))
    for _ in range(5):
        controller.poll(controller.now_ms)
        log.commit()
    assert answer.done and answer.response["is_fenced"] is False
    led = [p for p in controller.replication.partitions.values() if p.isr == (1,)]  # it was their last ISR member
    assert len(led) > BATCH and all(p.leader == 1 for p in led)
    assert standby.snapshot_records() == controller.snapshot_records()


def test_create_topics_writes_at_most_ten_thousand_partition_records_per_request():
    log, controller = active_controller()
    register_brokers(log, controller, 1)
    answer = run(log, controller, controller.create_topics(create_topics(("a", 6000, 1), ("b", 4000, 1),
                                                                         ("c", 1, 1))))
    assert [t["error_code"] for t in answer] == [0, 0, 42]  # INVALID_REQUEST: the request's bound reached
    assert "more than 10000 partition records" in answer[2]["error_message"]
    assert controller.replication.topic_exists("b") and not controller.replication.topic_exists("c")


def test_a_large_snapshot_loads_one_part_per_poll_holding_commits_and_the_leadership_until_loaded():
    log, controller, _, epochs = _cluster()
    end = controller.write_snapshot()
    epoch, records = log.snapshots[end]
    assert len(records) > 4 * BATCH
    other = MemoryLog()  # a second cluster's log stands in for the one the restarted controller reads
    fresh = make_controller(other, node_id=3003)
    fresh.handle_load_snapshot(end, epoch, records)
    assert fresh.has_work and len(fresh.replication.partitions) < 45
    fresh.handle_commit(end, end, epoch, [controller.cluster.fence_record(controller.cluster.brokers[3])])
    assert not fresh.cluster.brokers.get(3) or not fresh.cluster.brokers[3].fenced  # held while loading
    other.end_offset = end + 1
    other.elect(3003)  # elected in the middle of the load: it claims the leadership only once loaded
    polls = 0
    while fresh.has_work:  # the load's parts
        assert other.batches == []
        fresh.poll(0)
        polls += 1
    assert polls >= 4
    assert len(fresh.replication.partitions) == 45 and fresh.cluster.brokers[3].fenced
    assert fresh.last_committed_offset == end
    fresh.poll(0)
    assert other.batches  # its NoOpRecord, appended after the load


def _indexes(controller):
    """The replication manager's indexes as plain data, and what a scan of its partitions says they must be."""
    replication = controller.replication
    replica_of = {b: sorted(replication.partitions_of(b)) for b in (1, 2, 3)}
    leads = {b: replication.leaderships.get(b, 0) for b in (1, 2, 3)}
    expected_of = {b: sorted(k for k, p in replication.partitions.items() if b in p.replicas) for b in (1, 2, 3)}
    expected_leads = {b: sum(p.leader == b for p in replication.partitions.values()) for b in (1, 2, 3)}
    return (replica_of, leads), (expected_of, expected_leads)


def test_the_broker_to_partitions_index_and_leader_counts_follow_replay_and_the_revert_of_a_lost_leadership():
    from tests.unit.controller.quorum.helpers import lead

    log, controller, standby, epochs = _cluster(partitions=25)
    run(log, controller, controller.create_topics(create_topics(("u", 5, 3))))
    held, expected = _indexes(controller)
    assert held == expected and held == _indexes(standby)[0]
    assert controller.replication.leads_any(1)
    committed = held
    # uncommitted: a topic removed and broker 1 fenced in parts; then the leadership is lost and both revert
    controller.delete_topics(["u"])
    controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_fence=True))
    for _ in range(5):
        controller.poll(controller.now_ms)
    assert _indexes(controller)[0] != committed and not controller.replication.leads_any(1)
    lead(log, standby, truncate_uncommitted=True)
    assert _indexes(controller)[0] == committed == _indexes(controller)[1]
    assert controller.replication.leads_any(1)


def test_each_part_of_a_broker_step_resumes_its_scan_instead_of_rescanning_every_partition(monkeypatch):
    log, controller, standby, epochs = _cluster(partitions=45)
    run(log, controller, controller.create_topics(create_topics(("elsewhere", 40, 1), )))  # some without broker 1
    visited = []
    partitions = controller.replication.partitions
    real_get = type(partitions).get
    monkeypatch.setattr(type(partitions), "get", lambda self, key, default=None: (
        visited.append(key) if self is partitions else None, real_get(self, key, default))[1])
    fenced = controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_fence=True))
    for _ in range(6):
        controller.poll(controller.now_ms)
        log.commit()
    assert fenced.done and fenced.response["is_fenced"] is True
    ones = [k for k in controller.replication.partitions if 1 in controller.replication.partitions[k].replicas]
    assert len(ones) > 3 * BATCH  # several parts
    assert sorted(visited) == sorted(ones)  # each of broker 1's partitions once, nobody else's
    assert _led_or_in_isr(controller, 1) == 0
    assert standby.snapshot_records() == controller.snapshot_records()


def test_the_controller_freezes_the_heap_once_many_records_are_replayed(monkeypatch):
    import gc

    monkeypatch.setattr(quorum_controller, "FREEZE_AFTER_RECORDS", 20)
    gc.unfreeze()
    try:
        log, controller, standby, _ = _cluster(partitions=45)
        controller.poll(controller.now_ms)
        standby.poll(0)
        assert gc.get_freeze_count() > 0
        assert controller._replayed_since_freeze < 20
    finally:
        gc.unfreeze()


def test_a_broker_step_copies_nothing_up_front_and_a_topic_deleted_between_its_parts_loses_no_partition():
    log, controller, standby, epochs = _cluster(partitions=45)
    run(log, controller, controller.create_topics(create_topics(("doomed", 12, 3))))
    index = controller.replication._replica_of[1]
    copied = []
    real_iter = type(index).__iter__
    type(index).__iter__ = lambda self: (copied.append(self) if self is index else None, real_iter(self))[1]
    try:
        answer = controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_shut_down=True))
        controller.poll(controller.now_ms)  # the first part: no copy of broker 1's partitions taken for it
        log.commit()
        assert copied == [] and not answer.done
        run(log, controller, controller.delete_topics(["doomed"]))  # between two parts: the index changes
        for _ in range(8):
            controller.poll(controller.now_ms)
            log.commit()
    finally:
        type(index).__iter__ = real_iter
    assert answer.done and answer.error is None
    assert not controller.replication.leads_any(1)
    assert not any(p.leader == 1 for p in controller.replication.partitions.values())
    assert standby.snapshot_records() == controller.snapshot_records()


def test_the_next_part_waits_until_a_parts_worth_of_records_is_committed_and_the_commit_wakes_the_driver(
        monkeypatch):
    monkeypatch.setattr(quorum_controller, "MAX_UNCOMMITTED_RECORDS", BATCH)
    log, controller, standby, epochs = _cluster()
    woken = []
    controller.wake = lambda: woken.append(log.end_offset)
    first = controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_shut_down=True))
    end = log.end_offset
    controller.poll(controller.now_ms)  # the first part: ten leaderships moved, appended, not committed yet
    assert log.end_offset - end == BATCH and controller.waiting_for_commit and not controller.has_work
    other = controller.broker_heartbeat(heartbeat(2, epochs[2], log.end_offset))
    for _ in range(3):  # polls (a timer, requests arriving) append nothing while the part waits for its commit
        controller.poll(controller.now_ms)
    assert log.end_offset - end == BATCH and not other.done and not woken
    log.commit()  # the part commits: the driver is woken, and the next poll appends the next part
    assert woken and controller.has_work
    controller.poll(controller.now_ms)
    assert log.end_offset - end == 2 * BATCH
    for _ in range(5):
        log.commit()
        controller.poll(controller.now_ms)
    log.commit()
    assert first.done and other.done and not any(p.leader == 1 for p in controller.replication.partitions.values())
    assert standby.snapshot_records() == controller.snapshot_records()


def test_a_heartbeat_held_behind_uncommitted_parts_counts_for_the_session_as_it_arrives(monkeypatch):
    monkeypatch.setattr(quorum_controller, "MAX_UNCOMMITTED_RECORDS", BATCH)
    log, controller, standby, epochs = _cluster()
    controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_shut_down=True))
    controller.poll(controller.now_ms)  # a part appended, its commit outstanding: the queue is held
    assert controller.waiting_for_commit
    arrived = controller.now_ms + SESSION_MS
    held = controller.broker_heartbeat(heartbeat(2, epochs[2], log.end_offset), arrived)
    stale = controller.broker_heartbeat(heartbeat(3, epochs[3] + 1, log.end_offset), arrived)  # not its epoch
    assert not held.done
    assert controller.cluster.heartbeats.last_contact_ms[2] == arrived
    assert controller.cluster.heartbeats.last_contact_ms[3] < arrived
    for _ in range(5):  # a part commits, the next runs; the held heartbeats run in their turn
        log.commit()
        controller.poll(arrived + 1)
    log.commit()
    assert held.done and held.response["error_code"] == 0 and stale.response["error_code"] != 0
    stale_then = controller.cluster.stale_brokers(arrived + SESSION_MS)
    assert 2 not in stale_then and 3 in stale_then  # broker 2's session runs from its heartbeat's arrival


def test_a_controlled_shutdown_left_with_parts_to_go_by_a_failover_is_taken_up_by_the_next_controller():
    """The controller that began a controlled shutdown loses its leadership after the first part: its successor,
    which has the broker in controlled shutdown and leading partitions still, moves them at the broker's next
    heartbeat (Kafka's controller does at every one), and the broker may stop."""
    log, controller, standby, epochs = _cluster()
    controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_shut_down=True))
    controller.poll(controller.now_ms)  # the controlled-shutdown record and the first part
    log.commit()
    assert standby.cluster.brokers[1].in_controlled_shutdown and standby.replication.leads_any(1)
    lead(log, standby)  # the old controller renounces with parts left
    assert not controller.is_active and standby.is_active
    assert not controller.replication.shutdowns_moving  # dropped with the leadership: taken up if it leads again
    answer = standby.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_shut_down=True))
    for _ in range(5):
        standby.poll(standby.now_ms)
        log.commit()
    assert answer.done and answer.response["should_shut_down"] is False
    assert not standby.replication.leads_any(1)
    done = run(log, standby, standby.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_shut_down=True)))
    assert done["should_shut_down"] is True


def test_heartbeats_during_a_controlled_shutdowns_parts_start_no_second_operation():
    log, controller, standby, epochs = _cluster()
    first = controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_shut_down=True))
    controller.poll(controller.now_ms)
    log.commit()
    assert controller.replication.shutdowns_moving == {1} and controller.replication.leads_any(1)
    again = controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_shut_down=True))
    for _ in range(5):
        controller.poll(controller.now_ms)
        log.commit()
    assert first.done and again.done and again.response["should_shut_down"] is False
    assert not controller.replication.shutdowns_moving and not controller.replication.leads_any(1)
