"""Transactions in the log (Kafka 0.11, KIP-98): transactional batches open a producer's transaction, the
coordinator's end-transaction markers close it, the last stable offset follows, aborted transactions go to the
`.txnindex` in Kafka's format (rebuilt by recovery, truncated and deleted with their segment), and the fencing
rules for markers."""

import io
import os
import struct

import pytest

from zkbroker.log.dump import dump_log_segments
from zkbroker.log.log import Log
from zkbroker.log.producer_state import ProducerStateError
from zkbroker.log.transaction_index import AbortedTxn, TransactionIndex, transaction_index_filename
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.message_set import InvalidMessageError, iter_messages
from zkbroker.protocol.record_batch import (
    ControlRecordType,
    EndTxnMarker,
    build_end_txn_marker_batch,
    build_record_batch,
)

T0 = 1_700_000_000_000
COMMIT = ControlRecordType.COMMIT
ABORT = ControlRecordType.ABORT


def data(pid, seq, count=2, epoch=0, transactional=True):
    return bytearray(build_record_batch([(None, b"v%d" % i, T0) for i in range(count)], producer_id=pid,
                                        producer_epoch=epoch, base_sequence=seq, transactional=transactional))


def marker(pid, kind, epoch=0, coordinator_epoch=0):
    return bytearray(build_end_txn_marker_batch(EndTxnMarker(kind, coordinator_epoch), producer_id=pid,
                                                producer_epoch=epoch, timestamp=T0))


def new_log(tmp_path, **config):
    return Log(str(tmp_path / "t-0"), config or None, clock=lambda: T0)


def test_lso_stays_at_an_open_transaction_until_its_marker_passes_the_high_watermark(tmp_path):
    log = new_log(tmp_path)
    log.append(data(-1, -1, 2, transactional=False))  # 0-1, no producer
    log.append(data(7, 0))  # 2-3: producer 7's transaction opens at 2
    log.append(data(7, 2))  # 4-5
    assert log.last_stable_offset(6) == 2
    assert log.last_stable_offset(1) == 1  # never above the high watermark
    log.append(marker(7, COMMIT), coordinator=True)  # 6
    assert log.log_end_offset == 7
    assert log.last_stable_offset(6) == 2  # complete, but the marker is not yet below the HW
    assert log.last_stable_offset(7) == 7
    assert log.collect_aborted_transactions(0, 7) == []  # a commit is not indexed
    assert not os.path.exists(transaction_index_filename(log.dir, 0))


def test_an_abort_is_indexed_with_the_lso_it_leaves_in_kafkas_format(tmp_path):
    log = new_log(tmp_path)
    log.append(data(7, 0))  # 0-1
    log.append(data(8, 0))  # 2-3: producer 8's transaction opens at 2
    log.append(marker(7, ABORT, coordinator_epoch=3), coordinator=True)  # 4
    assert log.collect_aborted_transactions(0, 5) == [AbortedTxn(7, 0, 4, 2)]  # LSO: 8's still open at 2
    log.append(marker(8, ABORT, coordinator_epoch=3), coordinator=True)  # 5
    assert log.last_stable_offset(6) == 6
    with open(transaction_index_filename(log.dir, 0), "rb") as f:
        raw = f.read()
    # version int16, producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64
    assert raw == struct.pack(">hqqqq", 0, 7, 0, 4, 2) + struct.pack(">hqqqq", 0, 8, 2, 5, 6)
    assert log.collect_aborted_transactions(5, 6) == [AbortedTxn(8, 2, 5, 6)]  # markers below the fetch: skipped
    assert log.collect_aborted_transactions(0, 2) == [AbortedTxn(7, 0, 4, 2)]  # 8's began past the range


def test_markers_only_from_the_coordinator_and_fenced_by_epochs(tmp_path):
    log = new_log(tmp_path)
    log.append(data(7, 0, epoch=2))
    with pytest.raises(InvalidMessageError):
        log.append(marker(7, COMMIT, epoch=2))  # a client may not write a control batch
    with pytest.raises(ProducerStateError) as raised:
        log.append(marker(7, COMMIT, epoch=1), coordinator=True)
    assert raised.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    log.append(marker(7, COMMIT, epoch=2, coordinator_epoch=5), coordinator=True)
    log.append(data(7, 2, epoch=2))
    with pytest.raises(ProducerStateError) as raised:
        log.append(marker(7, ABORT, epoch=2, coordinator_epoch=4), coordinator=True)
    assert raised.value.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert log.log_end_offset == 5  # refused markers wrote nothing


def test_a_marker_with_a_bumped_epoch_ends_the_transaction_and_the_next_starts_at_sequence_0(tmp_path):
    log = new_log(tmp_path)
    log.append(data(7, 0, epoch=0))
    log.append(marker(7, ABORT, epoch=1), coordinator=True)  # KIP-360: the coordinator bumped the epoch
    assert log.collect_aborted_transactions(0, 3) == [AbortedTxn(7, 0, 2, 3)]
    with pytest.raises(ProducerStateError) as raised:
        log.append(data(7, 2, epoch=1))
    assert raised.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.append(data(7, 0, epoch=1))
    assert log.last_stable_offset(5) == 3


def test_a_marker_without_an_open_transaction_completes_nothing(tmp_path):
    log = new_log(tmp_path)
    log.append(marker(9, ABORT), coordinator=True)
    assert log.last_stable_offset(1) == 1
    assert log.collect_aborted_transactions(0, 1) == []


def test_the_txnindex_lives_with_its_segment_recovery_rebuilds_it_truncation_cuts_it(tmp_path):
    log = new_log(tmp_path, **{"segment.bytes": 250})
    log.append(data(7, 0))  # 0-1
    log.append(marker(7, ABORT), coordinator=True)  # 2
    log.append(data(8, 0))  # 3-4 (the segments roll at 250 bytes)
    log.append(marker(8, ABORT), coordinator=True)  # 5
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 1
    indexed = {s.base_offset: list(s.txn_index.entries) for s in log.segments if s.txn_index.entries}
    assert sorted(txn.last_offset for txns in indexed.values() for txn in txns) == [2, 5]
    log.close()
    for base in indexed:  # a crash lost the index files
        os.remove(transaction_index_filename(log.dir, base))
    recovered = Log(log.dir, recovery_point=0, clock=lambda: T0)
    assert {s.base_offset: s.txn_index.entries for s in recovered.segments if s.txn_index.entries} == indexed
    assert recovered.collect_aborted_transactions(0, 6) == [AbortedTxn(7, 0, 2, 3), AbortedTxn(8, 3, 5, 6)]
    recovered.truncate_to(5)  # a follower cut back below the second marker
    assert recovered.collect_aborted_transactions(0, 6) == [AbortedTxn(7, 0, 2, 3)]
    assert recovered.last_stable_offset(5) == 3  # producer 8's transaction is open again
    recovered.delete_segments_while(lambda s: s.base_offset < 3)
    assert recovered.collect_aborted_transactions(0, 6) == []


def test_an_open_transaction_survives_a_clean_restart_in_the_snapshot(tmp_path):
    log = new_log(tmp_path)
    log.append(data(-1, -1, transactional=False))
    log.append(data(7, 0))  # open at 2
    log.close()
    reopened = Log(log.dir, clock=lambda: T0)
    assert reopened.last_stable_offset(4) == 2
    reopened.append(marker(7, COMMIT), coordinator=True)
    assert reopened.last_stable_offset(5) == 5


def test_transaction_index_refuses_markers_out_of_order_and_reads_back(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TransactionIndex(path)
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 1, 5, 6))
    index.close()
    assert TransactionIndex(path).entries == [AbortedTxn(1, 0, 5, 6)]


def test_dump_log_shows_transactional_batches_and_markers_as_kafka(tmp_path):
    log = new_log(tmp_path)
    log.append(data(7, 0, count=1), leader_epoch=0)
    log.append(marker(7, COMMIT, coordinator_epoch=4), coordinator=True, leader_epoch=0)
    log.flush()
    out = io.StringIO()
    dump_log_segments([log.segments[0].log_path], out=out, err=io.StringIO())
    lines = out.getvalue().splitlines()
    assert "producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false" in lines[2]
    assert "baseOffset: 1 lastOffset: 1 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7" in lines[3]
    assert "isTransactional: true isControl: true" in lines[3]
    out = io.StringIO()
    dump_log_segments([log.segments[0].log_path], print_data_log=True, out=out, err=io.StringIO())
    control = out.getvalue().splitlines()[-1]
    assert control.startswith("| offset: 1 CreateTime: ")
    assert control.endswith(" endTxnMarker: COMMIT coordinatorEpoch: 4")


def test_dump_log_prints_the_txnindex_and_the_producer_snapshot_as_kafka(tmp_path):
    log = new_log(tmp_path)
    log.append(data(7, 0))  # 0-1
    log.append(marker(7, ABORT, coordinator_epoch=3), coordinator=True)  # 2
    log.append(data(8, 0))  # 3-4, open
    log.close()
    out = io.StringIO()
    snapshot = os.path.join(log.dir, f"{5:020d}.snapshot")
    dump_log_segments([transaction_index_filename(log.dir, 0), snapshot], out=out, err=io.StringIO())
    assert out.getvalue().splitlines()[1:] == [
        "version: 0 producerId: 7 firstOffset: 0 lastOffset: 2 lastStableOffset: 3",
        f"Dumping {snapshot}",
        "producerId: 7 producerEpoch: 0 coordinatorEpoch: 3 currentTxnFirstOffset: -1 firstSequence: 0 "
        f"lastSequence: 1 lastOffset: 1 offsetDelta: 1 timestamp: {T0}",
        "producerId: 8 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: 3 firstSequence: 0 "
        f"lastSequence: 1 lastOffset: 4 offsetDelta: 1 timestamp: {T0}",
    ]


def test_a_control_batchs_record_is_its_marker_and_readers_never_see_it(tmp_path):
    batch = build_end_txn_marker_batch(EndTxnMarker(ABORT, 3), producer_id=7, producer_epoch=1, timestamp=T0)
    [record] = list(iter_messages(batch, control=True))
    assert (record.key, record.value) == (b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x03")
    assert list(iter_messages(data(7, 0, count=1) + batch)) == list(iter_messages(data(7, 0, count=1)))  # readers


def test_an_index_rebuilt_after_a_clean_shutdown_keeps_the_segments_aborted_transactions(tmp_path):
    log = new_log(tmp_path)
    log.append(data(7, 0))  # 0-1
    log.append(marker(7, ABORT), coordinator=True)  # 2
    log.close()
    (tmp_path / ".kafka_cleanshutdown").touch()  # no recovery; but the offset index is gone and is rebuilt
    os.remove(os.path.join(log.dir, f"{0:020d}.index"))
    reopened = Log(log.dir, clock=lambda: T0)
    assert reopened.collect_aborted_transactions(0, 3) == [AbortedTxn(7, 0, 2, 3)]


def test_a_set_completing_a_transaction_and_opening_the_producers_next_leaves_the_next_open(tmp_path):
    # a follower fetches a marker and the same producer's next transactional batch in one set; recovery replays
    # them together too: the completed transaction must not close the one opened after it
    leader = new_log(tmp_path / "leader")
    leader.append(data(7, 0))  # 0-1
    leader.append(marker(7, COMMIT), coordinator=True)  # 2
    leader.append(data(7, 2))  # 3-4: the next transaction
    follower = new_log(tmp_path / "follower")
    follower.append(leader.read(0, 1 << 20).read_bytes(), assign_offsets=False)
    assert follower.last_stable_offset(5) == leader.last_stable_offset(5) == 3
    follower.close()
    for name in os.listdir(follower.dir):
        if name.endswith(".snapshot"):
            os.remove(os.path.join(follower.dir, name))
    assert new_log(tmp_path / "follower").last_stable_offset(5) == 3


def test_a_transactional_append_or_marker_of_a_producer_ends_its_verification(tmp_path):
    # KIP-890's token: a leader appends a verified batch only if its token is still there
    log = new_log(tmp_path)
    state = log.producer_state
    state.verifying[7] = token = object()
    state.verifying[8] = object()
    log.append(data(8, 0, transactional=False))  # another producer's plain batch: nothing to do with 7
    assert state.verifying[7] is token
    log.append(data(7, 0))
    assert 7 not in state.verifying
    state.verifying[7] = object()
    log.append(marker(7, ABORT), coordinator=True)  # the transaction ended while a verification was under way
    assert 7 not in state.verifying
