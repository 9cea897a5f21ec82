"""KIP-890's verification, its pure part: the produce's answer for a producer's first transactional batch at a
partition, from what the coordinator says of the transactional id."""

import pytest

from zkbroker.coordinator.transaction.state import TransactionState as S
from zkbroker.coordinator.transaction.verification import verification_error
from zkbroker.protocol.errors import ErrorCode
from zkbroker.topic_partition import TopicPartition

TP, OTHER = TopicPartition("out", 0), TopicPartition("out", 1)


def answer(error=ErrorCode.NONE, state=S.ONGOING, pid=7, epoch=2, partitions=(TP,), asked=(7, 2)):
    return verification_error(error, state, pid, epoch, partitions, *asked, TP)


def test_the_partition_in_the_producers_ongoing_transaction_is_taken():
    assert answer() == ErrorCode.NONE


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.DEAD])
def test_a_batch_of_an_ended_transaction_is_refused_with_invalid_txn_state(state):
    assert answer(state=state) == ErrorCode.INVALID_TXN_STATE


def test_a_partition_the_transaction_did_not_add_is_refused():
    assert answer(partitions=(OTHER,)) == ErrorCode.INVALID_TXN_STATE


def test_another_producer_or_epoch_holds_the_id():
    assert answer(pid=8) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert answer(epoch=3) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert answer(error=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, state=None) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_an_ending_transaction_or_an_unready_coordinator_is_retried(state):
    assert answer(state=state) == ErrorCode.NOT_ENOUGH_REPLICAS
    for error in (ErrorCode.NOT_COORDINATOR, ErrorCode.GROUP_LOAD_IN_PROGRESS,
                  ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE, ErrorCode.CONCURRENT_TRANSACTIONS):
        assert answer(error=error, state=None) == ErrorCode.NOT_ENOUGH_REPLICAS
