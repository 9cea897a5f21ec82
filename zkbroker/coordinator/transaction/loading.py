"""Loading a `__transaction_state` partition when this broker becomes its leader (Kafka 2.x's
TransactionStateManager.loadTransactionsForTxnTopicPartition), as a pure function of its records.

The records are read in offset order; the last value of each transactional id wins and a tombstone removes it.
A transaction the log shows in PrepareCommit or PrepareAbort was decided but its markers may not all be written
(the previous coordinator stopped between the two): the new coordinator completes it -- sends the markers again
(a partition appends a repeated marker harmlessly: it completes nothing) and then writes the completion. Those
come back as `pending`, each with its completion already prepared.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .log_format import decode_key, decode_value
from .metadata import TransactionMetadata, TxnTransitMetadata
from .state import TransactionState


@dataclass(frozen=True)
class PendingCompletion:
    transactional_id: str
    commit: bool
    transit: TxnTransitMetadata  # the CompleteCommit or CompleteAbort to write once every marker is written


@dataclass
class LoadedPartition:
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)
    pending: list[PendingCompletion] = field(default_factory=list)


def load_partition(records: Iterable[tuple[bytes, bytes | None]], now: int) -> LoadedPartition:
    """`records`: (key, value) of the partition's records in offset order (value None: a tombstone)."""
    latest: dict[str, TxnTransitMetadata] = {}
    for key, value in records:
        transactional_id = decode_key(key)
        transit = decode_value(value)
        if transit is None:
            latest.pop(transactional_id, None)
        else:
            latest[transactional_id] = transit
    loaded = LoadedPartition()
    for transactional_id, transit in latest.items():
        metadata = TransactionMetadata.from_transit(transactional_id, transit)
        loaded.transactions[transactional_id] = metadata
        if metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            commit = metadata.state == TransactionState.PREPARE_COMMIT
            loaded.pending.append(PendingCompletion(transactional_id, commit, metadata.prepare_complete(now)))
    return loaded
