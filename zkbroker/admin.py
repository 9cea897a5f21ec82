"""Topic administration in ZooKeeper (Kafka 0.8.2's AdminUtils): replica assignment and topic creation.

Used by the broker's auto-creation and by `zkbroker topics`. Creating a topic is only writing znodes:
`/config/topics/<t>` first, then `/brokers/topics/<t>` (0.8.2's order, without atomicity); the controller
watches `/brokers/topics` and does the rest.
"""

from __future__ import annotations

import random
import re

from kazoo.exceptions import NodeExistsError

from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import TopicAssignment, TopicConfig

LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_LENGTH = 255


class AdminError(ValueError):
    """A topic operation that cannot be done; the message says why (0.8.2's AdminOperationException)."""


class TopicExistsError(AdminError):
    pass


def validate_topic_name(topic: str) -> None:
    """0.8.2's Topic.validate."""
    if not topic:
        raise AdminError("topic name is illegal, can't be empty")
    if topic in (".", ".."):
        raise AdminError("topic name cannot be \".\" or \"..\"")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise AdminError(f"topic name is illegal, can't be longer than {MAX_TOPIC_LENGTH} characters")
    if not LEGAL_TOPIC.fullmatch(topic):
        raise AdminError(f"topic name {topic} is illegal, contains a character other than ASCII alphanumerics, "
                         "'.', '_' and '-'")


def assign_replicas_to_brokers(brokers: list[int], partitions: int, replication_factor: int,
                               fixed_start_index: int = -1, start_partition_id: int = -1,
                               rng: random.Random | None = None) -> dict[int, tuple[int, ...]]:
    """0.8.2's assignReplicasToBrokers: spread leaders round-robin from a random start, and followers at a
    random shift, so replicas of consecutive partitions land on different brokers.

    With fixed_start_index=0 and no shift this is the classic rule "partition i on broker i mod n,
    replica j on (i + j) mod n".
    """
    if partitions <= 0:
        raise AdminError("number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise AdminError("replication factor must be larger than 0")
    n = len(brokers)
    if replication_factor > n:
        raise AdminError(f"replication factor: {replication_factor} larger than available brokers: {n}")
    brokers = sorted(brokers)
    rng = rng or random.Random()
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition_id = max(start_partition_id, 0)
    out: dict[int, tuple[int, ...]] = {}
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


def live_broker_ids(zk: ZkClient) -> list[int]:
    return sorted(int(c) for c in zk.get_children(paths.BROKER_IDS) if c.isdigit())


def create_topic(zk: ZkClient, topic: str, partitions: int, replication_factor: int,
                 config: dict[str, str] | None = None) -> dict[int, tuple[int, ...]]:
    """AdminUtils.createTopic: assign replicas over the live brokers, write the config, then the topic."""
    validate_topic_name(topic)
    assignment = assign_replicas_to_brokers(live_broker_ids(zk), partitions, replication_factor)
    write_topic(zk, topic, assignment, config or {})
    return assignment


def write_topic(zk: ZkClient, topic: str, assignment: dict[int, tuple[int, ...]], config: dict[str, str]) -> None:
    if zk.kazoo.exists(paths.topic_path(topic)) is not None:
        raise TopicExistsError(f"Topic \"{topic}\" already exists.")
    zk.create_or_set(paths.topic_config_path(topic), TopicConfig(config).encode())
    try:
        zk.kazoo.create(paths.topic_path(topic), TopicAssignment(assignment).encode(), makepath=True)
    except NodeExistsError:
        raise TopicExistsError(f"Topic \"{topic}\" already exists.") from None
