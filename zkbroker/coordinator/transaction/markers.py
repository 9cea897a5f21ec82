"""Marker delivery, the pure part (Kafka 2.x's TransactionMarkerChannelManager and its completion handler): which
WriteTxnMarkers request goes to which partition leader, and what each partition's answer means.

Once a transaction is in PrepareCommit or PrepareAbort, each of its partitions must get the marker, however long
it takes: partitions are grouped by their current leader into one request per broker; a partition without a
leader waits and is planned again when metadata changes. Answers, per partition (Kafka's rules):

* NONE: written. UNSUPPORTED_FOR_MESSAGE_FORMAT counts as written too: a topic of a format before 0.11 took no
  transactional data, so it has nothing to end;
* UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_FOR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT,
  KAFKA_STORAGE_ERROR: retried (planned again against fresh metadata);
* INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: this coordinator or this producer epoch was replaced
  -- stop sending this transaction's markers, the newer one completes it;
* anything else (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, ...): a bug, not a state to retry.

When every partition is written, the coordinator writes CompleteCommit or CompleteAbort (decisions.complete).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from zkbroker.protocol.errors import ErrorCode
from zkbroker.topic_partition import TopicPartition


class MarkerOutcome(enum.Enum):
    WRITTEN = "written"
    RETRY = "retry"
    FENCED = "fenced"
    FATAL = "fatal"


_OUTCOMES = {
    ErrorCode.NONE: MarkerOutcome.WRITTEN,
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT: MarkerOutcome.WRITTEN,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: MarkerOutcome.RETRY,
    ErrorCode.NOT_LEADER_FOR_PARTITION: MarkerOutcome.RETRY,
    ErrorCode.NOT_ENOUGH_REPLICAS: MarkerOutcome.RETRY,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: MarkerOutcome.RETRY,
    ErrorCode.REQUEST_TIMED_OUT: MarkerOutcome.RETRY,
    ErrorCode.KAFKA_STORAGE: MarkerOutcome.RETRY,
    ErrorCode.INVALID_PRODUCER_EPOCH: MarkerOutcome.FENCED,
    ErrorCode.TRANSACTION_COORDINATOR_FENCED: MarkerOutcome.FENCED,
}


def outcome_of(error_code: int) -> MarkerOutcome:
    return _OUTCOMES.get(error_code, MarkerOutcome.FATAL)


@dataclass(frozen=True)
class MarkerPlan:
    """One WriteTxnMarkers request body per leader broker id, and the partitions that have no leader now."""

    requests: dict[int, dict]
    leaderless: frozenset[TopicPartition]


def plan(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
         partitions: Iterable[TopicPartition], leader_of: Callable[[TopicPartition], int | None]) -> MarkerPlan:
    """Group the transaction's partitions by leader (`leader_of`: the broker's metadata, None without a leader)."""
    by_leader: dict[int, dict[str, list[int]]] = {}
    leaderless = set()
    for tp in sorted(partitions):
        leader = leader_of(tp)
        if leader is None or leader < 0:
            leaderless.add(tp)
            continue
        by_leader.setdefault(leader, {}).setdefault(tp.topic, []).append(tp.partition)
    requests = {
        leader: {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                              "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
                              "topics": [{"name": topic, "partition_indexes": ids} for topic, ids in topics.items()]}]}
        for leader, topics in by_leader.items()
    }
    return MarkerPlan(requests, frozenset(leaderless))


def outcomes(response: dict) -> dict[TopicPartition, MarkerOutcome]:
    """The outcome of each partition in a WriteTxnMarkers response body (one producer's markers)."""
    found = {}
    for marker in response["markers"]:
        for topic in marker["topics"]:
            for partition in topic["partitions"]:
                found[TopicPartition(topic["name"], partition["partition_index"])] = outcome_of(partition["error_code"])
    return found
