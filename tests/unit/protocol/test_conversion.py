"""Message format conversion: record batches down-converted for old Fetch versions (read back by our walker and
by kafka-python's legacy reader), zstd refused, and message.format.version's conversion on write both ways."""

import pytest
from kafka.record.memory_records import MemoryRecords

from zkbroker.protocol.compression import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD
from zkbroker.protocol.conversion import ConversionError, convert_for_write, down_convert, highest_magic
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.message_set import analyze, assign_offsets, build_message_set, iter_messages
from zkbroker.protocol.record_batch import build_record_batch, read_header

T = 1_500_000_000_000
ITEMS = [(b"k0", b"v0", T), (None, b"v1", T + 5, [("h", b"x")]), (b"k2", None, T + 2)]


def stored(*sets, leader_epoch=0):
    """Sets as the broker stores them: numbered from 0."""
    return bytes(assign_offsets(bytearray(b"".join(sets)), 0, leader_epoch=leader_epoch).records)


def kafka_python(data):
    records = MemoryRecords(bytes(data))
    out = []
    while (batch := records.next_batch()) is not None:
        out += [(r.offset, r.key, r.value, r.timestamp) for r in batch]
    return out


@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4])
@pytest.mark.parametrize("to_magic", [0, 1])
def test_batches_down_converted_read_the_same_for_old_clients(codec, to_magic):
    data = stored(build_record_batch(ITEMS, codec=codec), build_record_batch(ITEMS[:1], codec=codec))
    converted = down_convert(data, to_magic, 0)
    assert highest_magic(converted) == to_magic
    assert analyze(converted).last_offset == 3  # CRCs and offsets hold
    expected = [(i, k, v, ts if to_magic else -1) for i, (k, v, ts, *_) in enumerate(ITEMS + ITEMS[:1])]
    assert [(m.offset, m.key, m.value, m.timestamp) for m in iter_messages(converted)] == expected
    assert [t[:3] for t in kafka_python(converted)] == [e[:3] for e in expected]


def test_records_below_the_fetch_offset_are_left_out_and_old_entries_pass_unchanged():
    legacy = build_message_set([(None, b"m", T)], magic=1)
    data = stored(build_record_batch(ITEMS), legacy, build_record_batch(ITEMS[:2], codec=CODEC_GZIP))
    converted = down_convert(data, 1, 2)
    assert [m.offset for m in iter_messages(converted)] == [2, 3, 4, 5]
    start = read_header(data).size
    assert legacy[8:] in converted and data[start:start + len(legacy)] in converted


def test_a_log_append_time_batch_keeps_its_time_in_magic_1():
    data = stored(build_record_batch(ITEMS, log_append_time=True, timestamp=T + 99))
    header = read_header(data)
    assert {m.timestamp for m in iter_messages(down_convert(data, 1, 0))} == {header.max_timestamp}


def test_a_zstd_batch_cannot_be_down_converted():
    data = stored(build_record_batch(ITEMS, codec=CODEC_ZSTD))
    with pytest.raises(ConversionError) as raised:
        down_convert(data, 1, 0)
    assert raised.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE == 76


def test_the_converted_set_is_cut_to_max_bytes_but_keeps_its_first_entry():
    data = stored(*[build_record_batch([(None, b"x" * 100, T)]) for _ in range(5)])
    assert len(list(iter_messages(down_convert(data, 0, 0, max_bytes=1)))) == 1
    assert len(list(iter_messages(down_convert(data, 0, 0, max_bytes=300)))) == 2


def test_a_torn_tail_is_left_out():
    data = stored(build_record_batch(ITEMS), build_record_batch(ITEMS))
    assert [m.offset for m in iter_messages(down_convert(data[:-5], 0, 0))] == [0, 1, 2]


# -- on write -------------------------------------------------------------------------------------


def test_old_messages_become_one_record_batch_for_format_0_11():
    produced = build_message_set([(b"a", b"1", T), (None, b"2", T + 1)], magic=1) + build_message_set(
        [(None, b"3", T + 2)], magic=1, codec=CODEC_SNAPPY)
    converted = convert_for_write(produced, 2)
    header = read_header(converted)
    assert (header.record_count, header.codec, len(converted)) == (3, CODEC_SNAPPY, header.size)
    info = assign_offsets(bytearray(converted), 10)
    assert [(m.offset, m.value, m.timestamp) for m in iter_messages(info.records)] == [
        (10, b"1", T), (11, b"2", T + 1), (12, b"3", T + 2)]


@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_GZIP, CODEC_LZ4])
def test_batches_become_magic_0_for_format_0_8_2(codec):
    converted = convert_for_write(build_record_batch([(b"k", b"v", T), (None, b"w", T + 1)], codec=codec), 0)
    assert highest_magic(converted) == 0
    info = assign_offsets(bytearray(converted), 5)  # a magic-0 wrapper is renumbered and re-CRC'd
    assert [(m.offset, m.key, m.value, m.magic) for m in iter_messages(info.records)] == [
        (5, b"k", b"v", 0), (6, None, b"w", 0)]


def test_magic_1_becomes_magic_0_and_back():
    m1 = build_message_set([(None, b"x", T)], magic=1, codec=CODEC_GZIP)
    m0 = convert_for_write(m1, 0)
    assert [(m.value, m.magic, m.timestamp) for m in iter_messages(m0)] == [(b"x", 0, -1)]
    assert [(m.value, m.magic, m.timestamp) for m in iter_messages(convert_for_write(m0, 1))] == [(b"x", 1, -1)]


def test_what_old_formats_cannot_hold_is_refused():
    with pytest.raises(ConversionError) as raised:
        convert_for_write(build_record_batch([(None, b"v", T)], producer_id=3, producer_epoch=0, base_sequence=0), 1)
    assert raised.value.error_code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    with pytest.raises(ConversionError, match="headers"):
        convert_for_write(build_record_batch([(None, b"v", T, [("h", b"")])]), 1)
    with pytest.raises(ConversionError) as raised:
        convert_for_write(build_record_batch([(None, b"v", T)], codec=CODEC_ZSTD), 1)
    assert raised.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize("to_magic", [0, 1])
def test_down_conversion_drops_control_batches(to_magic):
    from zkbroker.protocol.record_batch import ControlRecordType, EndTxnMarker, build_end_txn_marker_batch

    data = build_record_batch([(None, b"a", T), (None, b"b", T)], producer_id=3, producer_epoch=0, base_sequence=0,
                              transactional=True)
    control = build_end_txn_marker_batch(EndTxnMarker(ControlRecordType.COMMIT, 0), producer_id=3,
                                         producer_epoch=0, timestamp=T)
    log = bytes(assign_offsets(bytearray(data + control), 0, allow_control=True).records)
    converted = down_convert(log, to_magic, 0)
    assert [(m.offset, m.value) for m in iter_messages(converted)] == [(0, b"a"), (1, b"b")]
