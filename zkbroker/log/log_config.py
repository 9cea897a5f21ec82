"""LogConfig: one partition's log settings (Kafka's kafka.log.LogConfig), typed.

The keys, their checks and their defaults live in one table, `zkbroker.config.TOPIC_CONFIGS`; this is a
typed view of one row of values, so the log reads `config.segment_bytes` rather than string keys. Field
names are the topic keys with dots turned into underscores. `LogConfig()` holds the broker defaults;
`LogConfig.of(broker_config.topic_config(overrides))` a topic's settings on a given broker, and
`topic_log_config` the same from what the topic's `/config/topics/<t>` znode holds: the one reader of that
znode for the broker's logs and the controller alike.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zkbroker.config import (
    SERVER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigError,
    KafkaConfig,
    message_format_magic,
    validate_topic_config,
)
from zkbroker.zk import paths
from zkbroker.zk.znodes import EntityConfig, ZnodeFormatError

log = logging.getLogger("zkbroker.log.LogConfig")


def _broker_default(name: str) -> Any:
    """The default of a broker key, following 0.8.2's fallback chains (log.retention.ms -> ... -> hours)."""
    key = SERVER_CONFIGS[name]
    if key.default is None and key.fallback is not None:
        value = _broker_default(key.fallback)
        return value * key.fallback_scale if key.fallback_scale != 1 else value
    return key.default


def _default(topic_key: str) -> Any:
    return _broker_default(TOPIC_CONFIGS[topic_key].fallback)


@dataclass(frozen=True)
class LogConfig:
    """A partition's log settings; every field is a key of `TOPIC_CONFIGS`."""

    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_jitter_ms: int = _default("segment.jitter.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    retention_bytes: int = _default("retention.bytes")
    retention_ms: int = _default("retention.ms")
    max_message_bytes: int = _default("max.message.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    delete_retention_ms: int = _default("delete.retention.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    cleanup_policy: str = _default("cleanup.policy")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    min_insync_replicas: int = _default("min.insync.replicas")
    message_timestamp_type: str = _default("message.timestamp.type")
    message_format_version: str = _default("message.format.version")

    @classmethod
    def of(cls, config: LogConfig | Mapping[str, Any] | None) -> LogConfig:
        """A LogConfig from a LogConfig, a mapping of typed topic keys (`KafkaConfig.topic_config`), or None
        (the broker defaults). Keys the mapping lacks keep their defaults."""
        if config is None:
            return cls()
        if isinstance(config, LogConfig):
            return config
        unknown = [name for name in config if name not in TOPIC_CONFIGS]
        if unknown:
            raise ValueError(f"{', '.join(sorted(unknown))} is not a topic configuration key")
        return cls(**{name.replace(".", "_"): value for name, value in config.items()})

    def to_props(self) -> dict[str, Any]:
        """The settings under their topic key names."""
        return {f.name.replace("_", "."): getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def compact(self) -> bool:
        return self.cleanup_policy == "compact"

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def message_format_magic(self) -> int | None:
        """The magic appends are converted to, or None: each set stored as the client sent it."""
        return message_format_magic(self.message_format_version)

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """How much earlier than segment.ms a new segment rolls: uniform below min(jitter, segment.ms)."""
        if self.segment_jitter_ms == 0:
            return 0
        return (rng or random).randrange(min(self.segment_jitter_ms, self.segment_ms))


def topic_log_config(broker: KafkaConfig, topic: str, znode: bytes | None) -> LogConfig:
    """A topic's settings on this broker: the broker's defaults with the overrides held in the topic's
    `/config/topics/<t>` znode (its data, None or empty when there is none) on top.

    Each override takes the check of `kafka-topics --config`. One that fails it (written to ZooKeeper by hand
    or by another tool) is logged as an error naming the topic and the key, and the broker's value stands in
    for it: one topic's typo must not stop a broker from starting or a partition from opening. An unreadable
    znode leaves every key at the broker's value."""
    try:
        overrides = EntityConfig.decode(znode, paths.topic_config_path(topic)).config if znode else {}
    except ZnodeFormatError as e:
        log.error("Ignoring unreadable config of topic %s: %s", topic, e)
        overrides = {}
    config = broker.topic_config({})
    for name, raw in overrides.items():
        try:
            config |= validate_topic_config({name: raw})
        except ConfigError as e:
            if name in TOPIC_CONFIGS:
                log.error("Topic %s: ignoring its override of %s, the broker's %s applies instead. %s", topic, name,
                          TOPIC_CONFIGS[name].fallback, e)
            else:
                log.error("Topic %s: ignoring its override %s=%s. %s", topic, name, raw, e)
    return LogConfig.of(config)
