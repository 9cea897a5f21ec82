"""Transactions end to end with unmodified clients (KIP-98; DESIGN §18): the transaction coordinator on the
broker, `__transaction_state`, markers through WriteTxnMarkers, transactional offsets.

confluent-kafka's transactional producer commits and aborts (with send_offsets_to_transaction) and
read_committed consumers (confluent-kafka, kafka-python) see only the committed records, read_uncommitted ones
every record; kafka-python's transactional producer does the same; a coordinator killed in the middle of a
transaction hands it to the new leader of its `__transaction_state` partition, and the producer finishes it
there; and Kafka's transactions system test in its 20,000-record form (zkbroker.lab.txn_copier).
"""

from __future__ import annotations

import uuid

import pytest

from tests.integration.clients import ClientConfig
from tests.integration.harness import create_topic, wait_for

# Few internal partitions: quick to create and to load; the coordinator math is the same.
SMALL = {"transaction_state_log_num_partitions": 3, "offsets_topic_num_partitions": 3,
         "transaction_abort_timed_out_transaction_cleanup_interval_ms": 1000}
TIMEOUT_S = 60


def _ck_producer(bootstrap: str, transactional_id: str, **extra):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                     "socket.timeout.ms": 15000, "message.timeout.ms": 60000, **extra})


def _ck_send(producer, topic: str, values: list[bytes], partitions: int) -> None:
    for i, value in enumerate(values):
        producer.produce(topic, value=value, key=value, partition=i % partitions)
    assert producer.flush(TIMEOUT_S) == 0


def _values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


def _read(library: str, isolation: str, bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    config = {"isolation.level": isolation} if library == "confluent-kafka" else {"isolation_level": isolation}
    client = ClientConfig(library, library, config)
    return [r.value for r in client.consume(bootstrap, topic, {p: 0 for p in range(partitions)}, count,
                                            timeout_s=TIMEOUT_S)]


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets as a read_committed confluent-kafka consumer reads them (OffsetFetch v7 with
    require_stable)."""
    client = ClientConfig("confluent-kafka", "confluent-kafka", {"isolation.level": "read_committed"})
    return client.committed(bootstrap, group, topic, range(partitions))


@pytest.fixture
def broker(brokers):
    return brokers(1, **SMALL)[0]


def test_confluent_kafka_committed_transactions_alone_reach_read_committed_consumers(broker, zk_connect):
    create_topic(zk_connect, "out", 2, 1, [broker])
    producer = _ck_producer(broker.bootstrap, f"tx-{uuid.uuid4().hex[:6]}")
    producer.init_transactions(TIMEOUT_S)
    committed, aborted = _values("c", 6) + _values("d", 4), _values("x", 6)
    producer.begin_transaction()
    _ck_send(producer, "out", committed[:6], 2)
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    _ck_send(producer, "out", aborted, 2)
    producer.abort_transaction(TIMEOUT_S)
    producer.begin_transaction()
    _ck_send(producer, "out", committed[6:], 2)
    producer.commit_transaction(TIMEOUT_S)

    for library in ("confluent-kafka", "kafka-python"):
        seen = _read(library, "read_committed", broker.bootstrap, "out", 2, len(committed))
        assert sorted(seen) == sorted(committed), library
    everything = _read("confluent-kafka", "read_uncommitted", broker.bootstrap, "out", 2, 16)
    assert sorted(everything) == sorted(committed + aborted)


def test_confluent_kafka_send_offsets_to_transaction_commits_the_offsets_with_the_records(broker, zk_connect):
    """A consume-transform-produce step: the group's offsets commit with the transaction, and an aborted one
    leaves them where they were."""
    from confluent_kafka import TopicPartition

    create_topic(zk_connect, "in", 1, 1, [broker])
    create_topic(zk_connect, "out", 1, 1, [broker])
    group = f"copiers-{uuid.uuid4().hex[:6]}"
    ClientConfig("confluent-kafka", "confluent-kafka", {}).produce(broker.bootstrap, "in",
                                                                   [(b"k", v) for v in _values("i", 10)])
    producer = _ck_producer(broker.bootstrap, f"copier-{uuid.uuid4().hex[:6]}")
    producer.init_transactions(TIMEOUT_S)
    metadata = _group_metadata(broker.bootstrap, group)

    producer.begin_transaction()
    _ck_send(producer, "out", _values("o", 4), 1)
    producer.send_offsets_to_transaction([TopicPartition("in", 0, 4)], metadata, TIMEOUT_S)
    producer.commit_transaction(TIMEOUT_S)
    assert _committed(broker.bootstrap, group, "in", 1) == {0: 4}

    producer.begin_transaction()
    _ck_send(producer, "out", _values("z", 3), 1)
    producer.send_offsets_to_transaction([TopicPartition("in", 0, 7)], metadata, TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    assert _committed(broker.bootstrap, group, "in", 1) == {0: 4}
    assert _read("confluent-kafka", "read_committed", broker.bootstrap, "out", 1, 4) == _values("o", 4)


def _group_metadata(bootstrap: str, group: str):
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


def test_kafka_python_transactional_producer_commits_and_aborts(broker, zk_connect):
    import kafka

    if not hasattr(kafka.KafkaProducer, "begin_transaction"):
        pytest.fail(f"kafka-python {kafka.__version__} has no transactional producer")
    create_topic(zk_connect, "in", 1, 1, [broker])
    create_topic(zk_connect, "out", 1, 1, [broker])
    group = f"kp-copiers-{uuid.uuid4().hex[:6]}"
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:6]}",
                                   request_timeout_ms=30000)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for value in _values("k", 5):
            producer.send("out", value=value, partition=0)
        producer.send_offsets_to_transaction({kafka.TopicPartition("in", 0): kafka.OffsetAndMetadata(5, "", -1)},
                                             group)
        producer.commit_transaction()
        producer.begin_transaction()
        for value in _values("y", 5):
            producer.send("out", value=value, partition=0)
        producer.flush(timeout=30)  # an abort drops the records not sent yet: these are in the log, then aborted
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    assert _read("kafka-python", "read_committed", broker.bootstrap, "out", 1, 5) == _values("k", 5)
    assert sorted(_read("kafka-python", "read_uncommitted", broker.bootstrap, "out", 1, 10)) == sorted(
        _values("k", 5) + _values("y", 5))
    assert _committed(broker.bootstrap, group, "in", 1) == {0: 5}


def test_a_new_producer_of_the_transactional_id_fences_the_zombie_and_aborts_its_transaction(broker, zk_connect):
    """Zombie fencing: a second producer with the same transactional id initializes while the first has a
    transaction open; the coordinator bumps the epoch, aborts the open transaction, and the first producer's
    commit fails fatally (fenced). read_committed readers see only the new producer's records."""
    from confluent_kafka import KafkaException

    create_topic(zk_connect, "out", 1, 1, [broker])
    transactional_id = f"zombie-{uuid.uuid4().hex[:6]}"
    zombie = _ck_producer(broker.bootstrap, transactional_id)
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    _ck_send(zombie, "out", _values("zombie", 3), 1)
    successor = _ck_producer(broker.bootstrap, transactional_id)
    successor.init_transactions(TIMEOUT_S)  # retried through CONCURRENT_TRANSACTIONS while the abort completes
    successor.begin_transaction()
    _ck_send(successor, "out", _values("new", 3), 1)
    successor.commit_transaction(TIMEOUT_S)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT_S)
    assert raised.value.args[0].fatal() or raised.value.args[0].txn_requires_abort()
    assert _read("confluent-kafka", "read_committed", broker.bootstrap, "out", 1, 3) == _values("new", 3)
    assert broker.log_lines(f"fencing producer \\d+ of transactional id {transactional_id}")


def test_a_transaction_left_open_by_a_dead_producer_is_aborted_at_its_timeout(broker, zk_connect):
    """The producer never ends its transaction: the coordinator aborts it once transaction.timeout.ms passes, and
    the LSO moves on, so read_committed consumers read what came after."""
    create_topic(zk_connect, "out", 1, 1, [broker])
    producer = _ck_producer(broker.bootstrap, f"dies-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 3000,
                                                                                     "socket.timeout.ms": 3000,
                                                                                     "message.timeout.ms": 3000})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    _ck_send(producer, "out", _values("lost", 3), 1)
    del producer  # gone without a word: no EndTxn
    ClientConfig("confluent-kafka", "confluent-kafka", {}).produce(broker.bootstrap, "out", [(b"k", b"after")])
    assert _read("confluent-kafka", "read_committed", broker.bootstrap, "out", 1, 1) == [b"after"]
    assert broker.log_lines("open longer than its timeout")


def test_a_killed_coordinator_hands_the_transaction_to_the_new_leader(brokers, zk_connect):
    """Three brokers; the coordinator of the transactional id is killed with the transaction open. The new
    leader of its `__transaction_state` partition loads the transaction from the log, and the producer, after
    finding it, commits; read_committed readers see every committed record, once."""
    cluster = brokers(1, 2, 3, **SMALL)
    create_topic(zk_connect, "out", 2, 3, cluster)
    transactional_id = f"failover-{uuid.uuid4().hex[:6]}"
    producer = _ck_producer(cluster[0].bootstrap, transactional_id)
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    _ck_send(producer, "out", _values("a", 6), 2)
    coordinator = _coordinator_of(cluster, transactional_id)
    coordinator.kill()
    survivors = [b for b in cluster if b is not coordinator]
    _ck_send(producer, "out", _values("b", 4), 2)
    producer.commit_transaction(TIMEOUT_S)
    seen = _read("confluent-kafka", "read_committed", survivors[0].bootstrap, "out", 2, 10)
    assert sorted(seen) == sorted(_values("a", 6) + _values("b", 4))
    wait_for(lambda: any(b.log_lines("finished loading \\[__transaction_state") for b in survivors), 30,
             "a survivor to load the transaction state")


def _coordinator_of(cluster, transactional_id: str):
    """The broker whose log says it initialized the id (its coordinator when InitProducerId succeeded)."""
    for broker in cluster:
        if broker.log_lines(f"initialized transactional id {transactional_id} "):
            return broker
    raise AssertionError(f"no broker says it coordinates {transactional_id}")


# ---- Kafka's transactions system test (its 20,000-record form; 100,000 in bench/transactions.py) ---------------

SYSTEM_TEST_RECORDS = 20_000


def test_copiers_copy_every_record_exactly_once_through_broker_and_copier_kills(brokers, zk_connect, tmp_path):
    """Kafka's transactions system test: 20,000 records from a 2-partition input topic to a 3-partition output
    topic (RF 3, min.insync.replicas 2) by two confluent-kafka consume-transform-produce copiers
    (send_offsets_to_transaction) while each broker in turn is hard-killed and restarted, then each copier; a
    concurrent read_committed consumer and a final read see every input record exactly once, each partition in
    input order."""
    from zkbroker.lab import txn_copier

    cluster = brokers(1, 2, 3, **SMALL)

    def create(name: str, partitions: int) -> None:
        create_topic(zk_connect, name, partitions, 3, cluster, config={"min.insync.replicas": "2"})

    def bounce(broker):
        def restart() -> None:
            starts = len(broker.log_lines(r"\], started \("))
            broker.start()
            wait_for(lambda: len(broker.log_lines(r"\], started \(")) > starts, 60, f"broker {broker.id} to start")
        return broker.kill, restart

    # timeout_s below pytest's 120 s: a copier that never finishes is named with its last lines (about 35 s a run)
    outcome = txn_copier.run(tmp_path, ",".join(b.bootstrap for b in cluster), create,
                             [bounce(b) for b in cluster], SYSTEM_TEST_RECORDS, transaction_size=250,
                             pause_ms=400, down_s=1.0, timeout_s=100, librdkafka_debug="eos")
    # a copier dead of a fatal error: its log (librdkafka's eos lines) and the brokers' in tmp_path say why
    assert outcome.problems == [] and outcome.fatal_errors == [], (outcome, tmp_path)
    assert outcome.broker_bounces == 3 and outcome.copier_bounces >= 1, outcome
    assert outcome.bounced_while_copying >= 4, outcome  # every bounce hit copiers at work
