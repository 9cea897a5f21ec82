"""The log cleaner's decisions on record batches (magic 2) and transactions, on built batches, no files: a batch
that loses records is rebuilt with its header (base offset, last offset, producer fields); a producer's last batch
keeps an empty header; aborted transactions' batches put no key in the offset map and go; markers stay while
anything of their transaction is left, then go past the delete horizon; the cleanable part ends before an open
transaction's segment."""

from zkbroker.log.compaction import (
    CleanedTransactions,
    LastRecord,
    batch_retention_rule,
    clean_chunk,
    first_uncleanable_offset,
    index_keys,
)
from zkbroker.log.offset_map import OffsetMap
from zkbroker.log.transaction_index import AbortedTxn
from zkbroker.protocol.compression import CODEC_GZIP
from zkbroker.protocol.message_set import iter_entries, iter_messages
from zkbroker.protocol.record_batch import (
    ControlRecordType,
    EndTxnMarker,
    batch_crc,
    build_end_txn_marker_batch,
    build_record_batch,
    read_header,
)

T0 = 1_700_000_000_000
WHERE = "test"


def batch(base, keys, *, pid=-1, epoch=0, seq=-1, txn=False, codec=0, values=None):
    values = values or [b"v%d" % (base + i) for i in range(len(keys))]
    return build_record_batch([(k, v, T0 + base + i) for i, (k, v) in enumerate(zip(keys, values))],
                              base_offset=base, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                              transactional=txn, codec=codec, partition_leader_epoch=3)


def marker(base, pid, kind, epoch=0):
    return build_end_txn_marker_batch(EndTxnMarker(kind, 5), producer_id=pid, producer_epoch=epoch, timestamp=T0,
                                      base_offset=base, partition_leader_epoch=3)


def clean(chunk, *, aborted=(), last_records=None, retain_deletes=True, map_from=None):
    """Build the offset map over `map_from` (default: `chunk`) and clean `chunk` as the cleaner does: a fresh
    transaction walk for each pass. Returns (Retained, the index entries of the ABORT markers kept)."""
    offset_map = OffsetMap(1 << 20)
    index_keys(map_from or chunk, offset_map, discard_keyless=False, where=WHERE,
               transactions=CleanedTransactions(aborted))
    transactions = CleanedTransactions(aborted)
    rule = batch_retention_rule(transactions, last_records or {}, retain_deletes)
    retained = clean_chunk(chunk, offset_map, retain_deletes, discard_keyless=False, where=WHERE,
                           batch_retention=rule)
    return retained, transactions.retained_aborted


def headers(records):
    return [e.batch for e in iter_entries(records)]


def messages(records):
    return [(m.offset, m.key, m.value) for m in iter_messages(records, control=True)]


def test_a_batch_that_loses_records_is_rebuilt_with_its_header():
    first = batch(0, [b"a", b"b", b"c", b"d"], pid=7, epoch=2, seq=10, codec=CODEC_GZIP)
    later = batch(4, [b"b", b"d"], pid=8, seq=0)
    retained, _ = clean(first + later)
    assert messages(retained.records) == [(0, b"a", b"v0"), (2, b"c", b"v2"), (4, b"b", b"v4"), (5, b"d", b"v5")]
    rebuilt, copied = headers(retained.records)
    original = read_header(first)
    assert (rebuilt.base_offset, rebuilt.last_offset, rebuilt.producer_id, rebuilt.producer_epoch,
            rebuilt.base_sequence, rebuilt.last_sequence, rebuilt.partition_leader_epoch, rebuilt.codec) == (
        0, 3, 7, 2, 10, 13, 3, CODEC_GZIP)  # the last offset and sequence stay: d (offset 3) went
    assert rebuilt.record_count == 2 and rebuilt.first_timestamp == T0 and rebuilt.max_timestamp == T0 + 2
    assert rebuilt.crc == batch_crc(retained.records, 0, rebuilt.size) and rebuilt.crc != original.crc
    assert retained.records[rebuilt.size:] == later  # a batch keeping every record is copied as it is
    assert retained.entries == [(0, 0), (rebuilt.size, 4)] and (retained.kept, retained.dropped) == (4, 2)


def test_a_producers_last_batch_keeps_an_empty_header_and_other_emptied_batches_go():
    old = batch(0, [b"a", b"b"], pid=7, epoch=1, seq=0)  # producer 7, superseded, its last batch
    plain = batch(2, [b"a"])  # no producer: emptied, it goes
    other = batch(3, [b"b"], pid=9, seq=0)  # producer 9, superseded, not its last batch (it wrote 5)
    newest = batch(4, [b"a", b"b"], pid=9, seq=1)
    last_records = {7: LastRecord(1, 1), 9: LastRecord(5, 0)}
    retained, _ = clean(old + plain + other + newest, last_records=last_records)
    empty, kept = headers(retained.records)
    assert (empty.base_offset, empty.last_offset, empty.record_count, empty.producer_id, empty.producer_epoch,
            empty.base_sequence, empty.first_timestamp, empty.max_timestamp, empty.codec) == (
        0, 1, 0, 7, 1, 0, -1, T0 + 1, 0)
    assert empty.crc == batch_crc(retained.records, 0, empty.size)
    assert kept.base_offset == 4 and messages(retained.records) == [(4, b"a", b"v4"), (5, b"b", b"v5")]
    # an empty header read back: no records, and kept as it is by the next cleaning
    again, _ = clean(retained.records, last_records=last_records)
    assert again.records == retained.records


def test_an_aborted_transaction_puts_no_key_in_the_map_and_its_batches_go_while_its_marker_stays():
    committed = batch(0, [b"k"], pid=7, seq=0, txn=True, values=[b"committed"])
    log = committed + marker(1, 7, ControlRecordType.COMMIT)
    log += batch(2, [b"k", b"x"], pid=7, seq=1, txn=True, values=[b"aborted", b"aborted"])
    log += batch(4, [b"y"], pid=8, seq=0)  # another producer's record in between
    log += marker(5, 7, ControlRecordType.ABORT)
    aborted = [AbortedTxn(7, 2, 5, 6)]
    retained, kept_index = clean(log, aborted=aborted, last_records={7: LastRecord(3, 0), 8: LastRecord(4, 0)})
    # the committed value of k survives (the aborted k is no key of the map); the aborted batch, producer 7's
    # last data batch, keeps an empty header; both markers stay: their transactions' batches were met
    commit, abort = EndTxnMarker(ControlRecordType.COMMIT, 5), EndTxnMarker(ControlRecordType.ABORT, 5)
    assert messages(retained.records) == [(0, b"k", b"committed"), (1, commit.key(), commit.value()),
                                          (4, b"y", b"v4"), (5, abort.key(), abort.value())]
    assert [(h.base_offset, h.record_count, h.is_transactional, h.is_control) for h in headers(retained.records)] \
        == [(0, 1, True, False), (1, 1, True, True), (2, 0, True, False), (4, 1, False, False), (5, 1, True, True)]
    assert kept_index == aborted  # the ABORT marker kept: its index entry goes to the cleaned segment

    # producer 7 wrote again since: the aborted batch goes whole, and its ABORT marker stays this time (met)
    retained, kept_index = clean(log, aborted=aborted, last_records={7: LastRecord(9, 0), 8: LastRecord(4, 0)})
    assert [h.base_offset for h in headers(retained.records)] == [0, 1, 4, 5] and kept_index == aborted
    # the next cleaning meets nothing of that transaction: its marker goes once past the delete horizon
    retained, kept_index = clean(retained.records, aborted=aborted, retain_deletes=False,
                                 last_records={7: LastRecord(9, 0), 8: LastRecord(4, 0)})
    assert [h.base_offset for h in headers(retained.records)] == [0, 1, 4] and kept_index == []


def test_a_commit_marker_stays_while_its_batches_do_then_goes_past_the_delete_horizon():
    log = batch(0, [b"k"], pid=7, seq=0, txn=True) + marker(1, 7, ControlRecordType.COMMIT)
    log += batch(2, [b"k"], pid=8, seq=0)  # supersedes the transaction's only record
    last_records = {7: LastRecord(0, 0), 8: LastRecord(2, 0)}
    # producer 7's data batch is its last one: it stays empty, and the marker with it (its batch was met)
    retained, _ = clean(log, last_records=last_records, retain_deletes=False)
    assert [(h.base_offset, h.record_count) for h in headers(retained.records)] == [(0, 0), (1, 1), (2, 1)]
    # once the producer is forgotten (expired): the emptied batch goes, then the marker, past the horizon only
    retained, _ = clean(log, last_records={8: LastRecord(2, 0)}, retain_deletes=False)
    assert [h.base_offset for h in headers(retained.records)] == [1, 2]
    within, _ = clean(retained.records, last_records={8: LastRecord(2, 0)}, retain_deletes=True)
    assert [h.base_offset for h in headers(within.records)] == [1, 2]
    past, _ = clean(retained.records, last_records={8: LastRecord(2, 0)}, retain_deletes=False)
    assert [h.base_offset for h in headers(past.records)] == [2]


def test_a_producers_last_marker_keeps_its_header_and_an_empty_control_batch_goes():
    log = batch(0, [b"k"], pid=7, seq=0, txn=True) + marker(1, 7, ControlRecordType.ABORT, epoch=1)
    aborted = [AbortedTxn(7, 0, 1, 2)]
    # the abort bumped the epoch (KIP-360): producer 7 has no data batch in epoch 1, so the marker is its last
    first, _ = clean(log, aborted=aborted, last_records={7: LastRecord(None, 1)})
    assert [(h.base_offset, h.record_count, h.is_control) for h in headers(first.records)] == [(1, 1, True)]
    second, kept_index = clean(first.records, aborted=aborted, last_records={7: LastRecord(None, 1)},
                               retain_deletes=False)
    assert [(h.base_offset, h.record_count, h.producer_epoch) for h in headers(second.records)] == [(1, 0, 1)]
    assert kept_index == []
    # an empty control batch goes as soon as it is met, unless it is still the producer's last
    third, _ = clean(second.records, last_records={}, retain_deletes=True)
    assert third.records == b""


def test_the_cleanable_part_ends_before_the_segment_of_an_open_transaction():
    bases = [0, 100, 200, 300]
    assert first_uncleanable_offset(bases, 300, None) == 300
    assert first_uncleanable_offset(bases, 300, 150) == 100
    assert first_uncleanable_offset(bases, 300, 100) == 100
    assert first_uncleanable_offset(bases, 300, 5) == 0
    assert first_uncleanable_offset(bases, 300, 320) == 300
