"""KIP-890 part 1's verification, its pure part: whether a partition leader may take the first transactional batch
of a producer's transaction, given what the transaction coordinator says of the transactional id (Kafka 3.6's
`transaction.partition.verification.enable`, a switch here, off by default: the ZooKeeper-era brokers never
asked).

Without it a produce delayed past its transaction's end (a retry stuck in a network, a paused producer thread)
opens a transaction at the partition that no coordinator knows of: no marker will ever end it, and it holds the
last stable offset -- every read_committed consumer -- until an operator aborts it (KAFKA-12671, a *hanging
transaction*; `zkbroker transactions find-hanging`). With it, the leader asks the coordinator, before it appends
a producer's first batch of a transaction, whether the partition is in that producer's ongoing transaction.

Kafka 3.6 asks with AddPartitionsToTxn v4 in its verify-only form; we ask with DescribeTransactions (KIP-664),
which tells the same: the id's producer id and epoch, its state and its partitions. The answer for the producer:

- the partition is in the id's Ongoing transaction of that producer id and epoch: NONE (append);
- the id is unknown, or held by another producer id: INVALID_PRODUCER_ID_MAPPING;
- another epoch (a newer producer fenced this one): INVALID_PRODUCER_EPOCH;
- the transaction is ending (PrepareCommit, PrepareAbort), or the coordinator cannot say yet (not loaded, moved,
  unreachable): NOT_ENOUGH_REPLICAS, which producers retry -- as Kafka 3.6 turns such answers into it;
- anything else (no transaction, or one without this partition: the delayed produce): INVALID_TXN_STATE.

Between the coordinator's answer and the append the transaction may end (its marker appended meanwhile): the
leader keeps a verification token per producer (ProducerStateManager.verifying, Kafka's VerificationGuard),
which any transactional append or marker of that producer removes, and appends only if its token is still there
or the producer's transaction is already open at the partition.
"""

from __future__ import annotations

from collections.abc import Iterable

from zkbroker.protocol.errors import ErrorCode
from zkbroker.topic_partition import TopicPartition

from .state import TransactionState

#: What a coordinator that cannot answer now says, turned into the retriable answer a producer expects.
_RETRY = frozenset((ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE, ErrorCode.GROUP_LOAD_IN_PROGRESS,
                    ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.REQUEST_TIMED_OUT))


def verification_error(
    error: int,
    state: TransactionState | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
    asked_producer_id: int,
    asked_producer_epoch: int,
    partition: TopicPartition,
) -> int:
    """The produce answer for `partition`'s first transactional batch of (asked_producer_id, asked_producer_epoch),
    from the coordinator's description of the transactional id (`error` and, without one, the id's state, producer
    id and epoch, and partitions)."""
    if error in _RETRY:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if error != ErrorCode.NONE:
        return error
    if producer_id != asked_producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_epoch != asked_producer_epoch:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT,
                 TransactionState.PREPARE_EPOCH_FENCE):
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if state == TransactionState.ONGOING and partition in set(partitions):
        return ErrorCode.NONE
    return ErrorCode.INVALID_TXN_STATE
