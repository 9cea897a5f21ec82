"""The controller's events: everything that reaches the controller's one event thread.

ZooKeeper watches, the brokers' answers, the rebalance timer and ControlledShutdown requests only put one of
these on the queue (KafkaController's `_queue`); the event thread handles them one at a time, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from zkbroker.topic_partition import TopicPartition


@dataclass(frozen=True)
class Elect:
    """Race for `/controller` (startup, the node changed or vanished, or a new session)."""


@dataclass(frozen=True)
class BrokerChange:
    """The children of `/brokers/ids` changed."""


@dataclass(frozen=True)
class TopicChange:
    """The children of `/brokers/topics` changed."""


@dataclass(frozen=True)
class TopicDataChange:
    """A topic's assignment (`/brokers/topics/<t>`) changed: maybe new partitions."""

    topic: str


@dataclass(frozen=True)
class DeleteTopicsChange:
    """The children of `/admin/delete_topics` changed."""


@dataclass(frozen=True)
class ReassignPartitionsChange:
    """`/admin/reassign_partitions` changed."""


@dataclass(frozen=True)
class ReassignedPartitionIsrChange:
    """The `state` of a partition being reassigned changed (its new replicas may have caught up)."""

    tp: TopicPartition


@dataclass(frozen=True)
class PreferredReplicaElectionChange:
    """`/admin/preferred_replica_election` changed."""


@dataclass(frozen=True)
class TopicConfigChange:
    """The children of `/config/changes` changed: some topic's overrides were altered."""


@dataclass(frozen=True)
class AutoLeaderRebalance:
    """The `leader.imbalance.check.interval.seconds` timer fired."""


@dataclass(frozen=True)
class StopReplicaAnswer:
    """A broker answered a StopReplica (delete=true) of a topic deletion."""

    epoch: int
    broker_id: int
    partitions: tuple[TopicPartition, ...]
    response: Any


class ControlledShutdown:
    """A broker asked to be shut down (ControlledShutdown request). `answer` is called exactly once, on the
    event thread, with an error code and the partitions the broker still leads."""

    def __init__(self, broker_id: int, reply: Callable[[int, list[TopicPartition]], None]) -> None:
        self.broker_id = broker_id
        self._reply: Callable[[int, list[TopicPartition]], None] | None = reply

    def answer(self, error_code: int, remaining: Iterable[TopicPartition] = ()) -> None:
        reply, self._reply = self._reply, None
        if reply is not None:
            reply(error_code, sorted(remaining))


@dataclass(frozen=True)
class UncleanElection:
    """ElectLeaders with election type UNCLEAN (KIP-460, from the Admin API): elect a leader for each offline
    partition named, from any live replica when no ISR member is alive. `reply({partition: error code})` is
    called on the event thread once done (never if this broker stops being the controller first)."""

    partitions: tuple[TopicPartition, ...]
    reply: Callable[[dict[TopicPartition, int]], None]


@dataclass(frozen=True)
class AlterReassignments:
    """AlterPartitionReassignments (KIP-455, from the Admin API): each partition's target replicas, None to cancel.
    `reply({partition: (error code, message)})` is called on the event thread."""

    moves: dict[TopicPartition, tuple[int, ...] | None]
    reply: Callable[[dict[TopicPartition, tuple[int, str | None]]], None]


@dataclass(frozen=True)
class ListReassignments:
    """ListPartitionReassignments (KIP-455): `reply({partition: (replicas, adding, removing)})` for the partitions
    named (None: all) that are being reassigned."""

    partitions: tuple[TopicPartition, ...] | None
    reply: Callable[[dict[TopicPartition, tuple[tuple[int, ...], ...]]], None]


@dataclass(frozen=True)
class SessionExpired:
    """Our ZooKeeper session expired: a controller resigns at once (Kafka's handleNewSession, first half)."""


@dataclass(frozen=True)
class Shutdown:
    """The broker is shutting down."""


ControllerEvent = (Elect | BrokerChange | TopicChange | TopicDataChange | DeleteTopicsChange | ReassignPartitionsChange
                   | ReassignedPartitionIsrChange | PreferredReplicaElectionChange | TopicConfigChange
                   | AutoLeaderRebalance | StopReplicaAnswer | ControlledShutdown | UncleanElection | AlterReassignments
                   | ListReassignments | SessionExpired | Shutdown)
