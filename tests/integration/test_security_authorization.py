"""The ACL authorizer with real clients, the cases of Kafka's EndToEndAuthorizationTest (issue 28): produce without
Describe or without Write, consume without Read on the group, prefixed and wildcard ACLs, Deny over Allow, a super
user -- each answered with Kafka's error. Every ACL is added while the broker runs (the change notification puts
it in force without a restart). Clients authenticate with SASL/PLAIN over SASL_PLAINTEXT."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.integration.harness import create_topic, wait_for, wait_until_serving
from tests.integration.security_support import ADMIN, ALICE, BOB, SecureBroker, add_acl
from tests.real_tools import require
from zkbroker.lab.tls import make_certificates
from zkbroker.security.acl import PatternType, ResourceType

pytestmark = pytest.mark.integration

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP


@pytest.fixture
def authorized_broker(tmp_path, zk_connect):
    require("openssl")
    # The inter-broker listener is PLAINTEXT, whose principal is User:ANONYMOUS: a super user, as Kafka's
    # docs advise for that setup; clients here use the SASL listener.
    sb = SecureBroker(tmp_path, 1, zk_connect, make_certificates(tmp_path / "tls"),
                      **{"authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer",
                         "super.users": "User:admin;User:ANONYMOUS"})
    sb.broker.start()
    wait_until_serving(sb.broker)
    yield sb
    sb.broker.cleanup()


def conf(sb: SecureBroker, user: tuple[str, str]) -> dict:
    return {"bootstrap.servers": sb.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user[0], "sasl.password": user[1]}


def produce_error(sb: SecureBroker, user: tuple[str, str], topic: str) -> str | None:
    """Produce one record; the name of the delivery error, None when it was written."""
    import confluent_kafka as ck

    outcome = []
    producer = ck.Producer({**conf(sb, user), "message.timeout.ms": 10000, "retries": 0})
    producer.produce(topic, b"x", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(20)
    assert outcome, "no delivery report"
    return None if outcome[0] is None else outcome[0].name()


def consume_error(sb: SecureBroker, user: tuple[str, str], topic: str, group: str) -> str | None:
    """Subscribe in `group` and read one record; the first error's name, None when a record came."""
    import confluent_kafka as ck

    consumer = ck.Consumer({**conf(sb, user), "group.id": group, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            return None if msg.error() is None else msg.error().name()
        return "TIMED_OUT"
    finally:
        consumer.close()


def in_force(check, expected, what: str) -> None:
    """ACL changes reach the broker through ZooKeeper's watch: wait (bounded) for the answer to change."""
    wait_for(lambda: check() == expected, 30, what)


def test_produce_needs_write_and_describe_a_denied_principal_gets_topic_authorization_failed(
        authorized_broker, zk_connect):
    sb = authorized_broker
    create_topic(zk_connect, "orders", 1, 1, [sb.broker])
    assert produce_error(sb, BOB, "orders") == "TOPIC_AUTHORIZATION_FAILED"  # no ACL at all
    add_acl(zk_connect, TOPIC, "orders", "User:bob", "Describe")
    wait_for(lambda: sb.broker.log_lines(r"Processing ACL change for Topic:LITERAL:orders: 1 ACLs"), 30, "the ACL")
    # Describe without Write: the metadata is his, the write is not
    assert produce_error(sb, BOB, "orders") == "TOPIC_AUTHORIZATION_FAILED"
    assert sb.broker.log_lines("Principal = User:bob is Denied Operation = Write from host = 127.0.0.1 on "
                               "resource = Topic:orders")
    add_acl(zk_connect, TOPIC, "orders", "User:bob", "Write")
    in_force(lambda: produce_error(sb, BOB, "orders"), None, "bob's Write to be in force")
    assert produce_error(sb, ALICE, "orders") == "TOPIC_AUTHORIZATION_FAILED"  # bob's ACLs are not alice's
    assert produce_error(sb, ADMIN, "orders") is None  # a super user needs no ACL
    assert sb.broker.log_lines("Principal = User:alice is Denied Operation = Describe")


def test_consume_needs_read_on_the_group(authorized_broker, zk_connect):
    sb = authorized_broker
    create_topic(zk_connect, "events", 1, 1, [sb.broker])
    assert produce_error(sb, ADMIN, "events") is None
    add_acl(zk_connect, TOPIC, "events", "User:alice", "Read")
    group = f"g-{uuid.uuid4().hex[:6]}"
    in_force(lambda: consume_error(sb, ALICE, "events", group), "GROUP_AUTHORIZATION_FAILED", "no group ACL")
    add_acl(zk_connect, GROUP, group, "User:alice", "Read")
    in_force(lambda: consume_error(sb, ALICE, "events", group), None, "alice's group Read to be in force")


def test_prefixed_and_wildcard_acls_and_deny_over_allow(authorized_broker, zk_connect):
    sb = authorized_broker
    for topic in ("app-1", "other", "t-denied"):
        create_topic(zk_connect, topic, 1, 1, [sb.broker])
    add_acl(zk_connect, TOPIC, "app-", "User:alice", "Write", pattern_type=PatternType.PREFIXED)
    in_force(lambda: produce_error(sb, ALICE, "app-1"), None, "the prefixed ACL")
    assert produce_error(sb, ALICE, "other") == "TOPIC_AUTHORIZATION_FAILED"
    add_acl(zk_connect, TOPIC, "*", "User:*", "Write")  # every user, every topic
    in_force(lambda: produce_error(sb, BOB, "other"), None, "the wildcard ACL")
    add_acl(zk_connect, TOPIC, "t-denied", "User:bob", "Write", permission="Deny")
    in_force(lambda: produce_error(sb, BOB, "t-denied"), "TOPIC_AUTHORIZATION_FAILED", "Deny over the wildcard Allow")
    assert produce_error(sb, ALICE, "t-denied") is None


def zkbroker(*args: str) -> str:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "zkbroker", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_acls_tool_and_an_admin_client_manage_acls_in_force_without_restart(authorized_broker, zk_connect):
    import confluent_kafka as ck
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
    )
    from confluent_kafka.admin import ResourceType as CkResourceType

    sb = authorized_broker
    create_topic(zk_connect, "ledger", 1, 1, [sb.broker])
    # kafka-acls --authorizer-properties: the znodes, and Kafka 2.0-2.3's lines
    out = zkbroker("acls", "--authorizer-properties", f"zookeeper.connect={zk_connect}", "--add",
                   "--allow-principal", "User:bob", "--operation", "Write", "--topic", "ledger")
    line = "\tUser:bob has Allow permission for operations: Write from hosts: * \n"
    assert out == ("Adding ACLs for resource `Topic:LITERAL:ledger`: \n " + line + "\n"
                   "Current ACLs for resource `Topic:LITERAL:ledger`: \n " + line + "\n")
    in_force(lambda: produce_error(sb, BOB, "ledger"), None, "the tool's ACL")
    # an AdminClient (confluent-kafka) as the super user, over SASL: CreateAcls, DescribeAcls, DeleteAcls
    admin = AdminClient(conf(sb, ADMIN))
    binding = AclBinding(CkResourceType.TOPIC, "ledger", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding], request_timeout=15).values():
        assert future.result(15) is None
    in_force(lambda: produce_error(sb, ALICE, "ledger"), None, "the AdminClient's ACL")
    everything = AclBindingFilter(CkResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    described = admin.describe_acls(everything, request_timeout=15).result(15)
    assert {(b.principal, b.operation) for b in described} == {("User:bob", AclOperation.WRITE),
                                                                ("User:alice", AclOperation.WRITE)}
    # kafka-acls --bootstrap-server: the same ACLs in Kafka 2.x's AdminClient form, over SASL_SSL as the super user
    # (--command-config: our own client's TLS and SASL)
    command_config = sb.broker.dir / "admin.properties"
    command_config.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nssl.truststore.location={sb.certs.ca}\n"
                              'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                              f'username="{ADMIN[0]}" password="{ADMIN[1]}";\n')
    out = zkbroker("acls", "--bootstrap-server", sb.bootstrap("SASL_SSL"), "--command-config", str(command_config),
                   "--list", "--topic", "ledger")
    assert out.startswith("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ledger, "
                          "patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=WRITE, "
                          "permissionType=ALLOW)\n\t(principal=User:bob, host=*, operation=WRITE, "
                          "permissionType=ALLOW)")
    alice_only = AclBindingFilter(CkResourceType.TOPIC, "ledger", ResourcePatternType.LITERAL, "User:alice", None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    deleted = list(admin.delete_acls([alice_only], request_timeout=15).values())[0].result(15)
    assert [b.principal for b in deleted] == ["User:alice"]
    in_force(lambda: produce_error(sb, ALICE, "ledger"), "TOPIC_AUTHORIZATION_FAILED", "the deletion")
    # a user made by `zkbroker configs` authenticates at once with SCRAM (no restart)
    out = zkbroker("configs", "--zookeeper", zk_connect, "--alter", "--entity-type", "users", "--entity-name",
                   "carol", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=carol-secret]")
    assert out == "Completed Updating config for entity: user-principal 'carol'.\n"
    zkbroker("acls", "--authorizer-properties", f"zookeeper.connect={zk_connect}", "--add", "--allow-principal",
             "User:carol", "--producer", "--topic", "ledger")
    carol = ck.Producer({"bootstrap.servers": sb.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol",
                         "sasl.password": "carol-secret"})
    outcome = []
    carol.produce("ledger", b"c", on_delivery=lambda err, msg: outcome.append(err))
    carol.flush(20)
    assert outcome == [None]
