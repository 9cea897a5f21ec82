"""The consumer's configuration (0.8.2's ConsumerConfig and our three extensions), the registration znode's
exact JSON, 0.8.2's topic filters, and the consumer id."""

from __future__ import annotations

import json

import pytest

from consumer.config import CONSUMER_CONFIGS, ConsumerConfig
from consumer.connector import make_consumer_id
from consumer.subscription import Blacklist, Subscription, Whitelist
from zkbroker.config import ConfigError
from zkbroker.zk.znodes import ConsumerRegistration

BASE = {"group.id": "g", "zookeeper.connect": "zk:2181/k"}


def test_defaults_are_0_8_2s_and_the_extensions_are_off():
    c = ConsumerConfig(BASE)
    assert (c["auto.commit.enable"], c["auto.commit.interval.ms"], c["rebalance.max.retries"],
            c["rebalance.backoff.ms"], c["auto.offset.reset"], c["consumer.timeout.ms"],
            c["partition.assignment.strategy"], c["zookeeper.session.timeout.ms"], c["client.id"]) == (
        True, 60000, 4, 2000, "largest", -1, "range", 6000, "g")
    assert (c["offsets.commit.owned.only"], c["rebalance.backoff.jitter.ms"], c["rebalance.owner.wait.ms"]) == (
        False, 0, 0)
    assert ConsumerConfig(BASE, zookeeper_sync_time_ms=300)["rebalance.backoff.ms"] == 300


@pytest.mark.parametrize("given, message", [
    ({"zookeeper.connect": "zk"}, 'Missing required configuration "group.id"'),
    ({"group.id": "g"}, 'Missing required configuration "zookeeper.connect"'),
    (BASE | {"group.id": "a b"}, "configuration group.id: only ASCII letters"),
    (BASE | {"auto.offset.reset": "earliest"}, "auto.offset.reset: must be one of smallest, largest"),
    (BASE | {"partition.assignment.strategy": "sticky"}, "must be one of range, roundrobin"),
    (BASE | {"rebalance.max.retries": 0}, "rebalance.max.retries: must be at least 1"),
    (BASE | {"consumer.timeout.ms": "-5"}, "consumer.timeout.ms: must be at least -1"),
    (BASE | {"fetch.wait.max.ms": 40000}, "socket.timeout.ms should always be at least fetch.wait.max.ms"),
    (BASE | {"offsets.storage": "kafka"}, "offsets.storage: must be one of zookeeper"),
    (BASE | {"auto.commit.enable": "yes"}, "auto.commit.enable: not a boolean"),
])
def test_bad_values_are_one_clear_sentence(given, message):
    with pytest.raises(ConfigError, match=message):
        ConsumerConfig(given)


def test_every_key_is_documented():
    assert all(key.doc for key in CONSUMER_CONFIGS.values())


def test_registration_json_is_0_8_2s():
    static = json.loads(Subscription("g_c", {"orders": 2}).registration().encode())
    assert list(static) == ["version", "subscription", "pattern", "timestamp"]
    assert (static["version"], static["subscription"], static["pattern"]) == (1, {"orders": 2}, "static")
    assert isinstance(static["timestamp"], str)
    wild = json.loads(Subscription("g_c", {}, Whitelist("a.*, b"), 3).registration().encode())
    assert (wild["subscription"], wild["pattern"]) == ({"a.*|b": 3}, "white_list")
    black = Subscription.from_registration("g_d", ConsumerRegistration.decode(
        b'{"version":1,"subscription":{"x.*":1},"pattern":"black_list","timestamp":"1"}'))
    assert isinstance(black.topic_filter, Blacklist) and black.topics(["x1", "y", "__consumer_offsets"]) == {"y": 1}


def test_topic_filters_are_0_8_2s():
    assert Whitelist(" 'a,b' ").regex == "a|b"
    assert Whitelist("a.*").is_topic_allowed("abc") and not Whitelist("a").is_topic_allowed("ab")
    assert not Whitelist(".*").is_topic_allowed("__consumer_offsets")
    assert Whitelist(".*").is_topic_allowed("__consumer_offsets", exclude_internal_topics=False)
    with pytest.raises(ValueError, match=r"a\(b is an invalid regex\."):
        Whitelist("a(b")


def test_consumer_id():
    assert make_consumer_id("g", "fixed") == "g_fixed"
    generated = make_consumer_id("g", None)
    host_ms, uid = generated.removeprefix("g_").rsplit("-", 1)
    assert len(uid) == 8 and int(uid, 16) >= 0 and int(host_ms.rsplit("-", 1)[1]) > 0


def test_kafkas_client_security_properties_give_the_fetchers_a_login():
    config = ConsumerConfig({"group.id": "g", "zookeeper.connect": "zk:2181", "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "SCRAM-SHA-256", "ssl.truststore.location": "/ca.pem",
                             "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                                                 'required username="alice" password="s3cret";'})
    assert not config.warnings
    security = config.security
    assert (security.protocol.value, security.mechanism, security.username, security.password, security.cafile) == (
        "SASL_SSL", "SCRAM-SHA-256", "alice", "s3cret", "/ca.pem")
    assert ConsumerConfig({"group.id": "g", "zookeeper.connect": "zk:2181"}).security is None


def test_a_sasl_consumer_without_a_supported_mechanism_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="sasl.mechanism"):  # Kafka's default GSSAPI is not served
        ConsumerConfig({"group.id": "g", "zookeeper.connect": "zk:2181", "security.protocol": "SASL_PLAINTEXT"})
