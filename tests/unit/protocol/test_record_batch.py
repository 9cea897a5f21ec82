"""Record batches (magic 2): the seed's batches from a real Kafka 2.3 log, CRC-32C against known vectors and an
independent implementation, kafka-python's DefaultRecordBatch as the golden reference for every codec, and the
one message-set walk over batches: offsets assigned by patching the base offset and leader epoch only, torn
tails, corrupt and malformed batches, inflation bounds."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record._crc32c import crc as kafka_python_crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from zkbroker.protocol.compression import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD, compress
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.message_set import (
    InflationBoundError,
    InvalidMessageError,
    Message,
    analyze,
    assign_offsets,
    build_message_set,
    encode_message,
    entry_starts,
    iter_batch_records,
    iter_entries,
    iter_messages,
)
from zkbroker.protocol.record_batch import (
    ATTRIBUTES_AT,
    BATCH_OVERHEAD,
    CRC_AT,
    CorruptRecordError,
    batch_crc,
    build_record_batch,
    check_records,
    crc32c,
    encode_record,
    last_sequence,
    read_header,
)

CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]
SEED_VALUE = b"This is a great way to learn the framework."
ITEMS = [
    (b"key-0", b"value-0" * 20, 1500000000000, [("h1", b"v1"), ("h2", None)]),
    (None, b"v1" * 40, 1500000000007, []),
    (b"k2", None, 1499999999990, [("\u00e9t\u00e9", b"")]),
]


def kafka_python_batch(codec, items=ITEMS, producer_id=-1, base_sequence=-1):
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=producer_id, producer_epoch=0
        if producer_id >= 0 else -1, base_sequence=base_sequence, batch_size=1 << 20,
    )
    for i, (key, value, timestamp, headers) in enumerate(items):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


def kafka_python_read(data):
    records = MemoryRecords(bytes(data))
    out = []
    while (batch := records.next_batch()) is not None:
        out += [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in batch]
    return out


def expected_messages(base, items=ITEMS):
    return [Message(base + i, k, v, ts, 2, tuple(h)) for i, (k, v, ts, h) in enumerate(items)]


# -- CRC-32C -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "crc"),
    [
        (b"123456789", 0xE3069283),  # the check value of CRC-32C (Castagnoli)
        (bytes(32), 0x8A9136AA),  # RFC 3720 (iSCSI) B.4
        (b"\xff" * 32, 0x62A8AB43),
        (bytes(range(32)), 0x46DD794E),
        (bytes(range(31, -1, -1)), 0x113FDB5C),
    ],
)
def test_crc32c_known_vectors(data, crc):
    assert crc32c(data) == crc


@given(st.binary(max_size=600))
def test_crc32c_agrees_with_an_independent_implementation(data):
    assert crc32c(data) == kafka_python_crc32c(data)


# -- the seed: Kafka 2.3's own batches --------------------------------------------------------------


def seed_batch(base_offset, first, last):
    return build_record_batch([(None, SEED_VALUE, first), (None, SEED_VALUE, last)], base_offset=base_offset,
                              partition_leader_epoch=0)


def test_the_seeds_batches_byte_for_byte_crc_and_size():
    # DumpLogSegments of a Kafka 2.3 log (seeds/002): size 162, crc 2221167045 and 168766516
    first, second = seed_batch(0, 1567500758127, 1567500758701), seed_batch(2, 1567500759463, 1567500760242)
    assert (len(first), read_header(first).crc) == (162, 2221167045)
    assert (len(second), read_header(second).crc) == (162, 168766516)
    header = read_header(second)
    assert (header.base_offset, header.last_offset, header.record_count, header.max_timestamp) == (
        2, 3, 2, 1567500760242)
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence) == (-1, -1, -1, -1)


# -- batches against kafka-python --------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_read_by_kafka_python(codec):
    ours = build_record_batch(ITEMS, codec=codec, base_offset=40)
    assert kafka_python_read(ours) == [(40 + i, k, v, ts, h) for i, (k, v, ts, h) in enumerate(ITEMS)]


def test_uncompressed_batch_is_kafka_pythons_byte_for_byte():
    # kafka-python writes partition leader epoch 0 where Java's producer writes -1 (our default)
    assert build_record_batch(ITEMS, partition_leader_epoch=0) == kafka_python_batch(CODEC_NONE)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_assigned_and_read_back(codec):
    produced = bytearray(kafka_python_batch(codec))
    info = assign_offsets(produced, 1000, leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.count, info.shallow_count) == (1000, 1002, 3, 1)
    assert (info.codec, info.magic, info.valid_bytes) == (codec, 2, len(produced))
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (1500000000007, 1002)
    assert list(iter_messages(info.records)) == expected_messages(1000)
    assert read_header(info.records).partition_leader_epoch == 7
    assert [t[0] for t in kafka_python_read(info.records)] == [1000, 1001, 1002]


def test_assigning_offsets_patches_the_base_offset_and_leader_epoch_only():
    data = bytearray(kafka_python_batch(CODEC_GZIP) + build_record_batch(ITEMS[:1]))
    before = bytes(data)
    info = assign_offsets(data, 5, leader_epoch=3)
    assert info.records.obj is data  # in place
    second = read_header(before).size
    changed = {i for i in range(len(data)) if data[i] != before[i]}
    assert changed <= {*range(0, 8), *range(12, 16), *range(second, second + 8), *range(second + 12, second + 16)}
    assert [m.offset for m in iter_messages(data)] == [5, 6, 7, 8]
    assert analyze(data).last_offset == 8  # the clients' CRCs still hold
    assert [b.partition_leader_epoch for b in info.batches] == [3, 3]
    assert [(b.base_offset, b.last_offset) for b in info.batches] == [(5, 7), (8, 8)]


def test_producer_ids_and_sequences_reach_the_batch_info():
    data = bytearray(kafka_python_batch(CODEC_NONE, producer_id=4000, base_sequence=17))
    (batch,) = assign_offsets(data, 0).batches
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_sequence) == (4000, 0, 17, 19)
    header, records = iter_batch_records(data, 0)
    assert [r.sequence for r in records] == [17, 18, 19]


def test_sequences_wrap_at_int32_max():
    assert last_sequence(2**31 - 2, 3) == 1
    assert last_sequence(-1, 3) == -1


def test_a_set_of_all_three_magics_walks_as_one():
    data = bytearray(
        build_message_set([(None, b"m0")])
        + build_record_batch(ITEMS, codec=CODEC_LZ4)
        + build_message_set([(b"k", b"m1", 1500000000001)], magic=1, codec=CODEC_SNAPPY)
        + build_record_batch(ITEMS[:1])
    )
    info = assign_offsets(data, 0)
    assert (info.first_offset, info.last_offset, info.count, info.shallow_count, info.magic) == (0, 5, 6, 4, 2)
    messages = list(iter_messages(info.records))
    assert [(m.offset, m.magic) for m in messages] == [(0, 0), (1, 2), (2, 2), (3, 2), (4, 1), (5, 2)]
    checked = analyze(info.records)
    assert (checked.first_offset, checked.last_offset, checked.count, checked.offsets_monotonic) == (0, 5, 6, True)
    assert len(entry_starts(info.records)) == 4


def test_log_append_time_batches_give_every_record_the_batch_time():
    data = build_record_batch(ITEMS, log_append_time=True, timestamp=1)
    header = read_header(data)
    assert header.log_append_time
    assert {m.timestamp for m in iter_messages(data)} == {header.max_timestamp}


# -- torn tails and corruption --------------------------------------------------------------------


def test_a_torn_last_batch_is_left_out():
    whole = build_record_batch(ITEMS, base_offset=0)
    for cut in (1, 12, BATCH_OVERHEAD, len(whole) - 1):
        data = whole + build_record_batch(ITEMS, base_offset=3)[:cut]
        assert analyze(data).valid_bytes == len(whole)
        info = assign_offsets(bytearray(data), 10)
        assert (info.valid_bytes, info.last_offset) == (len(whole), 12)
        assert [m.offset for m in iter_messages(data)] == [0, 1, 2]


def test_a_flipped_byte_fails_the_crc32c():
    data = bytearray(build_record_batch(ITEMS))
    data[BATCH_OVERHEAD + 3] ^= 0x40
    with pytest.raises(InvalidMessageError, match="CRC-32C") as raised:
        assign_offsets(data, 0)
    assert raised.value.error_code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(InvalidMessageError, match="CRC-32C"):
        analyze(data)
    (entry,) = iter_entries(data)
    assert not entry.valid


def recrc(data):
    data = bytearray(data)
    struct.pack_into(">I", data, CRC_AT, batch_crc(data, 0, len(data)))
    return data


def test_a_count_that_disagrees_with_the_offset_range_is_refused():
    data = bytearray(build_record_batch(ITEMS))
    struct.pack_into(">i", data, ATTRIBUTES_AT + 2, 5)  # lastOffsetDelta
    with pytest.raises(InvalidMessageError, match="last offset delta 5"):
        assign_offsets(recrc(data), 0)


def test_records_that_do_not_fill_the_batch_are_refused():
    body = encode_record(0, 0, None, b"a") + encode_record(2, 0, None, b"b")  # offset deltas 0, 2
    good = build_record_batch([(None, b"a"), (None, b"b")])
    data = recrc(good[:BATCH_OVERHEAD] + body)
    with pytest.raises(InvalidMessageError, match="offset delta 2"):
        assign_offsets(data, 0)
    # a record whose length claims a byte more than its fields
    record = bytearray(encode_record(0, 0, None, b"a"))
    record[0] += 2
    short = bytearray(build_record_batch([(None, b"a")]))
    data = recrc(short[:BATCH_OVERHEAD] + record + b"\x00")
    struct.pack_into(">i", data, 8, len(data) - 12)
    with pytest.raises(InvalidMessageError, match="record 0"):
        assign_offsets(recrc(data), 0)


@given(st.lists(st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=300),
                          st.integers(0, 2**41), st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(
                              max_size=8)), max_size=3)), min_size=1, max_size=20))
def test_any_batch_we_build_validates_and_reads_back(items):
    data = build_record_batch(items)
    header = read_header(data)
    check_records(data, BATCH_OVERHEAD, len(data), header.record_count)
    messages = list(iter_messages(data))
    assert [(m.key, m.value, m.timestamp, list(m.headers)) for m in messages] == [
        (k, v, ts, [(hk, hv) for hk, hv in h]) for k, v, ts, h in items]


@given(st.binary(min_size=1, max_size=200))
def test_garbage_records_raise_corrupt_record_error_never_anything_else(garbage):
    try:
        check_records(garbage, 0, len(garbage), 3)
    except CorruptRecordError as exc:
        assert exc.error_code == ErrorCode.CORRUPT_MESSAGE


def test_a_control_batch_from_a_client_is_refused():
    data = bytearray(build_record_batch(ITEMS[:1]))
    struct.pack_into(">h", data, ATTRIBUTES_AT, 0x20)
    with pytest.raises(InvalidMessageError, match="control"):
        assign_offsets(recrc(data), 0)


def test_zstd_inside_a_magic_1_message_is_refused():
    inner = build_message_set([(None, b"x", 1)], magic=1)
    wrapper = encode_message(None, compress(CODEC_ZSTD, inner, magic=2), magic=1, attributes=CODEC_ZSTD)
    data = bytearray(struct.pack(">qi", 0, len(wrapper)) + wrapper)
    with pytest.raises(InvalidMessageError, match="codec 4 in a message of magic 1"):
        assign_offsets(data, 0)


@pytest.mark.parametrize("codec", [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD])
def test_a_compressed_batch_past_the_inflation_bound_is_refused_as_too_large(codec):
    data = bytearray(build_record_batch([(None, bytes(200_000))] * 10, codec=codec))
    assert len(data) < 200_000
    with pytest.raises(InflationBoundError) as raised:
        assign_offsets(data, 42, max_inflated_bytes=1_000_000)
    assert raised.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    with pytest.raises(InflationBoundError):
        list(iter_messages(data, max_inflated_bytes=1_000_000))
    assert len(list(iter_messages(data, max_inflated_bytes=3_000_000))) == 10


def test_end_txn_markers_are_kafkas_control_records_byte_for_byte():
    from zkbroker.protocol.record_batch import (
        ControlRecordType,
        CorruptRecordError,
        EndTxnMarker,
        build_end_txn_marker_batch,
        parse_end_txn_marker,
    )

    marker = EndTxnMarker(ControlRecordType.COMMIT, 258)
    # key: version int16 0, type int16 (1 COMMIT); value: version int16 0, coordinatorEpoch int32
    assert (marker.key(), marker.value()) == (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x01\x02")
    assert parse_end_txn_marker(marker.key(), marker.value()) == marker
    batch = build_end_txn_marker_batch(marker, producer_id=9, producer_epoch=2, timestamp=5)
    header = read_header(batch)
    assert (header.is_control, header.is_transactional, header.producer_id, header.producer_epoch,
            header.base_sequence, header.record_count) == (True, True, 9, 2, -1, 1)
    for key, value in ((b"\x00\x00\x00\x05", marker.value()), (b"\x00", marker.value()), (marker.key(), b"\x00")):
        with pytest.raises(CorruptRecordError):
            parse_end_txn_marker(key, value)
