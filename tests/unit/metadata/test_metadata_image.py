"""A KRaft broker's MetadataImage and MetadataDelta (zkbroker/metadata/): built from the records the quorum
controller commits, the image holds what the controller holds (topics by name and id, partitions, brokers and
their fencing, configs, features, producer ids); the delta says which local partitions changed role; a snapshot
onto an empty image gives the image the log gives."""

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


def _image_from_log(log, base: MetadataImage | None = None, start: int = 0) -> tuple[MetadataImage, MetadataDelta]:
    delta = MetadataDelta(base or MetadataImage())
    for offset, epoch, records in log.committed_records():
        for i, item in enumerate(records):
            if offset + i >= start:
                delta.replay(item, offset + i, epoch)
    return delta.apply(), delta


def test_the_image_holds_what_the_controller_holds():
    log, controller = active_controller()
    epochs = register_brokers(log, controller, 1, 2, 3)
    [created] = run(log, controller, controller.create_topics(create_topics(("t", 3, 2),
                                                                            configs={"retention.ms": "7"})))
    run(log, controller, controller.allocate_producer_ids(wire(67, 0, broker_id=1, broker_epoch=epochs[1])))
    run(log, controller, controller.broker_heartbeat(heartbeat(3, epochs[3], log.end_offset, want_fence=True)))
    image, _ = _image_from_log(log)
    assert image.metadata_version == 19 and image.next_producer_id == 1000
    assert image.offset == log.high_watermark - 1
    assert [b.id for b in image.live_brokers()] == [1, 2]  # the fenced broker is left out
    assert image.brokers[3].fenced and image.brokers[1].endpoint("PLAINTEXT").port == 9091
    topic = image.topic("t")
    assert topic.id == created["topic_id"] and image.topics_by_id[topic.id] is topic
    for p in range(3):
        assert image.partition("t", p) == controller.replication.partition("t", p)
    assert image.topic_config("t") == {"retention.ms": "7"}


def test_a_delta_names_the_partitions_whose_role_changed_on_one_broker():
    log, controller = active_controller()
    epochs = register_brokers(log, controller, 1, 2)
    run(log, controller, controller.create_topics(create_topics(("t", -1, -1), assignments={0: [1, 2], 1: [2, 1]})))
    image, delta = _image_from_log(log)
    created = delta.local_changes(1)
    assert set(created.leaders) == {("t", 0)} and set(created.followers) == {("t", 1)} and not created.deletes
    start = log.end_offset
    run(log, controller, controller.broker_heartbeat(heartbeat(1, epochs[1], log.end_offset, want_fence=True)))
    after, delta = _image_from_log(log, image, start)
    on_2 = delta.local_changes(2)
    # partition 0: 2 now leads; partition 1: 2 still leads, but the ISR it holds shrank (a new partition epoch)
    assert set(on_2.leaders) == {("t", 0), ("t", 1)} and not on_2.followers
    assert on_2.leaders[("t", 1)].isr == (2,) and on_2.leaders[("t", 1)].leader_epoch == 0
    assert set(delta.local_changes(1).followers) == {("t", 0), ("t", 1)}
    assert after.partition("t", 0).leader == 2 and image.partition("t", 0).leader == 1  # the old image is intact
    assert after.topics_by_id is not image.topics_by_id


def test_a_deleted_topic_is_a_local_delete_and_its_configs_go():
    log, controller = active_controller()
    register_brokers(log, controller, 1)
    run(log, controller, controller.create_topics(create_topics(("t", 2, 1), configs={"retention.ms": "7"})))
    image, _ = _image_from_log(log)
    start = log.end_offset
    run(log, controller, controller.delete_topics(["t"]))
    after, delta = _image_from_log(log, image, start)
    assert delta.local_changes(1).deletes == {("t", 0), ("t", 1)}
    assert after.topic("t") is None and after.topic_config("t") == {} and not after.topics_by_id


def test_an_unchanged_topic_is_shared_between_images():
    log, controller = active_controller()
    register_brokers(log, controller, 1)
    run(log, controller, controller.create_topics(create_topics(("a", 1, 1), ("b", 1, 1))))
    image, _ = _image_from_log(log)
    start = log.end_offset
    run(log, controller, controller.create_topics(create_topics(("c", 1, 1))))
    after, _ = _image_from_log(log, image, start)
    assert after.topic("a") is image.topic("a") and after.topic("c") is not None


def test_the_controllers_snapshot_onto_an_empty_image_gives_the_image_of_the_log():
    log, controller = active_controller()
    epochs = register_brokers(log, controller, 1, 2)
    run(log, controller, controller.create_topics(create_topics(("t", 4, 2), configs={"retention.ms": "7"})))
    run(log, controller, controller.broker_heartbeat(heartbeat(2, epochs[2], log.end_offset, want_fence=True)))
    from_log, _ = _image_from_log(log)
    end = controller.write_snapshot()
    epoch, records = log.snapshots[end]
    from_snapshot = image_from_records(records, end - 1, epoch)
    assert from_snapshot == from_log
