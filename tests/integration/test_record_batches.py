"""Record batches (magic 2) against real clients (issue 16's acceptance): kafka-python writing batches and
kafka-python pinned to 0.8.2 writing magic 0 share one topic and each reads all of it (down-conversion for the
old one), kcat reads it too; aiokafka's producer and consumer round-trip records with headers through every
codec; our own producer and consumers write and read batches."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.clients import PYTHON_CLIENTS
from tests.integration.harness import create_topic, wait_for
from tests.integration.test_real_clients import kcat_read_all, new_topic
from tests.real_tools import require
from zkbroker.protocol.message_set import iter_entries, iter_messages

KAFKA_PYTHON = next(c for c in PYTHON_CLIENTS if c.id == "kafka-python")
KAFKA_PYTHON_082 = next(c for c in PYTHON_CLIENTS if c.id == "kafka-python-0.8.2")


def magics_in_log(broker, topic: str, partition: int = 0) -> set[int]:
    return {e.magic for segment in broker.segment_files(topic, partition) for e in iter_entries(segment.read_bytes())}


@pytest.mark.timeout(240)
def test_kafka_python_batches_and_its_0_8_2_messages_share_a_topic_both_read_all_and_kcat_too(brokers, zk_connect):
    (broker,) = brokers(1)
    topic = new_topic("mix")
    create_topic(zk_connect, topic, 1, 1, [broker])
    new = [(b"new-%05d" % i, b"from kafka-python with record batches %d" % i) for i in range(2000)]
    old = [(b"old-%05d" % i, b"from kafka-python at 0.8.2, magic 0, %d" % i) for i in range(2000)]
    KAFKA_PYTHON.produce(broker.bootstrap, topic, new[:1000])
    KAFKA_PYTHON_082.produce(broker.bootstrap, topic, old[:1000], compression="gzip")
    KAFKA_PYTHON.produce(broker.bootstrap, topic, new[1000:], compression="lz4")
    KAFKA_PYTHON_082.produce(broker.bootstrap, topic, old[1000:])
    assert magics_in_log(broker, topic) == {0, 2}  # each stored as its client sent it
    expected = sorted(new + old)
    for client in (KAFKA_PYTHON, KAFKA_PYTHON_082):  # the old one gets the batches down-converted to magic 0
        received = client.consume(broker.bootstrap, topic, {0: 0}, len(expected), timeout_s=90)
        assert sorted((r.key, r.value) for r in received) == expected, client
        assert [r.offset for r in received] == list(range(len(expected))), client
    kcat = require("kcat")
    assert sorted((r.key, r.value) for r in kcat_read_all(kcat, broker.bootstrap, topic)) == expected


@pytest.mark.timeout(300)
@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_round_trips_20000_records_with_headers(codec, brokers, zk_connect):
    import aiokafka

    (broker,) = brokers(1)
    topic = new_topic("aio")
    create_topic(zk_connect, topic, 1, 1, [broker])
    records = [(b"k%05d" % i, b"value %d " % i * 3, [("n", b"%d" % i), ("empty", b"")]) for i in range(20000)]

    async def round_trip():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec,
                                             linger_ms=5, request_timeout_ms=30000)
        await producer.start()
        try:
            futures = [await producer.send(topic, value, key=key, headers=headers) for key, value, headers in records]
            acked = [(await f).offset for f in futures]
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            out = []
            while len(out) < len(records):
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500, max_records=5000), 60)
                out += [m for ms in batches.values() for m in ms]
            return acked, out
        finally:
            await consumer.stop()

    acked, received = asyncio.run(asyncio.wait_for(round_trip(), 240))
    assert acked == list(range(len(records)))
    assert [(m.offset, m.key, m.value, list(m.headers)) for m in received] == [
        (i, k, v, h) for i, (k, v, h) in enumerate(records)]
    assert magics_in_log(broker, topic) == {2}


@pytest.mark.timeout(120)
def test_our_producer_writes_batches_and_our_simple_consumer_reads_them(brokers, zk_connect):
    from consumer.simple import SimpleConsumer
    from zkbroker.client.producer import Producer

    (broker,) = brokers(1)
    topic = new_topic("ours")
    create_topic(zk_connect, topic, 1, 1, [broker])
    for codec in ("none", "zstd"):
        producer = Producer({"bootstrap.servers": broker.bootstrap, "message.format.version": "0.11.0",
                             "compression.type": codec, "acks": "1"})
        try:
            for i in range(500):
                producer.send(topic, b"%s-%d" % (codec.encode(), i), key=b"k", partition=0)
            producer.flush(30)
        finally:
            producer.close()
    assert magics_in_log(broker, topic) == {2}
    consumer = SimpleConsumer(broker.bootstrap, fetch_size=1 << 20)
    values = []
    offset = 0
    while offset < 1000:
        result = consumer.fetch(topic, 0, offset)
        values += [m.value for m in result.messages]
        offset = result.next_offset
    assert values == [b"none-%d" % i for i in range(500)] + [b"zstd-%d" % i for i in range(500)]
    # kcat, reading with librdkafka's own Fetch version (zstd needs v10), sees them all
    kcat = require("kcat")
    assert len(kcat_read_all(kcat, broker.bootstrap, topic)) == 1000
    consumer.close()


def test_a_fetch_too_old_for_zstd_is_refused_with_unsupported_compression_type(brokers, zk_connect):
    from zkbroker.protocol.api import ApiKey
    from zkbroker.protocol.record_batch import build_record_batch

    (broker,) = brokers(1)
    topic = new_topic("zstd")
    create_topic(zk_connect, topic, 1, 1, [broker])
    with broker.connection() as conn:
        batch = bytearray(build_record_batch([(None, b"z", 1)], codec=4))
        for version, expected in ((3, 76), (7, 0)):  # zstd needs Produce v7
            response = conn.send(ApiKey.PRODUCE, version, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                                           "topics": [{"topic": topic, "partitions": [
                                                               {"partition": 0, "records": batch}]}]})
            assert response.topics[0].partitions[0].error_code == expected
        for version, expected in ((2, 76), (9, 76), (10, 0)):  # and Fetch v10: no version below can carry it
            request = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                       "session_id": 0, "session_epoch": -1, "forgotten_topics": [], "topics": [
                           {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                            "fetch_offset": 0, "log_start_offset": -1,
                                                            "max_bytes": 1 << 20}]}]}
            row = conn.send(ApiKey.FETCH, version, request).topics[0].partitions[0]
            assert row.error_code == expected, version
        assert [m.value for m in iter_messages(row.records)] == [b"z"]


def test_producer_ids_come_from_blocks_in_zookeeper_without_collisions_across_brokers(brokers, zk):
    from zkbroker.protocol.api import ApiKey
    from zkbroker.zk import paths
    from zkbroker.zk.znodes import ProducerIdBlock

    pair = brokers(1, 2)
    wait_for(lambda: zk.registered() == {1, 2}, 15, "both brokers to register")
    ids = []
    for broker in pair + pair:
        with broker.connection() as conn:
            response = conn.send(ApiKey.INIT_PRODUCER_ID, 1,
                                 {"transactional_id": None, "transaction_timeout_ms": 60000})
            assert (response.error_code, response.producer_epoch) == (0, 0)
            ids.append(response.producer_id)
            # a transactional id goes to its coordinator, and no broker leads __transaction_state yet: no id taken
            refused = conn.send(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": "tx", "transaction_timeout_ms": 1})
            assert refused.error_code == 16  # NOT_COORDINATOR
    # each broker hands out ids from its own block of 1000, one after the other
    assert ids == [0, 1000, 1, 1001]
    assert ProducerIdBlock.decode(zk.get(paths.LATEST_PRODUCER_ID_BLOCK)) == ProducerIdBlock(2, 1000, 1999)
