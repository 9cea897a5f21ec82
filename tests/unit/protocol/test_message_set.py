"""Message sets magic 0 and 1: kafka-python's legacy builder as the golden reference."""

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from zkbroker.protocol.compression import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, compress
from zkbroker.protocol.errors import ErrorCode, RemoteProtocolError
from zkbroker.protocol.message_set import (
    InvalidMessageError,
    Message,
    analyze,
    assign_offsets,
    build_message_set,
    encode_message,
    iter_messages,
)

CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4]
ITEMS = [(b"key-0", b"value-0", 1500000000000), (None, b"v1", 1500000000001), (b"k2", None, 1500000000002)]


def kafka_python_set(magic, codec, items=ITEMS, first_offset=0):
    if magic == 0 and codec == CODEC_LZ4:
        pytest.importorskip("xxhash")  # kafka-python's 0.8 lz4 framing needs it
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (key, value, timestamp) in enumerate(items):
        builder.append(first_offset + i, timestamp=timestamp if magic else None, key=key, value=value)
    return bytes(builder.build())


def kafka_python_read(data):
    records = MemoryRecords(bytes(data))
    out = []
    while (batch := records.next_batch()) is not None:
        out += [(r.offset, r.key, r.value, r.timestamp) for r in batch]
    return out


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_golden_bytes(magic):
    ours = build_message_set(ITEMS, magic=magic)
    assert ours == kafka_python_set(magic, CODEC_NONE)


def test_magic0_layout_by_hand():
    message = encode_message(b"k", b"val")
    body = struct.pack(">bbi", 0, 0, 1) + b"k" + struct.pack(">i", 3) + b"val"
    assert message == struct.pack(">I", zlib.crc32(body)) + body
    assert build_message_set([(b"k", b"val")], base_offset=7) == struct.pack(">qi", 7, len(message)) + message


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_sets_assign_and_read_back(magic, codec):
    produced = bytearray(kafka_python_set(magic, codec))
    info = assign_offsets(produced, 1000)
    assert (info.first_offset, info.last_offset, info.count) == (1000, 1002, 3)
    assert info.shallow_count == (1 if codec else 3)
    assert info.valid_bytes == len(produced)
    assert info.codec == codec
    assert info.max_timestamp == (1500000000002 if magic else -1)
    expected = [
        (1000 + i, key, value, ts if magic else -1) for i, (key, value, ts) in enumerate(ITEMS)
    ]
    ours = [(m.offset, m.key, m.value, m.timestamp) for m in iter_messages(info.records)]
    assert ours == expected
    theirs = kafka_python_read(info.records)
    assert [t[:3] for t in theirs] == [e[:3] for e in expected]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_our_sets_read_by_kafka_python(magic, codec):
    if magic == 0 and codec == CODEC_LZ4:
        pytest.importorskip("xxhash")
    ours = build_message_set(ITEMS, magic=magic, codec=codec, base_offset=40)
    theirs = kafka_python_read(ours)
    assert [(o, k, v) for o, k, v, _ in theirs] == [(40 + i, k, v) for i, (k, v, _) in enumerate(ITEMS)]
    if magic:
        assert [t[3] for t in theirs] == [ts for _, _, ts in ITEMS]


def test_uncompressed_offsets_are_assigned_in_place_without_touching_crcs():
    data = bytearray(build_message_set(ITEMS, magic=1))
    before = bytes(data)
    info = assign_offsets(data, 5)
    assert isinstance(info.records, memoryview) and info.records.obj is data
    assert [m.offset for m in iter_messages(data)] == [5, 6, 7]
    # only the 8-byte offset fields changed
    changed = [i for i in range(len(data)) if data[i] != before[i]]
    offset_positions = set()
    pos = 0
    while pos < len(data):
        offset_positions.update(range(pos, pos + 8))
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    assert set(changed) <= offset_positions


def test_magic1_compressed_changes_only_the_wrapper_offset():
    data = bytearray(kafka_python_set(1, CODEC_GZIP))
    before = bytes(data)
    info = assign_offsets(data, 10)
    assert info.records.obj is data
    assert struct.unpack_from(">q", data)[0] == 12
    assert data[8:] == before[8:]


def test_magic0_compressed_is_renumbered_recompressed_and_re_crcd():
    data = bytearray(build_message_set(ITEMS, magic=0, codec=CODEC_GZIP))
    info = assign_offsets(data, 100)
    assert isinstance(info.records, bytes)
    assert struct.unpack_from(">q", info.records)[0] == 102  # wrapper = last inner offset
    assert [m.offset for m in iter_messages(info.records)] == [100, 101, 102]
    assert analyze(info.records).last_offset == 102  # CRCs hold


def test_mixed_set_with_two_compressed_wrappers_and_plain_messages():
    data = bytearray(
        build_message_set(ITEMS[:1], magic=0)
        + build_message_set(ITEMS, magic=0, codec=CODEC_SNAPPY)
        + build_message_set(ITEMS, magic=1, codec=CODEC_LZ4)
        + build_message_set(ITEMS[:2], magic=0, codec=CODEC_LZ4)
    )
    info = assign_offsets(data, 0)
    assert (info.first_offset, info.last_offset, info.count, info.shallow_count) == (0, 8, 9, 4)
    assert [m.offset for m in iter_messages(info.records)] == list(range(9))
    assert [m.magic for m in iter_messages(info.records)] == [0, 0, 0, 0, 1, 1, 1, 0, 0]


def test_magic1_wrapper_with_non_relative_inner_offsets_is_rebuilt():
    inner = build_message_set(ITEMS, magic=1, base_offset=50)  # absolute, not 0..n-1
    wrapper = encode_message(None, _gzip(inner), magic=1, attributes=CODEC_GZIP)
    data = bytearray(struct.pack(">qi", 0, len(wrapper)) + wrapper)
    info = assign_offsets(data, 7)
    assert [m.offset for m in iter_messages(info.records)] == [7, 8, 9]


def _gzip(data):
    return compress(CODEC_GZIP, data)


def test_log_append_time_wrapper_timestamp_applies_to_inner_messages():
    inner = build_message_set(ITEMS, magic=1)
    wrapper = encode_message(None, _gzip(inner), magic=1, attributes=CODEC_GZIP | 0x08, timestamp=42)
    data = struct.pack(">qi", 2, len(wrapper)) + wrapper
    assert [m.timestamp for m in iter_messages(data)] == [42, 42, 42]


def test_partial_trailing_message_is_tolerated():
    full = build_message_set(ITEMS, magic=1)
    first_size = 12 + struct.unpack_from(">i", full, 8)[0]
    for cut in range(len(full)):
        data = full[:cut]
        messages = list(iter_messages(data))
        info = analyze(data)
        assert len(messages) == info.count
        assert info.valid_bytes <= cut
        if cut >= first_size:
            assert messages[0] == Message(0, b"key-0", b"value-0", 1500000000000, 1)
        produced = assign_offsets(bytearray(data), 0)
        assert produced.count == len(messages) and len(produced.records) == produced.valid_bytes


def test_empty_set():
    info = assign_offsets(bytearray(), 10)
    assert (info.count, info.first_offset, info.last_offset, info.valid_bytes) == (0, 10, 9, 0)
    assert list(iter_messages(b"")) == []


def test_bad_crc_is_corrupt_message():
    data = bytearray(build_message_set(ITEMS, magic=0))
    data[-5] ^= 0xFF  # the last key's last byte
    for check in (lambda: assign_offsets(data, 0), lambda: analyze(data), lambda: list(iter_messages(data))):
        with pytest.raises(InvalidMessageError) as info:
            check()
        assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE
        assert isinstance(info.value, RemoteProtocolError)
        assert info.value.position > 0  # the third message, not the first
    assert len(list(iter_messages(data, verify_crc=False))) == 3


def test_bad_inner_crc_is_corrupt_message():
    inner = bytearray(build_message_set(ITEMS, magic=0))
    inner[-1] ^= 0xFF
    wrapper = encode_message(None, _gzip(inner), attributes=CODEC_GZIP)
    data = bytearray(struct.pack(">qi", 0, len(wrapper)) + wrapper)
    with pytest.raises(InvalidMessageError):
        assign_offsets(data, 0)
    analyze(data)  # the shallow check only sees the (valid) wrapper CRC


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: struct.pack_into(">i", d, 8, 3),  # size below the minimum
        lambda d: struct.pack_into(">b", d, 16, 2),  # magic 2 in a legacy set
    ],
)
def test_corrupt_headers(mutate):
    data = bytearray(build_message_set(ITEMS, magic=1))
    mutate(data)
    with pytest.raises(InvalidMessageError):
        assign_offsets(data, 0)


def test_inconsistent_key_length_with_a_valid_crc():
    body = struct.pack(">bbi", 0, 0, 100) + b"k" + struct.pack(">i", 1) + b"v"
    message = struct.pack(">I", zlib.crc32(body)) + body
    data = bytearray(struct.pack(">qi", 0, len(message)) + message)
    with pytest.raises(InvalidMessageError):
        assign_offsets(data, 0)
    with pytest.raises(InvalidMessageError):
        list(iter_messages(data))


def test_message_too_large():
    data = bytearray(build_message_set([(None, b"x" * 100)]))
    with pytest.raises(InvalidMessageError) as info:
        assign_offsets(data, 0, max_message_bytes=50)
    assert info.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert assign_offsets(data, 0, max_message_bytes=1000).count == 1


def test_nested_compression_is_rejected():
    inner = build_message_set(ITEMS, magic=0, codec=CODEC_GZIP)
    wrapper = encode_message(None, _gzip(inner), attributes=CODEC_GZIP)
    data = bytearray(struct.pack(">qi", 0, len(wrapper)) + wrapper)
    with pytest.raises(InvalidMessageError):
        assign_offsets(data, 0)


def test_read_only_input_is_copied_once():
    data = build_message_set(ITEMS)
    info = assign_offsets(data, 3)
    assert [m.offset for m in iter_messages(info.records)] == [3, 4, 5]
    assert struct.unpack_from(">q", data)[0] == 0


def test_analyze_reports_entry_offsets_and_monotonicity():
    data = build_message_set(ITEMS, magic=1, base_offset=20)
    info = analyze(data)
    assert (info.first_offset, info.last_offset, info.count, info.offsets_monotonic) == (20, 22, 3, True)
    wrapped = build_message_set(ITEMS, magic=0, codec=CODEC_GZIP, base_offset=30)
    info = analyze(data + wrapped)
    assert (info.first_offset, info.last_offset, info.shallow_count) == (20, 32, 4)
    assert not analyze(wrapped + data).offsets_monotonic


# -- the produce path's lean loop (uncompressed runs) against the reader ----------------------------------

_fields = st.one_of(st.none(), st.binary(max_size=40))
_runs = st.lists(
    st.tuples(st.sampled_from([0, 1]), st.sampled_from([CODEC_NONE, CODEC_NONE, CODEC_GZIP]),
              st.lists(st.tuples(_fields, _fields), min_size=1, max_size=6)),
    min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(_runs, st.integers(0, 2**40))
def test_assigned_sets_read_back_as_produced(runs, base):
    data = bytearray(b"".join(build_message_set(items, magic=magic, codec=codec) for magic, codec, items in runs))
    info = assign_offsets(data, base)
    produced = [(key, value) for _, _, items in runs for key, value in items]
    read = list(iter_messages(info.records))
    assert [(m.key, m.value) for m in read] == produced
    assert [m.offset for m in read] == list(range(base, base + len(produced)))
    assert (info.first_offset, info.last_offset, info.count) == (base, base + len(produced) - 1, len(produced))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1]), _fields, _fields), min_size=1, max_size=8), st.data())
def test_any_changed_byte_of_a_message_is_refused(messages, data):
    sets = [build_message_set([(key, value)], magic=magic) for magic, key, value in messages]
    victim = data.draw(st.integers(0, len(sets) - 1))
    start = sum(map(len, sets[:victim]))
    at = data.draw(st.integers(start + 12, start + len(sets[victim]) - 1))  # crc through the value
    corrupt = bytearray(b"".join(sets))
    corrupt[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(InvalidMessageError) as raised:
        assign_offsets(corrupt, 0)
    assert raised.value.position == start


@settings(max_examples=200, deadline=None)
@given(_runs, st.lists(st.integers(-3, 3), min_size=40, max_size=40), st.integers(0, 2**40))
def test_a_followers_analyze_matches_the_general_walk(runs, steps, base):
    # The general walk (taken when CRCs are not verified) is the reference for the lean loop, including sets
    # whose offsets do not rise: those are reported, never refused.
    data = bytearray(b"".join(build_message_set(items, magic=magic, codec=codec) for magic, codec, items in runs))
    assign_offsets(data, base)
    pos, k = 0, 0
    while pos + 12 <= len(data):  # shift some entries' offsets (outside the CRC) to break the order
        offset, size = struct.unpack_from(">qi", data, pos)
        struct.pack_into(">q", data, pos, offset + steps[k % len(steps)])
        pos, k = pos + 12 + size, k + 1
    assert analyze(data) == analyze(data, verify_crc=False)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1]), _fields, _fields), min_size=1, max_size=8), st.data())
def test_any_changed_byte_of_a_replicated_message_is_refused(messages, data):
    sets = [build_message_set([(key, value)], magic=magic) for magic, key, value in messages]
    victim = data.draw(st.integers(0, len(sets) - 1))
    start = sum(map(len, sets[:victim]))
    at = data.draw(st.integers(start + 12, start + len(sets[victim]) - 1))
    corrupt = bytearray(assign_offsets(bytearray(b"".join(sets)), 7).records)
    corrupt[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(InvalidMessageError) as raised:
        analyze(corrupt)
    assert raised.value.position == start
