"""TransactionState: where a transactional id's transaction stands (Kafka 2.x's TransactionState).

The id is the status byte of the `__transaction_state` value. The rule a transition must obey is stated once,
as data: a state may be entered only from its valid previous states (Kafka's validPreviousStates)::

    Empty             <- Empty, CompleteCommit, CompleteAbort       (InitProducerId)
    Ongoing           <- Ongoing, Empty, CompleteCommit, CompleteAbort   (AddPartitionsToTxn, AddOffsetsToTxn)
    PrepareCommit     <- Ongoing                                    (EndTxn commit)
    PrepareAbort      <- Ongoing, PrepareEpochFence                 (EndTxn abort; a fence or a timeout)
    CompleteCommit    <- PrepareCommit                              (every marker written)
    CompleteAbort     <- PrepareAbort                               (every marker written)
    Dead              <- Empty, CompleteAbort, CompleteCommit       (transactional.id.expiration.ms)
    PrepareEpochFence <- Ongoing                                    (never written: an abort follows at once)

Only Empty, CompleteCommit and CompleteAbort may expire.
"""

from __future__ import annotations

import enum


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """Kafka's name for the state (DescribeTransactions and the tools print it)."""
        return _KAFKA_NAMES[self]

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return VALID_PREVIOUS_STATES[self]

    @property
    def expiration_allowed(self) -> bool:
        return self in _EXPIRABLE

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        try:
            return cls(state_id)
        except ValueError:
            raise ValueError(f"unknown transaction state id {state_id}") from None


S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
_EXPIRABLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
_KAFKA_NAMES = {
    S.EMPTY: "Empty", S.ONGOING: "Ongoing", S.PREPARE_COMMIT: "PrepareCommit", S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit", S.COMPLETE_ABORT: "CompleteAbort", S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
del S
