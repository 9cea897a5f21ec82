"""Dynamic configs (server/dynamic_config.py): the broker config rebuilt from server.properties and ZooKeeper's
dynamic values with Kafka's precedence, and the notifications a broker acts on, without ZooKeeper."""

from __future__ import annotations

import pytest

from zkbroker.config import ConfigError, KafkaConfig
from zkbroker.server.dynamic_config import (
    DYNAMIC_BROKER_CONFIGS,
    DynamicBrokerConfig,
    DynamicConfigManager,
    broker_synonyms,
)
from zkbroker.zk import paths
from zkbroker.zk.znodes import ConfigChange, EntityConfig, encode_config_change, encode_entity_config_change


def static(**props) -> KafkaConfig:
    base = {"broker.id": "1", "zookeeper.connect": "zk:2181", "log.dirs": "/tmp/x"}
    return KafkaConfig.from_props({**base, **{k.replace("_", "."): str(v) for k, v in props.items()}})


def test_the_live_broker_configs_are_the_topic_defaults():
    assert {"log.retention.ms", "log.segment.bytes", "message.max.bytes", "min.insync.replicas",
            "log.cleanup.policy", "log.roll.ms"} <= DYNAMIC_BROKER_CONFIGS
    assert not {"broker.id", "zookeeper.connect", "log.dirs", "log.message.format.version",
                "unclean.leader.election.enable", "log.retention.hours"} & DYNAMIC_BROKER_CONFIGS


def test_synonyms_follow_the_fallback_chain_strongest_first():
    assert broker_synonyms("log.retention.ms") == ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
    assert broker_synonyms("message.max.bytes") == ["message.max.bytes"]


def test_per_broker_over_cluster_default_over_static():
    dynamic = DynamicBrokerConfig(static(log_retention_hours=1, message_max_bytes=5000))
    assert dynamic.current["log.retention.ms"] == 3_600_000
    current = dynamic.update({"log.retention.ms": "1000", "message.max.bytes": "3000"}, {"message.max.bytes": "4000"})
    assert current["log.retention.ms"] == 1000 and current["message.max.bytes"] == 4000
    assert dynamic.source_of("message.max.bytes") == ("dynamic_broker", "4000")
    assert dynamic.source_of("log.retention.ms") == ("dynamic_default", "1000")
    assert dynamic.source_of("log.retention.hours") == ("static", "1")
    assert dynamic.source_of("log.segment.bytes") is None
    assert dynamic.update({}, {})["message.max.bytes"] == 5000  # removed: the static value again


def test_entries_in_zookeeper_that_are_not_dynamic_or_invalid_are_skipped():
    dynamic = DynamicBrokerConfig(static())
    current = dynamic.update({"zookeeper.connect": "elsewhere:1", "message.max.bytes": "many"},
                             {"log.segment.bytes": "4096"})
    assert current["zookeeper.connect"] == "zk:2181" and current["message.max.bytes"] == 1_000_012
    assert current["log.segment.bytes"] == 4096
    assert dict(dynamic.default_configs) == {}


def test_validate_refuses_what_cannot_change_live_and_bad_values_naming_the_key():
    dynamic = DynamicBrokerConfig(static())
    with pytest.raises(ConfigError, match="Cannot update these configs dynamically: broker.id, log.dirs"):
        dynamic.validate({"log.dirs": "/y", "broker.id": "2", "message.max.bytes": "10"}, per_broker=True)
    with pytest.raises(ConfigError, match="message.max.bytes"):
        dynamic.validate({"message.max.bytes": "ten"}, per_broker=False)
    # a relation between two keys: message.max.bytes may not exceed replica.fetch.max.bytes (1 MiB)
    with pytest.raises(ConfigError, match="replica.fetch.max.bytes"):
        dynamic.validate({"message.max.bytes": str(2 * 1024 * 1024)}, per_broker=False)
    dynamic.validate({"message.max.bytes": "4000", "log.retention.ms": "1000"}, per_broker=False)


class FakeZk:
    def __init__(self, nodes: dict[str, bytes]) -> None:
        self.nodes = nodes

    def get(self, path):
        data = self.nodes.get(path)
        return data, (None if data is None else object())

    def get_many(self, paths_):
        return [self.get(p) for p in paths_]

    def subscribe_child_changes(self, path, listener):
        self.listener = listener
        return sorted(p.rsplit("/", 1)[1] for p in self.nodes if p.startswith(path + "/"))


def manager(nodes, topics=("t",)):
    applied = []
    m = DynamicConfigManager(FakeZk(nodes), DynamicBrokerConfig(static()), lambda: set(topics),
                             lambda current, configs, change: applied.append((current, configs, change)))
    return m, applied


def test_a_topic_change_in_every_notification_form_reaches_its_logs():
    nodes = {paths.topic_config_path("t"): EntityConfig({"retention.ms": "1000"}).encode(),
             paths.config_change_path("config_change_0000000000"): b'"old"'}
    m, applied = manager(nodes)
    m.startup()  # notifications already there were written before the configs read at start
    forms = [encode_config_change("t"), b'{"version":1,"entity_type":"topics","entity_name":"t"}',
             encode_entity_config_change(ConfigChange("topics", "t"))]
    for seq, data in enumerate(forms, start=1):
        nodes[paths.config_change_path(f"config_change_{seq:010d}")] = data
    m.zk.listener(paths.CONFIG_CHANGES, sorted(p.rsplit("/", 1)[1] for p in nodes if "config_change_" in p))
    assert len(applied) == 3
    assert all(configs["t"].retention_ms == 1000 and change == ConfigChange("topics", "t")
               for _, configs, change in applied)


def test_changes_for_other_topics_other_brokers_and_unreadable_notifications_are_ignored():
    nodes = {}
    m, applied = manager(nodes)
    m.startup()
    nodes[paths.config_change_path("config_change_0000000001")] = encode_config_change("not-here")
    nodes[paths.config_change_path("config_change_0000000002")] = encode_entity_config_change(
        ConfigChange("brokers", "7"))
    nodes[paths.config_change_path("config_change_0000000003")] = b"{garbage"
    nodes[paths.config_change_path("config_change_0000000004")] = encode_entity_config_change(
        ConfigChange("clients", "app"))
    m.zk.listener(paths.CONFIG_CHANGES, sorted(p.rsplit("/", 1)[1] for p in nodes))
    assert applied == []


def test_a_broker_default_change_recomputes_every_local_topic():
    nodes = {paths.broker_config_path(paths.DEFAULT_ENTITY): EntityConfig({"log.retention.ms": "5000"}).encode(),
             paths.topic_config_path("a"): EntityConfig({"retention.ms": "10"}).encode()}
    m, applied = manager(nodes, topics=("a", "b"))
    m.process(ConfigChange("brokers", paths.DEFAULT_ENTITY))
    (current, configs, _), = applied
    assert current["log.retention.ms"] == 5000
    assert configs["a"].retention_ms == 10  # its own override stands
    assert configs["b"].retention_ms == 5000  # the new broker default
