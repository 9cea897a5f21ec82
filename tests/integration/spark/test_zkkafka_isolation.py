"""`kafka.isolation.level` in the zkkafka source against a real broker whose data a confluent-kafka transactional
producer wrote (committed, aborted and still open transactions beside plain records), read by PySpark local[2]:
read_committed returns the committed and plain records only and stops at the last stable offset; the default,
read_uncommitted, returns every record; neither ever returns a transaction marker. `spark-ingest --isolation-level
read_committed` ingests the committed records and commits the group's offset at the last stable offset."""

from __future__ import annotations

import uuid

import pytest

from consumer.spark.ingest import IngestConfig, run_ingest
from tests.integration.harness import create_topic
from tests.integration.transactional_data import COMMITTED, EVERYTHING, OPEN_AT, TIMEOUT_S, write_transactions

SMALL = {"transaction_state_log_num_partitions": 3, "offsets_topic_num_partitions": 3}


def values(df) -> list[bytes]:
    return [bytes(r.value) for r in df.orderBy("offset").collect()]


@pytest.mark.timeout(240)
def test_read_committed_leaves_out_aborted_and_open_transactions_and_read_uncommitted_keeps_them(
        spark, brokers, zk_connect, zk, tmp_path):
    broker = brokers(1, **SMALL)[0]
    topic = f"isolation-{uuid.uuid4().hex[:6]}"
    create_topic(zk_connect, topic, 1, 1, [broker])
    txn = write_transactions(broker.bootstrap, topic)

    def read(**extra: str):
        reader = spark.read.format("zkkafka").option("kafka.bootstrap.servers", broker.bootstrap)
        for key, value in {"subscribe": topic, **extra}.items():
            reader = reader.option(key, value)
        return reader.load()

    assert values(read(**{"kafka.isolation.level": "read_committed"})) == COMMITTED
    assert values(read()) == EVERYTHING
    with pytest.raises(Exception, match="Invalid value serializable for configuration isolation.level"):
        read(**{"kafka.isolation.level": "serializable"}).count()

    # spark-ingest --isolation-level read_committed: the committed records, the group's offset at the LSO
    result = run_ingest(IngestConfig(zookeeper=zk_connect, group="etl-committed", output=tmp_path / "out",
                                     topic=topic, isolation_level="read_committed"), spark=spark)
    assert result.records == len(COMMITTED)
    assert values(spark.read.parquet(str(tmp_path / "out"))) == COMMITTED
    assert int(zk.get(f"/consumers/etl-committed/offsets/{topic}/0")) == OPEN_AT
    txn.abort_transaction(TIMEOUT_S)
