"""A transactional id's states and transitions (Kafka 2.x's TransactionMetadata): every one of the 64
(from, to) pairs prepared against the table, the pending state that blocks a second change, and the checks
complete_transition makes before it applies a written transition."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from zkbroker.coordinator.transaction.metadata import IllegalTransitionError, TransactionMetadata
from zkbroker.coordinator.transaction.state import TransactionState as S
from zkbroker.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
# Kafka 2.x's validPreviousStates, written out again as the test's own reference
LEGAL = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING), (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_ABORT, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}


def metadata(state=S.EMPTY, epoch=3, partitions=(), start=-1):
    return TransactionMetadata("tx", 1000, producer_epoch=epoch, txn_timeout_ms=60000, state=state,
                               topic_partitions=set(partitions), txn_start_timestamp=start,
                               txn_last_update_timestamp=10)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(S, S)))
def test_every_transition_is_legal_exactly_when_kafkas_table_says(source, target):
    m = metadata(source)
    if (source, target) in LEGAL:
        transit = m.prepare_transition_to(target, 1000, 3, -1, 60000, frozenset(), -1, 20)
        assert (transit.state, m.pending_state, m.state) == (target, target, source)
    else:
        with pytest.raises(IllegalTransitionError):
            m.prepare_transition_to(target, 1000, 3, -1, 60000, frozenset(), -1, 20)
        assert m.pending_state is None


def test_the_table_is_kafkas():
    assert {(p, s) for s in S for p in s.valid_previous_states} == LEGAL
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert [s.kafka_name for s in S] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                         "CompleteAbort", "Dead", "PrepareEpochFence"]
    assert S.from_id(7) == S.PREPARE_EPOCH_FENCE
    with pytest.raises(ValueError):
        S.from_id(8)


def test_a_pending_transition_blocks_another_until_completed_or_aborted():
    m = metadata()
    transit = m.prepare_add_partitions(frozenset({TP}), now=20)
    with pytest.raises(IllegalTransitionError):
        m.prepare_add_partitions(frozenset({TP}), now=21)
    m.abort_transition()  # the write failed: nothing changed
    assert (m.state, m.topic_partitions, m.pending_state) == (S.EMPTY, set(), None)
    transit = m.prepare_add_partitions(frozenset({TP}), now=20)
    m.complete_transition(transit)
    assert (m.state, m.topic_partitions, m.txn_start_timestamp) == (S.ONGOING, {TP}, 20)
    assert m.txn_last_update_timestamp == 20


def test_a_full_commit_cycle_and_the_epoch_bump_of_init_producer_id():
    m = metadata(epoch=-1)
    m.complete_transition(m.prepare_increment_producer_epoch(30000, None, now=5))
    assert (m.producer_epoch, m.txn_timeout_ms, m.state) == (0, 30000, S.EMPTY)
    m.complete_transition(m.prepare_add_partitions(frozenset({TP}), now=10))
    m.complete_transition(m.prepare_abort_or_commit(S.PREPARE_COMMIT, now=11))
    assert m.topic_partitions == {TP}  # kept until the markers are written
    m.complete_transition(m.prepare_complete(now=12))
    assert (m.state, m.topic_partitions, m.txn_start_timestamp) == (S.COMPLETE_COMMIT, set(), 10)
    m.complete_transition(m.prepare_increment_producer_epoch(30000, None, now=13))
    assert (m.producer_epoch, m.last_producer_epoch) == (1, -1)


def test_complete_refuses_what_was_not_prepared():
    m = metadata(S.ONGOING, partitions=[TP], start=5)
    transit = m.prepare_abort_or_commit(S.PREPARE_COMMIT, now=20)
    with pytest.raises(IllegalTransitionError):  # not the pending state
        m.complete_transition(replace(transit, state=S.PREPARE_ABORT))
    with pytest.raises(IllegalTransitionError):  # another producer epoch
        m.complete_transition(replace(transit, producer_epoch=9))
    with pytest.raises(IllegalTransitionError):  # other partitions than the transaction's
        m.complete_transition(replace(transit, topic_partitions=frozenset()))
    m.complete_transition(transit)
    assert m.state == S.PREPARE_COMMIT
    empty = metadata(S.EMPTY)
    with pytest.raises(IllegalTransitionError):  # InitProducerId must bump the epoch by one
        empty.complete_transition(replace(empty.prepare_increment_producer_epoch(1, None, 1), producer_epoch=5))


def test_a_fence_bumps_the_epoch_and_never_past_short_max():
    assert metadata(S.ONGOING, epoch=4, partitions=[TP], start=1).prepare_fence_producer_epoch().producer_epoch == 5
    with pytest.raises(IllegalTransitionError):
        metadata(S.ONGOING, epoch=32767).prepare_fence_producer_epoch()


def test_kip_360_a_producer_naming_its_epoch_bumps_it_and_a_retry_gets_the_same():
    m = metadata(S.EMPTY, epoch=3)
    transit = m.prepare_increment_producer_epoch(60000, expected_epoch=3, now=1)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (4, 3)
    m.complete_transition(transit)
    retry = m.prepare_increment_producer_epoch(60000, expected_epoch=3, now=2)
    assert (retry.producer_epoch, retry.last_producer_epoch) == (4, 3)
    m.abort_transition()
    assert m.prepare_increment_producer_epoch(60000, expected_epoch=1, now=3) is None  # fenced long ago
    assert m.pending_state is None
