"""Topic administration in ZooKeeper (Kafka 0.8.2's AdminUtils): replica assignment, topic creation, more
partitions, config overrides and the deletion mark.

Used by the broker's auto-creation, by `zkbroker topics` and by the Admin API (server/admin_manager.py,
which checks a request as Kafka 2.x does and then writes through here). All of it is only writing znodes; the
controller watches them and does the rest:
- creating a topic writes `/config/topics/<t>` first, then `/brokers/topics/<t>` (0.8.2's order, without
  atomicity);
- adding partitions rewrites `/brokers/topics/<t>` with the new partitions appended (conditionally on the
  version read, which 0.8.2 did not do);
- changing overrides rewrites `/config/topics/<t>` and announces it under `/config/changes` (0.8.2's tools
  with the topic name; the Admin API with Kafka 2.x's version 2 notification, which also serves the dynamic
  broker configs in `/config/brokers/<id>` and `/config/brokers/<default>`);
- deleting only creates `/admin/delete_topics/<t>`.
"""

from __future__ import annotations

import random
import re

from kazoo.exceptions import BadVersionError, NodeExistsError

from zkbroker.config import validate_topic_config
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import (
    ConfigChange,
    EntityConfig,
    TopicAssignment,
    ZnodeFormatError,
    encode_config_change,
    encode_entity_config_change,
)

LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_LENGTH = 255
# Kafka 0.10.1 on: 249, so that a partition's directory name (topic, '-', partition, and a '.deleted' suffix
# with a 32-character id while it is deleted) stays within 255 characters.
MAX_TOPIC_LENGTH_2X = 249
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"  # the transaction coordinator's log (DESIGN §18)
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})

Assignment = dict[int, tuple[int, ...]]


class AdminError(ValueError):
    """A topic operation that cannot be done; the message says why (0.8.2's AdminOperationException)."""


class TopicExistsError(AdminError):
    pass


def validate_topic_name(topic: str, max_length: int = MAX_TOPIC_LENGTH) -> None:
    """0.8.2's Topic.validate (Kafka 2.x's with max_length=MAX_TOPIC_LENGTH_2X)."""
    if not topic:
        raise AdminError("topic name is illegal, can't be empty")
    if topic in (".", ".."):
        raise AdminError("topic name cannot be \".\" or \"..\"")
    if len(topic) > max_length:
        raise AdminError(f"topic name is illegal, can't be longer than {max_length} characters "
                         f"(it has {len(topic)})")
    if not LEGAL_TOPIC.fullmatch(topic):
        raise AdminError(f"topic name {topic} is illegal, contains a character other than ASCII alphanumerics, "
                         "'.', '_' and '-'")


def assign_replicas_to_brokers(brokers: list[int], partitions: int, replication_factor: int,
                               fixed_start_index: int = -1, start_partition_id: int = -1,
                               rng: random.Random | None = None) -> Assignment:
    """0.8.2's assignReplicasToBrokers: spread leaders round-robin from a random start, and followers at a
    random shift, so replicas of consecutive partitions land on different brokers.

    `brokers` is used in the order given (creation passes the sorted registered brokers; the reassignment
    tool the user's list). With fixed_start_index=0 and no shift this is the classic rule "partition i on
    broker i mod n, replica j on (i + j) mod n".
    """
    if partitions <= 0:
        raise AdminError("number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise AdminError("replication factor must be larger than 0")
    n = len(brokers)
    if replication_factor > n:
        raise AdminError(f"replication factor: {replication_factor} larger than available brokers: {n}")
    rng = rng or random.Random()
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition_id = max(start_partition_id, 0)
    out: Assignment = {}
    for _ in range(partitions):
        if partition_id > 0 and partition_id % n == 0:
            shift += 1
        first = (partition_id + start) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out[partition_id] = tuple(replicas)
        partition_id += 1
    return out


def parse_replica_assignment(text: str, first_partition: int = 0) -> Assignment:
    """`--replica-assignment 1:2,2:3`: partitions (from `first_partition`) separated by commas, each a
    colon-separated list of broker ids, preferred replica first (TopicCommand.parseReplicaAssignment)."""
    out: Assignment = {}
    for i, entry in enumerate(text.split(",")):
        partition = first_partition + i
        ids = [s.strip() for s in entry.split(":")]
        if ids == [""]:
            raise AdminError(f"Invalid replica assignment \"{text}\": partition {partition} has no replicas")
        for s in ids:
            if not s.isdigit():
                raise AdminError(f"Invalid replica assignment \"{text}\": \"{s}\" is not a broker id")
        replicas = tuple(int(s) for s in ids)
        duplicates = sorted({r for r in replicas if replicas.count(r) > 1})
        if duplicates:
            raise AdminError("Partition replica lists may not contain duplicate entries: "
                             + ",".join(map(str, duplicates)))
        out[partition] = replicas
        if len(replicas) != len(out[first_partition]):
            raise AdminError(f"Partition {partition} has different replication factor: {','.join(ids)}")
    return out


def live_broker_ids(zk: ZkClient) -> list[int]:
    """The registered brokers, sorted (ZkUtils.getSortedBrokerList)."""
    return sorted(int(c) for c in zk.get_children(paths.BROKER_IDS) if c.isdigit())


def all_topics(zk: ZkClient) -> list[str]:
    return zk.get_children(paths.BROKER_TOPICS)


def topic_exists(zk: ZkClient, topic: str) -> bool:
    return zk.get(paths.topic_path(topic))[1] is not None


def read_assignment(zk: ZkClient, topic: str) -> Assignment | None:
    """The topic's partition -> replicas, or None when the topic does not exist."""
    data, stat = zk.get(paths.topic_path(topic))
    if stat is None:
        return None
    try:
        return TopicAssignment.decode(data, paths.topic_path(topic)).partitions
    except ZnodeFormatError as e:
        raise AdminError(str(e)) from e


def fetch_topic_config(zk: ZkClient, topic: str) -> dict[str, str]:
    data, _ = zk.get(paths.topic_config_path(topic))
    if not data:
        return {}
    try:
        return EntityConfig.decode(data, paths.topic_config_path(topic)).config
    except ZnodeFormatError as e:
        raise AdminError(str(e)) from e


def create_topic(zk: ZkClient, topic: str, partitions: int, replication_factor: int,
                 config: dict[str, str] | None = None) -> Assignment:
    """AdminUtils.createTopic: assign replicas over the live brokers, write the config, then the topic."""
    validate_topic_name(topic)
    assignment = assign_replicas_to_brokers(live_broker_ids(zk), partitions, replication_factor)
    write_topic(zk, topic, assignment, config or {})
    return assignment


def write_topic(zk: ZkClient, topic: str, assignment: Assignment, config: dict[str, str]) -> None:
    """createOrUpdateTopicPartitionAssignmentPathInZK for a new topic (also with a manual assignment)."""
    validate_topic_name(topic)
    validate_topic_config(config)
    if len({len(r) for r in assignment.values()}) != 1:
        raise AdminError("All partitions should have the same number of replicas.")
    if any(len(set(r)) != len(r) for r in assignment.values()):
        raise AdminError(f"Duplicate replica assignment found: {_format_assignment(assignment)}")
    if zk.kazoo.exists(paths.topic_path(topic)) is not None:
        raise TopicExistsError(f"Topic \"{topic}\" already exists.")
    zk.create_or_set(paths.topic_config_path(topic), EntityConfig(config).encode())
    try:
        zk.kazoo.create(paths.topic_path(topic), TopicAssignment(assignment).encode(), makepath=True)
    except NodeExistsError:
        raise TopicExistsError(f"Topic \"{topic}\" already exists.") from None


def add_partitions(zk: ZkClient, topic: str, num_partitions: int, replica_assignment: str | None = None) -> Assignment:
    """AdminUtils.addPartitions: only an increase; new partitions assigned as 0.8.2 does (start index = the
    head of partition 0's replicas, a broker id used as an index) or manually. Returns the added partitions.

    A manual assignment lists either the new partitions only or, as 0.8.2 read it, every partition (the
    existing ones are then skipped).
    """
    data, stat = zk.get(paths.topic_path(topic))
    if stat is None:
        raise AdminError(f"The topic {topic} does not exist")
    try:
        existing = TopicAssignment.decode(data, paths.topic_path(topic)).partitions
    except ZnodeFormatError as e:
        raise AdminError(str(e)) from e
    to_add = num_partitions - len(existing)
    if to_add <= 0:
        raise AdminError("The number of partitions for a topic can only be increased")
    replication_factor = len(existing[min(existing)])
    brokers = live_broker_ids(zk)
    if replica_assignment:
        entries = replica_assignment.split(",")
        if len(entries) == num_partitions:
            entries = entries[len(existing):]
        elif len(entries) != to_add:
            raise AdminError(f"The replica assignment lists {len(entries)} partitions; it must list the {to_add} new "
                             f"ones or all {num_partitions}")
        added = parse_replica_assignment(",".join(entries), first_partition=len(existing))
        for replicas in added.values():
            if not set(replicas) <= set(brokers):
                raise AdminError(f"some specified brokers not available. specified brokers: "
                                 f"{','.join(map(str, replicas))} available brokers: {','.join(map(str, brokers))}")
    else:
        added = assign_replicas_to_brokers(brokers, to_add, replication_factor,
                                           fixed_start_index=existing[min(existing)][0],
                                           start_partition_id=len(existing))
    if any(len(r) != replication_factor for r in added.values()):
        raise AdminError("The replication factor in manual replication assignment is not equal to the existing "
                         f"replication factor for the topic {replication_factor}")
    write_added_partitions(zk, topic, existing, added, stat.version)
    return added


def colliding_topics(topic: str, existing: list[str]) -> list[str]:
    """The existing topics whose names differ from `topic` only by '.' against '_' (Kafka 0.9's
    Topic.hasCollision: both map to the same metric name)."""
    if "." not in topic and "_" not in topic:
        return []
    key = topic.replace(".", "_")
    return sorted(t for t in existing if t != topic and t.replace(".", "_") == key)


def write_added_partitions(zk: ZkClient, topic: str, existing: Assignment, added: Assignment, version: int) -> None:
    """Rewrite `/brokers/topics/<t>` with `added` appended, only if it is still at `version` (the one read)."""
    try:
        zk.kazoo.set(paths.topic_path(topic), TopicAssignment({**existing, **added}).encode(), version=version)
    except BadVersionError:
        raise AdminError(f"The assignment of topic {topic} changed meanwhile; try again") from None


def fetch_entity_config(zk: ZkClient, entity_type: str, name: str) -> dict[str, str]:
    """What `/config/<type>/<name>` holds (empty when there is no such znode)."""
    path = paths.entity_config_path(entity_type, name)
    data, _ = zk.get(path)
    if not data:
        return {}
    try:
        return EntityConfig.decode(data, path).config
    except ZnodeFormatError as e:
        raise AdminError(str(e)) from e


def change_entity_config(zk: ZkClient, entity_type: str, name: str, config: dict[str, str]) -> None:
    """Kafka 2.x's AdminZkClient.changeEntityConfig: write the entity's complete config, then a version 2
    notification under `/config/changes` that every broker acts on. The caller has validated `config`."""
    zk.create_or_set(paths.entity_config_path(entity_type, name), EntityConfig(config).encode())
    zk.kazoo.create(paths.config_change_path(paths.CONFIG_CHANGE_PREFIX),
                    encode_entity_config_change(ConfigChange(entity_type, name)), sequence=True, makepath=True)


def change_topic_config(zk: ZkClient, topic: str, config: dict[str, str]) -> None:
    """AdminUtils.changeTopicConfig: write the topic's complete overrides, then a change notification."""
    if not topic_exists(zk, topic):
        raise AdminError(f"Topic \"{topic}\" does not exist.")
    validate_topic_config(config)
    zk.create_or_set(paths.topic_config_path(topic), EntityConfig(config).encode())
    zk.kazoo.create(f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}", encode_config_change(topic),
                    sequence=True, makepath=True)


def mark_topic_for_deletion(zk: ZkClient, topic: str) -> bool:
    """AdminUtils.deleteTopic: create /admin/delete_topics/<t>; False if it was marked already."""
    try:
        zk.kazoo.create(paths.delete_topic_path(topic), b"", makepath=True)
    except NodeExistsError:
        return False
    return True


def _format_assignment(assignment: Assignment) -> str:
    return ",".join(f"{p}:{':'.join(map(str, r))}" for p, r in sorted(assignment.items()))
