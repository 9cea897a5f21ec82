"""TransactionMetadata: one transactional id as its coordinator holds it (Kafka 2.x's TransactionMetadata).

A change happens in two steps, because it must be written to `__transaction_state` (and replicated) before it
counts: a `prepare_*` method checks the transition against the state table (state.py), marks it *pending* (no
second change may start meanwhile) and returns the `TxnTransitMetadata` to write; once written,
`complete_transition` applies it after checking that it is the change that was prepared (Kafka's
completeTransitionTo rules: the pending state, the epoch kept or bumped by one -- or 0 with a new producer id --,
partitions only added while Ongoing, the same partitions when preparing to end, none after). A failed write
calls `abort_transition`.

Epochs: a producer id's epoch goes up by one at each InitProducerId (fencing the previous producer of the
transactional id: a zombie), and when the coordinator fences an open transaction (a timeout, or a new producer
while one is Ongoing). Epoch 32766 (Short.MaxValue - 1) is the last a client may use, so that the coordinator
can always fence; past it the transactional id gets a new producer id at epoch 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zkbroker.topic_partition import TopicPartition

from .state import TransactionState

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
_SHORT_MAX = 32767


class IllegalTransitionError(Exception):
    """A transition the state table, or the pending one, does not allow: a coordinator bug, never a client's."""


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= _SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of a transition: what is written to `__transaction_state` and applied once written."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TransactionState = TransactionState.EMPTY
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    pending_state: TransactionState | None = None
    # A fence whose write failed: the next fence reuses the epoch it bumped to (never returned to a client).
    has_failed_epoch_fence: bool = False
    # The pending PrepareAbort is a fence's (its record carries the bumped epoch).
    fencing: bool = False

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def producer_epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (TransactionState.ONGOING, TransactionState.PREPARE_ABORT,
                              TransactionState.PREPARE_COMMIT)

    # -- preparing transitions ------------------------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Fence the producer of an open transaction (its timeout, or a new producer of the id): the epoch goes up
        by one -- unless the last fence's write failed -- and an abort with that epoch follows."""
        if self.producer_epoch == _SHORT_MAX:
            raise IllegalTransitionError("cannot fence a producer at epoch Short.MaxValue: it would overflow")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self.prepare_transition_to(TransactionState.PREPARE_EPOCH_FENCE, self.producer_id, epoch,
                                          NO_PRODUCER_EPOCH, self.txn_timeout_ms, frozenset(self.topic_partitions),
                                          self.txn_start_timestamp, self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, txn_timeout_ms: int, expected_epoch: int | None,
                                         now: int) -> TxnTransitMetadata | None:
        """InitProducerId on an id with no open transaction: the epoch bumped (KIP-360: a producer naming its
        current epoch bumps it again to recover; naming the previous one is a retry of a bump that succeeded and
        gets the current epoch). None when `expected_epoch` is neither: that producer was fenced."""
        if self.producer_epoch_exhausted:
            raise IllegalTransitionError(f"no epochs left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self.prepare_transition_to(TransactionState.EMPTY, self.producer_id, epoch, last_epoch, txn_timeout_ms,
                                          frozenset(), -1, now)

    def prepare_producer_id_rotation(self, new_producer_id: int, txn_timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """Epochs exhausted: the id continues under a new producer id at epoch 0."""
        if self.has_pending_transaction:
            raise IllegalTransitionError("cannot rotate the producer id while a transaction is pending")
        return self.prepare_transition_to(TransactionState.EMPTY, new_producer_id, 0,
                                          self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                                          txn_timeout_ms, frozenset(), -1, now)

    def prepare_add_partitions(self, partitions: frozenset[TopicPartition], now: int) -> TxnTransitMetadata:
        """AddPartitionsToTxn (and AddOffsetsToTxn's offsets partition): the transaction is Ongoing; it starts now
        if it was not."""
        starting = self.state in (TransactionState.EMPTY, TransactionState.COMPLETE_ABORT,
                                  TransactionState.COMPLETE_COMMIT)
        return self.prepare_transition_to(TransactionState.ONGOING, self.producer_id, self.producer_epoch,
                                          self.last_producer_epoch, self.txn_timeout_ms,
                                          frozenset(self.topic_partitions) | partitions,
                                          now if starting else self.txn_start_timestamp, now)

    def prepare_abort_or_commit(self, state: TransactionState, now: int) -> TxnTransitMetadata:
        """EndTxn: PrepareCommit or PrepareAbort, the partitions kept (each gets its marker)."""
        return self.prepare_transition_to(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                                          self.txn_timeout_ms, frozenset(self.topic_partitions),
                                          self.txn_start_timestamp, now)

    def prepare_complete(self, now: int) -> TxnTransitMetadata:
        """Every partition has its marker: CompleteCommit or CompleteAbort, no partitions left."""
        state = (TransactionState.COMPLETE_COMMIT if self.state == TransactionState.PREPARE_COMMIT
                 else TransactionState.COMPLETE_ABORT)
        self.has_failed_epoch_fence = False  # the prepare record, with the fenced epoch, was written
        return self.prepare_transition_to(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                                          self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, now)

    def prepare_dead(self) -> TxnTransitMetadata:
        """transactional.id.expiration.ms passed: the id is removed (a tombstone in `__transaction_state`)."""
        return self.prepare_transition_to(TransactionState.DEAD, self.producer_id, self.producer_epoch,
                                          self.last_producer_epoch, self.txn_timeout_ms, frozenset(),
                                          self.txn_start_timestamp, self.txn_last_update_timestamp)

    def prepare_transition_to(self, state: TransactionState, producer_id: int, epoch: int, last_epoch: int,
                              timeout_ms: int, partitions: frozenset[TopicPartition], start_timestamp: int,
                              now: int) -> TxnTransitMetadata:
        """Check the transition against the state table and make it pending (Kafka's prepareTransitionTo); the
        prepare_* methods name the transitions the coordinator makes."""
        if self.pending_state is not None:
            raise IllegalTransitionError(f"transactional id {self.transactional_id}: preparing {state.kafka_name} "
                                         f"while {self.pending_state.kafka_name} is pending")
        if producer_id < 0:
            raise IllegalTransitionError(f"illegal new producer id {producer_id}")
        if state != TransactionState.DEAD and epoch < 0:
            raise IllegalTransitionError(f"illegal new producer epoch {epoch}")
        if self.state not in state.valid_previous_states:
            raise IllegalTransitionError(f"transactional id {self.transactional_id}: {state.kafka_name} cannot "
                                         f"follow {self.state.kafka_name}")
        self.pending_state = state
        return TxnTransitMetadata(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state, partitions,
                                  start_timestamp, now)

    # -- completing them ------------------------------------------------------------------------------------

    def abort_transition(self) -> None:
        """The write of the prepared transition failed: nothing changes, another may be prepared. A fencing
        abort keeps its bumped epoch in memory (never handed out): the next fence does not bump again."""
        if self.fencing:
            self.has_failed_epoch_fence = True
        self.fencing = False
        self.pending_state = None

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """Apply `transit`, written to the log, if it is what was prepared; IllegalTransitionError otherwise."""
        target = self.pending_state
        if target is None or target != transit.state:
            self._fail(transit, f"the pending state is {target.kafka_name if target else 'none'}")
        S = TransactionState
        same_producer = transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id
        if target == S.EMPTY:
            bump = (transit.producer_epoch == self.producer_epoch + 1
                    or (transit.producer_epoch == 0 and transit.producer_id != self.producer_id))
            if ((transit.producer_epoch != self.producer_epoch and not bump) or transit.topic_partitions
                    or transit.txn_start_timestamp != -1):
                self._fail(transit, "an InitProducerId transition must bump the epoch and hold no partitions")
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif target == S.ONGOING:
            if (not same_producer or not self.topic_partitions <= transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms):
                self._fail(transit, "adding partitions keeps the producer and the partitions already added")
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions |= transit.topic_partitions
        elif target in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            if (not same_producer or self.topic_partitions != transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms
                    or self.txn_start_timestamp != transit.txn_start_timestamp):
                self._fail(transit, "preparing to end keeps the producer, partitions, timeout and start")
        elif target in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            if (not same_producer or self.txn_timeout_ms != transit.txn_timeout_ms
                    or transit.txn_start_timestamp == -1):
                self._fail(transit, "completing keeps the producer and the timeout")
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions.clear()
        else:  # PrepareEpochFence turns into PrepareAbort before any write; Dead removes the id instead
            self._fail(transit, f"{target.kafka_name} is never completed")
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.fencing = False
        self.state = target

    def _fail(self, transit: TxnTransitMetadata, why: str) -> None:
        raise IllegalTransitionError(f"transactional id {self.transactional_id} in {self.state.kafka_name} cannot "
                                     f"complete the transition to {transit}: {why}")

    @classmethod
    def from_transit(cls, transactional_id: str, transit: TxnTransitMetadata) -> TransactionMetadata:
        """The metadata a `__transaction_state` record describes (loading a partition of the log)."""
        return cls(transactional_id, transit.producer_id, transit.last_producer_id, transit.producer_epoch,
                   transit.last_producer_epoch, transit.txn_timeout_ms, transit.state, set(transit.topic_partitions),
                   transit.txn_start_timestamp, transit.txn_last_update_timestamp)
