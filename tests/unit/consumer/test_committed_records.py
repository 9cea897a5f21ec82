"""What a read_committed consumer keeps of a fetched set: aborted transactions' batches and every marker left out,
committed and non-transactional data kept in order, and where the next fetch starts."""

from __future__ import annotations

from consumer.read_committed import committed_records
from zkbroker.protocol.message_set import build_message_set, iter_messages
from zkbroker.protocol.record_batch import (
    ControlRecordType,
    EndTxnMarker,
    build_end_txn_marker_batch,
    build_record_batch,
)


def data(producer: int, base: int, *values: bytes, transactional: bool = True) -> bytes:
    return build_record_batch([(None, v) for v in values], base_offset=base, producer_id=producer, producer_epoch=0,
                              base_sequence=0, transactional=transactional)


def marker(producer: int, offset: int, commit: bool) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_end_txn_marker_batch(EndTxnMarker(kind, 0), producer_id=producer, producer_epoch=0, timestamp=0,
                                      base_offset=offset)


def values(records: bytes) -> list[bytes]:
    return [m.value for m in iter_messages(records)]


def test_an_aborted_transaction_and_every_marker_are_left_out_interleaved_data_kept():
    fetched = b"".join([
        data(1, 0, b"a1", b"a2"),            # producer 1, committed below
        data(2, 2, b"b1"),                   # producer 2, aborted below
        data(7, 3, b"plain", transactional=False),
        data(2, 4, b"b2"),
        marker(2, 5, commit=False),
        marker(1, 6, commit=True),
        data(2, 7, b"b3"),                   # producer 2's next transaction, not aborted
    ])
    kept, end = committed_records(fetched, [(2, 2)])
    assert values(kept) == [b"a1", b"a2", b"plain", b"b3"]
    assert end == 8


def test_a_set_of_markers_and_aborted_data_only_keeps_nothing_but_says_where_it_ended():
    fetched = data(2, 10, b"x") + marker(2, 11, commit=False)
    assert committed_records(fetched, [(2, 10)]) == (b"", 12)


def test_an_aborted_transaction_starting_after_the_set_drops_nothing_yet_and_magic_0_data_stays():
    fetched = build_message_set([(None, b"old")], base_offset=0) + data(2, 1, b"later")
    kept, end = committed_records(fetched, [(2, 5)])
    assert values(kept) == [b"old", b"later"] and end == 2


def test_a_torn_tail_is_not_part_of_the_set():
    whole = data(1, 0, b"a")
    kept, end = committed_records(whole + data(1, 1, b"b")[:30], [])
    assert kept == whole and end == 1
