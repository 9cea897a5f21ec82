"""A KRaft broker's pure parts: its lifecycle as the controller's answers move it (registered, fenced until caught
up, unfenced, fenced again, registering again after a stale epoch, a controlled shutdown through heartbeats); what
the metadata image means for it (the LeaderAndIsr-shaped request its ReplicaManager applies, ISR-only changes, the
Metadata snapshot without fenced brokers); and the APIs it advertises."""

from __future__ import annotations

from tests.unit.controller.quorum.helpers import (
    active_controller,
    create_topics,
    heartbeat,
    register_brokers,
    run,
    wire,
)
from zkbroker.metadata.delta import MetadataDelta, image_from_records
from zkbroker.metadata.image import MetadataImage
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.raft.snapshot_policy import SnapshotPolicy
from zkbroker.server.broker_lifecycle import BrokerLifecycle, BrokerState, Listener
from zkbroker.server.kraft_apis import kraft_versions
from zkbroker.server.metadata_publisher import (
    BrokerMetadataListener,
    BrokerSnapshotWriter,
    cluster_snapshot,
    leader_and_isr,
)

# ---- the lifecycle ---------------------------------------------------------------------------------------------


def _lifecycle() -> BrokerLifecycle:
    return BrokerLifecycle(1, "cluster", (Listener("PLAINTEXT", "h", 9092),), heartbeat_interval_ms=2000,
                           retry_backoff_ms=100, incarnation_id=b"\x01" * 16)


def test_a_broker_registers_then_stays_fenced_until_a_heartbeat_says_it_caught_up():
    lc = _lifecycle()
    kind, body = lc.next_request()
    assert kind == "registration" and body["incarnation_id"] == b"\x01" * 16
    assert body["listeners"] == [{"name": "PLAINTEXT", "host": "h", "port": 9092, "security_protocol": 0}]
    assert body["features"][0]["name"] == "metadata.version"
    lc.on_registration(1000, ErrorCode.NONE, 42)
    assert (lc.state, lc.broker_epoch, lc.fenced) == (BrokerState.RECOVERY, 42, True) and lc.due(1000)
    assert lc.heartbeat(7) == {"broker_id": 1, "broker_epoch": 42, "current_metadata_offset": 7,
                               "want_fence": False, "want_shut_down": False}
    lc.on_heartbeat(1000, ErrorCode.NONE, False, True, False)  # not caught up yet: asks again soon
    assert lc.state is BrokerState.RECOVERY and lc.next_send_ms == 1100
    lc.on_heartbeat(1100, ErrorCode.NONE, True, False, False)
    assert (lc.state, lc.fenced, lc.next_send_ms) == (BrokerState.RUNNING, False, 3100)
    assert lc.take_events() == ["registered", "unfenced"]


def test_a_refused_registration_is_retried_and_a_stale_epoch_registers_again():
    lc = _lifecycle()
    lc.on_registration(0, ErrorCode.DUPLICATE_BROKER_REGISTRATION, -1)
    assert lc.state is BrokerState.STARTING and not lc.due(50) and lc.due(100)
    lc.on_registration(100, ErrorCode.NONE, 5)
    lc.on_heartbeat(100, ErrorCode.NONE, True, False, False)
    lc.on_heartbeat(2100, ErrorCode.NONE, True, True, False)  # our session expired: the controller fenced us
    assert (lc.state, lc.fenced) == (BrokerState.RECOVERY, True)
    lc.on_heartbeat(2200, ErrorCode.STALE_BROKER_EPOCH, False, True, False)
    assert (lc.state, lc.broker_epoch) == (BrokerState.STARTING, -1) and lc.next_request()[0] == "registration"
    assert lc.take_events() == ["registered", "unfenced", "fenced", "registering again"]


def test_a_controlled_shutdown_goes_through_heartbeats_until_the_controller_says_shut_down():
    lc = _lifecycle()
    assert not lc.begin_controlled_shutdown(0)  # never registered: nothing to ask
    lc = _lifecycle()
    lc.on_registration(0, ErrorCode.NONE, 5)
    lc.on_heartbeat(0, ErrorCode.NONE, True, False, False)
    assert lc.begin_controlled_shutdown(10) and lc.due(10)
    assert lc.heartbeat(9)["want_shut_down"] is True
    lc.on_heartbeat(20, ErrorCode.NONE, True, False, False)  # leaderships still moving
    assert lc.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN
    lc.on_heartbeat(120, ErrorCode.NONE, True, True, True)
    assert lc.state is BrokerState.SHUTTING_DOWN and not lc.due(10_000)


def test_a_recovering_broker_heartbeats_want_fence_until_ready_then_asks_at_once():
    lc = _lifecycle()
    lc.ready_to_unfence = False  # as BrokerServer starts it: its replicas not yet applied
    lc.set_ready_to_unfence(0)  # before registering: nothing to send early, registration comes first
    assert lc.next_request()[0] == "registration"
    lc = _lifecycle()
    lc.ready_to_unfence = False
    lc.on_registration(0, ErrorCode.NONE, 5)
    assert lc.heartbeat(9)["want_fence"] is True
    lc.on_heartbeat(0, ErrorCode.NONE, True, True, False)  # caught up by offset, kept fenced as we asked
    assert (lc.state, lc.fenced, lc.next_send_ms) == (BrokerState.RECOVERY, True, 100)
    lc.set_ready_to_unfence(40)
    assert lc.due(40) and lc.heartbeat(9)["want_fence"] is False
    lc.on_heartbeat(40, ErrorCode.NONE, True, False, False)
    assert (lc.state, lc.fenced) == (BrokerState.RUNNING, False)
    lc.set_ready_to_unfence(50)  # once is enough: no event, no early heartbeat
    assert lc.take_events() == ["registered", "ready to unfence", "unfenced"] and not lc.due(50)
    assert lc.begin_controlled_shutdown(60) and lc.heartbeat(9) == {
        "broker_id": 1, "broker_epoch": 5, "current_metadata_offset": 9, "want_fence": False, "want_shut_down": True}


# ---- the metadata image ------------------------------------------------------------------------------------------

def _image(log, base: MetadataImage | None = None, start: int = 0) -> tuple[MetadataImage, MetadataDelta]:
    delta = MetadataDelta(base or MetadataImage())
    for offset, epoch, records in log.committed_records():
        for i, item in enumerate(records):
            if offset + i >= start:
                delta.replay(item, offset + i, epoch)
    return delta.apply(), delta


def test_new_partitions_become_one_leader_and_isr_request_with_their_leaders_addresses():
    log, controller = active_controller()
    register_brokers(log, controller, 1, 2)
    run(log, controller, controller.create_topics(create_topics(("t", -1, -1), assignments={0: [1, 2], 1: [2, 1]})))
    image, delta = _image(log)
    request, updates = leader_and_isr(delta.local_changes(1), image, {}, controller_id=3001)
    assert not updates and request.controller_id == 3001 and request.controller_epoch == image.epoch
    states = {(s.topic, s.partition): s for s in request.partition_states}
    assert (states["t", 0].leader, states["t", 0].replicas, states["t", 0].isr) == (1, (1, 2), (1, 2))
    assert states["t", 1].leader == 2 and states["t", 1].zk_version == image.partition("t", 1).partition_epoch
    assert [(b.broker_id, b.port) for b in request.live_leaders] == [(1, 9091), (2, 9092)]


def test_a_fenced_follower_changes_only_the_isr_of_the_partition_a_broker_keeps_leading():
    log, controller = active_controller()
    epochs = register_brokers(log, controller, 1, 2)
    run(log, controller, controller.create_topics(create_topics(("t", -1, -1), assignments={0: [1, 2], 1: [2, 1]})))
    image, _ = _image(log)
    start = log.end_offset
    run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_fence=True)))
    after, delta = _image(log, image, start)
    held = {("t", 0): image.partition("t", 0).leader_epoch, ("t", 1): image.partition("t", 1).leader_epoch}
    request, updates = leader_and_isr(delta.local_changes(2), after, held)
    # partition 0: broker 2 takes over (a new leader epoch, through LeaderAndIsr's methods); partition 1: broker 2
    # still leads at the same leader epoch, with broker 1 out of the ISR and a new partition epoch
    assert [(s.topic, s.partition, s.leader) for s in request.partition_states] == [("t", 0, 2)]
    assert set(updates) == {("t", 1)} and updates["t", 1].isr == (2,)
    assert updates["t", 1].partition_epoch == after.partition("t", 1).partition_epoch
    snapshot = cluster_snapshot(after, 2)
    assert sorted(snapshot.brokers) == [2] and snapshot.controller_id == 2  # the fenced broker is left out
    assert snapshot.partitions["t"][0].leader == 2 and snapshot.brokers[2].endpoint("PLAINTEXT") == ("localhost", 9092)
    assert cluster_snapshot(after, 1).controller_id == 2  # a fenced broker names a live one


def test_the_listener_publishes_an_image_per_committed_run_and_a_snapshot_replaces_the_image():
    log, controller = active_controller()
    register_brokers(log, controller, 1)
    run(log, controller, controller.create_topics(create_topics(("t", 1, 1))))
    published = []
    listener = BrokerMetadataListener(lambda image, delta: published.append((image, delta)))
    for offset, epoch, records in log.committed_records():
        listener.handle_commit(offset, offset + len(records) - 1, epoch, records)
    assert listener.image.offset == log.high_watermark - 1 and listener.image.partition("t", 0).leader == 1
    assert len(published) == len(log.committed_records())
    listener.handle_load_snapshot(log.high_watermark, 1, controller.snapshot_records())
    image, delta = published[-1]
    assert image.partition("t", 0) == listener.image.partition("t", 0) and set(delta.local_changes(1).leaders) == {
        ("t", 0)}


# ---- what a KRaft broker advertises -----------------------------------------------------------------------------

def test_a_kraft_broker_advertises_no_zookeeper_only_api_and_forwards_at_versions_the_controller_speaks():
    every = set(ApiKey)
    versions = kraft_versions(every)
    for key in (ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA, ApiKey.CONTROLLED_SHUTDOWN):
        assert key not in versions
    assert versions[ApiKey.CREATE_TOPICS] == (0, 6) and versions[ApiKey.OFFSET_COMMIT][0] == 1
    assert ApiKey.PRODUCE in versions and ApiKey.API_VERSIONS in versions


def test_a_broker_snapshot_of_its_image_replays_into_the_same_image_once_the_policy_says_so():
    log, controller = active_controller()
    epochs = register_brokers(log, controller, 1, 2)
    run(log, controller, controller.create_topics(create_topics(("t", 2, 2), configs={"retention.ms": "7"})))
    run(log, controller, controller.allocate_producer_ids(wire(67, 0, broker_id=1, broker_epoch=epochs[1])))
    listener = BrokerMetadataListener(lambda image, delta: None)
    written = []
    writer = BrokerSnapshotWriter(listener, SnapshotPolicy(max_bytes=1, max_interval_ms=0),
                                  lambda end, epoch, records: written.append((end, epoch, records)), lambda: 0)
    for offset, epoch, records in log.committed_records():
        listener.handle_commit(offset, offset + len(records) - 1, epoch, records)
        writer.handle_commit(offset, offset + len(records) - 1, epoch, records)
    end, epoch, records = written[-1]
    assert (end, epoch) == (listener.image.offset + 1, listener.image.epoch)
    again = image_from_records(records, end - 1, epoch)
    for name in ("features", "brokers", "topics_by_name", "configs", "next_producer_id"):
        assert getattr(again, name) == getattr(listener.image, name), name
