"""KIP-890's verification (`transaction.partition.verification.enable`, DESIGN §18) against KAFKA-12671's hanging
transaction: confluent-kafka's transactional producer writes to a partition and aborts; then a produce of that
transaction arrives late (a batch of the same transactional id, producer id and epoch, as a retry stuck in the
network would carry). The leader asks the coordinator first and refuses the batch with INVALID_TXN_STATE; a batch
of a transactional id no coordinator knows gets INVALID_PRODUCER_ID_MAPPING; a plain record written after them
reaches read_committed readers. (Without the check such a batch hangs the partition: test_transactions_tool.py's
hanging transaction, found and aborted with `zkbroker transactions`.)"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from consumer.simple import READ_COMMITTED, SimpleConsumer
from tests.integration.harness import create_topic, wait_for
from tests.integration.test_transactions import SMALL, TIMEOUT_S, _ck_producer, _ck_send
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.record_batch import build_record_batch, read_header

pytestmark = pytest.mark.integration


def produce(broker, transactional_id: str, batch: bytes) -> int:
    connection = broker.connection()
    try:
        response = connection.send(ApiKey.PRODUCE, 3, {"transactional_id": transactional_id, "acks": -1,
                                                       "timeout_ms": 10000, "topics": [{"topic": "out", "partitions": [
                                                           {"partition": 0, "records": batch}]}]})
    finally:
        connection.close()
    return response.topics[0].partitions[0].error_code


def test_a_produce_delayed_past_its_abort_is_refused_when_the_leader_verifies(brokers, zk_connect):
    (broker,) = brokers(1, **SMALL, transaction_partition_verification_enable="true")
    create_topic(zk_connect, "out", 1, 1, [broker])
    transactional_id = f"late-{uuid.uuid4().hex[:6]}"
    producer = _ck_producer(broker.bootstrap, transactional_id)
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    _ck_send(producer, "out", [b"a0", b"a1"], 1)  # offsets 0-1
    producer.abort_transaction(TIMEOUT_S)  # marker at 2

    with SimpleConsumer(broker.bootstrap) as consumer:
        # the abort's marker reaches the partition after EndTxn's answer: the late batch comes after it
        wait_for(lambda: consumer.latest_offset("out", 0, READ_COMMITTED) == 3, 30, "the ABORT marker")
        records, _ = consumer.fetch_raw("out", 0, 0)
        first = read_header(records)
        late = build_record_batch([(None, b"late", int(time.time() * 1000))], producer_id=first.producer_id,
                                  producer_epoch=first.producer_epoch, base_sequence=first.last_sequence + 1,
                                  transactional=True)
        error = produce(broker, transactional_id, late)
        ghost = build_record_batch([(None, b"ghost", int(time.time() * 1000))], producer_id=987_654,
                                   producer_epoch=0, base_sequence=0, transactional=True)
        ghost_error = produce(broker, "nobody-knows-me", ghost)
        writer = Producer({"bootstrap.servers": broker.bootstrap})
        writer.produce("out", value=b"after", partition=0)
        assert writer.flush(TIMEOUT_S) == 0
        end = consumer.latest_offset("out", 0)
        stable = consumer.latest_offset("out", 0, READ_COMMITTED)
        seen = [m.value for m in consumer.iter_messages("out", 0, 0, isolation_level=READ_COMMITTED)]

    assert (error, ghost_error) == (ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    assert (end, stable) == (4, 4)  # neither was appended: "after" follows the marker at 3
    assert seen == [b"after"]
    assert broker.log_lines("Refused producer .* its coordinator does not count the partition")
