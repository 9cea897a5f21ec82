"""`zkbroker transactions` (Kafka 3.0's kafka-transactions.sh, KIP-664) against a broker holding an open
transaction of confluent-kafka's producer and a hanging one -- a transactional batch whose producer no
coordinator knows (KAFKA-12671's shape): list, describe and describe-producers show the open one in Kafka's
columns; find-hanging finds the hanging one alone, and abort ends it, so that read_committed readers pass it."""

from __future__ import annotations

import time
import uuid

from tests.integration.admin_support import tool
from tests.integration.clients import ClientConfig
from tests.integration.harness import create_topic
from tests.integration.test_transactions import SMALL, TIMEOUT_S, _ck_producer, _ck_send
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.record_batch import build_record_batch

GHOST = 987_654  # a producer id no coordinator handed out
OLD = int(time.time() * 1000) - 3_600_000  # its batch is an hour old: past any transaction timeout


def rows(out: str) -> list[list[str]]:
    return [line.rstrip("\t").split() for line in out.splitlines()]


def test_the_transactions_tool_lists_describes_and_aborts_a_hanging_transaction(brokers, zk_connect):
    broker = brokers(1, **SMALL)[0]
    create_topic(zk_connect, "out", 1, 1, [broker])
    transactional_id = f"tool-{uuid.uuid4().hex[:6]}"
    producer = _ck_producer(broker.bootstrap, transactional_id)
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    _ck_send(producer, "out", [b"open-0", b"open-1"], 1)  # offsets 0-1, left open
    connection = broker.connection()
    batch = build_record_batch([(None, b"ghost", OLD)], producer_id=GHOST, producer_epoch=0, base_sequence=0,
                               transactional=True)
    response = connection.send(ApiKey.PRODUCE, 3, {"transactional_id": "ghost", "acks": 1, "timeout_ms": 10000,
                                                   "topics": [{"topic": "out", "partitions": [
                                                       {"partition": 0, "records": batch}]}]})
    assert response.topics[0].partitions[0].error_code == 0
    connection.close()
    server = broker.bootstrap

    code, out, _ = tool("transactions", "--bootstrap-server", server, "list")
    assert code == 0
    assert out.splitlines()[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert [transactional_id, "1"] == rows(out)[1][:2] and rows(out)[1][3] == "Ongoing"
    assert all(line.endswith("\t") for line in out.splitlines())

    code, out, _ = tool("transactions", "--bootstrap-server", server, "describe", "--transactional-id",
                        transactional_id)
    assert code == 0
    header, row = rows(out)
    assert header[:5] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState"]
    assert row[0] == "1" and row[1] == transactional_id and row[4] == "Ongoing" and row[-1] == "out-0"

    code, out, _ = tool("transactions", "--bootstrap-server", server, "describe-producers", "--topic", "out",
                        "--partition", "0")
    assert code == 0
    table = rows(out)
    assert table[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                        "CurrentTransactionStartOffset"]
    assert sorted(r[5] for r in table[1:]) == ["0", "2"]  # both transactions open: from offsets 0 and 2

    code, out, _ = tool("transactions", "--bootstrap-server", server, "find-hanging", "--broker-id", "1",
                        "--max-transaction-timeout", "1")
    assert code == 0
    table = rows(out)
    assert table[0][:3] == ["Topic", "Partition", "ProducerId"]
    assert [r[:3] for r in table[1:]] == [["out", "0", str(GHOST)]]  # the coordinator's own is not hanging

    code, _, err = tool("transactions", "--bootstrap-server", server, "abort", "--topic", "out", "--partition", "0",
                        "--start-offset", "2")
    assert code == 0, err
    producer.commit_transaction(TIMEOUT_S)
    reader = ClientConfig("confluent-kafka", "confluent-kafka", {"isolation.level": "read_committed"})
    assert [r.value for r in reader.consume(server, "out", {0: 0}, 2, timeout_s=TIMEOUT_S)] == [b"open-0", b"open-1"]
    code, out, _ = tool("transactions", "--bootstrap-server", server, "find-hanging", "--topic", "out")
    assert rows(out)[1:] == []
