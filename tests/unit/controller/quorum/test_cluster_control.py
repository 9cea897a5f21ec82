"""Broker lifecycle on the quorum controller (KIP-631), with an injected clock: registration and its refusals,
fenced until caught up to its own registration, fenced after broker.session.timeout.ms without a heartbeat,
unfenced again once it heartbeats, controlled shutdown through heartbeats, unregistration."""

from __future__ import annotations

from tests.unit.controller.quorum.helpers import (
    SESSION_MS,
    active_controller,
    create_topics,
    heartbeat,
    lead,
    register_brokers,
    registration,
    run,
)
from zkbroker.protocol.errors import ErrorCode


def test_a_registered_broker_is_fenced_until_its_metadata_offset_reaches_its_registration():
    log, controller = active_controller()
    answer = run(log, controller, controller.register_broker(registration(1)))
    epoch = answer["broker_epoch"]
    assert answer["error_code"] == 0 and controller.cluster.brokers[1].fenced
    offset = controller.cluster.registration_offsets[1]
    behind = run(log, controller, controller.broker_heartbeat(heartbeat(1, epoch, offset - 1)))
    assert behind == {"error_code": 0, "is_caught_up": False, "is_fenced": True, "should_shut_down": False}
    assert controller.cluster.brokers[1].fenced
    caught_up = run(log, controller, controller.broker_heartbeat(heartbeat(1, epoch, offset)))
    assert caught_up == {"error_code": 0, "is_caught_up": True, "is_fenced": False, "should_shut_down": False}
    assert not controller.cluster.brokers[1].fenced


def test_the_broker_epoch_is_the_registration_offset_or_later_and_grows_with_each_registration():
    log, controller = active_controller()
    first = run(log, controller, controller.register_broker(registration(1, incarnation=1)))["broker_epoch"]
    second = run(log, controller, controller.register_broker(registration(1, incarnation=1)))["broker_epoch"]
    assert second > first
    assert controller.cluster.registration_offsets[1] >= first


def test_registration_refusals_name_their_reason():
    log, controller = active_controller()
    wrong_cluster = run(log, controller, controller.register_broker(registration(1, cluster_id="other")))
    assert wrong_cluster["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID
    old = run(log, controller, controller.register_broker(registration(1, max_mv=7)))
    assert old["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert 1 not in controller.cluster.brokers


def test_another_incarnation_with_a_live_session_is_a_duplicate_and_one_without_replaces_it():
    log, controller = active_controller()
    register_brokers(log, controller, 1, now_ms=0)
    duplicate = run(log, controller, controller.register_broker(registration(1, incarnation=9)), now_ms=1000)
    assert duplicate["error_code"] == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    later = run(log, controller, controller.register_broker(registration(1, incarnation=9)), now_ms=SESSION_MS + 2000)
    assert later["error_code"] == 0
    assert controller.cluster.brokers[1].incarnation_id[1] == 9 and controller.cluster.brokers[1].fenced


def test_a_broker_silent_past_its_session_is_fenced_and_its_leaderships_move():
    log, controller = active_controller()
    epochs = register_brokers(log, controller, 1, 2, now_ms=0)
    run(log, controller, controller.create_topics(create_topics(("t", 2, 2))))
    led_by_1 = [key for key, p in controller.replication.partitions.items() if p.leader == 1]
    assert led_by_1
    controller.poll(SESSION_MS)  # exactly the session: still fine
    assert not controller.cluster.brokers[1].fenced
    run(log, controller, controller.broker_heartbeat(heartbeat(2, epochs[2], log.end_offset)), now_ms=SESSION_MS)
    controller.poll(SESSION_MS + 1)
    log.commit()
    assert controller.cluster.brokers[1].fenced and not controller.cluster.brokers[2].fenced
    for key in led_by_1:
        part = controller.replication.partitions[key]
        assert part.leader == 2 and part.isr == (2,) and part.leader_epoch == 1
    # back: a heartbeat from the same epoch unfences it, once caught up; it rejoins ISRs through AlterPartition
    back = run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset)),
               now_ms=SESSION_MS + 5)
    assert back["is_fenced"] is False and not controller.cluster.brokers[1].fenced


def test_a_stale_broker_epoch_is_refused():
    log, controller = active_controller()
    epochs = register_brokers(log, controller, 1)
    stale = run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1] - 1, log.end_offset)))
    assert stale["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    unknown = run(log, controller, controller.broker_heartbeat(heartbeat(7, 1, log.end_offset)))
    assert unknown["error_code"] == ErrorCode.STALE_BROKER_EPOCH


def test_controlled_shutdown_moves_leaderships_then_lets_the_broker_go():
    log, controller = active_controller()
    epochs = register_brokers(log, controller, 1, 2, 3)
    run(log, controller, controller.create_topics(create_topics(("t", 3, 3))))
    first = run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset,
                                                                       want_shut_down=True)))
    assert first["should_shut_down"] is False and first["is_fenced"] is False
    assert controller.cluster.brokers[1].in_controlled_shutdown
    assert not controller.replication.leads_any(1)
    assert all(1 not in p.isr for p in controller.replication.partitions.values())
    assert 1 not in controller.cluster.active_brokers()
    done = run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset,
                                                                      want_shut_down=True)))
    assert done == {"error_code": 0, "is_caught_up": True, "is_fenced": True, "should_shut_down": True}
    assert controller.cluster.brokers[1].fenced


def test_want_fence_fences_an_unfenced_broker():
    log, controller = active_controller()
    epochs = register_brokers(log, controller, 1)
    answer = run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset,
                                                                        want_fence=True)))
    assert answer["is_fenced"] is True and controller.cluster.brokers[1].fenced


def test_unregistering_removes_the_broker_and_its_isr_memberships():
    log, controller = active_controller()
    register_brokers(log, controller, 1, 2)
    run(log, controller, controller.create_topics(create_topics(("t", 2, 2))))
    assert run(log, controller, controller.unregister_broker(2)) == {"error_code": 0, "error_message": None}
    assert 2 not in controller.cluster.brokers
    assert all(p.leader == 1 and p.isr == (1,) for p in controller.replication.partitions.values())
    again = run(log, controller, controller.unregister_broker(2))
    assert again["error_code"] == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_a_new_active_controller_gives_every_unfenced_broker_a_full_session():
    log, controller = active_controller()
    register_brokers(log, controller, 1, now_ms=0)
    controller.now_ms = 8000
    log.elect(None)
    lead(log, controller)
    controller.poll(SESSION_MS + 1)  # 9001 ms after the last heartbeat, but only 1001 ms into this leadership
    log.commit()
    assert not controller.cluster.brokers[1].fenced
    controller.poll(8000 + SESSION_MS + 1)
    log.commit()
    assert controller.cluster.brokers[1].fenced


def test_describe_shows_each_brokers_fencing_and_last_metadata_offset_for_the_lab():
    log, controller = active_controller()
    epochs = register_brokers(log, controller, 1, 2)
    run(log, controller, controller.broker_heartbeat(heartbeat(2, epochs[2], 42, want_fence=True)))
    described = controller.describe()
    assert described["active"] and described["metadata_version"] == 19
    assert [(b["id"], b["fenced"], b["metadata_offset"]) for b in described["brokers"]] == [
        (1, False, controller.cluster.heartbeats.metadata_offsets[1]), (2, True, 42)]
