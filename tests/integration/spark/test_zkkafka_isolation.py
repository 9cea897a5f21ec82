"""`kafka.isolation.level` in the zkkafka source against a real broker whose data a confluent-kafka transactional
producer wrote (committed, aborted and still open transactions beside plain records), read by PySpark local[2]:
read_committed returns the committed and plain records only and stops at the last stable offset; the default,
read_uncommitted, returns every record; neither ever returns a transaction marker."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.harness import create_topic

SMALL = {"transaction_state_log_num_partitions": 3, "offsets_topic_num_partitions": 3}
TIMEOUT_S = 60


def values(df) -> list[bytes]:
    return [bytes(r.value) for r in df.orderBy("offset").collect()]


@pytest.mark.timeout(240)
def test_read_committed_leaves_out_aborted_and_open_transactions_and_read_uncommitted_keeps_them(
        spark, brokers, zk_connect):
    from confluent_kafka import Producer

    broker = brokers(1, **SMALL)[0]
    topic = f"isolation-{uuid.uuid4().hex[:6]}"
    create_topic(zk_connect, topic, 1, 1, [broker])
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    # The open transaction must outlive the reads (the coordinator aborts one older than its timeout).
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}",
                    "message.timeout.ms": 60000, "transaction.timeout.ms": 600000})
    txn.init_transactions(TIMEOUT_S)

    def transaction(prefix: str, end) -> None:
        txn.begin_transaction()
        for i in range(3):
            txn.produce(topic, value=f"{prefix}{i}".encode(), partition=0)
        assert txn.flush(TIMEOUT_S) == 0
        if end is not None:
            end(TIMEOUT_S)

    transaction("c", txn.commit_transaction)
    transaction("a", txn.abort_transaction)
    plain.produce(topic, value=b"p0", partition=0)
    assert plain.flush(TIMEOUT_S) == 0
    transaction("d", txn.commit_transaction)
    transaction("o", None)  # left open: beyond the last stable offset
    plain.produce(topic, value=b"p1", partition=0)
    assert plain.flush(TIMEOUT_S) == 0

    def read(**extra: str):
        reader = spark.read.format("zkkafka").option("kafka.bootstrap.servers", broker.bootstrap)
        for key, value in {"subscribe": topic, **extra}.items():
            reader = reader.option(key, value)
        return reader.load()

    committed = values(read(**{"kafka.isolation.level": "read_committed"}))
    assert committed == [b"c0", b"c1", b"c2", b"p0", b"d0", b"d1", b"d2"]  # p1 lies past the open transaction
    everything = values(read())
    assert everything == [b"c0", b"c1", b"c2", b"a0", b"a1", b"a2", b"p0", b"d0", b"d1", b"d2",
                          b"o0", b"o1", b"o2", b"p1"]
    with pytest.raises(Exception, match="Invalid value serializable for configuration isolation.level"):
        read(**{"kafka.isolation.level": "serializable"}).count()
    txn.abort_transaction(TIMEOUT_S)
