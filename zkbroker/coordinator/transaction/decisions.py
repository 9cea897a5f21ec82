"""The transaction coordinator's decisions (Kafka 2.x's TransactionCoordinator), as pure functions.

Each takes a transactional id's metadata (None when the coordinator holds none) and the request's fields, and
answers a `Decision`: an error for the client, or a prepared transition to write to `__transaction_state`
(the metadata is then pending; the driver completes or aborts it after the write), or neither (a retry that
needs no write). Time comes in as `now`; producer ids from the caller's `generate_producer_id`. Errors are
Kafka 2.8's: PRODUCER_FENCED for a producer whose epoch a newer one replaced (the API layer answers
INVALID_PRODUCER_EPOCH to versions that predate KIP-588), CONCURRENT_TRANSACTIONS (retriable) while a
transition or the markers of the last transaction are under way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from zkbroker.protocol.errors import ErrorCode
from zkbroker.topic_partition import TopicPartition

from .metadata import NO_PRODUCER_EPOCH, TransactionMetadata, TxnTransitMetadata
from .state import TransactionState

S = TransactionState
DEFAULT_MAX_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms
DEFAULT_ID_EXPIRATION_MS = 604_800_000  # transactional.id.expiration.ms (7 days)


@dataclass(frozen=True)
class Decision:
    """error NONE with a transit: write it, then answer; NONE without one: answer at once."""

    error: int = ErrorCode.NONE
    transit: TxnTransitMetadata | None = None
    #: InitProducerId found a transaction Ongoing: the transit fences its producer, the driver then aborts it
    #: (end_txn with the fenced epoch, not from a client) and answers CONCURRENT_TRANSACTIONS, so the client
    #: retries and gets the epoch bumped once more.
    fence_then_abort: bool = False


def _error(code: int) -> Decision:
    return Decision(error=code)


def valid_transaction_timeout(timeout_ms: int, max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS) -> bool:
    return 0 < timeout_ms <= max_timeout_ms


def init_producer_id(
    metadata: TransactionMetadata | None,
    transactional_id: str,
    timeout_ms: int,
    now: int,
    generate_producer_id: Callable[[], int],
    expected: tuple[int, int] | None = None,
    max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS,
) -> tuple[TransactionMetadata | None, Decision]:
    """InitProducerId with a transactional id (`expected`: KIP-360's (producer id, epoch) of a producer that
    recovers). Returns the metadata -- new when there was none, for the caller to keep -- and the decision."""
    if not transactional_id:
        return metadata, _error(ErrorCode.INVALID_REQUEST)
    if not valid_transaction_timeout(timeout_ms, max_timeout_ms):
        return metadata, _error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    if metadata is None:
        metadata = TransactionMetadata(transactional_id, generate_producer_id(), txn_timeout_ms=timeout_ms,
                                       txn_last_update_timestamp=now)
    if metadata.pending_transition_in_progress:
        return metadata, _error(ErrorCode.CONCURRENT_TRANSACTIONS)
    if expected is not None and not _known_producer(metadata, expected[0]):
        return metadata, _error(ErrorCode.PRODUCER_FENCED)
    state = metadata.state
    if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
        return metadata, _error(ErrorCode.CONCURRENT_TRANSACTIONS)  # the markers are being written: retry
    if state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
        if metadata.producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
            transit = metadata.prepare_producer_id_rotation(generate_producer_id(), timeout_ms, now,
                                                            record_last_epoch=expected is not None)
            return metadata, Decision(transit=transit)
        transit = metadata.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1], now)
        return metadata, (_error(ErrorCode.PRODUCER_FENCED) if transit is None else Decision(transit=transit))
    if state == S.ONGOING:
        return metadata, Decision(transit=metadata.prepare_fence_producer_epoch(), fence_then_abort=True)
    return metadata, _error(ErrorCode.CONCURRENT_TRANSACTIONS)  # Dead, PrepareEpochFence: being removed, fenced


def _known_producer(metadata: TransactionMetadata, producer_id: int) -> bool:
    """The recovering producer's id is this transactional id's, or its previous one after a rotation."""
    return producer_id == metadata.producer_id or (
        producer_id == metadata.last_producer_id and metadata.producer_epoch_exhausted)


def _check_producer(metadata: TransactionMetadata | None, producer_id: int, epoch: int) -> int:
    if metadata is None or metadata.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if metadata.producer_epoch != epoch:
        return ErrorCode.PRODUCER_FENCED
    if metadata.pending_transition_in_progress or metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return ErrorCode.CONCURRENT_TRANSACTIONS
    return ErrorCode.NONE


def add_partitions(metadata: TransactionMetadata | None, producer_id: int, epoch: int,
                   partitions: Iterable[TopicPartition], now: int) -> Decision:
    """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's `__consumer_offsets` partition)."""
    error = _check_producer(metadata, producer_id, epoch)
    if error != ErrorCode.NONE:
        return _error(error)
    added = frozenset(partitions)
    if metadata.state == S.ONGOING and added <= metadata.topic_partitions:
        return Decision()  # every partition is in already: nothing to write
    return Decision(transit=metadata.prepare_add_partitions(added, now))


def end_txn(metadata: TransactionMetadata | None, producer_id: int, epoch: int, commit: bool, now: int,
            from_client: bool = True) -> Decision:
    """EndTxn, or the coordinator's own abort of a fenced or timed-out transaction (`from_client` False, with the
    bumped epoch of the fence it prepared)."""
    if metadata is None or metadata.producer_id != producer_id:
        return _error(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if (from_client and epoch != metadata.producer_epoch) or epoch < metadata.producer_epoch:
        return _error(ErrorCode.PRODUCER_FENCED)
    fencing = metadata.pending_state == S.PREPARE_EPOCH_FENCE
    if metadata.pending_transition_in_progress and not fencing:
        return _error(ErrorCode.CONCURRENT_TRANSACTIONS)
    state = metadata.state
    if state == S.ONGOING:
        target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if target == S.PREPARE_ABORT and fencing:
            # the fence is written as part of this abort: its record carries the bumped epoch
            metadata.pending_state = None
            metadata.producer_epoch = epoch
            metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = metadata.prepare_abort_or_commit(target, now)
            metadata.fencing = True
            return Decision(transit=transit)
        return Decision(transit=metadata.prepare_abort_or_commit(target, now))
    if state == S.COMPLETE_COMMIT and commit or state == S.COMPLETE_ABORT and not commit:
        return Decision()  # a retry of an EndTxn that completed
    if state == S.PREPARE_COMMIT and commit or state == S.PREPARE_ABORT and not commit:
        return _error(ErrorCode.CONCURRENT_TRANSACTIONS)  # its markers are being written
    return _error(ErrorCode.INVALID_TXN_STATE)  # Empty, the other outcome, Dead, PrepareEpochFence


def complete(metadata: TransactionMetadata, now: int) -> Decision:
    """Every partition of a PrepareCommit or PrepareAbort transaction has its marker: write the completion."""
    if metadata.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT) or metadata.pending_transition_in_progress:
        return _error(ErrorCode.INVALID_TXN_STATE)
    return Decision(transit=metadata.prepare_complete(now))


def timed_out(metadatas: Iterable[TransactionMetadata], now: int) -> list[tuple[str, int, int]]:
    """(transactional id, producer id, epoch) of each Ongoing transaction older than its timeout, with no
    transition pending (Kafka's timedOutTransactions): the coordinator aborts them with `abort_timed_out`."""
    return [(m.transactional_id, m.producer_id, m.producer_epoch) for m in metadatas
            if m.state == S.ONGOING and not m.pending_transition_in_progress
            and m.txn_start_timestamp + m.txn_timeout_ms < now]


def abort_timed_out(metadata: TransactionMetadata | None, producer_id: int, now: int) -> Decision:
    """Abort a timed-out transaction, fencing its producer: the epoch is bumped in the PrepareAbort record, so
    the producer, if it lives, learns it was fenced at its next request. Nothing when the id moved on."""
    if (metadata is None or metadata.producer_id != producer_id or metadata.pending_transition_in_progress
            or metadata.state != S.ONGOING):
        return Decision()
    fence = metadata.prepare_fence_producer_epoch()
    return end_txn(metadata, producer_id, fence.producer_epoch, commit=False, now=now, from_client=False)


def expired_transactional_ids(metadatas: Iterable[TransactionMetadata], now: int,
                              expiration_ms: int = DEFAULT_ID_EXPIRATION_MS) -> list[str]:
    """Ids idle past transactional.id.expiration.ms with no transaction open (Kafka's
    removeExpiredTransactionalIds): each gets `prepare_dead` and a tombstone."""
    return [m.transactional_id for m in metadatas
            if m.state.expiration_allowed and not m.pending_transition_in_progress
            and m.txn_last_update_timestamp <= now - expiration_ms]
