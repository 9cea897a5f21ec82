"""LogConfig is a typed view of the one config table: same keys, same defaults, same fallbacks."""

import dataclasses

import pytest

from zkbroker.config import TOPIC_CONFIGS, KafkaConfig
from zkbroker.log.log_config import LogConfig


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
