"""Record batches (magic 2) in the log: the seed's Kafka 2.3 log rebuilt by our broker's append path and dumped
byte for byte as Kafka's DumpLogSegments printed it, the time index by Kafka's rules, ListOffsets by timestamp,
retention by the largest timestamp, LogAppendTime, leader epochs, and recovery of a torn magic-2 tail."""

import os
import struct
from pathlib import Path

import pytest

from zkbroker.cli import main
from zkbroker.log.log import Log
from zkbroker.log.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from zkbroker.protocol.compression import CODEC_GZIP, CODEC_LZ4
from zkbroker.protocol.message_set import build_message_set, iter_messages
from zkbroker.protocol.record_batch import build_record_batch, read_header

GOLDEN = Path(__file__).parent / "golden"
SEED_VALUE = b"This is a great way to learn the framework."
T0 = 1_600_000_000_000
# Two compressed batches as compressed once (a newer zlib or LZ4 could compress differently, and the dump
# prints CRCs): gzip, records c (T0+20) and a null value (T0+25); LZ4, record d (T0+35) from producer 7.
GZIP_BATCH = bytes.fromhex(
    "000000000000000000000054ffffffff02ae078f4800010000000100000174876e801400000174876e8019ffffffffffffffffffff"
    "ffffffff000000021f8b0800000000000003e363606060644a66e061e06262646400002648f5a50f000000"
)
LZ4_BATCH = bytes.fromhex(
    "000000000000000000000048ffffffff02bf8b6adf00030000000000000174876e802300000174876e8023000000000000000700"
    "00000000000000000104224d18604082080000800e0000000102640000000000"
)


class Clock:
    def __init__(self, now=T0):
        self.now = now

    def __call__(self):
        return self.now


def assert_golden(name, text):
    path = GOLDEN / name
    if os.environ.get("ZKBROKER_UPDATE_GOLDEN"):
        path.write_bytes(text.encode())
    assert text.encode() == path.read_bytes()


def dump(capsys, *args):
    assert main(["dump-log", *args]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def all_messages(log):
    return [m for s in log.segments for m in iter_messages(s.read(s.base_offset, None, 1 << 30).read_bytes())]


# -- the seed ---------------------------------------------------------------------------------------


def test_the_frozen_batches_hold_their_records():
    assert [(m.value, m.timestamp) for m in iter_messages(GZIP_BATCH)] == [(b"c", T0 + 20), (None, T0 + 25)]
    assert [(m.value, m.timestamp) for m in iter_messages(LZ4_BATCH)] == [(b"d", T0 + 35)]
    assert (read_header(GZIP_BATCH).codec, read_header(LZ4_BATCH).codec) == (CODEC_GZIP, CODEC_LZ4)


def test_the_seeds_log_appended_by_our_broker_dumps_as_kafka_2_3_printed_it(tmp_path, monkeypatch, capsys):
    """seeds/002: a Kafka 2.3 partition written by a producer (two batches of two records), dumped with
    DumpLogSegments --print-data-log. Produced to our log as the producer sent them (offsets 0, leader epoch
    -1), the broker path assigns offsets and epoch 0, and the dump is the seed's text."""
    log = Log(str(tmp_path / "test-0"))
    for first, last in ((1567500758127, 1567500758701), (1567500759463, 1567500760242)):
        produced = bytearray(build_record_batch([(None, SEED_VALUE, first), (None, SEED_VALUE, last)]))
        log.append(produced, leader_epoch=0)
    log.close()
    monkeypatch.chdir(log.dir)
    out, err = dump(capsys, "--files", "00000000000000000000.log", "--print-data-log")
    assert out == (GOLDEN / "dump_log_magic2_seed.txt").read_text()
    assert err == ""


def mixed_log(tmp_path):
    """Batches and messages of all three magics, out-of-order timestamps, an index entry per set."""
    clock = Clock()
    log = Log(str(tmp_path / "t-0"), {"index.interval.bytes": 0}, clock=clock)
    sets = [
        build_record_batch([(b"k", b"a", T0 + 10, [("trace", b"1")]), (None, b"b", T0 + 22)]),
        build_message_set([(None, b"m0")]),
        GZIP_BATCH,
        build_message_set([(b"x", b"m1", T0 + 40)], magic=1),
        LZ4_BATCH,
        build_record_batch([(None, b"e", T0 + 50)]),
    ]
    for records in sets:
        log.append(bytearray(records), leader_epoch=3)
    return log


@pytest.mark.parametrize("flags, golden", [([], "dump_mixed_magics.txt"),
                                           (["--print-data-log"], "dump_mixed_magics_data.txt")])
def test_dump_of_a_log_of_all_three_magics(tmp_path, monkeypatch, capsys, flags, golden):
    log = mixed_log(tmp_path)
    log.close()
    monkeypatch.chdir(log.dir)
    out, err = dump(capsys, "--files", "00000000000000000000.log", *flags)
    assert_golden(golden, out)
    assert err == ""


def test_time_index_dump_golden_and_its_checks(tmp_path, monkeypatch, capsys):
    log = mixed_log(tmp_path)
    log.close()
    monkeypatch.chdir(log.dir)
    out, err = dump(capsys, "--files", "00000000000000000000.timeindex")
    assert_golden("dump_time_index.txt", out)
    assert err == ""
    # an entry whose timestamp is not its entry's largest, and one that points inside a batch
    with open("00000000000000000000.timeindex", "r+b") as f:
        f.write(struct.pack(">qi", T0 + 31, 1) + struct.pack(">qi", T0 + 24, 3))
    out, err = dump(capsys, "--files", "00000000000000000000.timeindex")
    assert err.splitlines() == [
        f"Found timestamp mismatch in :{os.path.abspath('00000000000000000000.timeindex')}",
        f"  Index timestamp: {T0 + 31}, log timestamp: {T0 + 22}",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 3, found log offset: 4",
    ]


# -- the time index ---------------------------------------------------------------------------------


def test_time_index_entries_follow_kafkas_rules(tmp_path):
    log = mixed_log(tmp_path)
    segment = log.active_segment
    # an offer with each offset index entry (every set after the first, index.interval.bytes=0) of the largest
    # timestamp so far, this set's included; an entry only when that grew (not for the batch of T0+35)
    assert [segment.time_index.entry(i) for i in range(segment.time_index.entries)] == [
        (T0 + 22, 1), (T0 + 25, 4), (T0 + 40, 5), (T0 + 50, 7)]
    assert segment.max_timestamp == (T0 + 50, 7)
    log.append(bytearray(build_record_batch([(None, b"late", T0 + 55)])))  # not indexed yet ...
    log.roll()  # ... the roll adds the segment's largest timestamp
    assert segment.time_index.last_entry == (T0 + 55, 8)


def test_the_largest_timestamp_survives_a_clean_restart_and_a_crash(tmp_path):
    log = mixed_log(tmp_path)
    log.close()
    reopened = Log(log.dir, {"index.interval.bytes": 0})
    assert reopened.active_segment.max_timestamp == (T0 + 50, 7)
    reopened.append(bytearray(build_record_batch([(None, b"f", T0 + 60)])))
    reopened.flush()
    # a crash: no clean shutdown marker, no close: recovery rebuilds both indexes
    crashed = Log(log.dir, {"index.interval.bytes": 0}, recovery_point=0)
    assert crashed.active_segment.max_timestamp == (T0 + 60, 8)
    assert crashed.active_segment.time_index.last_entry == (T0 + 60, 8)  # rebuilt: an offer per index entry
    assert crashed.recovered_leader_epochs == [(3, 0), (3, 3), (3, 6), (3, 7), (-1, 8)]


def test_a_log_written_before_time_indexes_gets_empty_ones_and_finds_its_timestamps(tmp_path):
    log = mixed_log(tmp_path)
    log.roll()
    log.close()
    for name in os.listdir(log.dir):
        if name.endswith(".timeindex"):
            os.remove(os.path.join(log.dir, name))
    open(os.path.join(log.dir, "..", ".kafka_cleanshutdown"), "w").close()
    reopened = Log(log.dir, {"index.interval.bytes": 0})
    first = reopened.segments[0]
    assert first.time_index.entries == 0
    assert first.max_timestamp == (T0 + 50, 7)
    assert reopened.fetch_offset_by_timestamp(T0 + 23) == (T0 + 25, 4)


def test_time_index_lookup_truncation_and_sanity(tmp_path):
    index = TimeIndex(str(tmp_path / "00000000000000000100.timeindex"), 100, max_index_size=12 * 5)
    assert index.lookup(5) == (NO_TIMESTAMP, 100)
    for timestamp, offset in [(10, 100), (10, 101), (9, 102), (20, 103), (30, 103), (40, 110)]:
        if timestamp < index.last_entry.timestamp:
            with pytest.raises(ValueError):
                index.maybe_append(timestamp, offset)
        else:
            index.maybe_append(timestamp, offset)
    assert [index.entry(i) for i in range(index.entries)] == [(10, 100), (20, 103), (30, 103), (40, 110)]
    assert index.is_full  # the last slot is kept for the roll's entry
    index.maybe_append(50, 111, skip_full_check=True)
    assert index.lookup(29) == (20, 103) and index.lookup(1000) == (50, 111)
    index.truncate_to(103)
    assert index.last_entry == TimestampOffset(10, 100)
    assert index.is_sane()
    index.close()
    assert os.path.getsize(index.path) == 12


# -- ListOffsets by timestamp, retention ------------------------------------------------------------


def test_offsets_by_timestamp_find_the_first_record_at_or_after_it(tmp_path):
    log = mixed_log(tmp_path)
    log.roll()
    log.append(bytearray(build_record_batch([(None, b"g", T0 + 45), (None, b"h", T0 + 70)])))
    find = log.fetch_offset_by_timestamp
    assert find(T0) == (T0 + 10, 0)
    assert find(T0 + 11) == (T0 + 22, 1)  # inside the first batch
    assert find(T0 + 23) == (T0 + 25, 4)  # inside a compressed batch, past an earlier-stamped record
    assert find(T0 + 36) == (T0 + 40, 5)  # a magic-1 message
    assert find(T0 + 41) == (T0 + 50, 7)  # the first segment whose largest timestamp reaches it
    assert find(T0 + 51) == (T0 + 70, 9)  # the second segment
    assert find(T0 + 71) is None


def test_retention_goes_by_the_largest_timestamp_and_by_mtime_without_timestamps(tmp_path):
    clock = Clock(T0 + 1000)
    log = Log(str(tmp_path / "t-0"), {"retention.ms": 500}, clock=clock)
    log.append(bytearray(build_record_batch([(None, b"old", T0)])))
    log.roll()
    log.append(bytearray(build_record_batch([(None, b"new", T0 + 900)])))
    log.roll()
    log.append(bytearray(build_message_set([(None, b"magic 0")])))
    log.roll()
    for segment in log.segments:
        segment.set_last_modified(T0 + 1000)  # every file just written: 0.8.2's rule would delete nothing
    log.segments[2].set_last_modified(T0)  # the magic-0 segment goes by its mtime
    assert log.delete_old_segments() == 1
    assert [s.base_offset for s in log.segments] == [1, 2, 3]


# -- appends ----------------------------------------------------------------------------------------


def test_the_leader_stamps_its_epoch_and_nothing_else_changes(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    produced = build_record_batch([(None, b"x", T0), (None, b"y", T0 + 1)], codec=CODEC_GZIP)
    info = log.append(bytearray(produced), leader_epoch=9)
    stored = log.read(0, 1 << 20).read_bytes()
    assert stored[:8] == struct.pack(">q", 0) and stored[12:16] == struct.pack(">i", 9)
    assert stored[16:] == produced[16:] and stored[8:12] == produced[8:12]
    assert [(b.partition_leader_epoch, b.base_offset) for b in info.batches] == [(9, 0)]


def test_log_append_time_stamps_batches_and_magic_1_messages(tmp_path):
    clock = Clock(T0 + 5000)
    log = Log(str(tmp_path / "t-0"), {"message.timestamp.type": "LogAppendTime"}, clock=clock)
    log.append(bytearray(build_record_batch([(None, b"a", T0), (None, b"b", T0 + 1)])))
    log.append(bytearray(build_message_set([(None, b"c", T0)], magic=1)))
    log.append(bytearray(build_message_set([(None, b"d", T0), (None, b"e", T0)], magic=1, codec=CODEC_GZIP)))
    log.append(bytearray(build_message_set([(None, b"f")])))
    messages = all_messages(log)  # the CRCs checked again by the read
    assert [m.timestamp for m in messages] == [T0 + 5000] * 5 + [-1]
    assert read_header(log.read(0, 1 << 20).read_bytes()).log_append_time
    assert log.active_segment.max_timestamp == (T0 + 5000, 1)


def test_a_torn_magic_2_tail_is_cut_at_recovery(tmp_path):
    log = Log(str(tmp_path / "t-0"))
    for i in range(3):
        log.append(bytearray(build_record_batch([(None, b"v%d" % i, T0 + i)] * 3)), leader_epoch=1)
    log.flush()
    path = log.active_segment.log_path
    size = os.path.getsize(path)
    batch = read_header(log.read(6, 1 << 20).read_bytes()).size
    with open(path, "r+b") as f:
        f.truncate(size - 7)  # the last batch torn
    reopened = Log(log.dir, recovery_point=0)
    assert reopened.log_end_offset == 6
    assert os.path.getsize(path) == size - batch
    assert [m.offset for m in all_messages(reopened)] == list(range(6))
    # a flipped byte inside the second batch: its CRC-32C fails and recovery cuts from there
    with open(path, "r+b") as f:
        f.seek(batch + 70)
        byte = f.read(1)
        f.seek(batch + 70)
        f.write(bytes([byte[0] ^ 1]))
    again = Log(log.dir, recovery_point=0)
    assert again.log_end_offset == 3


def test_truncating_inside_a_batch_cuts_the_whole_batch_and_its_time_index_entries(tmp_path):
    log = Log(str(tmp_path / "t-0"), {"index.interval.bytes": 0})
    for i in range(4):
        log.append(bytearray(build_record_batch([(None, b"v", T0 + 10 * i + j) for j in range(3)])))
    assert log.active_segment.time_index.last_entry == (T0 + 32, 11)
    log.truncate_to(7)  # inside the third batch (offsets 6-8): the whole batch goes ...
    assert log.log_end_offset == 7  # ... though the log end is the target, as 0.8.2 and Kafka 2.x have it
    assert [m.offset for m in all_messages(log)] == list(range(6))
    assert log.active_segment.time_index.last_entry == (T0 + 12, 5)
    assert log.active_segment.max_timestamp == (T0 + 12, 5)
    assert log.active_segment.translate_offset(4) == (5, log.active_segment.translate_offset(3)[1])


def test_message_format_version_converts_appends_and_unset_stores_as_sent(tmp_path):
    from zkbroker.protocol.conversion import ConversionError, highest_magic

    def stored(log):
        return log.read(0, 1 << 20).read_bytes()

    as_sent = Log(str(tmp_path / "a-0"))
    as_sent.append(bytearray(build_message_set([(None, b"m0")]) + build_record_batch([(None, b"b", T0)])))
    assert {m.magic for m in iter_messages(stored(as_sent))} == {0, 2}

    old = Log(str(tmp_path / "b-0"), {"message.format.version": "0.8.2"})
    old.append(bytearray(build_record_batch([(b"k", b"b", T0), (None, b"c", T0)], codec=CODEC_GZIP)))
    assert highest_magic(stored(old)) == 0
    assert [(m.offset, m.value) for m in iter_messages(stored(old))] == [(0, b"b"), (1, b"c")]
    with pytest.raises(ConversionError) as raised:  # an idempotent producer's batch cannot become magic 0
        old.append(bytearray(build_record_batch([(None, b"x", T0)], producer_id=1, producer_epoch=0,
                                                base_sequence=0)))
    assert raised.value.error_code == 43 and old.log_end_offset == 2

    new = Log(str(tmp_path / "c-0"), {"message.format.version": "0.11.0"})
    new.append(bytearray(build_message_set([(None, b"m1", T0)], magic=1)))
    assert highest_magic(stored(new)) == 2 and read_header(stored(new)).partition_leader_epoch == -1
