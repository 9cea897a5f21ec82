"""The options of a `zkkafka` batch read, checked as Spark's KafkaSourceProvider checks them, with its messages.

Exactly one of `subscribe` (comma-separated topics), `subscribePattern` (a regex the whole topic name must
match; Python's dialect, which agrees with Java's on ordinary topic patterns) and `assign` (`{"t":[0,1]}`);
`startingOffsets` `earliest` (the default), `group` (with `group.id`: the 0.8.2 group's committed offsets in
ZooKeeper) or `{"t":{"0":23,"1":-2}}` (-2 = earliest); `endingOffsets` `latest` (the default) or JSON
(-1 = latest); `failOnDataLoss`; `minPartitions`; `maxRecordsPerPartition`; `kafkaConsumer.pollTimeoutMs`;
`fetch.message.max.bytes`; `zookeeper.session.timeout.ms` / `zookeeper.connection.timeout.ms`.
The cluster is named by exactly one of `zookeeper.connect` (the 0.8.2 way) and `kafka.bootstrap.servers` (Spark's
way, and KRaft's: cluster_view.py); with the latter, `startingOffsets` `group` reads the offsets the group
committed at its coordinator. `kafka.isolation.level` `read_committed` reads up to the last stable offset and
leaves out aborted transactions (KIP-98), as Spark's source does with that consumer setting.
`startingOffsetsByTimestamp` / `endingOffsetsByTimestamp` (`{"t":{"0":1500000000000}}`, every partition of the
read) take precedence over startingOffsets / endingOffsets, with Spark's semantics: each partition starts (ends)
at the first offset whose timestamp is at or after the given one; with none, a start fails the read
(`startingOffsetsByTimestampStrategy` `error`, the default) or starts at the latest offset (`latest`), and an end
is the latest offset.
A secured cluster (DESIGN §19) is reached with Kafka's client security properties, `kafka.`-prefixed as Spark's
Kafka source takes them (`kafka.security.protocol`, `kafka.sasl.mechanism`, `kafka.sasl.jaas.config`,
`kafka.ssl.truststore.location` naming a PEM CA file, ...), or with `kafka.consumer.config`, a Kafka client
properties file holding them (the console tools' `--consumer.config`), so no password need be an option Spark
prints; options given beside the file override its keys. The file is read where the options are checked (the
driver), and the security travels with the options to the executors.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from zkbroker.client.security import CLIENT_SECURITY_CONFIGS, ClientSecurity
from zkbroker.config import ConfigError, parse_properties

__all__ = ["CONSUMER_CONFIG", "EARLIEST", "LATEST", "SourceOptions", "ZkKafkaOptionError", "client_security",
           "parse_options", "parse_stream_options", "tp_name", "tp_names"]

log = logging.getLogger("consumer.spark")

#: Offsets in startingOffsets / endingOffsets JSON that mean "look it up" (Kafka's ListOffsets times).
LATEST = -1
EARLIEST = -2

_STRATEGIES = ("subscribe", "subscribepattern", "assign")  # Spark's order, in its messages
_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'
_IGNORED_IN_BATCH = ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay")


class ZkKafkaOptionError(ValueError):
    """The options are invalid (Spark's IllegalArgumentException): the query fails before any task runs."""


def tp_name(topic: str, partition: int) -> str:
    """Kafka's TopicPartition.toString, as Spark's messages print it."""
    return f"{topic}-{partition}"


def tp_names(keys) -> str:
    return "[" + ", ".join(tp_name(t, p) for t, p in sorted(keys)) + "]"


@dataclass(frozen=True)
class SourceOptions:
    """The parsed, checked options of one read. Offsets maps are {(topic, partition): offset}."""

    zookeeper_connect: str | None  # exactly one of zookeeper_connect and bootstrap_servers is set
    strategy: str  # one of _STRATEGIES
    topics: tuple[str, ...] = ()  # subscribe
    pattern: str | None = None  # subscribepattern
    assigned: tuple[tuple[str, int], ...] = ()  # assign
    starting: str | dict = "earliest"  # "earliest" | "latest" (streams) | "group" | {(t, p): offset, EARLIEST, LATEST}
    ending: str | dict = "latest"  # "latest" | {(t, p): offset or LATEST}
    group_id: str | None = None
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    starting_timestamps: dict | None = None  # {(t, p): timestamp ms}: startingOffsetsByTimestamp
    ending_timestamps: dict | None = None  # endingOffsetsByTimestamp
    starting_timestamp_strategy: str = "error"  # or "latest"
    fetch_max_bytes: int = 1024 * 1024
    poll_timeout_ms: int = 120_000
    zk_session_timeout_ms: int = 30_000
    zk_connection_timeout_ms: int = 30_000
    client_id: str = "zkkafka"
    max_offsets_per_trigger: int | None = None  # streams only: the offsets one micro-batch reads at most
    bootstrap_servers: str | None = None  # kafka.bootstrap.servers: the cluster through its brokers' Metadata
    isolation_level: int = 0  # kafka.isolation.level: 0 read_uncommitted (the default, as Kafka's), 1 read_committed
    # kafka.security.protocol, kafka.sasl.*, kafka.ssl.* and kafka.consumer.config; None: PLAINTEXT. Not in the
    # repr: it holds the password.
    security: ClientSecurity | None = field(default=None, repr=False)


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Check the options of a batch read as Spark's KafkaSourceProvider does (validateBatchOptions), with
    Spark's messages; raise ZkKafkaOptionError. Keys are case-insensitive."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    _check_connect(opts)
    starting = _offsets_limit(opts, "startingoffsets", "earliest")
    if starting == "latest":
        raise ZkKafkaOptionError("starting offset can't be latest for batch queries on Kafka")
    if isinstance(starting, dict):
        for (topic, partition), offset in sorted(starting.items()):
            if offset == LATEST:
                raise ZkKafkaOptionError(f"startingOffsets for {tp_name(topic, partition)} can't be latest for batch "
                                         "queries on Kafka")
    ending = _offsets_limit(opts, "endingoffsets", "latest")
    if ending in ("earliest", "group"):
        raise ZkKafkaOptionError("ending offset can't be earliest for batch queries on Kafka" if ending == "earliest"
                                 else "endingOffsets can't be group: committed offsets are where a read starts")
    if isinstance(ending, dict):
        for (topic, partition), offset in sorted(ending.items()):
            if offset == EARLIEST:
                raise ZkKafkaOptionError(f"ending offset for {tp_name(topic, partition)} can't be earliest for batch "
                                         "queries on Kafka")
    if isinstance(starting, dict) and isinstance(ending, dict):
        if set(starting) != set(ending):
            raise ZkKafkaOptionError(
                "The specified start offset and end offset should have the same topic-partitions. Topic-partitions "
                f"for start offset: {tp_names(starting)}, topic-partitions for end offset: {tp_names(ending)}.")
        for (topic, partition), start in sorted(starting.items()):
            end = ending[(topic, partition)]
            if start >= 0 and end >= 0 and start > end:
                raise ZkKafkaOptionError(f"The specified start offset {start} is greater than the end offset {end} "
                                         f"for topic {topic} partition {partition}.")
    for key in _IGNORED_IN_BATCH:
        if key in opts:
            log.warning("%s option ignored in batch queries", key)
    return _common_options(opts, starting, ending)


def parse_stream_options(options: Mapping[str, str]) -> SourceOptions:
    """Check the options of a streaming read (`spark.readStream.format("zkkafka")`) as Spark's
    KafkaSourceProvider does (validateStreamOptions): startingOffsets `latest` (the default), `earliest`,
    `group` or JSON in which -1 means latest; no endingOffsets; `maxOffsetsPerTrigger`."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    _check_connect(opts)
    if "endingoffsets" in opts:
        raise ZkKafkaOptionError("ending offset not valid in streaming queries")
    if "endingoffsetsbytimestamp" in opts:
        raise ZkKafkaOptionError("ending timestamp not valid in streaming queries")
    starting = _offsets_limit(opts, "startingoffsets", "latest")
    max_offsets = _positive(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger must be positive")
    for key in ("minoffsetspertrigger", "maxtriggerdelay"):
        if key in opts:
            log.warning("%s is not supported by zkkafka streams; every trigger reads what is there", key)
    return replace(_common_options(opts, starting, "latest"), max_offsets_per_trigger=max_offsets)


def _check_connect(opts: dict[str, str]) -> None:
    given = [key for key in ("zookeeper.connect", "kafka.bootstrap.servers") if opts.get(key, "").strip()]
    if not given:
        raise ZkKafkaOptionError("Option 'kafka.bootstrap.servers' or 'zookeeper.connect' must be specified for "
                                 "configuring Kafka consumer")
    if len(given) > 1:
        raise ZkKafkaOptionError("Options 'zookeeper.connect' and 'kafka.bootstrap.servers' both name the cluster: "
                                 "set one (ZooKeeper's address for the 0.8.2 way, the brokers' for Metadata)")


def _common_options(opts: dict[str, str], starting: str | dict, ending: str | dict) -> SourceOptions:
    """The options batch reads and streams share (validateGeneralOptions), with the limits already checked."""
    strategies = [k for k in _STRATEGIES if k in opts]
    if not strategies:
        raise ZkKafkaOptionError("One of the following options must be specified for Kafka source: "
                                 f"{', '.join(_STRATEGIES)}. See the docs for more details.")
    if len(strategies) > 1:
        raise ZkKafkaOptionError("Only one of the following options can be specified for Kafka source: "
                                 f"{', '.join(_STRATEGIES)}. See the docs for more details.")
    strategy = strategies[0]
    value = opts[strategy]
    topics: tuple[str, ...] = ()
    pattern = None
    assigned: tuple[tuple[str, int], ...] = ()
    if strategy == "assign":
        if not value.strip().startswith("{"):
            raise ZkKafkaOptionError(f"No topicpartitions to assign as specified value for option 'assign' is "
                                     f"'{value}'")
        assigned = _assign_json(value)
    elif strategy == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise ZkKafkaOptionError(f"No topics to subscribe to as specified value for option 'subscribe' is "
                                     f"'{value}'")
    else:
        pattern = value.strip()
        if not pattern:
            raise ZkKafkaOptionError(f"Pattern to subscribe is empty as specified value for option "
                                     f"'subscribePattern' is '{value}'")
        try:
            re.compile(pattern)
        except re.error as e:
            raise ZkKafkaOptionError(f"Invalid subscribePattern '{pattern}': {e}") from None

    min_partitions = _positive(opts, "minpartitions", "minPartitions must be positive")
    max_records = _positive(opts, "maxrecordsperpartition", "maxrecordsperpartition must be positive")
    for key, message in (
        ("kafka.auto.offset.reset", "Kafka option 'auto.offset.reset' is not supported. Instead set the source "
         "option 'startingoffsets' to 'earliest' or 'latest' to specify where to start."),
        ("kafka.key.deserializer", "Kafka option 'key.deserializer' is not supported as keys are deserialized as "
         "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys."),
        ("kafka.value.deserializer", "Kafka option 'value.deserializer' is not supported as values are "
         "deserialized as byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
         "deserialize the values."),
        ("kafka.enable.auto.commit", "Kafka option 'enable.auto.commit' is not supported"),
        ("kafka.interceptor.classes", "Kafka option 'interceptor.classes' is not supported"),
    ):
        if key in opts:
            raise ZkKafkaOptionError(message)
    group_id = opts.get("group.id", "").strip() or None
    if starting == "group" and group_id is None:
        raise ZkKafkaOptionError("startingOffsets 'group' needs the option 'group.id': the consumer group whose "
                                 "committed offsets the read starts from")
    if group_id is not None and starting != "group":
        log.warning("Option group.id is only used with startingOffsets=group; ignoring it")
    starting_timestamps = _timestamps(opts, "startingoffsetsbytimestamp")
    ending_timestamps = _timestamps(opts, "endingoffsetsbytimestamp")
    strategy_by_time = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy_by_time not in ("error", "latest"):
        raise ZkKafkaOptionError(f"Unknown startingOffsetsByTimestampStrategy '{strategy_by_time}': error or latest")
    return SourceOptions(
        zookeeper_connect=opts.get("zookeeper.connect", "").strip() or None,
        bootstrap_servers=opts.get("kafka.bootstrap.servers", "").strip() or None, strategy=strategy,
        topics=topics, pattern=pattern, assigned=assigned, starting=starting, ending=ending, group_id=group_id,
        fail_on_data_loss=_boolean(opts, "failondataloss", True), min_partitions=min_partitions,
        max_records_per_partition=max_records, include_headers=_boolean(opts, "includeheaders", False),
        starting_timestamps=starting_timestamps, ending_timestamps=ending_timestamps,
        starting_timestamp_strategy=strategy_by_time,
        fetch_max_bytes=_positive(opts, "fetch.message.max.bytes", "fetch.message.max.bytes must be positive")
        or 1024 * 1024,
        poll_timeout_ms=_positive(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs must be "
                                  "positive") or 120_000,
        zk_session_timeout_ms=_positive(opts, "zookeeper.session.timeout.ms", "zookeeper.session.timeout.ms must "
                                        "be positive") or 30_000,
        zk_connection_timeout_ms=_positive(opts, "zookeeper.connection.timeout.ms", "zookeeper.connection."
                                           "timeout.ms must be positive") or 30_000,
        client_id=opts.get("client.id", "zkkafka"), isolation_level=_isolation_level(opts),
        security=client_security(opts))


#: The option naming a Kafka client properties file with the security settings (the console tools'
#: --consumer.config); lower case, as the options are looked up.
CONSUMER_CONFIG = "kafka.consumer.config"


def client_security(opts: Mapping[str, str]) -> ClientSecurity | None:
    """The security of the options (lower-cased keys): Kafka's client security properties from the
    `kafka.consumer.config` file, overridden by the `kafka.`-prefixed options; None for PLAINTEXT. A bad value
    names its option and never shows a password."""
    props: dict[str, str] = {}
    path = opts.get(CONSUMER_CONFIG, "").strip()
    if path:
        try:
            from_file = parse_properties(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise ZkKafkaOptionError(f"Cannot read the option 'kafka.consumer.config' {path}: "
                                     f"{e.strerror or e}") from None
        props.update((key.name, from_file[key.name]) for key in CLIENT_SECURITY_CONFIGS if key.name in from_file)
    for key in CLIENT_SECURITY_CONFIGS:
        value = opts.get("kafka." + key.name)
        if value is not None:
            props[key.name] = value
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        if props.get(key, "PEM").strip().upper() != "PEM":
            raise ZkKafkaOptionError(f"Option 'kafka.{key}' must be PEM (a PEM file), got '{props[key]}'")
    try:
        security = ClientSecurity.from_properties(props)
    except ConfigError as e:
        raise ZkKafkaOptionError(f"Invalid Kafka security option: {e}") from None
    if security.protocol.uses_sasl and not (security.username and security.password):
        raise ZkKafkaOptionError("A SASL security.protocol needs a login: the option 'kafka.sasl.jaas.config' "
                                 "(... required username=\"u\" password=\"p\";) or a kafka.consumer.config file "
                                 "with it")
    return None if security.protocol.value == "PLAINTEXT" else security


def _isolation_level(opts: dict[str, str]) -> int:
    value = opts.get("kafka.isolation.level", "read_uncommitted").strip()
    levels = {"read_uncommitted": 0, "read_committed": 1}
    if value.lower() not in levels:
        # Kafka's ConfigException, which Spark's source passes on
        raise ZkKafkaOptionError(f"Invalid value {value} for configuration isolation.level: String must be one of: "
                                 "read_committed, read_uncommitted")
    return levels[value.lower()]


def _offsets_limit(opts: dict[str, str], key: str, default: str) -> str | dict:
    value = opts.get(key, default).strip()
    if value.lower() in ("earliest", "latest", "group"):
        return value.lower()
    try:
        parsed = json.loads(value)
        if not isinstance(parsed, dict) or not parsed:
            raise ValueError
        out = {}
        for topic, partitions in parsed.items():
            if not isinstance(partitions, dict):
                raise ValueError
            for partition, offset in partitions.items():
                if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                    raise ValueError
                out[(topic, int(partition))] = offset
        return out
    except ValueError:
        raise ZkKafkaOptionError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {value}") from None


def _timestamps(opts: dict[str, str], key: str) -> dict | None:
    """{(topic, partition): timestamp} of a ...ByTimestamp option, or None when it is not given."""
    if key not in opts:
        return None
    try:
        parsed = json.loads(opts[key])
        if not isinstance(parsed, dict) or not parsed:
            raise ValueError
        out = {}
        for topic, partitions in parsed.items():
            if not isinstance(partitions, dict):
                raise ValueError
            for partition, timestamp in partitions.items():
                if isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
                    raise ValueError
                out[(topic, int(partition))] = timestamp
        return out
    except ValueError:
        raise ZkKafkaOptionError(f'Expected e.g. {{"topicA":{{"0":1500000000000}}}}, got {opts[key]}') from None


def _assign_json(value: str) -> tuple[tuple[str, int], ...]:
    try:
        parsed = json.loads(value)
        if not isinstance(parsed, dict):
            raise ValueError
        out = []
        for topic, partitions in parsed.items():
            if not isinstance(partitions, list):
                raise ValueError
            for partition in partitions:
                if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
                    raise ValueError
                out.append((topic, partition))
    except ValueError:
        raise ZkKafkaOptionError(f"Expected e.g. {_ASSIGN_EXAMPLE}, got {value}") from None
    return tuple(sorted(set(out)))


def _positive(opts: dict[str, str], key: str, message: str) -> int | None:
    if key not in opts:
        return None
    try:
        number = int(opts[key].strip())
    except ValueError:
        raise ZkKafkaOptionError(f"{message}, got '{opts[key]}'") from None
    if number <= 0:
        raise ZkKafkaOptionError(message)
    return number


def _boolean(opts: dict[str, str], key: str, default: bool) -> bool:
    value = opts.get(key)
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ZkKafkaOptionError(f"Option '{key}' must be true or false, got '{value}'")
