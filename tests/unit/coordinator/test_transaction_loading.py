"""Loading a `__transaction_state` partition: the last record of each id wins, tombstones remove it, and a
transaction left in PrepareCommit or PrepareAbort (its coordinator stopped before every marker was written) is
handed back for completion with its completion prepared -- the new coordinator's half of the failover."""

from __future__ import annotations

from zkbroker.coordinator.transaction.loading import load_partition
from zkbroker.coordinator.transaction.log_format import encode_key, encode_value
from zkbroker.coordinator.transaction.metadata import TxnTransitMetadata
from zkbroker.coordinator.transaction.state import TransactionState as S
from zkbroker.topic_partition import TopicPartition

TP = TopicPartition("out", 0)


def record(txn_id, state, epoch=0, partitions=(), start=-1, now=1):
    transit = TxnTransitMetadata(4000, -1, epoch, -1, 60000, state, frozenset(partitions), start, now)
    return encode_key(txn_id), encode_value(transit)


def test_the_last_record_wins_and_a_tombstone_removes_the_id():
    loaded = load_partition([
        record("a", S.EMPTY),
        record("a", S.ONGOING, partitions=[TP], start=5),
        record("b", S.EMPTY),
        (encode_key("b"), None),
        record("c", S.COMPLETE_COMMIT, epoch=2, start=5, now=9),
    ], now=100)
    assert sorted(loaded.transactions) == ["a", "c"]
    a = loaded.transactions["a"]
    assert (a.state, a.topic_partitions, a.txn_start_timestamp, a.pending_state) == (S.ONGOING, {TP}, 5, None)
    assert loaded.transactions["c"].producer_epoch == 2
    assert loaded.pending == []


def test_a_transaction_left_between_prepare_and_complete_is_completed_by_the_new_coordinator():
    loaded = load_partition([
        record("a", S.ONGOING, partitions=[TP], start=5),
        record("a", S.PREPARE_COMMIT, partitions=[TP], start=5, now=7),
        record("b", S.ONGOING, epoch=1, partitions=[TP], start=5),
        record("b", S.PREPARE_ABORT, epoch=1, partitions=[TP], start=5, now=7),
    ], now=100)
    [commit, abort] = loaded.pending
    assert (commit.transactional_id, commit.commit, commit.transit.state) == ("a", True, S.COMPLETE_COMMIT)
    assert (abort.transactional_id, abort.commit, abort.transit.state) == ("b", False, S.COMPLETE_ABORT)
    a = loaded.transactions["a"]
    assert a.topic_partitions == {TP}  # the partitions whose markers are sent again
    a.complete_transition(commit.transit)  # once the markers are written
    assert (a.state, a.topic_partitions, a.txn_last_update_timestamp) == (S.COMPLETE_COMMIT, set(), 100)
