"""A secured inter-broker listener (issue 28, DESIGN §19): three brokers reach each other over SASL_SSL with
SCRAM-SHA-512 as `User:broker`, who holds ClusterAction on the cluster and nothing more (the authorizer is on);
the controller's LeaderAndIsr and UpdateMetadata and the followers' fetches authenticate, so records a
confluent-kafka producer writes with acks=all reach every replica. A fourth broker configured with a wrong
password is refused by the leader, says so in its log, and never joins the data path (it leaves the ISR)."""

from __future__ import annotations

import json

import pytest

from tests.integration.harness import Broker, ZkView, wait_for, wait_for_leaders
from tests.integration.security_support import ADMIN, SecureBroker, add_acl, add_scram_user
from tests.real_tools import require
from zkbroker import admin
from zkbroker.lab.tls import make_certificates
from zkbroker.security.acl import ResourceType
from zkbroker.zk.client import ZkClient

pytestmark = pytest.mark.integration

BROKER_USER = ("broker", "broker-secret")
N = 20


def inter_broker_props(password: str) -> dict:
    return {"inter.broker.listener.name": "SASL_SSL", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{BROKER_USER[0]}" password="{password}";',
            "authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer",
            # User:ANONYMOUS is the harness's own PLAINTEXT helpers (metadata, offsets); brokers are not super
            "super.users": "User:admin;User:ANONYMOUS", "replica.lag.time.max.ms": 3000}


def write_topic(zk_connect: str, topic: str, replicas: tuple[int, ...]) -> None:
    zk = ZkClient(zk_connect, session_timeout_ms=15_000, name="test-admin")
    zk.start()
    try:
        admin.write_topic(zk, topic, {0: replicas}, {})
    finally:
        zk.close()


def isr(zk: ZkView, topic: str) -> list[int]:
    """The ISR the leader wrote (0.8's metadata caches learn of a shrink only later, KAFKA-1367)."""
    return sorted(json.loads(zk.get(f"/brokers/topics/{topic}/partitions/0/state"))["isr"])


def log_bytes(broker: Broker, topic: str) -> int:
    return sum(f.stat().st_size for f in broker.segment_files(topic, 0))


def produce(sb: SecureBroker, topic: str) -> None:
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": sb.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                            "sasl.mechanism": "PLAIN", "sasl.username": ADMIN[0], "sasl.password": ADMIN[1],
                            "ssl.ca.location": str(sb.certs.ca), "acks": "all", "linger.ms": 0})
    failures = []
    for i in range(N):
        producer.produce(topic, b"v%d" % i, on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(60) == 0 and not failures, failures


def test_brokers_replicate_over_a_sasl_ssl_inter_broker_listener_and_a_wrong_password_stays_out(
        tmp_path, zk_connect):
    require("openssl")
    certs = make_certificates(tmp_path / "tls")
    add_scram_user(zk_connect, *BROKER_USER, mechanisms=("SCRAM-SHA-512",))
    add_acl(zk_connect, ResourceType.CLUSTER, "kafka-cluster", "User:broker", "ClusterAction")
    brokers = [SecureBroker(tmp_path, i, zk_connect, certs, **inter_broker_props(BROKER_USER[1]))
               for i in (1, 2, 3)]
    intruder = SecureBroker(tmp_path, 4, zk_connect, certs, **inter_broker_props("wrong-password"))
    zk = ZkView(zk_connect)
    try:
        for sb in brokers:
            sb.broker.start()
        for sb in brokers:
            wait_for(lambda sb=sb: "started" in sb.broker.log(), 60, f"broker {sb.broker.id} to start")
        serving = [sb.broker for sb in brokers]
        write_topic(zk_connect, "replicated", (1, 2, 3))
        wait_for_leaders(serving, "replicated", 1, timeout_s=60)
        produce(brokers[0], "replicated")
        # every follower fetched it all over SASL_SSL, as User:broker
        wait_for(lambda: len({log_bytes(b, "replicated") for b in serving}) == 1
                 and log_bytes(serving[0], "replicated") > 0, 30, "every replica to hold the records")
        assert isr(zk, "replicated") == [1, 2, 3]
        assert any("authenticated as User:broker with SCRAM-SHA-512 (listener SASL_SSL)" in b.log()
                   for b in serving)

        intruder.broker.start()
        wait_for(lambda: "started" in intruder.broker.log(), 60, "broker 4 to start")
        write_topic(zk_connect, "excluded", (1, 2, 4))
        wait_for_leaders(serving, "excluded", 1, timeout_s=60)
        produce(brokers[0], "excluded")
        refused = f"Authentication with broker 1 at 127.0.0.1:{brokers[0].ports['SASL_SSL']} failed, cannot fetch"
        wait_for(lambda: refused in intruder.broker.log(), 30, "broker 4 to log that broker 1 refused it")
        assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in intruder.broker.log()
        wait_for(lambda: isr(zk, "excluded") == [1, 2], 30, "broker 4 to leave the ISR")
        assert log_bytes(intruder.broker, "excluded") == 0 < log_bytes(serving[1], "excluded")
    finally:
        zk.close()
        for sb in [*brokers, intruder]:
            sb.broker.cleanup()
