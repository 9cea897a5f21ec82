"""LogConfig is a typed view of the one config table: same keys, same defaults, same fallbacks; a topic's
overrides from ZooKeeper are checked against that table, and a bad one falls back to the broker's value."""

import dataclasses
import logging

import pytest

from zkbroker.config import TOPIC_CONFIGS, KafkaConfig
from zkbroker.log.log_config import LogConfig, topic_log_config
from zkbroker.zk.znodes import EntityConfig


def test_every_topic_key_is_a_field_and_nothing_else():
    assert sorted(f.name for f in dataclasses.fields(LogConfig)) == sorted(k.replace(".", "_") for k in TOPIC_CONFIGS)


def test_defaults_are_the_broker_defaults():
    broker = KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "localhost:2181"})
    assert LogConfig().to_props() == broker.topic_config({})
    assert LogConfig().retention_ms == 7 * 24 * 3600 * 1000


def test_a_topic_config_from_the_broker():
    broker = KafkaConfig.from_props(
        {"broker.id": "1", "zookeeper.connect": "zk:2181", "log.retention.hours": "1", "log.segment.bytes": "1000"}
    )
    config = LogConfig.of(broker.topic_config({"segment.bytes": "500", "cleanup.policy": "compact"}))
    assert (config.segment_bytes, config.retention_ms, config.compact) == (500, 3_600_000, True)
    assert LogConfig.of(None) == LogConfig() and LogConfig.of(config) is config
    with pytest.raises(ValueError, match="segment.size is not a topic configuration key"):
        LogConfig.of({"segment.size": 1})


def test_roll_jitter_is_below_both_limits():
    import random

    rng = random.Random(0)
    assert LogConfig().random_segment_jitter(rng) == 0
    jitters = {LogConfig(segment_ms=10, segment_jitter_ms=1000).random_segment_jitter(rng) for _ in range(200)}
    assert jitters == set(range(10))


# ---- topic_log_config: the one reader of /config/topics/<t> --------------------------------------------------

BROKER = {"broker.id": "1", "zookeeper.connect": "zk:2181", "log.segment.bytes": "1000",
          "unclean.leader.election.enable": "false"}


def znode(**overrides: str) -> bytes:
    return EntityConfig({k.replace("_", "."): v for k, v in overrides.items()}).encode()


def test_a_topic_without_overrides_has_the_broker_values():
    broker = KafkaConfig.from_props(BROKER)
    expected = LogConfig.of(broker.topic_config({}))
    assert topic_log_config(broker, "t", None) == expected
    assert topic_log_config(broker, "t", b"") == expected
    assert topic_log_config(broker, "t", znode()) == expected


def test_a_topic_override_is_typed_through_the_config_table():
    broker = KafkaConfig.from_props(BROKER)
    config = topic_log_config(broker, "t", znode(segment_bytes="500", unclean_leader_election_enable="TRUE",
                                                  min_insync_replicas="2"))
    assert (config.segment_bytes, config.unclean_leader_election_enable, config.min_insync_replicas) == (500, True, 2)


def test_a_bad_override_is_logged_naming_topic_and_key_and_the_broker_value_stands_in(caplog):
    broker = KafkaConfig.from_props(BROKER)
    with caplog.at_level(logging.ERROR, logger="zkbroker.log.LogConfig"):
        config = topic_log_config(broker, "orders", znode(segment_bytes="500", unclean_leader_election_enable="yes",
                                                           min_insync_replicas="0"))
    assert config.segment_bytes == 500  # the good override still applies
    assert config.unclean_leader_election_enable is False  # the broker's value, not a lenient reading of "yes"
    assert config.min_insync_replicas == 1
    assert sorted(r.getMessage() for r in caplog.records) == [
        "Topic orders: ignoring its override of min.insync.replicas, the broker's min.insync.replicas applies "
        "instead. Invalid value '0' for configuration min.insync.replicas: must be at least 1",
        "Topic orders: ignoring its override of unclean.leader.election.enable, the broker's "
        "unclean.leader.election.enable applies instead. Invalid value 'yes' for configuration "
        "unclean.leader.election.enable: not a boolean (true or false)"]


def test_an_unknown_override_is_logged_and_ignored(caplog):
    broker = KafkaConfig.from_props(BROKER)
    with caplog.at_level(logging.ERROR, logger="zkbroker.log.LogConfig"):
        config = topic_log_config(broker, "orders", znode(segment_size="500"))
    assert config == LogConfig.of(broker.topic_config({}))
    assert [r.getMessage() for r in caplog.records] == [
        'Topic orders: ignoring its override segment.size=500. Unknown configuration "segment.size".']


def test_an_unreadable_znode_leaves_every_key_at_the_broker_value(caplog):
    broker = KafkaConfig.from_props(BROKER)
    with caplog.at_level(logging.ERROR, logger="zkbroker.log.LogConfig"):
        config = topic_log_config(broker, "orders", b"not json")
    assert config == LogConfig.of(broker.topic_config({}))
    assert [r.getMessage() for r in caplog.records] == [
        "Ignoring unreadable config of topic orders: /config/topics/orders is not JSON: b'not json'"]
