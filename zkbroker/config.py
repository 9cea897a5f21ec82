"""Broker configuration: the one table of Kafka 0.8.2 configuration keys, their types and defaults.

`SERVER_CONFIGS` is `kafka.server.KafkaConfig` (with the zookeeper.* keys of `kafka.utils.ZKConfig`) as of
0.8.2.2, key for key. `TOPIC_CONFIGS` is `kafka.log.LogConfig`: the per-topic overrides kept in
/config/topics/<t>, each taking its default from a broker key. `parse_properties` reads `server.properties`
the way java.util.Properties does, and `KafkaConfig` is the validated, immutable result the broker reads.

Where we deviate from 0.8.2, on purpose:
- Booleans are true or false in any case (Scala's toBoolean, which LogConfig used); 0.8.2's broker keys
  wanted lower case.
- Some keys 0.8.2 read without a check get one, so that a bad value fails at start rather than at first
  use: port, advertised.port, default.replication.factor, num.replica.fetchers, log.cleanup.policy, and
  each topic override takes the check of the broker key it overrides.
- List elements are trimmed, and server.properties is read as UTF-8 (Java read ISO-8859-1).
- A topic's min.insync.replicas defaults to the broker's min.insync.replicas. 0.8.2 did not pass that key on
  (it stayed 1 unless set per topic); 0.9 fixed it.
- Extensions, each marked as such in its doc: listeners and advertised.listeners (0.9 names),
  replication.truncation (KIP-101), replica.lag.rule (KIP-16), replica.lag.check.interval.ms,
  replica.out.of.range.reset (KAFKA-2143), log.cleaner.keyless.messages (KAFKA-1755), and
  log.message.format.version unset by default (each batch stored as sent).
- Later Kafka keys for later features: log.message.timestamp.type (0.10) and log.message.format.version (0.10),
  with their topic keys message.timestamp.type and message.format.version.
"""

from __future__ import annotations

import enum
import re
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from zkbroker.security import listeners
from zkbroker.security.acl import parse_super_users

# The SASL mechanisms a broker can offer (sasl.enabled.mechanisms).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration is invalid: the operator's fault. The message is one sentence naming the key."""


# --- java.util.Properties ----------------------------------------------------------------------------------

_BLANK = " \t\f"
_ESCAPE = re.compile(r"\\(?:u(?P<hex>[0-9a-fA-F]{4})|(?P<bad>u)|(?P<char>.)|$)", re.DOTALL)
_CONTROL_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse the text of a Java .properties file the way Properties.load does; a repeated key's last value wins.

    Lines starting with # or ! are comments; `key=value`, `key: value` and `key value` all work; a line ending
    in an odd number of backslashes continues on the next, whose leading blanks are dropped; `\\t \\n \\r \\f`
    and `\\uXXXX` are escapes, and a backslash before any other character stands for that character.
    """
    props = {}
    for line in _logical_lines(text):
        key, value = _split_entry(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _logical_lines(text: str):
    pending = ""  # the start of a logical line continued by a trailing backslash
    for natural in re.split(r"\r\n|\r|\n", text):
        line = pending + natural.lstrip(_BLANK)
        if not pending and (not line or line[0] in "#!"):
            continue
        # An even run of backslashes is escaped backslashes; an odd one ends with the continuation mark.
        if (len(line) - len(line.rstrip("\\"))) % 2:
            pending = line[:-1]
        else:
            pending = ""
            yield line
    if pending:
        yield pending


def _split_entry(line: str) -> tuple[str, str]:
    """Split at the first unescaped '=', ':' or blank; one separator may sit among the blanks after the key."""
    end = 0
    while end < len(line) and line[end] not in "=:" + _BLANK:
        end += 2 if line[end] == "\\" else 1
    rest = line[end:].lstrip(_BLANK)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANK)
    return line[:end], rest


def _unescape(text: str) -> str:
    def replace(m: re.Match) -> str:
        if m["hex"]:
            return chr(int(m["hex"], 16))
        if m["bad"]:
            raise ConfigError(f"Malformed \\uxxxx encoding in {text!r}.")
        char = m["char"] or ""
        return _CONTROL_ESCAPES.get(char, char)

    unescaped = _ESCAPE.sub(replace, text)
    # Java strings are UTF-16: a character beyond U+FFFF is written as two escapes, a surrogate pair.
    return unescaped.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


# --- Types and validators ----------------------------------------------------------------------------------

class ConfigType(enum.Enum):
    SHORT = "short"  # Java's 16-bit short
    INT = "int"  # Java's 32-bit int: 0.8.2 reads most keys, even some in ms, as Int
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"  # comma-separated; a tuple of trimmed, non-empty strings
    MAP = "map"  # comma-separated name:count pairs; a read-only mapping of str to int


_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _integer(bits: int) -> Callable[[str], int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def parse(raw: str) -> int:
        # Not int(): Java's parseInt takes no blanks and no underscores.
        if not _INTEGER.fullmatch(raw):
            raise ValueError("not an integer")
        value = int(raw)
        if not low <= value <= high:
            raise ValueError(f"out of range for a {bits}-bit integer")
        return value

    return parse


def _parse_double(raw: str) -> float:
    if not _DECIMAL.fullmatch(raw.strip()):
        raise ValueError("not a number")
    return float(raw)


def _parse_boolean(raw: str) -> bool:
    if raw.lower() not in ("true", "false"):
        raise ValueError("not a boolean (true or false)")
    return raw.lower() == "true"


def _parse_list(raw: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def _parse_counts(raw: str) -> Mapping[str, int]:
    counts = {}
    for item in _parse_list(raw):
        name, _, count = (part.strip() for part in item.partition(":"))
        if not name or not _INTEGER.fullmatch(count):
            raise ValueError("not a comma-separated list of name:count pairs")
        counts[name] = int(count)
    return MappingProxyType(counts)


_PARSERS: dict[ConfigType, Callable[[str], Any]] = {
    ConfigType.SHORT: _integer(16),
    ConfigType.INT: _integer(32),
    ConfigType.LONG: _integer(64),
    ConfigType.DOUBLE: _parse_double,
    ConfigType.BOOLEAN: _parse_boolean,
    ConfigType.STRING: str,
    ConfigType.LIST: _parse_list,
    ConfigType.MAP: _parse_counts,
}


@dataclass(frozen=True)
class Range:
    """Inclusive bounds on a number; None leaves that side open."""

    min: int | None = None
    max: int | None = None

    def __call__(self, value: float) -> float:
        if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
            raise ValueError(str(self))
        return value

    def __str__(self) -> str:
        if self.max is None:
            return f"must be at least {self.min}"
        if self.min is None:
            return f"must be at most {self.max}"
        return f"must be between {self.min} and {self.max}"


@dataclass(frozen=True)
class OneOf:
    """One of a fixed set of names, matched in any case; the value becomes the name as listed."""

    choices: tuple[str, ...]

    def __call__(self, value: str) -> str:
        for choice in self.choices:
            if value.lower() == choice.lower():
                return choice
        raise ValueError(str(self))

    def __str__(self) -> str:
        return "must be one of " + ", ".join(self.choices)


@dataclass(frozen=True)
class NonEmpty:
    """A list that names at least one item."""

    def __call__(self, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError(str(self))
        return value

    def __str__(self) -> str:
        return "must name at least one item"


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # the default of a key that must be given


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key.

    `default` is the typed value used when the key is not given: REQUIRED if it must be given, or None when
    `fallback` names the key whose value (times `fallback_scale`) stands in, as 0.8.2 chains
    log.retention.ms -> minutes -> hours. A topic key's fallback is the broker key that supplies its default.
    """

    name: str
    type: ConfigType
    default: Any
    doc: str
    validator: Callable[[Any], Any] | None = None
    fallback: str | None = None
    fallback_scale: int = 1

    def coerce(self, raw: str) -> Any:
        """Parse and validate a value given as text."""
        try:
            value = _PARSERS[self.type](raw)
            return self.validator(value) if self.validator else value
        except ValueError as e:
            raise _invalid(self.name, raw, str(e)) from None


def _invalid(name: str, value: object, reason: str) -> ConfigError:
    return ConfigError(f"Invalid value {str(value)!r} for configuration {name}: {reason}")


def resolve_keys(table: Mapping[str, ConfigKey], given: Mapping[str, str]) -> dict[str, Any]:
    """Typed values for every key of `table`, in its order: the given text parsed, else the fallback key's value
    (scaled), else the default; a REQUIRED key not given is an error. Broker and client tables alike."""
    values: dict[str, Any] = {}
    for key in table.values():
        if key.name in given:
            values[key.name] = key.coerce(given[key.name])
        elif key.default is REQUIRED:
            raise ConfigError(f'Missing required configuration "{key.name}" which has no default value.')
        elif key.fallback is not None:
            fallback = values[key.fallback]
            values[key.name] = fallback * key.fallback_scale if key.fallback_scale != 1 else fallback
        else:
            values[key.name] = key.default
    return values


# --- The broker's keys (KafkaConfig) -----------------------------------------------------------------------

_SHORT, _INT, _LONG, _DOUBLE = ConfigType.SHORT, ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE
_BOOLEAN, _STRING, _LIST, _MAP = ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.LIST, ConfigType.MAP
_AT_LEAST_0, _AT_LEAST_1, _PORT = Range(0), Range(1), Range(0, 65535)


def _counts_at_least_0(counts: Mapping[str, int]) -> Mapping[str, int]:
    for name, count in counts.items():
        if count < 0:
            raise ValueError(f"the count for {name} must be at least 0")
    return counts


_COMPRESSION_CODECS = OneOf(("none", "gzip", "snappy", "lz4", "0", "1", "2", "3"))
_CLEANUP_POLICIES = OneOf(("delete", "compact"))
_TIMESTAMP_TYPES = OneOf(("CreateTime", "LogAppendTime"))
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?(?:-IV\d+)?")


def message_format_magic(version: str) -> int | None:
    """The magic a message.format.version writes -- Kafka's ApiVersion: before 0.10.0 magic 0, before 0.11.0
    magic 1, from 0.11.0 on magic 2 -- or None for the unset value (our default: each batch as the client sent
    it). ValueError for something that is not a Kafka version from 0.8.0 on."""
    if version == "":
        return None
    match = _VERSION.fullmatch(version)
    if match is None:
        raise ValueError("must be a Kafka version such as 0.8.2, 0.10.0 or 0.11.0, or empty")
    major, minor = int(match[1]), int(match[2])
    if (major, minor) < (0, 8):
        raise ValueError("must be 0.8.0 or later")
    return 0 if (major, minor) < (0, 10) else 1 if (major, minor) < (0, 11) else 2


def _message_format_version(value: str) -> str:
    message_format_magic(value)
    return value
_HOUR_MS, _MINUTE_MS = 3_600_000, 60_000

_ROLES = ("broker", "controller")


def _process_roles(roles: tuple[str, ...]) -> tuple[str, ...]:
    for role in roles:
        if role not in _ROLES:
            raise ValueError(f"unknown role {role!r}: the roles are broker and controller")
    if len(set(roles)) != len(roles):
        raise ValueError("a role is named twice")
    return roles


def _AT_LEAST_0_OR_UNSET(value: int) -> int:  # noqa: N802 - named as the validators it stands beside
    if value < -1:
        raise ValueError("must be at least 0")
    return value



# A fallback key is listed after the key it falls back to.
SERVER_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType({key.name: key for key in (
    # ZooKeeper (ZKConfig)
    ConfigKey("zookeeper.connect", _STRING, REQUIRED,
              "ZooKeeper connection string host:port[,host:port...][/chroot]; the chroot holds this cluster."),
    ConfigKey("zookeeper.session.timeout.ms", _INT, 6000,
              "ZooKeeper session timeout; a broker whose session expires is taken for dead."),
    ConfigKey("zookeeper.connection.timeout.ms", _INT, None,
              "How long to wait for a ZooKeeper connection; defaults to zookeeper.session.timeout.ms.",
              fallback="zookeeper.session.timeout.ms"),
    ConfigKey("zookeeper.sync.time.ms", _INT, 2000, "How far a ZooKeeper follower may lag behind its leader."),
    ConfigKey("zookeeper.set.acl", _BOOLEAN, False,
              "Extension (Kafka 0.9's switch): create znodes with Kafka's secure ACLs (the login of "
              "$ZKBROKER_JAAS_CONFIG may change them, the world only read; /consumers stays open)."),

    # KRaft mode (Kafka 3.7, KIP-500/595; DESIGN §17): set process.roles and ZooKeeper is not used at all
    ConfigKey("process.roles", _LIST, (),
              "KRaft mode (Kafka 3.7): controller (a voter of the metadata quorum), broker (serves clients, "
              "fetches the metadata log from the quorum) or broker,controller (both in one process). Empty: "
              "ZooKeeper mode.", _process_roles),
    ConfigKey("node.id", _INT, -1, "KRaft mode: this node's id, unique among brokers and controllers.",
              _AT_LEAST_0_OR_UNSET),
    ConfigKey("controller.quorum.voters", _LIST, (),
              "KRaft mode: the metadata quorum's voters, ID@HOST:PORT,... (their controller listeners); "
              "ID@HOST:PORT:DIRECTORY_ID (as Kafka's storage format --initial-controllers) for every voter "
              "switches KIP-853's directory ids on (Kafka 3.8+): a voter is known by its log dir's directory.id "
              "too, and one formatted again replicates as an observer."),
    ConfigKey("controller.quorum.pre.vote.enable", _BOOLEAN, False,
              "KRaft mode: KIP-996's Pre-Vote (Kafka 4.0; not in 3.7): a voter that lost its leader asks whether "
              "a majority would vote for it before it stands, so a voter cut off alone cannot unseat a healthy "
              "leader when it returns. Every voter must have the same setting (Vote v2 on the wire)."),
    ConfigKey("controller.listener.names", _LIST, (),
              "KRaft mode: the names in listeners that the controller serves the quorum on (the first one is "
              "what other nodes connect to)."),
    ConfigKey("controller.quorum.election.timeout.ms", _INT, 1000,
              "KRaft mode: how long a voter waits without a leader before it stands (plus a random part as "
              "long again).", _AT_LEAST_1),
    ConfigKey("controller.quorum.election.backoff.max.ms", _INT, 1000,
              "KRaft mode: the longest backoff before a candidate that lost stands again.", _AT_LEAST_0),
    ConfigKey("controller.quorum.fetch.timeout.ms", _INT, 2000,
              "KRaft mode: how long a follower waits for its leader before standing; a leader that a majority "
              "has not fetched from within 1.5 times this resigns.", _AT_LEAST_1),
    ConfigKey("controller.quorum.request.timeout.ms", _INT, 2000,
              "KRaft mode: how long a quorum request waits for its answer.", _AT_LEAST_1),
    ConfigKey("controller.quorum.retry.backoff.ms", _INT, 20,
              "KRaft mode: the wait before a quorum request that failed is sent again.", _AT_LEAST_0),
    ConfigKey("metadata.log.dir", _STRING, "",
              "KRaft mode: the directory of the metadata log (__cluster_metadata-0); empty: the first of "
              "log.dirs."),
    ConfigKey("metadata.log.segment.bytes", _INT, 1024**3, "KRaft mode: the metadata log's segment size.",
              Range(14)),
    ConfigKey("metadata.log.max.record.bytes.between.snapshots", _LONG, 20 * 1024 * 1024,
              "KRaft mode: committed record bytes after which a node writes a snapshot of the metadata.",
              _AT_LEAST_1),
    ConfigKey("metadata.log.max.snapshot.interval.ms", _LONG, 3_600_000,
              "KRaft mode: the longest time between two snapshots when records were committed; 0: no limit.",
              _AT_LEAST_0),
    ConfigKey("broker.heartbeat.interval.ms", _INT, 2000, "KRaft mode: how often a broker heartbeats its "
              "controller.", _AT_LEAST_1),
    ConfigKey("broker.session.timeout.ms", _INT, 9000, "KRaft mode: a broker without a heartbeat for this long "
              "is fenced.", _AT_LEAST_1),

    # General
    ConfigKey("broker.id", _INT, REQUIRED, "This broker's id, unique in the cluster: its /brokers/ids/<id>.",
              _AT_LEAST_0),
    ConfigKey("message.max.bytes", _INT, 1_000_012,
              "Largest message the broker accepts: 1000000 plus the 12-byte offset and size of a log entry.",
              _AT_LEAST_0),
    ConfigKey("num.network.threads", _INT, 3, "Threads that read requests from and write responses to sockets.",
              _AT_LEAST_1),
    ConfigKey("num.io.threads", _INT, 8, "Threads that handle requests.", _AT_LEAST_1),
    ConfigKey("background.threads", _INT, 10, "Threads for background work such as deleting old segments.",
              _AT_LEAST_1),
    ConfigKey("queued.max.requests", _INT, 500,
              "Requests read from one connection and not yet answered; at this many the broker stops reading "
              "that connection (0.8.2 bounded one queue shared by every connection).", _AT_LEAST_1),

    # Socket server
    ConfigKey("port", _INT, 9092, "Port the broker listens on.", _PORT),
    ConfigKey("host.name", _STRING, "", "Address the broker binds to; empty binds every interface."),
    ConfigKey("advertised.host.name", _STRING, None,
              "Host registered in ZooKeeper for clients; defaults to host.name, and when that is empty to the "
              "machine's canonical host name.", fallback="host.name"),
    ConfigKey("advertised.port", _INT, None, "Port registered in ZooKeeper for clients; defaults to port.", _PORT,
              fallback="port"),
    ConfigKey("listeners", _LIST, (),
              "Extension (Kafka 2.x's key, DESIGN §19): NAME://host:port each; the inter-broker listener's host and "
              "port stand for host.name and port. Unset: one PLAINTEXT listener on host.name:port."),
    ConfigKey("advertised.listeners", _LIST, (),
              "Extension (Kafka 2.x's key): what each listener registers in ZooKeeper for clients, "
              "NAME://host:port; a listener not named here registers itself. The inter-broker one stands for "
              "advertised.host.name and advertised.port."),
    ConfigKey("listener.security.protocol.map", _LIST, (),
              "LISTENER_NAME:SECURITY_PROTOCOL pairs (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); unset: each "
              "protocol's name stands for itself."),
    ConfigKey("inter.broker.listener.name", _STRING, "",
              "The listener brokers reach each other on (controller requests, replica fetches, transaction markers, "
              "controlled shutdown); unset: the one named by security.inter.broker.protocol, else PLAINTEXT, else "
              "the only listener. On SSL or SASL listeners brokers authenticate as clients do."),
    ConfigKey("security.inter.broker.protocol", _STRING, "",
              "The inter-broker listener named by its protocol (the listener of that name); Kafka's older key. "
              "Setting it and inter.broker.listener.name both is an error."),
    ConfigKey("sasl.mechanism.inter.broker.protocol", _STRING, "GSSAPI",
              "The SASL mechanism a broker authenticates with on a SASL inter-broker listener (one of "
              "sasl.enabled.mechanisms); its username and password are the ones in "
              "listener.name.<listener>.<mechanism>.sasl.jaas.config, else sasl.jaas.config."),
    ConfigKey("ssl.endpoint.identification.algorithm", _STRING, "https",
              "https: a broker reaching another over TLS checks the certificate names that broker's host (Kafka "
              "2.0's default); empty: it does not."),
    ConfigKey("ssl.keystore.type", _STRING, "PEM",
              "PEM only (KIP-651): ssl.keystore.location is a PEM file holding the certificate chain and the "
              "private key. Kafka's JKS and PKCS12 stores convert with keytool and openssl.", OneOf(("PEM",))),
    ConfigKey("ssl.keystore.location", _STRING, "",
              "The broker's certificate chain and private key (one PEM file); required by SSL and SASL_SSL "
              "listeners."),
    ConfigKey("ssl.key.password", _STRING, "", "The password of the private key in ssl.keystore.location, if any."),
    ConfigKey("ssl.truststore.type", _STRING, "PEM", "PEM only (KIP-651).", OneOf(("PEM",))),
    ConfigKey("ssl.truststore.location", _STRING, "",
              "The CA certificates (one PEM file) client certificates are checked against; unset: the system's."),
    ConfigKey("ssl.client.auth", _STRING, "none",
              "required, requested or none: whether SSL listeners ask clients for a certificate, whose "
              "distinguished name is then the principal (User:CN=...,O=...).",
              OneOf(("required", "requested", "none"))),
    ConfigKey("sasl.enabled.mechanisms", _LIST, ("GSSAPI",),
              "The SASL mechanisms SASL listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, "
              "GSSAPI, is not built: name the ones you want)."),
    ConfigKey("sasl.jaas.config", _STRING, "",
              "The broker's PLAIN users, JAAS-style: org.apache.kafka.common.security.plain.PlainLoginModule "
              "required user_alice=\"secret\";. listener.name.<listener>.plain.sasl.jaas.config overrides it "
              "per listener, as in Kafka."),
    ConfigKey("sasl.server.max.receive.size", _INT, 524288,
              "Largest request read before a SASL client has authenticated; a larger one closes the connection "
              "unread (KIP-526).", _AT_LEAST_1),
    ConfigKey("connection.failed.authentication.delay.ms", _INT, 100,
              "How long a failed authentication waits before it is answered and its connection closed "
              "(KIP-306).", _AT_LEAST_0),
    ConfigKey("authorizer.class.name", _STRING, "",
              "kafka.security.auth.SimpleAclAuthorizer (or Kafka 2.4's kafka.security.authorizer.AclAuthorizer) "
              "turns on the ACL authorizer; empty: every request is allowed.",
              OneOf(("", "kafka.security.auth.SimpleAclAuthorizer", "kafka.security.authorizer.AclAuthorizer"))),
    ConfigKey("super.users", _STRING, "", "Principals allowed everything, separated by semicolons: User:admin;User:b."),
    ConfigKey("allow.everyone.if.no.acl.found", _BOOLEAN, False,
              "Whether a resource with no ACL at all is open to everyone (with an authorizer)."),
    ConfigKey("quota.window.num", _INT, 11,
              "Samples a client quota's rate is measured over (Kafka 0.9's key).", _AT_LEAST_1),
    ConfigKey("quota.window.size.seconds", _INT, 1, "Length of each sample of a client quota's rate.", _AT_LEAST_1),
    ConfigKey("socket.send.buffer.bytes", _INT, 100 * 1024, "SO_SNDBUF of the broker's sockets."),
    ConfigKey("socket.receive.buffer.bytes", _INT, 100 * 1024, "SO_RCVBUF of the broker's sockets."),
    ConfigKey("socket.request.max.bytes", _INT, 100 * 1024 * 1024,
              "Largest request the broker reads; a larger size prefix closes the connection.", _AT_LEAST_1),
    ConfigKey("max.connections.per.ip", _INT, INT32_MAX, "Connections allowed from one IP address.", _AT_LEAST_1),
    ConfigKey("max.connections.per.ip.overrides", _MAP, MappingProxyType({}),
              "Exceptions to max.connections.per.ip, as host:count,host:count.", _counts_at_least_0),
    ConfigKey("connections.max.idle.ms", _LONG, 10 * 60 * 1000,
              "A connection with no request completed (received or answered) for this long is closed.",
              _AT_LEAST_1),

    # Log
    ConfigKey("num.partitions", _INT, 1, "Partitions of an automatically created topic.", _AT_LEAST_1),
    ConfigKey("log.dir", _LIST, ("/tmp/kafka-logs",), "Directory for log data, used when log.dirs is not set.",
              NonEmpty()),
    ConfigKey("log.dirs", _LIST, None,
              "Comma-separated directories for log data; a new partition goes to the one with fewest "
              "partitions. Defaults to log.dir.", NonEmpty(), fallback="log.dir"),
    ConfigKey("log.segment.bytes", _INT, 1024**3, "Size at which a log segment is rolled.",
              Range(14)),  # the smallest message: crc, magic, attributes, key and value sizes
    ConfigKey("log.roll.hours", _INT, 24 * 7, "Age in hours at which a log segment is rolled even if not full.",
              _AT_LEAST_1),
    ConfigKey("log.roll.ms", _INT, None, "Age in ms at which a log segment is rolled; overrides log.roll.hours.",
              _AT_LEAST_1, fallback="log.roll.hours", fallback_scale=_HOUR_MS),
    ConfigKey("log.roll.jitter.hours", _INT, 0,
              "Largest random time in hours taken off a segment's roll age, so segments do not all roll at once.",
              _AT_LEAST_0),
    ConfigKey("log.roll.jitter.ms", _INT, None,
              "Largest random time in ms taken off a segment's roll age; overrides log.roll.jitter.hours.",
              _AT_LEAST_0, fallback="log.roll.jitter.hours", fallback_scale=_HOUR_MS),
    ConfigKey("log.retention.hours", _INT, 24 * 7, "Hours a log segment is kept before it is deleted.",
              _AT_LEAST_1),
    ConfigKey("log.retention.minutes", _INT, None,
              "Minutes a log segment is kept before it is deleted; overrides log.retention.hours.",
              _AT_LEAST_1, fallback="log.retention.hours", fallback_scale=60),
    ConfigKey("log.retention.ms", _INT, None,
              "Milliseconds a log segment is kept before it is deleted; overrides log.retention.minutes and "
              "log.retention.hours.", _AT_LEAST_1, fallback="log.retention.minutes", fallback_scale=_MINUTE_MS),
    ConfigKey("log.retention.bytes", _LONG, -1,
              "Size a partition's log may reach before its oldest segments are deleted; -1 means no limit."),
    ConfigKey("log.retention.check.interval.ms", _LONG, 5 * 60 * 1000,
              "How often logs are checked for segments to delete.", _AT_LEAST_1),
    ConfigKey("log.cleanup.policy", _STRING, "delete",
              "What happens to old segments: delete (retention), or compact (the log cleaner keeps the last "
              "message of each key).", _CLEANUP_POLICIES),
    ConfigKey("log.cleaner.enable", _BOOLEAN, False,
              "Run the log cleaner, which compacts the logs of compact topics (__consumer_offsets among them); "
              "false, as in 0.8.2, leaves them growing."),
    ConfigKey("log.cleaner.threads", _INT, 1, "Log cleaner threads.", _AT_LEAST_0),
    ConfigKey("log.cleaner.io.max.bytes.per.second", _DOUBLE, sys.float_info.max,
              "Read plus write rate the log cleaner is throttled to."),
    ConfigKey("log.cleaner.dedupe.buffer.size", _LONG, 500 * 1024 * 1024,
              "Memory for the offset maps of all cleaner threads (24 bytes a key).", _AT_LEAST_0),
    ConfigKey("log.cleaner.io.buffer.size", _INT, 512 * 1024,
              "Memory for I/O buffers across all cleaner threads.", _AT_LEAST_0),
    ConfigKey("log.cleaner.io.buffer.load.factor", _DOUBLE, 0.9, "How full an offset map may become."),
    ConfigKey("log.cleaner.backoff.ms", _LONG, 15 * 1000,
              "How long the cleaner sleeps when no log needs cleaning.", _AT_LEAST_0),
    ConfigKey("log.cleaner.min.cleanable.ratio", _DOUBLE, 0.5,
              "Share of a compacted log (dirty bytes over all bytes) that must be dirty before it is cleaned."),
    ConfigKey("log.cleaner.delete.retention.ms", _LONG, 24 * 60 * 60 * 1000,
              "How long delete markers (null values) stay in a compacted log after it was cleaned."),
    ConfigKey("log.cleaner.keyless.messages", _STRING, "stop-cleaner",
              "Extension (KAFKA-1755, Kafka 0.9): what the log cleaner does with a message without a key in a "
              "compacted log: stop-cleaner (0.8.2: the cleaner thread ends with an error) or discard (0.9: "
              "the cleaner drops it).", OneOf(("stop-cleaner", "discard"))),
    ConfigKey("log.index.size.max.bytes", _INT, 10 * 1024 * 1024, "Largest size of a segment's offset index.",
              Range(4)),
    ConfigKey("log.index.interval.bytes", _INT, 4096,
              "Bytes of messages between two entries of the offset index.", _AT_LEAST_0),
    ConfigKey("log.message.timestamp.type", _STRING, "CreateTime",
              "Kafka 0.10: the timestamp messages of magic 1 and 2 keep: CreateTime (the producer's) or "
              "LogAppendTime (the broker's, stamped at append).", _TIMESTAMP_TYPES),
    ConfigKey("log.message.format.version", _STRING, "",
              "Kafka 0.10's key: the message format logs are written in, converted on append, 0.8.2 (magic 0), "
              "0.10.0 (magic 1) or 0.11.0 (magic 2). Extension: unset (the default) stores each message set as "
              "the client sent it.", _message_format_version),
    ConfigKey("transactional.id.expiration.ms", _INT, 604_800_000,
              "Kafka 0.11: how long a partition keeps the state of an idempotent producer that writes nothing, and "
              "how long a transaction coordinator keeps a transactional id with no transaction.",
              _AT_LEAST_1),
    ConfigKey("log.flush.interval.messages", _LONG, INT64_MAX,
              "Messages a partition may receive before its log is flushed to disk.", _AT_LEAST_1),
    ConfigKey("log.segment.delete.delay.ms", _LONG, 60000,
              "How long a deleted segment's files stay on disk (renamed .deleted) before they are removed.",
              _AT_LEAST_0),
    ConfigKey("log.flush.scheduler.interval.ms", _LONG, INT64_MAX,
              "How often the flusher checks whether a log is due to be flushed."),
    ConfigKey("log.flush.interval.ms", _LONG, None,
              "Longest time a message stays unflushed; defaults to log.flush.scheduler.interval.ms.",
              fallback="log.flush.scheduler.interval.ms"),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", _INT, 60000,
              "How often the recovery point (last flushed offset) of every log is checkpointed.", _AT_LEAST_0),
    ConfigKey("num.recovery.threads.per.data.dir", _INT, 1,
              "Threads per log directory that recover logs at start and flush them at shutdown.", _AT_LEAST_1),
    ConfigKey("auto.create.topics.enable", _BOOLEAN, True,
              "Create a topic when a client asks for metadata of a topic that does not exist."),
    ConfigKey("min.insync.replicas", _INT, 1,
              "ISR size below which a produce request with acks=-1 fails with NotEnoughReplicas.", _AT_LEAST_1),

    # Replication
    ConfigKey("controller.socket.timeout.ms", _INT, 30000,
              "Socket timeout of the controller's channels to brokers."),
    ConfigKey("controller.zookeeper.batched", _BOOLEAN, True,
              "Extension (KAFKA-5642, Kafka 1.1): the controller writes the state of many partitions in "
              "multi() batches, several in flight; false writes one node per transaction, one at a time, as "
              "0.8.2's synchronous ZooKeeper client did."),
    ConfigKey("controller.message.queue.size", _INT, INT32_MAX,
              "Requests queued on each of the controller's channels to brokers."),
    ConfigKey("default.replication.factor", _INT, 1, "Replication factor of an automatically created topic.",
              _AT_LEAST_1),
    ConfigKey("replica.lag.time.max.ms", _LONG, 10000,
              "A follower that has not fetched for this long is removed from the ISR."),
    ConfigKey("replica.lag.max.messages", _LONG, 4000,
              "A follower this many messages behind the leader is removed from the ISR "
              "(not with replica.lag.rule=caught-up-time)."),
    ConfigKey("replica.lag.rule", _STRING, "time-or-messages",
              "Extension (KIP-16, Kafka 0.9): when a leader drops a follower from the ISR: time-or-messages "
              "(0.8.2: no fetch for replica.lag.time.max.ms, or more than replica.lag.max.messages behind its log "
              "end, so a burst of more messages makes a healthy follower flap, KAFKA-1546) or caught-up-time (not "
              "caught up to its log end at any time in the last replica.lag.time.max.ms).",
              OneOf(("time-or-messages", "caught-up-time"))),
    ConfigKey("replica.lag.check.interval.ms", _LONG, None,
              "Extension: how often a leader looks for followers to drop from the ISR; defaults to "
              "replica.lag.time.max.ms, 0.8.2's schedule (later Kafka checks at half of it).", _AT_LEAST_1,
              fallback="replica.lag.time.max.ms"),
    ConfigKey("replica.socket.timeout.ms", _INT, 30000,
              "Socket timeout of follower fetches; at least replica.fetch.wait.max.ms."),
    ConfigKey("replica.socket.receive.buffer.bytes", _INT, 64 * 1024, "SO_RCVBUF of follower fetch sockets."),
    ConfigKey("replica.fetch.max.bytes", _INT, 1024 * 1024,
              "Bytes a follower asks for per partition; at least message.max.bytes."),
    ConfigKey("replica.fetch.wait.max.ms", _INT, 500,
              "Longest a follower fetch waits at the leader; at most replica.lag.time.max.ms."),
    ConfigKey("replica.fetch.min.bytes", _INT, 1, "Bytes a follower fetch waits for before the leader answers."),
    ConfigKey("num.replica.fetchers", _INT, 1, "Fetcher threads per source broker.", _AT_LEAST_1),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", _LONG, 5000,
              "How often each log directory's high watermarks are checkpointed."),
    ConfigKey("fetch.purgatory.purge.interval.requests", _INT, 1000,
              "Fetch requests between purges of the fetch purgatory."),
    ConfigKey("producer.purgatory.purge.interval.requests", _INT, 1000,
              "Produce requests between purges of the producer purgatory."),
    ConfigKey("auto.leader.rebalance.enable", _BOOLEAN, True,
              "Let the controller move leadership back to preferred replicas."),
    ConfigKey("leader.imbalance.per.broker.percentage", _INT, 10,
              "Percentage of a broker's partitions led by others above which the controller rebalances."),
    ConfigKey("leader.imbalance.check.interval.seconds", _INT, 300,
              "How often the controller checks for leader imbalance."),
    ConfigKey("unclean.leader.election.enable", _BOOLEAN, True,
              "Elect a replica outside the ISR when no ISR member is alive, accepting the loss of messages."),
    ConfigKey("broker.epoch.enable", _BOOLEAN, False,
              "Extension (KIP-380, Kafka 2.2): the controller tells two registrations of a broker apart by their "
              "znode's creation zxid (the broker epoch), so a broker that bounced before the controller looked "
              "at /brokers/ids is handled as a failure and a startup (0.8.2 saw an unchanged id set and did "
              "nothing, KAFKA-1120)."),
    ConfigKey("replication.truncation", _STRING, "high-watermark",
              "Extension (KIP-101): where a new follower truncates its log: high-watermark (0.8.2) or "
              "leader-epoch.", OneOf(("high-watermark", "leader-epoch"))),
    ConfigKey("replica.out.of.range.reset", _STRING, "leader-start",
              "Extension (KAFKA-2143, Kafka 0.9.0.1): what a follower does when the leader answers "
              "OFFSET_OUT_OF_RANGE although its log end is at or past the follower's: leader-start (0.8.2) drops "
              "the whole log and starts again at the leader's log start; keep-log keeps the log and fetches on "
              "from its own end (dropping it only when the leader's log start lies above that end).",
              OneOf(("leader-start", "keep-log"))),

    # Controlled shutdown
    ConfigKey("controlled.shutdown.enable", _BOOLEAN, True,
              "Move leadership off the broker before it shuts down."),
    ConfigKey("controlled.shutdown.max.retries", _INT, 3, "Attempts at a controlled shutdown."),
    ConfigKey("controlled.shutdown.retry.backoff.ms", _INT, 5000, "Pause between controlled shutdown attempts."),

    # Offset management (the __consumer_offsets topic)
    ConfigKey("offset.metadata.max.bytes", _INT, 4096, "Largest metadata string of an offset commit."),
    ConfigKey("offsets.load.buffer.size", _INT, 5 * 1024 * 1024,
              "Bytes read at a time when offsets are loaded into the cache.", _AT_LEAST_1),
    ConfigKey("offsets.topic.replication.factor", _SHORT, 3, "Replication factor of the offsets topic.",
              _AT_LEAST_1),
    ConfigKey("offsets.topic.num.partitions", _INT, 50, "Partitions of the offsets topic.", _AT_LEAST_1),
    ConfigKey("offsets.topic.segment.bytes", _INT, 100 * 1024 * 1024, "Segment size of the offsets topic.",
              _AT_LEAST_1),
    ConfigKey("offsets.topic.compression.codec", _STRING, "none",
              "Compression of the offsets topic: none, gzip, snappy, lz4 or their numbers 0-3.",
              _COMPRESSION_CODECS),
    ConfigKey("offsets.retention.minutes", _INT, 24 * 60, "Age at which a committed offset is discarded.",
              _AT_LEAST_1),
    ConfigKey("offsets.retention.check.interval.ms", _LONG, 600000, "How often stale offsets are looked for.",
              _AT_LEAST_1),
    ConfigKey("offsets.commit.timeout.ms", _INT, 5000,
              "Longest an offset commit waits for the offsets topic's replicas.", _AT_LEAST_1),
    ConfigKey("offsets.commit.required.acks", _SHORT, -1,
              "Acks an offset commit needs; at most offsets.topic.replication.factor.", Range(-1)),

    # The transaction coordinator and its __transaction_state topic (DESIGN §18; Kafka 0.11+ keys)
    ConfigKey("transaction.state.log.num.partitions", _INT, 50,
              "Partitions of the transaction state topic; a transactional id's coordinator leads partition "
              "abs(id.hashCode) % this.", _AT_LEAST_1),
    ConfigKey("transaction.state.log.replication.factor", _SHORT, 3,
              "Replication factor of the transaction state topic (capped to the live brokers: our deviation, "
              "Kafka refuses to create it with fewer).", _AT_LEAST_1),
    ConfigKey("transaction.state.log.min.isr", _INT, 2,
              "min.insync.replicas of the transaction state topic (capped to its replication factor).",
              _AT_LEAST_1),
    ConfigKey("transaction.state.log.segment.bytes", _INT, 100 * 1024 * 1024,
              "Segment size of the transaction state topic.", _AT_LEAST_1),
    ConfigKey("transaction.state.log.load.buffer.size", _INT, 5 * 1024 * 1024,
              "Bytes read at a time when a transaction state partition is loaded.", _AT_LEAST_1),
    ConfigKey("transaction.max.timeout.ms", _INT, 900_000,
              "Largest transaction timeout a producer may ask for (InitProducerId); above it "
              "INVALID_TRANSACTION_TIMEOUT.", _AT_LEAST_1),
    ConfigKey("transaction.partition.verification.enable", _BOOLEAN, False,
              "KIP-890 (Kafka 3.6, where it is on by default): a partition leader asks the transaction coordinator "
              "whether a partition is in the producer's ongoing transaction before it takes the producer's first "
              "batch of it, so that a produce delayed past its transaction's end is refused (INVALID_TXN_STATE) "
              "instead of leaving a hanging transaction (KAFKA-12671). Off: the ZooKeeper-era brokers' behaviour."),
    ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", _INT, 10_000,
              "How often the coordinator looks for transactions open past their timeout, and aborts them.",
              _AT_LEAST_1),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", _INT, 3_600_000,
              "How often the coordinator removes transactional ids idle past transactional.id.expiration.ms.",
              _AT_LEAST_1),

    # The group coordinator (DESIGN §12; Kafka 0.9+ keys, 0.8.2 had no coordinator)
    ConfigKey("group.min.session.timeout.ms", _INT, 6000,
              "Smallest session timeout a group member may ask for (JoinGroup); below it INVALID_SESSION_TIMEOUT.",
              _AT_LEAST_0),
    ConfigKey("group.max.session.timeout.ms", _INT, 1800000,
              "Largest session timeout a group member may ask for (Kafka 3.0's default; 0.9's 30000 refuses "
              "today's clients, which ask for 45000).", _AT_LEAST_0),
    ConfigKey("group.initial.rebalance.delay.ms", _INT, 0,
              "How long an empty group's first rebalance waits for more members, extended by as much for each "
              "(KIP-134, Kafka 0.11's default 3000); 0 completes it at once, as 0.9-0.10 did.", _AT_LEAST_0),

    ConfigKey("delete.topic.enable", _BOOLEAN, False,
              "Act on /admin/delete_topics; when false a topic marked for deletion stays."),
)})

# The one-key checks above cannot state 0.8.2's require()s that relate two keys: (key, bound, other key).
_RELATIONS = (
    ("replica.fetch.wait.max.ms", "at most", "replica.socket.timeout.ms"),  # else fetches time out for nothing
    ("replica.fetch.wait.max.ms", "at most", "replica.lag.time.max.ms"),  # else idle followers leave the ISR
    ("replica.fetch.max.bytes", "at least", "message.max.bytes"),  # else a follower cannot fetch a big message
    ("offsets.commit.required.acks", "at most", "offsets.topic.replication.factor"),
    ("group.min.session.timeout.ms", "at most", "group.max.session.timeout.ms"),
)
_MIN_DEDUPE_BYTES_PER_CLEANER = 1024 * 1024



# --- Per-topic overrides (LogConfig) -----------------------------------------------------------------------

TOPIC_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType({key.name: key for key in (
    ConfigKey("segment.bytes", _INT, None, "Size at which a log segment is rolled.",
              Range(14), fallback="log.segment.bytes"),
    ConfigKey("segment.ms", _LONG, None, "Age at which a log segment is rolled even if not full.",
              _AT_LEAST_1, fallback="log.roll.ms"),
    ConfigKey("segment.jitter.ms", _LONG, None, "Largest random time taken off a segment's roll age.",
              _AT_LEAST_0, fallback="log.roll.jitter.ms"),
    ConfigKey("segment.index.bytes", _INT, None, "Largest size of a segment's offset index.",
              Range(4), fallback="log.index.size.max.bytes"),
    ConfigKey("flush.messages", _LONG, None, "Messages received before the log is flushed to disk.",
              _AT_LEAST_1, fallback="log.flush.interval.messages"),
    ConfigKey("flush.ms", _LONG, None, "Longest time a message stays unflushed.",
              fallback="log.flush.interval.ms"),
    ConfigKey("retention.bytes", _LONG, None, "Size the log may reach before old segments are deleted; -1: none.",
              fallback="log.retention.bytes"),
    ConfigKey("retention.ms", _LONG, None, "Age at which a log segment is deleted.",
              fallback="log.retention.ms"),
    ConfigKey("max.message.bytes", _INT, None, "Largest message the topic accepts.",
              _AT_LEAST_0, fallback="message.max.bytes"),
    ConfigKey("index.interval.bytes", _INT, None, "Bytes of messages between two offset index entries.",
              _AT_LEAST_0, fallback="log.index.interval.bytes"),
    ConfigKey("file.delete.delay.ms", _INT, None, "How long a deleted segment's files stay on disk.",
              _AT_LEAST_0, fallback="log.segment.delete.delay.ms"),
    ConfigKey("delete.retention.ms", _LONG, None,
              "How long delete markers (null values) stay in a compacted log after it was cleaned.",
              fallback="log.cleaner.delete.retention.ms"),
    ConfigKey("min.cleanable.dirty.ratio", _DOUBLE, None,
              "Share of the compacted log that must be dirty before it is cleaned.",
              fallback="log.cleaner.min.cleanable.ratio"),
    ConfigKey("cleanup.policy", _STRING, None,
              "delete (retention removes old segments) or compact (the log cleaner keeps the last message of "
              "each key).", _CLEANUP_POLICIES, fallback="log.cleanup.policy"),
    ConfigKey("unclean.leader.election.enable", _BOOLEAN, None,
              "Elect a replica outside the ISR when no ISR member is alive.",
              fallback="unclean.leader.election.enable"),
    ConfigKey("min.insync.replicas", _INT, None,
              "ISR size below which a produce request with acks=-1 fails.",
              _AT_LEAST_1, fallback="min.insync.replicas"),
    ConfigKey("message.timestamp.type", _STRING, None, "CreateTime or LogAppendTime (Kafka 0.10).",
              _TIMESTAMP_TYPES, fallback="log.message.timestamp.type"),
    ConfigKey("message.format.version", _STRING, None,
              "The message format the topic's log is written in; unset: as each client sends it.",
              _message_format_version, fallback="log.message.format.version"),
)})


def validate_topic_config(props: Mapping[str, str]) -> dict[str, Any]:
    """Check a topic's overrides (as kept in /config/topics/<t>) and return their typed values."""
    for name in props:
        if name not in TOPIC_CONFIGS:
            raise ConfigError(f'Unknown configuration "{name}".')
    return {name: TOPIC_CONFIGS[name].coerce(raw) for name, raw in props.items()}


#: The broker keys that change without a restart (Kafka's DynamicLogConfig): the broker defaults of the topic
#: configs, less `log.message.format.version` (Kafka excludes it too) and `unclean.leader.election.enable`
#: (read when a topic is loaded). Both controllers' AlterConfigs refuse the others, as Kafka does.
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    key.fallback for key in TOPIC_CONFIGS.values()
    if key.fallback not in ("log.message.format.version", "unclean.leader.election.enable"))


def validate_dynamic_broker_config(props: Mapping[str, str]) -> None:
    """ConfigError, naming the keys, unless every key of `props` is dynamic and its value passes its check
    (relations between keys need the whole config: DynamicBrokerConfig checks those on a broker)."""
    fixed = sorted(name for name in props if name not in DYNAMIC_BROKER_CONFIGS)
    if fixed:
        raise ConfigError(f"Cannot update these configs dynamically: {', '.join(fixed)}")
    for name, raw in props.items():
        SERVER_CONFIGS[name].coerce(raw)


# --- The validated configuration ---------------------------------------------------------------------------

@dataclass(frozen=True)
class KafkaConfig:
    """A broker's validated configuration (kafka.server.KafkaConfig): every key of SERVER_CONFIGS has a value.

    `cfg["key"]` is the typed value, given or default. `originals` holds the strings as given; `warnings` says
    which of them were not used (unknown keys, `Property foo is not valid`), for the server to log.
    """

    _values: Mapping[str, Any] = field(repr=False)
    originals: Mapping[str, str]
    warnings: tuple[str, ...] = ()

    @classmethod
    def load(cls, path: str, overrides: Sequence[str] = ()) -> KafkaConfig:
        """Read a server.properties file, then apply `key=value` overrides on top."""
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(f"Cannot read configuration file {path}: {e.strerror or e}.") from e
        except UnicodeDecodeError as e:
            raise ConfigError(f"Cannot read configuration file {path}: it is not UTF-8 text.") from e
        props = parse_properties(text)
        for override in overrides:
            name, sep, value = override.partition("=")
            if not sep or not name.strip():
                raise ConfigError(f"Invalid override {override!r}: expected key=value.")
            props[name.strip()] = value
        return cls.from_props(props)

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> KafkaConfig:
        originals = dict(props)
        kraft = _kraft_given(originals)
        given, warnings = kraft if kraft is not None else _apply_listener_aliases(originals)
        warnings += [f"Property {name} is not valid" for name in sorted(given) if name not in SERVER_CONFIGS]
        values = resolve_keys(SERVER_CONFIGS, given)
        _check_relations(values)
        _check_security(values)
        return cls(MappingProxyType(values), MappingProxyType(originals), tuple(warnings))

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"{name} is not a broker configuration key") from None

    def topic_config(self, overrides: Mapping[str, str]) -> dict[str, Any]:
        """A topic's LogConfig: this broker's defaults with the topic's validated overrides on top."""
        defaults = {key.name: self[key.fallback] for key in TOPIC_CONFIGS.values()}
        return defaults | validate_topic_config(overrides)

    @property
    def broker_id(self) -> int:
        return self["broker.id"]

    @property
    def zk_connect(self) -> str:
        return self["zookeeper.connect"]

    @property
    def zk_session_timeout_ms(self) -> int:
        return self["zookeeper.session.timeout.ms"]

    @property
    def zk_connection_timeout_ms(self) -> int:
        return self["zookeeper.connection.timeout.ms"]

    @property
    def host(self) -> str:
        """The address to bind; empty means every interface."""
        return self["host.name"]

    @property
    def port(self) -> int:
        return self["port"]

    @property
    def advertised_host(self) -> str:
        """advertised.host.name, else host.name, else this machine's canonical host name, as 0.8.2 registers."""
        host = self["advertised.host.name"]
        return host if host.strip() else socket.getfqdn()

    @property
    def advertised_port(self) -> int:
        return self["advertised.port"]

    @property
    def endpoints(self) -> list[listeners.EndPoint]:
        """The listeners the broker binds (one PLAINTEXT listener on host.name:port when `listeners` is unset)."""
        return _endpoints(self._values)

    @property
    def advertised_endpoints(self) -> list[listeners.EndPoint]:
        """What the broker registers in ZooKeeper, one endpoint per listener."""
        protocol_map = listeners.parse_protocol_map(self["listener.security.protocol.map"])
        advertised = listeners.parse_endpoints(self["advertised.listeners"], protocol_map)
        inter = self.inter_broker_listener_name
        # advertised.host.name/port (0.8's keys) still speak for the inter-broker listener
        if not any(e.listener_name == inter for e in advertised):
            protocol = next(e.security_protocol for e in self.endpoints if e.listener_name == inter)
            advertised.append(listeners.EndPoint(inter, self.advertised_host, self.advertised_port, protocol))
        return listeners.advertised_endpoints(self.endpoints, advertised, self.advertised_host)

    def listener_jaas_config(self, listener_name: str, mechanism: str) -> str:
        """`listener.name.<listener>.<mechanism>.sasl.jaas.config` (lower case, as Kafka), else `sasl.jaas.config`."""
        key = f"listener.name.{listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config"
        return self.originals.get(key, self["sasl.jaas.config"])

    @property
    def inter_broker_listener_name(self) -> str:
        return self.inter_broker_endpoint.listener_name

    @property
    def inter_broker_endpoint(self) -> listeners.EndPoint:
        """The listener brokers reach each other on (bound form), with its security protocol."""
        return listeners.inter_broker_listener(self.endpoints, _inter_broker_name(self._values))

    @property
    def log_dirs(self) -> tuple[str, ...]:
        return self["log.dirs"]

    @property
    def is_kraft(self) -> bool:
        """KRaft mode (process.roles set): no ZooKeeper, a metadata quorum instead (DESIGN §17)."""
        return bool(self["process.roles"])

    @property
    def is_kraft_broker(self) -> bool:
        """KRaft mode with the broker role: clients served, metadata fetched from the quorum (DESIGN §17)."""
        return "broker" in self["process.roles"]

    @property
    def is_kraft_controller(self) -> bool:
        return "controller" in self["process.roles"]

    @property
    def controller_endpoint(self) -> tuple[str, int]:
        """Where a KRaft controller (or a combined node's controller) serves the quorum: its first controller
        listener."""
        name = self["controller.listener.names"][0]
        host, port = kraft_listeners(self.originals)[name]
        return host, int(port)

    @property
    def node_id(self) -> int:
        return self["node.id"]

    @property
    def quorum_voters(self) -> dict[int, tuple[str, int]]:
        """controller.quorum.voters: node id -> (host, port) of its controller listener."""
        return parse_quorum_voters(",".join(self["controller.quorum.voters"]))

    @property
    def quorum_voter_directories(self) -> dict[int, str] | None:
        """controller.quorum.voters' directory ids (KIP-853), None when it names none."""
        return parse_voter_directories(",".join(self["controller.quorum.voters"]))

    @property
    def metadata_log_dir(self) -> str:
        return self["metadata.log.dir"] or self.log_dirs[0]

    @property
    def log_retention_ms(self) -> int:
        """log.retention.ms, else log.retention.minutes, else log.retention.hours, in ms."""
        return self["log.retention.ms"]


# A controller's `listeners` entry, NAME://host:port (KRaft mode's own parse: the controller listener only).
_LISTENER = re.compile(r"(?P<protocol>[A-Za-z_]+)://(?P<host>\[[^\]]*\]|[^:/\[\]]*):(?P<port>[0-9]+)")
_VOTER = re.compile(r"(?P<id>[0-9]+)@(?P<host>\[[^\]]*\]|[^:@\[\]]+):(?P<port>[0-9]+)"
                    r"(?::(?P<directory>[A-Za-z0-9_-]{22}))?")


def parse_quorum_voters(raw: str) -> dict[int, tuple[str, int]]:
    """controller.quorum.voters (ID@HOST:PORT,...) as node id -> (host, port); ConfigError naming the key."""
    voters: dict[int, tuple[str, int]] = {}
    for item in SERVER_CONFIGS["controller.quorum.voters"].coerce(raw):
        m = _VOTER.fullmatch(item)
        if not m or int(m["port"]) > _PORT.max:
            raise _invalid("controller.quorum.voters", raw,
                           f"{item!r} is not of the form ID@HOST:PORT (or ID@HOST:PORT:DIRECTORY_ID)")
        node = int(m["id"])
        if node in voters:
            raise _invalid("controller.quorum.voters", raw, f"voter {node} is named twice")
        voters[node] = (m["host"].strip("[]"), int(m["port"]))
    return voters


def parse_voter_directories(raw: str) -> dict[int, str] | None:
    """The directory ids controller.quorum.voters gives (ID@HOST:PORT:DIRECTORY_ID, KIP-853): voter -> id, or None
    when it gives none (voters known by id alone, as Kafka 3.7); ConfigError when only some voters have one."""
    parse_quorum_voters(raw)
    found = {int(m["id"]): m["directory"] for item in SERVER_CONFIGS["controller.quorum.voters"].coerce(raw)
             for m in [_VOTER.fullmatch(item)]}
    if all(d is None for d in found.values()):
        return None
    if any(d is None for d in found.values()):
        raise _invalid("controller.quorum.voters", raw, "either every voter has a directory id or none has")
    return found


def kraft_listeners(originals: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """KRaft mode's `listeners` (NAME://host:port: PLAINTEXT and the controller.listener.names) by name."""
    names = SERVER_CONFIGS["controller.listener.names"].coerce(originals.get("controller.listener.names", ""))
    if not names:
        raise ConfigError("controller.listener.names must name the listener the controller serves, e.g. CONTROLLER.")
    found: dict[str, tuple[str, str]] = {}
    raw = originals.get("listeners", "")
    for item in SERVER_CONFIGS["listeners"].coerce(raw):
        m = _LISTENER.fullmatch(item)
        if not m or int(m["port"]) > _PORT.max:
            raise _invalid("listeners", raw, f"{item!r} is not of the form NAME://host:port")
        name = m["protocol"].upper()
        if name != "PLAINTEXT" and name not in names:
            raise _invalid("listeners", raw, f"listener {name} has no security protocol: only PLAINTEXT and the "
                           f"controller.listener.names ({', '.join(names)}, plaintext) are supported")
        found[name] = (m["host"].strip("[]"), m["port"])
    return found


#: Where KRaft mode's defaults differ from the table's (which are 0.8.2's): Kafka 3.7's. The one home of
#: each, read by the quorum controller (its elections) and by a KRaft broker (its topics' log configs) alike.
KRAFT_DEFAULTS: dict[str, str] = {
    # false since Kafka 0.11 (KIP-106); 0.8.2's true stays ZooKeeper mode's
    "unclean.leader.election.enable": "false",
    # A KRaft broker (Kafka 2.8+) truncates by leader epoch (KIP-101, Kafka 0.11), never to its high watermark
    "replication.truncation": "leader-epoch",
}


def _kraft_given(originals: dict[str, str]) -> tuple[dict[str, str], list[str]] | None:
    """KRaft mode's keys checked as Kafka 3.7 checks them, and the 0.8 keys the rest of the code reads derived
    from them (broker.id from node.id, host.name and port from the controller listener); None in ZooKeeper mode.
    """
    roles = SERVER_CONFIGS["process.roles"].coerce(originals.get("process.roles", ""))
    if not roles:
        return None
    if "zookeeper.connect" in originals:
        raise ConfigError("zookeeper.connect must not be set with process.roles: a KRaft node uses no ZooKeeper.")
    if "node.id" not in originals:
        raise ConfigError('Missing required configuration "node.id" which has no default value.')
    node_id = SERVER_CONFIGS["node.id"].coerce(originals["node.id"])
    if node_id < 0:
        raise _invalid("node.id", node_id, "must be at least 0")
    if "broker.id" in originals and originals["broker.id"].strip() != str(node_id):
        raise ConfigError(f"broker.id ({originals['broker.id']}) must equal node.id ({node_id}) in KRaft mode.")
    voters = parse_quorum_voters(originals.get("controller.quorum.voters", ""))
    if not voters:
        raise ConfigError("controller.quorum.voters must name the metadata quorum's voters (ID@HOST:PORT,...).")
    broker, controller = "broker" in roles, "controller" in roles
    if broker and not controller and node_id in voters:
        raise ConfigError(f"node.id {node_id} is one of controller.quorum.voters: a broker's node.id must differ "
                          f"from every controller's.")
    if controller and node_id not in voters:
        raise ConfigError(f"controller.quorum.voters must include this controller's node.id {node_id} "
                          f"(process.roles=controller makes it a voter).")
    found = kraft_listeners(originals)
    names = SERVER_CONFIGS["controller.listener.names"].coerce(originals.get("controller.listener.names", ""))
    # A broker serves clients on its PLAINTEXT listener and reaches the controllers at their voter addresses; a
    # controller serves the quorum on the first controller listener; a combined node both.
    for served in (["PLAINTEXT"] if broker else []) + ([names[0]] if controller else []):
        if served not in found:
            example = "PLAINTEXT://localhost:9092" if served == "PLAINTEXT" else f"{names[0]}://localhost:9093"
            what = "a PLAINTEXT listener for clients" if served == "PLAINTEXT" else \
                f"the controller listener {names[0]} named by controller.listener.names"
            raise ConfigError(f"listeners must include {what} (e.g. {example}).")
    given = {**KRAFT_DEFAULTS, **{name: value for name, value in originals.items() if name != "listeners"}}
    given["host.name"], given["port"] = found["PLAINTEXT" if broker else names[0]]
    given["broker.id"] = str(node_id)
    given["zookeeper.connect"] = ""
    return given, []


def _apply_listener_aliases(originals: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The inter-broker listener (and its advertised form) stand for the 0.8 host and port keys, which the rest
    of the broker reads; as in 0.9, the listener wins over host.name and port."""
    given, warnings = dict(originals), []
    protocol_map = _listener_part("listener.security.protocol.map", originals, listeners.parse_protocol_map)
    if "listeners" not in originals and "advertised.listeners" not in originals:
        return given, warnings
    bound = _listener_part("listeners", originals, lambda entries: listeners.parse_endpoints(entries, protocol_map))
    advertised = _listener_part("advertised.listeners", originals,
                                lambda entries: listeners.parse_endpoints(entries, protocol_map))
    aliases = []
    if bound:
        inter = _inter_broker(originals, bound)
        aliases.append(("listeners", (("host.name", inter.host), ("port", str(inter.port)))))
        advertised_inter = next((e for e in advertised if e.listener_name == inter.listener_name), None)
    else:  # advertised.listeners alone (0.9's alias): its one listener is the inter-broker one
        if len(advertised) != 1:
            raise _invalid("advertised.listeners", originals["advertised.listeners"],
                           "without listeners, exactly one advertised listener")
        advertised_inter = advertised[0]
        if advertised_inter.security_protocol is not listeners.SecurityProtocol.PLAINTEXT:
            raise _invalid("advertised.listeners", originals["advertised.listeners"],
                           "without listeners, the one advertised listener is the inter-broker one and must be "
                           "PLAINTEXT")
    if advertised_inter is not None:
        aliases.append(("advertised.listeners", (("advertised.host.name", advertised_inter.host),
                                                 ("advertised.port", str(advertised_inter.port)))))
    for listener_key, pairs in aliases:
        for name, value in pairs:
            if name in originals and originals[name] != value:
                warnings.append(f"Property {name} is ignored because {listener_key} is set")
            given[name] = value
    return given, warnings


def _listener_part(name: str, originals: Mapping[str, str], parse: Callable[[tuple[str, ...]], Any]) -> Any:
    raw = originals.get(name, "")
    try:
        return parse(SERVER_CONFIGS[name].coerce(raw))
    except ValueError as e:
        if isinstance(e, ConfigError):
            raise
        raise _invalid(name, raw, str(e)) from None


def _inter_broker_name(values: Mapping[str, str]) -> str:
    """inter.broker.listener.name, else the listener security.inter.broker.protocol names (Kafka: not both)."""
    name, protocol = values.get("inter.broker.listener.name", ""), values.get("security.inter.broker.protocol", "")
    if name and protocol:
        raise _invalid("security.inter.broker.protocol", protocol,
                       "only one of inter.broker.listener.name and security.inter.broker.protocol may be set")
    if protocol:
        try:
            return listeners.SecurityProtocol.parse(protocol).value
        except ValueError as e:
            raise _invalid("security.inter.broker.protocol", protocol, str(e)) from None
    return name


def _inter_broker(originals: Mapping[str, str], bound: list[listeners.EndPoint]) -> listeners.EndPoint:
    name = _inter_broker_name(originals)
    key = "security.inter.broker.protocol" if originals.get("security.inter.broker.protocol") else \
        "inter.broker.listener.name"
    try:
        return listeners.inter_broker_listener(bound, name)
    except ValueError as e:
        raise _invalid(key, name, str(e)) from None


def _check_security(values: Mapping[str, Any]) -> None:
    """What a listener's security protocol needs: a key store for TLS, mechanisms we have for SASL."""
    protocols = {e.security_protocol for e in _endpoints(values)}
    if any(p.uses_tls for p in protocols) and not values["ssl.keystore.location"]:
        raise _invalid("ssl.keystore.location", "", "an SSL or SASL_SSL listener needs the broker's certificate and "
                                                    "key (a PEM file)")
    if any(p.uses_sasl for p in protocols):
        mechanisms = values["sasl.enabled.mechanisms"]
        unknown = [m for m in mechanisms if m not in SASL_MECHANISMS]
        if unknown or not mechanisms:
            raise _invalid("sasl.enabled.mechanisms", ",".join(mechanisms),
                           f"must name some of {', '.join(SASL_MECHANISMS)} (GSSAPI is not built)")
    try:
        parse_super_users(values["super.users"])
    except ValueError as e:
        raise _invalid("super.users", values["super.users"], str(e)) from None
    _check_inter_broker_sasl(values)


def _check_inter_broker_sasl(values: Mapping[str, Any]) -> None:
    """A SASL inter-broker listener: the broker's mechanism is enabled (Kafka's rule) and its credentials given."""
    name = _inter_broker_name(values)
    try:
        inter = listeners.inter_broker_listener(_endpoints(values), name)
    except ValueError:  # a KRaft controller's listeners, checked where they are read
        return
    if not inter.security_protocol.uses_sasl:
        return
    mechanism = values["sasl.mechanism.inter.broker.protocol"].upper()
    if mechanism not in values["sasl.enabled.mechanisms"]:
        raise _invalid("sasl.mechanism.inter.broker.protocol", mechanism,
                       "must be one of sasl.enabled.mechanisms when SASL is used for inter-broker communication")


def _endpoints(values: Mapping[str, Any]) -> list[listeners.EndPoint]:
    protocol_map = listeners.parse_protocol_map(values["listener.security.protocol.map"])
    if values["listeners"]:
        return listeners.parse_endpoints(values["listeners"], protocol_map)
    return [listeners.EndPoint("PLAINTEXT", values["host.name"], values["port"],
                               listeners.SecurityProtocol.PLAINTEXT)]


def _check_relations(values: Mapping[str, Any]) -> None:
    for name, bound, other in _RELATIONS:
        value, limit = values[name], values[other]
        if (value > limit) if bound == "at most" else (value < limit):
            raise _invalid(name, value, f"must be {bound} {other} ({limit})")
    dedupe, threads = values["log.cleaner.dedupe.buffer.size"], values["log.cleaner.threads"]
    if threads and dedupe // threads <= _MIN_DEDUPE_BYTES_PER_CLEANER:
        raise _invalid("log.cleaner.dedupe.buffer.size", dedupe,
                       f"must be more than 1 MiB per cleaner thread (log.cleaner.threads is {threads})")
