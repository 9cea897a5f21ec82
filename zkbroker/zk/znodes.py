"""The exact JSON of every znode Kafka 0.8.2 writes, one codec per znode.

Kafka's `Json.encode` writes compact JSON (no spaces) and `timestamp` as a *string* of epoch ms; its parser
maps every number to a 32-bit Int. We write the keys in the order the 0.8.2 docs and tools show them, so a
`get` in zkCli.sh prints what a 0.8.2 cluster printed. Decoders are tolerant of key order and extra keys
(later Kafka versions add some) but reject anything that a 0.8.2 broker could not have parsed.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class ZnodeFormatError(ValueError):
    """A znode's data is not in the format Kafka 0.8.2 writes (whose fault: whoever wrote the node)."""


def now_ms() -> str:
    """Kafka's znode timestamp: epoch milliseconds as a decimal string."""
    return str(int(time.time() * 1000))


def _dump(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _load(data: bytes | None, what: str) -> object:
    if not data:
        raise ZnodeFormatError(f"{what} is empty")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ZnodeFormatError(f"{what} is not JSON: {data[:80]!r}") from e


def _obj(data: bytes | None, what: str) -> dict:
    value = _load(data, what)
    if not isinstance(value, dict):
        raise ZnodeFormatError(f"{what} is not a JSON object: {data[:80]!r}")
    return value


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not INT32_MIN <= value <= INT32_MAX:
        raise ZnodeFormatError(f"{what} must be a 32-bit integer, got {value!r}")
    return value


def _int_list(value: object, what: str) -> list[int]:
    if not isinstance(value, list):
        raise ZnodeFormatError(f"{what} must be a list of integers, got {value!r}")
    return [_int(v, what) for v in value]


def _objects(value: object, what: str) -> list[dict]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ZnodeFormatError(f"{what} must be a list of objects, got {value!r}")
    return value


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ZnodeFormatError(f"{what} must be a string, got {value!r}")
    return value


def _field(obj: dict, key: str, what: str) -> object:
    if key not in obj:
        raise ZnodeFormatError(f"{what} has no {key!r}")
    return obj[key]


@dataclass(frozen=True)
class BrokerRegistration:
    """Ephemeral `/brokers/ids/<id>` (ZkUtils.registerBrokerInZk).

    With listeners beyond one PLAINTEXT listener it is Kafka 2.x's version 4: `endpoints`
    (`["PLAINTEXT://h:9092","SASL_SSL://h:9093"]`) and `listener_security_protocol_map` beside `host`/`port`,
    which stay the inter-broker listener's (other brokers and older tools read those).
    """

    broker_id: int
    host: str
    port: int
    jmx_port: int = -1
    timestamp: str = field(default_factory=now_ms)
    # The registration znode's creation zxid, as read (not part of its JSON): KIP-380's broker epoch, which
    # tells two registrations of one broker apart. -1 when not read from ZooKeeper.
    epoch: int = field(default=-1, compare=False)
    # (listener name, host, port, security protocol) per listener; empty: only host:port, as PLAINTEXT
    endpoints: tuple[tuple[str, str, int, str], ...] = ()

    def encode(self) -> bytes:
        if not self.endpoints:
            return _dump({"version": 1, "host": self.host, "port": self.port,
                          "jmx_port": self.jmx_port, "timestamp": self.timestamp})
        return _dump({"version": 4, "host": self.host, "port": self.port, "jmx_port": self.jmx_port,
                      "timestamp": self.timestamp,
                      "endpoints": [f"{name}://{_bracket(host)}:{port}" for name, host, port, _ in self.endpoints],
                      "listener_security_protocol_map": {name: protocol for name, _, _, protocol in self.endpoints}})

    @classmethod
    def decode(cls, broker_id: int, data: bytes | None) -> BrokerRegistration:
        what = f"/brokers/ids/{broker_id}"
        obj = _obj(data, what)
        endpoints = []
        protocols = obj.get("listener_security_protocol_map") or {}
        if not isinstance(protocols, dict):
            raise ZnodeFormatError(f"{what} listener_security_protocol_map is not an object")
        for text in obj.get("endpoints") or ():
            name, sep, rest = _str(text, what + " endpoint").partition("://")
            host, _, port = rest.rpartition(":")
            if not sep or not port.isdigit():
                raise ZnodeFormatError(f"{what} endpoint {text!r} is not of the form NAME://host:port")
            endpoints.append((name, host.strip("[]"), int(port), str(protocols.get(name, name))))
        host, port = obj.get("host"), obj.get("port", -1)
        if host is None and endpoints:  # Kafka 2.x writes no host when there is no PLAINTEXT listener
            host, port = endpoints[0][1], endpoints[0][2]
        return cls(broker_id, _str(host, what + " host"), _int(port, what + " port"),
                   _int(obj.get("jmx_port", -1), what + " jmx_port"), str(obj.get("timestamp", "")),
                   endpoints=tuple(endpoints))

    def endpoint(self, listener_name: str | None) -> tuple[str, int] | None:
        """Where clients of a listener reach this broker; without listener names (a 0.8 registration, or a
        connection not made through a listener) host:port. None: the broker has no such listener."""
        if listener_name is None or not self.endpoints:
            return self.host, self.port
        for name, host, port, _ in self.endpoints:
            if name == listener_name:
                return host, port
        return None

    def same_endpoint(self, other: BrokerRegistration) -> bool:
        """Kafka's test for "I wrote this conflicted ephemeral node": everything but the timestamp."""
        return (self.broker_id, self.host, self.port, self.jmx_port, self.endpoints) == (
            other.broker_id, other.host, other.port, other.jmx_port, other.endpoints)


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True)
class ControllerRegistration:
    """Ephemeral `/controller`, written by the election winner (ZookeeperLeaderElector)."""

    broker_id: int
    timestamp: str = field(default_factory=now_ms)

    def encode(self) -> bytes:
        return _dump({"version": 1, "brokerid": self.broker_id, "timestamp": self.timestamp})

    @classmethod
    def decode(cls, data: bytes | None) -> ControllerRegistration:
        value = _load(data, "/controller")
        if isinstance(value, int) and not isinstance(value, bool):
            # Kafka 0.8.0 wrote a plain integer; KafkaController.parseControllerId still accepts it.
            return cls(_int(value, "/controller"), "")
        if not isinstance(value, dict):
            raise ZnodeFormatError(f"/controller is neither JSON nor an integer: {data[:80]!r}")
        return cls(_int(_field(value, "brokerid", "/controller"), "/controller brokerid"),
                   str(value.get("timestamp", "")))


def encode_controller_epoch(epoch: int) -> bytes:
    """`/controller_epoch` holds the epoch as a decimal string."""
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return _int(int((data or b"").decode()), "/controller_epoch")
    except (UnicodeDecodeError, ValueError) as e:
        raise ZnodeFormatError(f"/controller_epoch is not a decimal integer: {data!r}") from e


@dataclass(frozen=True)
class LeaderIsrState:
    """`/brokers/topics/<t>/partitions/<p>/state` (ZkUtils.leaderAndIsrZkData). leader -1 = no leader."""

    leader: int
    leader_epoch: int
    controller_epoch: int
    isr: tuple[int, ...]

    def encode(self) -> bytes:
        # The bytes _dump writes for these keys (compact JSON of plain ints), without going through json: the
        # controller encodes one per partition it decides about, thousands at a time.
        return b'{"version":1,"leader":%d,"leader_epoch":%d,"controller_epoch":%d,"isr":[%s]}' % (
            self.leader, self.leader_epoch, self.controller_epoch, b",".join(b"%d" % r for r in self.isr))

    @classmethod
    def decode(cls, data: bytes | None, what: str = "partition state") -> LeaderIsrState:
        obj = _obj(data, what)
        try:  # the common case, checked cheaply: every field present, a 32-bit int (and not a bool)
            leader, leader_epoch, controller_epoch, isr = (obj["leader"], obj["leader_epoch"],
                                                           obj["controller_epoch"], obj["isr"])
            if (type(leader) is int and type(leader_epoch) is int and type(controller_epoch) is int
                    and type(isr) is list and all(type(r) is int for r in isr)
                    and all(INT32_MIN <= v <= INT32_MAX for v in (leader, leader_epoch, controller_epoch, *isr))):
                return cls(leader, leader_epoch, controller_epoch, tuple(isr))
        except KeyError:
            pass
        return cls(_int(_field(obj, "leader", what), what + " leader"),
                   _int(_field(obj, "leader_epoch", what), what + " leader_epoch"),
                   _int(_field(obj, "controller_epoch", what), what + " controller_epoch"),
                   tuple(_int_list(_field(obj, "isr", what), what + " isr")))


@dataclass(frozen=True)
class TopicAssignment:
    """`/brokers/topics/<t>`: partition id (a string key in JSON) -> replica list, head = preferred replica.

    While a reassignment made through the Admin API runs (KIP-455), Kafka 2.4's version 2 adds, per partition
    being moved, the replicas it is `adding_replicas` and `removing_replicas` (the replica list holds both);
    otherwise the node keeps 0.8.2's version 1, byte for byte."""

    partitions: dict[int, tuple[int, ...]]
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def encode(self) -> bytes:
        ordered = {str(p): list(self.partitions[p]) for p in sorted(self.partitions)}
        if not self.adding and not self.removing:
            return _dump({"version": 1, "partitions": ordered})
        return _dump({"version": 2, "partitions": ordered,
                      "adding_replicas": {str(p): list(r) for p, r in sorted(self.adding.items())},
                      "removing_replicas": {str(p): list(r) for p, r in sorted(self.removing.items())}})

    @classmethod
    def decode(cls, data: bytes | None, what: str = "topic assignment") -> TopicAssignment:
        obj = _obj(data, what)
        parts = _field(obj, "partitions", what)
        if not isinstance(parts, dict):
            raise ZnodeFormatError(f"{what} partitions must be an object, got {parts!r}")
        out: dict[int, tuple[int, ...]] = {}
        for key, replicas in parts.items():
            try:
                partition = int(key)
            except ValueError as e:
                raise ZnodeFormatError(f"{what} has a non-numeric partition id {key!r}") from e
            out[partition] = tuple(_int_list(replicas, f"{what} partition {key}"))
        moving = []
        for name in ("adding_replicas", "removing_replicas"):
            raw = obj.get(name) or {}
            if not isinstance(raw, dict):
                raise ZnodeFormatError(f"{what} {name} must be an object, got {raw!r}")
            try:
                moving.append({int(k): tuple(_int_list(v, f"{what} {name} {k}")) for k, v in raw.items() if v})
            except ValueError as e:
                raise ZnodeFormatError(f"{what} {name} has a non-numeric partition id") from e
        return cls(out, *moving)


@dataclass(frozen=True)
class EntityConfig:
    """`/config/topics/<t>` (per-topic overrides, AdminUtils.writeTopicConfig) and, from Kafka 1.1 on,
    `/config/brokers/<id>` and `/config/brokers/<default>` (dynamic broker configs), and `/config/users/<u>` (SCRAM
    credentials, quotas): values as strings, `{}` = none."""

    config: dict[str, str]

    def encode(self) -> bytes:
        return _dump({"version": 1, "config": {k: str(v) for k, v in self.config.items()}})

    @classmethod
    def decode(cls, data: bytes | None, what: str = "entity config") -> EntityConfig:
        obj = _obj(data, what)
        config = obj.get("config", {})
        if not isinstance(config, dict):
            raise ZnodeFormatError(f"{what} config must be an object, got {config!r}")
        return cls({str(k): str(v) for k, v in config.items()})


#: The entity types of `/config/<type>/<name>` (Kafka's ConfigType); `<default>` names every entity of a type.
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers")


@dataclass(frozen=True)
class ConfigChange:
    """What a `/config/changes/config_change_<seq>` notification names: the entity whose config changed.

    Three forms exist and brokers read all of them (Kafka 2.x's DynamicConfigManager reads the last two):
    0.8.2's tools write the topic name as a JSON string; Kafka 0.9-0.10.0 wrote
    `{"version":1,"entity_type":"topics","entity_name":"t"}`; Kafka 0.10.1 on (the Admin API, `configs`)
    writes `{"version":2,"entity_path":"topics/t"}`, where a user's client is `users/<u>/clients/<c>`
    (entity type `users`, name `<u>/clients/<c>`)."""

    entity_type: str
    entity_name: str

    @property
    def entity_path(self) -> str:
        return f"{self.entity_type}/{self.entity_name}"


def encode_config_change(topic: str) -> bytes:
    """0.8.2's notification (AdminUtils.changeTopicConfig): the topic name as a quoted JSON string."""
    return _dump(topic)


def encode_entity_config_change(change: ConfigChange) -> bytes:
    """Kafka 0.10.1+'s notification (AdminUtils.changeEntityConfig): version 2 with the entity path."""
    return _dump({"version": 2, "entity_path": change.entity_path})


def decode_config_change(data: bytes | None) -> ConfigChange:
    what = "config change"
    value = _load(data, what)
    if isinstance(value, str):
        return ConfigChange("topics", value)
    if not isinstance(value, dict):
        raise ZnodeFormatError(f"{what} is neither a topic name nor an object: {data[:80]!r}")
    version = value.get("version")
    if version == 1:
        entity_type = _str(_field(value, "entity_type", what), what + " entity_type")
        name = _str(_field(value, "entity_name", what), what + " entity_name")
        if entity_type not in ("topics", "clients"):  # what version 1 could name
            raise ZnodeFormatError(f"{what} version 1 names entity type {entity_type!r}, not topics or clients")
    elif version == 2:
        path = _str(_field(value, "entity_path", what), what + " entity_path")
        entity_type, slash, name = path.partition("/")
        if not slash or not name:
            raise ZnodeFormatError(f"{what} entity_path {path!r} is not <type>/<name>")
    else:
        raise ZnodeFormatError(f"{what} has unknown version {version!r}")
    if entity_type not in CONFIG_ENTITY_TYPES:
        raise ZnodeFormatError(f"{what} names unknown entity type {entity_type!r}")
    return ConfigChange(entity_type, name)


@dataclass(frozen=True)
class PartitionReplicas:
    topic: str
    partition: int
    replicas: tuple[int, ...]


def encode_reassignment(moves: list[PartitionReplicas]) -> bytes:
    """`/admin/reassign_partitions` (ZkUtils.getPartitionReassignmentZkData)."""
    return _dump({"version": 1, "partitions": [
        {"topic": m.topic, "partition": m.partition, "replicas": list(m.replicas)} for m in moves]})


def decode_reassignment(data: bytes | None) -> list[PartitionReplicas]:
    what = "/admin/reassign_partitions"
    obj = _obj(data, what)
    out = []
    for entry in _objects(_field(obj, "partitions", what), what + " partitions"):
        out.append(PartitionReplicas(_str(_field(entry, "topic", what), what),
                                     _int(_field(entry, "partition", what), what),
                                     tuple(_int_list(_field(entry, "replicas", what), what))))
    return out


def encode_preferred_election(partitions: list[tuple[str, int]]) -> bytes:
    """`/admin/preferred_replica_election` (PreferredReplicaLeaderElectionCommand)."""
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_preferred_election(data: bytes | None) -> list[tuple[str, int]]:
    what = "/admin/preferred_replica_election"
    obj = _obj(data, what)
    return [(_str(_field(e, "topic", what), what), _int(_field(e, "partition", what), what))
            for e in _objects(_field(obj, "partitions", what), what + " partitions")]


@dataclass(frozen=True)
class ConsumerRegistration:
    """Ephemeral `/consumers/<g>/ids/<consumer id>` (ZookeeperConsumerConnector.registerConsumerInZK).

    pattern is `static` (subscription = topic -> stream count), or `white_list` / `black_list`, where the
    subscription's only key is the regex.
    """

    subscription: dict[str, int]
    pattern: str = "static"
    timestamp: str = field(default_factory=now_ms)

    def encode(self) -> bytes:
        return _dump({"version": 1, "subscription": dict(self.subscription), "pattern": self.pattern,
                      "timestamp": self.timestamp})

    @classmethod
    def decode(cls, data: bytes | None, what: str = "consumer registration") -> ConsumerRegistration:
        obj = _obj(data, what)
        sub = _field(obj, "subscription", what)
        if not isinstance(sub, dict):
            raise ZnodeFormatError(f"{what} subscription must be an object, got {sub!r}")
        pattern = _str(_field(obj, "pattern", what), what + " pattern")
        if pattern not in ("static", "white_list", "black_list"):
            raise ZnodeFormatError(f"{what} pattern must be static, white_list or black_list, got {pattern!r}")
        return cls({str(k): _int(v, what) for k, v in sub.items()}, pattern, str(obj.get("timestamp", "")))


def encode_offset(next_offset: int) -> bytes:
    """`/consumers/<g>/offsets/<t>/<p>`: the next offset to consume, as a decimal string."""
    return str(next_offset).encode()


def decode_offset(data: bytes | None) -> int:
    try:
        return int((data or b"").decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise ZnodeFormatError(f"consumer offset is not a decimal integer: {data!r}") from e


@dataclass(frozen=True)
class ProducerIdBlock:
    """`/latest_producer_id_block` (Kafka 0.11's ProducerIdManager): the last block of producer ids a broker
    took, block_start..block_end inclusive, the ids written as strings (JSON numbers lose longs in some readers)."""

    broker_id: int
    block_start: int
    block_end: int

    def encode(self) -> bytes:
        return _dump({"version": 1, "broker": self.broker_id, "block_start": str(self.block_start),
                      "block_end": str(self.block_end)})

    @classmethod
    def decode(cls, data: bytes | None) -> ProducerIdBlock:
        what = "/latest_producer_id_block"
        obj = _obj(data, what)
        try:
            start = int(str(_field(obj, "block_start", what)))
            end = int(str(_field(obj, "block_end", what)))
        except ValueError as e:
            raise ZnodeFormatError(f"{what} block_start and block_end must be integers: {data!r}") from e
        return cls(_int(_field(obj, "broker", what), what + " broker"), start, end)


@dataclass(frozen=True)
class ClusterId:
    """`/cluster/id` (Kafka 0.10.1, KIP-78): the cluster's id, made by the first broker to start, read by the
    others; `version` is a string in Kafka's JSON. Not in 0.8.2; clients need it (librdkafka's describe_cluster
    crashes on a Metadata answer without one)."""

    id: str

    def encode(self) -> bytes:
        return _dump({"version": "1", "id": self.id})

    @classmethod
    def decode(cls, data: bytes | None) -> ClusterId:
        what = "/cluster/id"
        obj = _obj(data, what)
        return cls(_str(_field(obj, "id", what), what + " id"))

    @classmethod
    def generate(cls) -> ClusterId:
        """Kafka's CoreUtils.generateUuidAsBase64: a random UUID's 16 bytes, base64url without padding."""
        return cls(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))
