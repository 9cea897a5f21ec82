"""Configs that change without a restart: Kafka 2.x's DynamicBrokerConfig and DynamicConfigManager, ZooKeeper mode.

Where they live (DESIGN §16): a topic's overrides in `/config/topics/<t>`; dynamic broker configs in
`/config/brokers/<id>` (one broker) and `/config/brokers/<default>` (every broker), all as
`{"version":1,"config":{...}}`. Whoever writes one announces it with a sequential
`/config/changes/config_change_<n>` (zkbroker/zk/znodes.ConfigChange reads every form); each broker watches
those notifications and applies the entity named:
- a topic: its logs on this broker take the new settings at once (the next append, roll or retention pass);
- a broker (this one or `<default>`): the broker's config is rebuilt with the dynamic values on top of
  server.properties -- per-broker over cluster default over static over default, as Kafka ranks them -- and
  every log's settings recomputed from it.

Which broker keys are dynamic: DYNAMIC_BROKER_CONFIGS (in zkbroker/config.py, beside the table, since the quorum
controller checks them too), the broker defaults of the topic configs (Kafka's DynamicLogConfig), less
`log.message.format.version` (Kafka excludes it too) and `unclean.leader.election.enable` (Kafka's controller
re-reads it; ours reads it when it loads a topic).
The others need a restart, and AlterConfigs refuses them, as Kafka does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from zkbroker.config import (
    DYNAMIC_BROKER_CONFIGS,
    SERVER_CONFIGS,
    ConfigError,
    KafkaConfig,
    validate_dynamic_broker_config,
)
from zkbroker.log.log_config import LogConfig, topic_log_config
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import ConfigChange, EntityConfig, ZnodeFormatError, decode_config_change

log = logging.getLogger("zkbroker.server.DynamicConfigManager")



def broker_synonyms(name: str) -> list[str]:
    """The broker keys that can set `name`, strongest first: log.retention.ms, log.retention.minutes,
    log.retention.hours (0.8.2's fallback chains, Kafka's DynamicBrokerConfig.brokerConfigSynonyms)."""
    names = [name]
    while (fallback := SERVER_CONFIGS[names[-1]].fallback) is not None:
        names.append(fallback)
    return names


class DynamicBrokerConfig:
    """This broker's config: server.properties (`static`) with the dynamic configs from ZooKeeper on top.

    `current` is the KafkaConfig in force; it is rebuilt whole on every change, so readers never see half of
    one. An entry in ZooKeeper that is not dynamic, or whose value fails its check, is logged and skipped (a
    hand-written znode must not stop a broker)."""

    def __init__(self, static: KafkaConfig) -> None:
        self.static = static
        self.default_configs: Mapping[str, str] = MappingProxyType({})
        self.broker_configs: Mapping[str, str] = MappingProxyType({})
        self.current = static

    def validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """ConfigError, naming the keys, unless `props` can replace the dynamic configs of one broker
        (`per_broker`) or of every broker; the config they make must pass every check a start would."""
        validate_dynamic_broker_config(props)
        default = self.default_configs if per_broker else props
        broker = props if per_broker else self.broker_configs
        KafkaConfig.from_props({**self.static.originals, **default, **broker})

    def update(self, default_configs: Mapping[str, str], broker_configs: Mapping[str, str]) -> KafkaConfig:
        """Put the dynamic configs read from ZooKeeper in force; returns the new `current`."""
        self.default_configs = MappingProxyType(self._usable(default_configs, paths.DEFAULT_ENTITY))
        self.broker_configs = MappingProxyType(self._usable(broker_configs, str(self.static.broker_id)))
        try:
            self.current = KafkaConfig.from_props({**self.static.originals, **self.default_configs,
                                                   **self.broker_configs})
        except ConfigError as e:  # together they break a relation between two keys
            log.error("Ignoring the dynamic broker configs, which together are invalid: %s", e)
            self.current = self.static
        return self.current

    @staticmethod
    def _usable(props: Mapping[str, str], entity: str) -> dict[str, str]:
        usable = {}
        for name, raw in props.items():
            if name not in DYNAMIC_BROKER_CONFIGS:
                log.error("Ignoring %s in /config/brokers/%s: it cannot change without a restart", name, entity)
                continue
            try:
                SERVER_CONFIGS[name].coerce(raw)
            except ConfigError as e:
                log.error("Ignoring %s in /config/brokers/%s: %s", name, entity, e)
                continue
            usable[name] = raw
        return usable

    def source_of(self, name: str) -> tuple[str, str] | None:
        """Where `name` itself is set, strongest first: ("dynamic_broker" | "dynamic_default" | "static",
        its text), or None when only its default applies."""
        if name in self.broker_configs:
            return "dynamic_broker", self.broker_configs[name]
        if name in self.default_configs:
            return "dynamic_default", self.default_configs[name]
        if name in self.static.originals:
            return "static", self.static.originals[name]
        return None


def read_entity_config(zk: ZkClient, entity_type: str, name: str) -> dict[str, str]:
    """`/config/<type>/<name>`; empty when absent or unreadable (logged)."""
    path = paths.entity_config_path(entity_type, name)
    data, _ = zk.get(path)
    if not data:
        return {}
    try:
        return EntityConfig.decode(data, path).config
    except ZnodeFormatError as e:
        log.error("Ignoring unreadable %s: %s", path, e)
        return {}


class DynamicConfigManager:
    """Watches `/config/changes` and applies each change that concerns this broker (Kafka's
    DynamicConfigManager with its ZkNodeChangeNotificationListener).

    Listeners run on the ZkClient event thread, where blocking ZooKeeper reads are fine; the new settings
    reach the logs through `apply_logs(current broker config, {topic: LogConfig}, change)`, which the server
    runs on its event loop (the one bridge) and records in the lab's timeline."""

    def __init__(self, zk: ZkClient, dynamic: DynamicBrokerConfig,
                 local_topics: Callable[[], set[str]],
                 apply_logs: Callable[[KafkaConfig, dict[str, LogConfig], ConfigChange], None],
                 quotas_changed: Callable[[], None] | None = None) -> None:
        self.zk = zk
        self.quotas_changed = quotas_changed  # users' and clients' quotas (client_quotas.py)
        self.dynamic = dynamic
        self.broker_id = dynamic.static.broker_id
        self.local_topics = local_topics
        self.apply_logs = apply_logs
        self._last_seen = -1

    def initialize(self) -> KafkaConfig:
        """At start, before the logs open: the dynamic broker configs in force now."""
        return self.dynamic.update(read_entity_config(self.zk, "brokers", paths.DEFAULT_ENTITY),
                                   read_entity_config(self.zk, "brokers", str(self.broker_id)))

    def startup(self) -> None:
        """Watch for notifications; those already there were written before the configs we read at start."""
        children = self.zk.subscribe_child_changes(paths.CONFIG_CHANGES, self._on_changes) or []
        self._last_seen = max((_sequence(c) for c in children), default=-1)

    def _on_changes(self, path: str, children: list[str] | None) -> None:
        for child in sorted(children or (), key=_sequence):
            seq = _sequence(child)
            if seq <= self._last_seen:
                continue
            self._last_seen = seq
            data, _ = self.zk.get(paths.config_change_path(child))
            if data is None:
                continue  # purged meanwhile
            try:
                change = decode_config_change(data)
            except ZnodeFormatError as e:
                log.warning("Ignoring unreadable config change %s: %s", child, e)
                continue
            self.process(change)

    def process(self, change: ConfigChange) -> None:
        """Apply one notification (on the ZkClient event thread)."""
        if change.entity_type == "topics":
            topic = change.entity_name
            if topic not in self.local_topics():
                return  # no log of it here; its settings are read when a replica opens
            znode, _ = self.zk.get(paths.topic_config_path(topic))
            current = self.dynamic.current
            self.apply_logs(current, {topic: topic_log_config(current, topic, znode)}, change)
            log.info("Processed topic config change for topic %s", topic)
        elif change.entity_type == "brokers":
            if change.entity_name not in (paths.DEFAULT_ENTITY, str(self.broker_id)):
                return
            current = self.dynamic.update(read_entity_config(self.zk, "brokers", paths.DEFAULT_ENTITY),
                                          read_entity_config(self.zk, "brokers", str(self.broker_id)))
            topics = sorted(self.local_topics())
            znodes = self.zk.get_many([paths.topic_config_path(t) for t in topics])
            configs = {t: topic_log_config(current, t, data) for t, (data, _) in zip(topics, znodes, strict=True)}
            self.apply_logs(current, configs, change)
            log.info("Processed broker config change for %s: dynamic configs now %s", change.entity_path,
                     _props({**self.dynamic.default_configs, **self.dynamic.broker_configs}))
        elif change.entity_type in ("users", "clients") and self.quotas_changed is not None:
            self.quotas_changed()
            log.info("Processed quota config change for %s", change.entity_path)
        else:
            log.debug("Ignoring config change for %s: zkbroker has no %s configs", change.entity_path,
                      change.entity_type)


def _sequence(child: str) -> int:
    try:
        return int(child[len(paths.CONFIG_CHANGE_PREFIX):])
    except ValueError:
        return -1


def _props(props: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(props.items())) + "}"
