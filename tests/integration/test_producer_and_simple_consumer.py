"""Our producer and the simple consumer against real brokers: acks 0/1/-1 and every codec round trip, keys
routed where librdkafka's Java-compatible murmur2 partitioner routes them, clear errors, retries that follow a
leader killed mid-stream, and a simple consumer that follows the leader move too."""

from __future__ import annotations

import threading
import time

import pytest

from consumer.simple import LeaderNotFound, SimpleConsumer
from tests.integration.harness import create_topic, wait_for
from zkbroker.client.partitioner import InvalidPartitionError
from zkbroker.client.producer import Producer, RecordTooLargeError
from zkbroker.protocol.errors import UnknownTopicOrPartitionError

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acks_setting_and_codec_round_trips(zk_connect, brokers, acks):
    (broker,) = brokers(1)
    create_topic(zk_connect, "rt", 2, 1, [broker])
    sent: dict[int, list[bytes]] = {0: [], 1: []}
    with Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "linger.ms": 2}) as plain:
        for codec in ("none", "gzip", "snappy", "lz4"):
            with Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "compression.type": codec,
                           "linger.ms": 2}) as producer:
                futures = [producer.send("rt", f"{codec}-{i}".encode(), key=f"k{i}".encode()) for i in range(40)]
                producer.flush(10)
                for i, future in enumerate(futures):
                    metadata = future.get(0)
                    assert metadata.topic == "rt"
                    assert (metadata.offset == -1) == (acks == "0")
                    sent[metadata.partition].append(f"{codec}-{i}".encode())
        plain.send("rt", None, key=b"tombstone", partition=0).get(10)
        sent[0].append(None)
    with SimpleConsumer(broker.bootstrap) as simple:
        def received(p: int) -> list:
            return [m.value for m in simple.iter_messages("rt", p, 0)]

        wait_for(lambda: received(0) == sent[0] and received(1) == sent[1], 10, "every record, in order")


def test_keys_land_where_librdkafkas_java_compatible_partitioner_puts_them(zk_connect, brokers):
    from confluent_kafka import Producer as ConfluentProducer

    (broker,) = brokers(1)
    create_topic(zk_connect, "keys", 7, 1, [broker])
    theirs: dict[bytes, int] = {}
    confluent = ConfluentProducer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random",
                                   "log_level": 0})
    for i in range(60):
        key = f"user-{i}".encode()
        confluent.produce("keys", b"v", key=key,
                          on_delivery=lambda err, msg: theirs.__setitem__(msg.key(), msg.partition()))
    assert confluent.flush(20) == 0
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        ours = {f"user-{i}".encode(): producer.send("keys", b"v", key=f"user-{i}".encode()).get(10).partition
                for i in range(60)}
    assert ours == theirs
    assert len(set(ours.values())) == 7


def test_clear_errors_for_bad_records(zk_connect, brokers):
    (broker,) = brokers(1)
    create_topic(zk_connect, "small", 3, 1, [broker])
    with Producer({"bootstrap.servers": broker.bootstrap, "max.request.size": 1000}) as producer:
        with pytest.raises(InvalidPartitionError, match=r"3 is not in the range \[0\.\.\.2\]"):
            producer.send("small", b"v", partition=3)
        with pytest.raises(RecordTooLargeError, match="larger than the maximum request size"):
            producer.send("small", b"x" * 2000)
        with pytest.raises(TypeError, match="must be bytes, str or None"):
            producer.send("small", 42)
        assert producer.partitions_for("small") == [0, 1, 2]
    with pytest.raises(RuntimeError, match="closed"):
        producer.send("small", b"v")


def test_retries_follow_a_killed_leader_and_nothing_acknowledged_is_lost(zk_connect, brokers):
    serving = brokers(1, 2)
    leaders = create_topic(zk_connect, "moving", 2, 2, serving)
    bootstrap = ",".join(b.bootstrap for b in serving)
    acknowledged: list[bytes] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def produce() -> None:
        # timeout.ms is short because the surviving leader answers an acks=-1 request that waits on the dead
        # replica only when timeout.ms runs out (it does not wake the request when the ISR shrinks). A batch waits
        # for a leader up to request.timeout.ms: the session timeout, the controller's election and the new
        # leader's metadata, which on a loaded machine took more than 10 s in a fresh-clone run.
        with Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 20, "retry.backoff.ms": 100,
                       "linger.ms": 5, "request.timeout.ms": 30000, "timeout.ms": 2000}) as producer:
            i = 0
            while not stop.is_set():
                value = f"m{i}".encode()
                i += 1
                producer.send("moving", value, callback=lambda md, e, v=value: (
                    acknowledged.append(v) if e is None else errors.append(e)))
                time.sleep(0.002)

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        wait_for(lambda: len(acknowledged) > 200, 20, "records acknowledged before the kill")
        victim = next(b for b in serving if b.id == leaders[0])
        survivor = next(b for b in serving if b.id != leaders[0])
        victim.kill()
        count = len(acknowledged)
        wait_for(lambda: len(acknowledged) > count + 300, 30, "records acknowledged by the new leader")
    finally:
        stop.set()
        thread.join(60)
    assert not errors, errors[:3]
    with SimpleConsumer(survivor.bootstrap) as simple:
        in_log = {m.value for p in (0, 1) for m in simple.iter_messages("moving", p, 0)}
    assert set(acknowledged) <= in_log


def test_simple_consumer_finds_leaders_fetches_ranges_and_follows_a_leader_move(zk_connect, brokers):
    serving = brokers(1, 2, auto_create_topics_enable="false")
    leaders = create_topic(zk_connect, "sc", 1, 2, serving)
    with Producer({"bootstrap.servers": serving[0].bootstrap, "acks": "all"}) as producer:
        for i in range(100):
            producer.send("sc", f"v{i}".encode())
    simple = SimpleConsumer.from_zookeeper(zk_connect, retry_backoff_ms=300, max_retries=40)
    try:
        assert simple.partitions("sc") == [0]
        assert simple.find_leader("sc", 0).node_id == leaders[0]
        assert (simple.earliest_offset("sc", 0), simple.latest_offset("sc", 0)) == (0, 100)
        assert [m.offset for m in simple.iter_messages("sc", 0, 10, 15)] == [10, 11, 12, 13, 14]
        first = simple.fetch("sc", 0, 0, max_bytes=300)
        assert first.messages[0].value == b"v0" and first.high_watermark == 100
        next(b for b in serving if b.id == leaders[0]).kill()
        rest = [m.value for m in simple.iter_messages("sc", 0, first.next_offset)]
        assert rest == [f"v{i}".encode() for i in range(first.next_offset, 100)]
        assert simple.find_leader("sc", 0).node_id != leaders[0]
        with pytest.raises(UnknownTopicOrPartitionError):
            simple.partitions("no-such-topic")
        with pytest.raises((UnknownTopicOrPartitionError, LeaderNotFound)):
            simple.fetch("sc", 5, 0)
    finally:
        simple.close()
