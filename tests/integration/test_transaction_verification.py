"""KIP-890's verification (`transaction.partition.verification.enable`, DESIGN §18) against KAFKA-12671's hanging
transaction: confluent-kafka's transactional producer writes to a partition and aborts; then a produce of that
transaction arrives late (a batch of the same transactional id, producer id and epoch, as a retry stuck in the
network would carry). The partition's leader first asks the coordinator, on the other broker, and refuses the
batch with INVALID_TXN_STATE; a batch of a transactional id no coordinator knows gets INVALID_PRODUCER_ID_MAPPING;
a plain record written after them reaches read_committed readers. (Without the check such a batch hangs the
partition: test_transactions_tool.py's hanging transaction, found and aborted with `zkbroker transactions`.)"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Producer

from consumer.simple import READ_COMMITTED, SimpleConsumer
from tests.integration.harness import create_topic, wait_for
from tests.integration.test_transactions import SMALL, TIMEOUT_S, _ck_producer
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.record_batch import build_record_batch, read_header

pytestmark = pytest.mark.integration


def produce(broker, transactional_id: str, partition: int, batch: bytes) -> int:
    connection = broker.connection()
    try:
        response = connection.send(ApiKey.PRODUCE, 3, {"transactional_id": transactional_id, "acks": -1,
                                                       "timeout_ms": 10000, "topics": [{"topic": "out", "partitions": [
                                                           {"partition": partition, "records": batch}]}]})
    finally:
        connection.close()
    return response.topics[0].partitions[0].error_code


def test_a_produce_delayed_past_its_abort_is_refused_when_the_leader_verifies(brokers, zk_connect, zk):
    # two brokers: the partition's leader asks the coordinator on the other one (DescribeTransactions)
    cluster = brokers(1, 2, **SMALL, transaction_partition_verification_enable="true")
    transactional_id = f"late-{uuid.uuid4().hex[:6]}"
    producer = _ck_producer(cluster[0].bootstrap, transactional_id)
    producer.init_transactions(TIMEOUT_S)  # creates __transaction_state: one partition, its leader the coordinator
    coordinator = json.loads(zk.get("/brokers/topics/__transaction_state/partitions/0/state"))["leader"]
    leaders = create_topic(zk_connect, "out", 2, 1, cluster)  # one partition on each broker
    partition = next(p for p, leader in leaders.items() if leader != coordinator)
    leader = next(b for b in cluster if b.id == leaders[partition])
    producer.begin_transaction()
    for value in (b"a0", b"a1"):  # offsets 0-1
        producer.produce("out", value=value, partition=partition)
    assert producer.flush(TIMEOUT_S) == 0
    producer.abort_transaction(TIMEOUT_S)  # marker at 2

    with SimpleConsumer(leader.bootstrap) as consumer:
        # the abort's marker reaches the partition after EndTxn's answer: the late batch comes after it
        wait_for(lambda: consumer.latest_offset("out", partition, READ_COMMITTED) == 3, 30, "the ABORT marker")
        records, _ = consumer.fetch_raw("out", partition, 0)
        first = read_header(records)
        late = build_record_batch([(None, b"late", int(time.time() * 1000))], producer_id=first.producer_id,
                                  producer_epoch=first.producer_epoch, base_sequence=first.last_sequence + 1,
                                  transactional=True)
        # Until the coordinator has completed the abort (its markers acknowledged) it answers the retriable
        # NOT_ENOUGH_REPLICAS, and a producer retries, as this does.
        errors = []
        wait_for(lambda: errors.append(produce(leader, transactional_id, partition, late))
                 or errors[-1] != ErrorCode.NOT_ENOUGH_REPLICAS, 30, "an answer other than retry")
        error = errors[-1]
        ghost = build_record_batch([(None, b"ghost", int(time.time() * 1000))], producer_id=987_654,
                                   producer_epoch=0, base_sequence=0, transactional=True)
        ghost_error = produce(leader, "nobody-knows-me", partition, ghost)
        writer = Producer({"bootstrap.servers": leader.bootstrap})
        writer.produce("out", value=b"after", partition=partition)
        assert writer.flush(TIMEOUT_S) == 0
        end = consumer.latest_offset("out", partition)
        stable = consumer.latest_offset("out", partition, READ_COMMITTED)
        seen = [m.value for m in consumer.iter_messages("out", partition, 0, isolation_level=READ_COMMITTED)]

    assert (error, ghost_error) == (ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    assert (end, stable) == (4, 4)  # neither was appended: "after" follows the marker at 3
    assert seen == [b"after"]
    assert leader.log_lines("Refused producer .* its coordinator does not count the partition")
