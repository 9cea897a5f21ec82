"""ACLs on transactions (DESIGN §18, §19), with confluent-kafka's transactional producer over SASL_PLAINTEXT: the
TransactionalId resource (Describe to find its coordinator, Write to initialize, add partitions and offsets, end),
Write on each topic the transaction writes, Read on the group whose offsets it commits and on their topic -- each
refusal answered with Kafka 2.x's error."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.harness import create_topic, wait_for, wait_until_serving
from tests.integration.security_support import ADMIN, BOB, SecureBroker, add_acl
from tests.real_tools import require
from zkbroker.lab.tls import make_certificates
from zkbroker.security.acl import ResourceType

pytestmark = pytest.mark.integration

TIMEOUT_S = 30


@pytest.fixture
def authorized_broker(tmp_path, zk_connect):
    require("openssl")
    sb = SecureBroker(tmp_path, 1, zk_connect, make_certificates(tmp_path / "tls"),
                      **{"authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer",
                         "super.users": "User:admin;User:ANONYMOUS",
                         "transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1})
    sb.broker.start()
    wait_until_serving(sb.broker)
    yield sb
    sb.broker.cleanup()


def conf(sb: SecureBroker, user: tuple[str, str]) -> dict:
    return {"bootstrap.servers": sb.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user[0], "sasl.password": user[1]}


def init_error(sb: SecureBroker, user: tuple[str, str], transactional_id: str) -> str | None:
    """init_transactions() with a fresh producer; the error's name, None when it succeeded."""
    import confluent_kafka as ck

    producer = ck.Producer({**conf(sb, user), "transactional.id": transactional_id})
    try:
        producer.init_transactions(TIMEOUT_S)
        return None
    except ck.KafkaException as e:
        return e.args[0].name()


def acl_seen(sb: SecureBroker, pattern: str) -> None:
    wait_for(lambda: sb.broker.log_lines(rf"Processing ACL change for {pattern}"), 30, pattern)


def test_transactional_apis_need_the_transactional_id_topic_and_group_acls(authorized_broker, zk_connect):
    import confluent_kafka as ck

    sb = authorized_broker
    tx = f"tx-{uuid.uuid4().hex[:6]}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    for topic in ("ledger", "secret"):
        create_topic(zk_connect, topic, 1, 1, [sb.broker])
    add_acl(zk_connect, ResourceType.TOPIC, "ledger", "User:bob", "Write", "Describe")
    add_acl(zk_connect, ResourceType.TOPIC, "secret", "User:bob", "Describe")  # seen, not written
    acl_seen(sb, "Topic:LITERAL:secret")

    # no ACL on the id: FindCoordinator for it needs Describe
    assert init_error(sb, BOB, tx) == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    assert sb.broker.log_lines(f"Principal = User:bob is Denied Operation = Describe from host = 127.0.0.1 on "
                               f"resource = TransactionalId:{tx}")
    # Describe alone finds the coordinator; InitProducerId needs Write
    add_acl(zk_connect, ResourceType.TRANSACTIONAL_ID, tx, "User:bob", "Describe")
    acl_seen(sb, f"TransactionalId:LITERAL:{tx}")
    assert init_error(sb, BOB, tx) == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    assert sb.broker.log_lines(f"Principal = User:bob is Denied Operation = Write from host = 127.0.0.1 on "
                               f"resource = TransactionalId:{tx}")
    add_acl(zk_connect, ResourceType.TRANSACTIONAL_ID, tx, "User:bob", "Write")
    wait_for(lambda: init_error(sb, BOB, tx) is None, 30, "bob's Write on the transactional id to be in force")

    producer = ck.Producer({**conf(sb, BOB), "transactional.id": tx})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce("ledger", b"committed")
    producer.commit_transaction(TIMEOUT_S)

    # a topic without Write: AddPartitionsToTxn answers TOPIC_AUTHORIZATION_FAILED, an abortable error (the
    # transaction holds a partition already, so that the abort has something to end: an EndTxn with nothing
    # added answers INVALID_TXN_STATE, which librdkafka takes for fatal)
    producer.begin_transaction()
    producer.produce("ledger", b"aborted")
    producer.flush(TIMEOUT_S)
    producer.produce("secret", b"never")
    with pytest.raises(ck.KafkaException) as raised:
        producer.commit_transaction(TIMEOUT_S)
    assert raised.value.args[0].txn_requires_abort()
    assert sb.broker.log_lines("Principal = User:bob is Denied Operation = Write from host = 127.0.0.1 on "
                               "resource = Topic:secret")
    producer.abort_transaction(TIMEOUT_S)

    # offsets of a group without Read: AddOffsetsToTxn answers GROUP_AUTHORIZATION_FAILED
    consumer = ck.Consumer({**conf(sb, ADMIN), "group.id": group})
    metadata = consumer.consumer_group_metadata()
    consumer.close()
    producer.begin_transaction()
    producer.produce("ledger", b"aborted too")
    producer.flush(TIMEOUT_S)
    with pytest.raises(ck.KafkaException) as raised:
        producer.send_offsets_to_transaction([ck.TopicPartition("ledger", 0, 1)], metadata, TIMEOUT_S)
    assert raised.value.args[0].name() == "GROUP_AUTHORIZATION_FAILED"
    producer.abort_transaction(TIMEOUT_S)
    add_acl(zk_connect, ResourceType.GROUP, group, "User:bob", "Read")
    acl_seen(sb, f"Group:LITERAL:{group}")
    # TxnOffsetCommit then needs Read on the topic of the offsets
    producer.begin_transaction()
    producer.produce("ledger", b"aborted at last")
    producer.flush(TIMEOUT_S)
    with pytest.raises(ck.KafkaException) as raised:
        producer.send_offsets_to_transaction([ck.TopicPartition("ledger", 0, 1)], metadata, TIMEOUT_S)
    assert raised.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"
    producer.abort_transaction(TIMEOUT_S)
    add_acl(zk_connect, ResourceType.TOPIC, "ledger", "User:bob", "Read")
    wait_for(lambda: len(sb.broker.log_lines(r"Processing ACL change for Topic:LITERAL:ledger")) >= 2, 30,
             "bob's Read on the topic")
    producer.begin_transaction()
    producer.produce("ledger", b"with offsets")
    producer.send_offsets_to_transaction([ck.TopicPartition("ledger", 0, 1)], metadata, TIMEOUT_S)
    producer.commit_transaction(TIMEOUT_S)

    reader = ck.Consumer({**conf(sb, ADMIN), "group.id": f"r-{uuid.uuid4().hex[:6]}",
                          "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    reader.assign([ck.TopicPartition("ledger", 0, 0)])
    values = []
    deadline_polls = 60
    while len(values) < 2 and deadline_polls:
        msg = reader.poll(0.5)
        deadline_polls -= 1
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    reader.close()
    assert values == [b"committed", b"with offsets"]
