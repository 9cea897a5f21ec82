"""The Admin API's checks, as Kafka 2.x's AdminManager and AdminZkClient make them: pure functions of a request
and what the cluster holds (live brokers, existing topics, configs), each raising ApiError with Kafka's error
code and a message that says what is wrong. server/admin_manager.py reads ZooKeeper, calls these, then writes
through zkbroker/admin.py.

The same rules serve the quorum controller (controller/quorum/), which is why they live below both. Where the
two modes differ is only where a topic's assignment is kept, hence how large it may be: an `AssignmentBound`.

Beyond Kafka: an assignment whose `/brokers/topics/<t>` JSON would not fit in a znode is refused up front with
INVALID_REQUEST naming the bound (Kafka let ZooKeeper fail the write), and before any assignment is built, so a
request for two billion partitions costs nothing (`ZNODE_BOUND`; the metadata log's `RECORDS_BOUND` caps the
partition records one request may write); a replica list that is empty is refused as well.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zkbroker import admin
from zkbroker.config import TOPIC_CONFIGS, ConfigError, ConfigType, validate_topic_config
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.schemas import describe_configs as dc
from zkbroker.protocol.schemas.create_topics import NO_NUM_PARTITIONS, NO_REPLICATION_FACTOR
from zkbroker.protocol.schemas.incremental_alter_configs import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT
from zkbroker.zk.znodes import TopicAssignment

#: ZooKeeper refuses a request larger than jute.maxbuffer (1 MiB less one byte by default); a create or set
#: carries the path and some framing besides the data, for which we keep 1 KiB.
ZNODE_MAX_BYTES = 0xFFFFF
_FRAMING_BYTES = 1024
#: The smallest a partition's entry can be in `/brokers/topics/<t>`: `"0":[1],`.
_MIN_ENTRY_BYTES = 8

Assignment = dict[int, tuple[int, ...]]


class ApiError(Exception):
    """A request Kafka refuses: the error code for the response and the message beside it."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or ErrorCode(code).name)
        self.code = code
        self.message = message


# ---- topics ---------------------------------------------------------------------------------------------------

def check_topic_name(topic: str) -> None:
    """Kafka 2.x's Topic.validate: INVALID_TOPIC_EXCEPTION (17)."""
    try:
        admin.validate_topic_name(topic, admin.MAX_TOPIC_LENGTH_2X)
    except admin.AdminError as e:
        raise ApiError(ErrorCode.INVALID_TOPIC, _sentence(str(e))) from None


def check_not_existing(topic: str, exists: bool, marked_for_deletion: bool, all_topics: Sequence[str]) -> None:
    if marked_for_deletion:
        raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' is marked for deletion.")
    if exists:
        raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
    collisions = admin.colliding_topics(topic, list(all_topics))
    if collisions:
        raise ApiError(ErrorCode.INVALID_TOPIC,
                       f"Topic '{topic}' collides with existing topics: {', '.join(collisions)}")


@dataclass(frozen=True)
class TopicToCreate:
    """One topic of a CreateTopics request, as decoded."""

    name: str
    num_partitions: int
    replication_factor: int
    assignments: Mapping[int, Sequence[int]]  # partition -> brokers; empty: assign from the counts
    configs: Mapping[str, str | None]


def topic_to_create(entry: Any) -> TopicToCreate:
    """From a decoded CreateTopics topic; a partition listed twice is INVALID_REQUEST (Kafka's map took the last)."""
    assignments: dict[int, list[int]] = {}
    for a in entry.assignments:
        if a.partition_index in assignments:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"Partition {a.partition_index} is assigned twice in the request for topic {entry.name}.")
        assignments[a.partition_index] = list(a.broker_ids)
    return TopicToCreate(entry.name, entry.num_partitions, entry.replication_factor, assignments,
                         {c.name: c.value for c in entry.configs})


@dataclass(frozen=True)
class AssignmentBound:
    """How large one request's assignment may be where the mode keeps it: `count` checks a partition count
    before an assignment is built (so a huge count costs nothing), `assignment` the assignment built."""

    count: Callable[[str, int], None]
    assignment: Callable[[str, Assignment], None]


def creation_assignment(topic: TopicToCreate, live_brokers: Sequence[int], default_partitions: int,
                        default_replication_factor: int, rng: random.Random | None = None,
                        bound: AssignmentBound | None = None) -> Assignment:
    """Kafka's checks of a topic to create (KafkaApis, AdminManager.createTopics, AdminZkClient.validateTopicCreate)
    and the assignment it gets: the one given, or Kafka's spread over the live brokers. Existence is checked
    by the caller (check_not_existing); the configs here. `bound`: ZooKeeper's znode unless given."""
    bound = bound or ZNODE_BOUND
    nulls = sorted(name for name, value in topic.configs.items() if value is None)
    if nulls:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for topic configs : {','.join(nulls)}")
    if topic.assignments and (topic.num_partitions != NO_NUM_PARTITIONS
                              or topic.replication_factor != NO_REPLICATION_FACTOR):
        raise ApiError(ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor and replicasAssignments "
                                                  "were set. Both cannot be used at the same time.")
    if topic.assignments:
        assignment = {p: tuple(brokers) for p, brokers in topic.assignments.items()}
        bound.assignment(topic.name, assignment)
        check_assignment(assignment)
    else:
        partitions = default_partitions if topic.num_partitions == NO_NUM_PARTITIONS else topic.num_partitions
        replication = (default_replication_factor if topic.replication_factor == NO_REPLICATION_FACTOR
                       else topic.replication_factor)
        check_counts(partitions, replication, len(live_brokers))
        bound.count(topic.name, partitions)
        assignment = admin.assign_replicas_to_brokers(sorted(live_brokers), partitions, replication, rng=rng)
        bound.assignment(topic.name, assignment)
    check_topic_configs(topic.configs, ErrorCode.INVALID_CONFIG)
    return assignment


def check_counts(partitions: int, replication_factor: int, live_brokers: int) -> None:
    if partitions <= 0:
        raise ApiError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > live_brokers:
        raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                       f"Replication factor: {replication_factor} larger than available brokers: {live_brokers}.")


def check_assignment(assignment: Assignment) -> None:
    """AdminZkClient.validateTopicCreate's checks of an explicit assignment: INVALID_REPLICA_ASSIGNMENT (39)."""
    for partition, replicas in sorted(assignment.items()):
        if not replicas:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Partition {partition} has no replicas.")
    if len({len(r) for r in assignment.values()}) != 1:
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas")
    for partition, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"Duplicate replica assignment found: partition {partition} lists "
                           f"{','.join(map(str, replicas))}")
    if sorted(assignment) != list(range(len(assignment))):
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "partitions should be a consecutive 0-based integer sequence")


def check_znode_size(topic: str, assignment: Assignment) -> None:
    size = len(TopicAssignment(assignment).encode())
    if size + len(topic) + _FRAMING_BYTES > ZNODE_MAX_BYTES:
        raise _too_large(topic, size, at_least=False)


def _check_znode_count(topic: str, partitions: int) -> None:
    if partitions * _MIN_ENTRY_BYTES > ZNODE_MAX_BYTES:
        raise _too_large(topic, partitions * _MIN_ENTRY_BYTES, at_least=True)


def _too_large(topic: str, size: int, at_least: bool) -> ApiError:
    return ApiError(ErrorCode.INVALID_REQUEST,
                    f"The assignment of topic {topic} would take {'at least ' if at_least else ''}{size} bytes in "
                    f"/brokers/topics/{topic}; ZooKeeper refuses a znode over {ZNODE_MAX_BYTES} bytes "
                    f"(jute.maxbuffer) less {_FRAMING_BYTES} for the request's framing.")


#: ZooKeeper mode: the whole assignment is one `/brokers/topics/<t>` znode.
ZNODE_BOUND = AssignmentBound(_check_znode_count, check_znode_size)

#: KRaft mode: one PartitionRecord per partition, all in one batch of the metadata log, appended in one turn of
#: the controller's queue: Kafka 3.7's controller caps one request's records at 10,000 (a larger request would
#: hold its queue, and the heartbeats behind it, for seconds); CreateTopics checks the request's total as well.
MAX_PARTITIONS_PER_REQUEST = 10_000


def _check_record_count(topic: str, partitions: int) -> None:
    if partitions > MAX_PARTITIONS_PER_REQUEST:
        raise ApiError(ErrorCode.INVALID_REQUEST,
                       f"Topic {topic} would get {partitions} partition records in one request; the controller "
                       f"writes at most {MAX_PARTITIONS_PER_REQUEST} per request.")


RECORDS_BOUND = AssignmentBound(_check_record_count, lambda topic, assignment: _check_record_count(
    topic, len(assignment)))


def check_topic_configs(configs: Mapping[str, str | None], bad_value_code: int) -> dict[str, str]:
    """LogConfig.validate: an unknown key is INVALID_CONFIG; a bad value `bad_value_code` (CreateTopics answers
    INVALID_CONFIG, AlterConfigs INVALID_REQUEST, as Kafka does). Returns the configs as strings."""
    unknown = sorted(name for name in configs if name not in TOPIC_CONFIGS)
    if unknown:
        raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {', '.join(unknown)}")
    props = {name: value for name, value in configs.items() if value is not None}
    try:
        validate_topic_config(props)
    except ConfigError as e:
        raise ApiError(bad_value_code, str(e)) from None
    return props


def new_partitions_assignment(topic: str, existing: Assignment, count: int,
                              given: Sequence[Sequence[int]] | None, live_brokers: Sequence[int],
                              registered_brokers: Sequence[int], rng: random.Random | None = None,
                              bound: AssignmentBound | None = None) -> Assignment:
    """CreatePartitions (AdminManager.createPartitions, AdminZkClient.createNewPartitionsAssignment): the
    assignment of the partitions added to reach `count`. `bound`: ZooKeeper's znode unless given."""
    bound = bound or ZNODE_BOUND
    old = len(existing)
    increment = count - old
    if increment < 0:
        raise ApiError(ErrorCode.INVALID_PARTITIONS,
                       f"Topic currently has {old} partitions, which is higher than the requested {count}.")
    if increment == 0:
        raise ApiError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
    replication = len(existing[0]) if 0 in existing else len(next(iter(existing.values())))
    if given is not None:
        unknown = sorted({b for replicas in given for b in replicas} - set(registered_brokers))
        if unknown:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
        if len(given) != increment:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"Increasing the number of partitions by {increment} but {len(given)} assignments "
                           "provided.")
        added = {old + i: tuple(replicas) for i, replicas in enumerate(given)}
        for partition, replicas in added.items():
            if not replicas:
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Cannot have replication factor of 0 for partition id {partition}.")
            if len(set(replicas)) != len(replicas):
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Duplicate brokers not allowed in replica assignment: "
                               f"{', '.join(map(str, replicas))} for partition id {partition}.")
        wrong = {p: len(r) for p, r in added.items() if len(r) != replication}
        if wrong:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"Inconsistent replication factor between partitions, partition 0 has {replication} while "
                           f"partitions {sorted(wrong)} have replication factors {[wrong[p] for p in sorted(wrong)]}, "
                           "respectively.")
    else:
        if replication > len(live_brokers):
            raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                           f"Replication factor: {replication} larger than available brokers: {len(live_brokers)}.")
        bound.count(topic, increment)
        brokers = sorted(live_brokers)
        head = existing[min(existing)][0]
        # Kafka 2.x starts at the first broker whose id is at least partition 0's preferred replica
        start = next((i for i, b in enumerate(brokers) if b >= head), 0)
        added = admin.assign_replicas_to_brokers(brokers, increment, replication, fixed_start_index=start,
                                                 start_partition_id=old, rng=rng)
    bound.assignment(topic, {**existing, **added})
    return added


# ---- configs --------------------------------------------------------------------------------------------------

def broker_resource_id(name: str, own_id: int) -> int | None:
    """A broker config resource's name: "" for the cluster default (None), else this broker's id."""
    if not name:
        return None
    try:
        broker = int(name)
    except ValueError:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if broker != own_id:
        raise ApiError(ErrorCode.INVALID_REQUEST,
                       f"Unexpected broker id, expected {own_id} or empty string, but received {name}")
    return broker


def check_no_nulls(entries: Sequence[tuple[str, str | None]]) -> None:
    nulls = [name for name, value in entries if value is None]
    if nulls:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")


def apply_incremental(current: Mapping[str, str], ops: Sequence[Any], known: Mapping[str, Any]) -> dict[str, str]:
    """IncrementalAlterConfigs' operations on the present config (AdminManager.prepareIncrementalConfigs);
    `known` is the table of keys (topic or broker) the entity takes."""
    names = [op.name for op in ops]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys : {','.join(duplicates)}")
    nulls = [f"{_OP_NAMES.get(op.config_operation, op.config_operation)}:{op.name}" for op in ops
             if op.value is None and op.config_operation != OP_DELETE]
    if nulls:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")
    props = dict(current)
    for op in ops:
        if op.config_operation == OP_SET:
            props[op.name] = op.value
        elif op.config_operation == OP_DELETE:
            props.pop(op.name, None)
        elif op.config_operation in (OP_APPEND, OP_SUBTRACT):
            key = known.get(op.name)
            if key is None:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {op.name}")
            if key.type != ConfigType.LIST:
                verb = "append" if op.config_operation == OP_APPEND else "subtract"
                raise ApiError(ErrorCode.INVALID_REQUEST,
                               f"Config value {verb} is not allowed for config key: {op.name}")
            present = props.get(op.name)
            if present is None:  # not set: the key's default, if it has one
                present = format_value(key.default, key.type) or ""
            old = [v for v in present.split(",") if v]
            values = [v for v in op.value.split(",") if v]
            new = old + values if op.config_operation == OP_APPEND else [v for v in old if v not in values]
            props[op.name] = ",".join(new)
        else:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op.config_operation} for {op.name}")
    return props


_OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

_CONFIG_TYPES = {ConfigType.BOOLEAN: dc.TYPE_BOOLEAN, ConfigType.STRING: dc.TYPE_STRING, ConfigType.INT: dc.TYPE_INT,
                 ConfigType.SHORT: dc.TYPE_SHORT, ConfigType.LONG: dc.TYPE_LONG, ConfigType.DOUBLE: dc.TYPE_DOUBLE,
                 ConfigType.LIST: dc.TYPE_LIST, ConfigType.MAP: dc.TYPE_STRING}


def config_type_id(ctype: ConfigType) -> int:
    return _CONFIG_TYPES.get(ctype, dc.TYPE_UNKNOWN)


def format_value(value: Any, ctype: ConfigType) -> str | None:
    """A typed value as Kafka's ConfigDef.convertToString writes it."""
    if value is None:
        return None
    if ctype == ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype == ConfigType.LIST:
        return ",".join(value)
    if ctype == ConfigType.MAP:
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if ctype == ConfigType.DOUBLE:
        text = repr(float(value))
        return text.upper().replace("E+", "E") if "e" in text else text  # Java's Double.toString: 1.0E308
    return str(value)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
