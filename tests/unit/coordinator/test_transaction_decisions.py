"""The transaction coordinator's decisions (Kafka 2.x's TransactionCoordinator) driven as its driver will drive
them -- decide, write (here: complete at once), answer -- with the clock and producer ids given: epochs bumped at
each InitProducerId, zombies fenced, an open transaction fenced and aborted by a new producer or its timeout,
retries, KIP-360's recovery, epoch exhaustion, and transactional id expiration."""

from __future__ import annotations

import itertools

from zkbroker.coordinator.transaction import decisions as d
from zkbroker.coordinator.transaction.metadata import TransactionMetadata
from zkbroker.coordinator.transaction.state import TransactionState as S
from zkbroker.protocol.errors import ErrorCode as E
from zkbroker.topic_partition import TopicPartition

TP = TopicPartition("out", 0)
OFFSETS = TopicPartition("__consumer_offsets", 17)


class Coordinator:
    """A stand-in for the driver: one transactional id, each decided transit written at once."""

    def __init__(self) -> None:
        self.ids = itertools.count(4000)
        self.metadata: TransactionMetadata | None = None
        self.written = []

    def write(self, decision: d.Decision) -> d.Decision:
        if decision.transit is not None:
            self.written.append(decision.transit)
            if decision.transit.state != S.PREPARE_EPOCH_FENCE:
                self.metadata.complete_transition(decision.transit)
        return decision

    def init(self, timeout_ms=60000, now=0, expected=None) -> tuple[int, int, int]:
        self.metadata, decision = d.init_producer_id(self.metadata, "tx", timeout_ms, now, lambda: next(self.ids),
                                                     expected)
        if decision.fence_then_abort:
            fence = decision.transit
            self.write(d.end_txn(self.metadata, fence.producer_id, fence.producer_epoch, commit=False, now=now,
                                 from_client=False))
            return E.CONCURRENT_TRANSACTIONS, -1, -1
        self.write(decision)
        if decision.error != E.NONE:
            return decision.error, -1, -1
        return decision.error, self.metadata.producer_id, self.metadata.producer_epoch

    def add(self, pid, epoch, *partitions, now=1) -> int:
        return self.write(d.add_partitions(self.metadata, pid, epoch, partitions or (TP,), now)).error

    def end(self, pid, epoch, commit=True, now=2) -> int:
        return self.write(d.end_txn(self.metadata, pid, epoch, commit, now)).error

    def markers_written(self, now=3) -> None:
        self.write(d.complete(self.metadata, now))


def test_a_transaction_commits_and_init_producer_id_fences_the_zombie():
    c = Coordinator()
    assert c.init() == (E.NONE, 4000, 0)
    assert c.add(4000, 0, TP, OFFSETS) == E.NONE
    assert c.add(4000, 0, TP) == E.NONE and len(c.written) == 2  # already in: nothing written
    assert c.end(4000, 0, commit=True) == E.NONE
    assert c.metadata.state == S.PREPARE_COMMIT
    assert c.end(4000, 0, commit=True) == E.CONCURRENT_TRANSACTIONS  # its markers are being written
    assert c.add(4000, 0, TP) == E.CONCURRENT_TRANSACTIONS
    c.markers_written()
    assert c.metadata.state == S.COMPLETE_COMMIT
    assert c.end(4000, 0, commit=True) == E.NONE  # a retry of the commit
    assert c.end(4000, 0, commit=False) == E.INVALID_TXN_STATE
    assert c.init() == (E.NONE, 4000, 1)  # a new instance of the producer...
    assert c.add(4000, 0, TP) == E.PRODUCER_FENCED  # ...fences the old one, a zombie from now on
    assert c.end(4000, 0) == E.PRODUCER_FENCED
    assert c.add(4999, 1, TP) == E.INVALID_PRODUCER_ID_MAPPING


def test_a_new_producer_while_a_transaction_is_ongoing_aborts_it_with_a_bumped_epoch():
    c = Coordinator()
    c.init()
    c.add(4000, 0)
    assert c.init() == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    assert (c.metadata.state, c.metadata.producer_epoch) == (S.PREPARE_ABORT, 1)
    assert c.written[-1].producer_epoch == 1  # the PrepareAbort record carries the fenced epoch
    assert c.init()[0] == E.CONCURRENT_TRANSACTIONS  # PrepareAbort: its markers first, then retry
    c.markers_written()
    assert c.metadata.state == S.COMPLETE_ABORT
    assert c.init() == (E.NONE, 4000, 2)
    assert c.add(4000, 0) == E.PRODUCER_FENCED


def test_init_producer_id_refuses_bad_timeouts_and_ids():
    c = Coordinator()
    assert c.init(timeout_ms=0)[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert c.init(timeout_ms=d.DEFAULT_MAX_TIMEOUT_MS + 1)[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert d.init_producer_id(None, "", 1000, 0, lambda: 1)[1].error == E.INVALID_REQUEST


def test_kip_360_a_producer_recovers_with_its_epoch_and_a_stale_one_is_fenced():
    c = Coordinator()
    c.init()
    c.add(4000, 0)
    c.end(4000, 0, commit=False)
    c.markers_written()
    assert c.init(expected=(4000, 0)) == (E.NONE, 4000, 1)  # the producer bumps its own epoch to go on
    assert c.init(expected=(4000, 0)) == (E.NONE, 4000, 1)  # a retry of that call: the same epoch
    assert c.init(expected=(4000, 5))[0] == E.PRODUCER_FENCED
    assert c.init(expected=(1234, 1))[0] == E.PRODUCER_FENCED  # not this id's producer


def test_exhausted_epochs_move_the_id_to_a_new_producer_id():
    c = Coordinator()
    c.init()
    c.metadata.producer_epoch = 32766  # Short.MaxValue - 1: the last a client may hold
    assert c.init() == (E.NONE, 4001, 0)
    assert c.metadata.last_producer_id == 4000


def test_timed_out_transactions_are_aborted_with_their_producer_fenced():
    c = Coordinator()
    c.init(timeout_ms=1000)
    c.add(4000, 0, now=10)
    assert d.timed_out([c.metadata], now=1010) == []
    assert d.timed_out([c.metadata], now=1011) == [("tx", 4000, 0)]
    c.write(d.abort_timed_out(c.metadata, 4000, now=1011))
    assert (c.metadata.state, c.metadata.producer_epoch) == (S.PREPARE_ABORT, 1)
    assert d.timed_out([c.metadata], now=5000) == []
    assert d.abort_timed_out(c.metadata, 4000, now=5000).transit is None  # already aborting
    assert c.end(4000, 0, commit=True) == E.PRODUCER_FENCED  # the producer wakes up: fenced


def test_a_failed_fence_write_does_not_bump_the_epoch_twice():
    c = Coordinator()
    c.init()
    c.add(4000, 0)
    decision = d.abort_timed_out(c.metadata, 4000, now=100)
    assert decision.transit.producer_epoch == 1
    c.metadata.abort_transition()  # the PrepareAbort write failed
    again = d.abort_timed_out(c.metadata, 4000, now=200)
    assert again.transit.producer_epoch == 1  # epoch 1 was never handed out: reused
    c.write(again)
    assert c.metadata.state == S.PREPARE_ABORT


def test_idle_transactional_ids_expire_but_not_with_a_transaction_open():
    c = Coordinator()
    c.init(now=0)
    assert d.expired_transactional_ids([c.metadata], now=999, expiration_ms=1000) == []
    assert d.expired_transactional_ids([c.metadata], now=1000, expiration_ms=1000) == ["tx"]
    c.add(4000, 0, now=1)
    assert d.expired_transactional_ids([c.metadata], now=10**9, expiration_ms=1000) == []
    idle = Coordinator()
    idle.init(now=0)
    assert idle.metadata.prepare_dead().state == S.DEAD  # the driver writes a tombstone and forgets the id
