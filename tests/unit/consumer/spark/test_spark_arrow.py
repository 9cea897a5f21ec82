"""Message sets decoded into Arrow batches of Spark's Kafka schema."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from consumer.spark import kafka_schema, message_set_batch
from zkbroker.protocol.compression import CODEC_GZIP, CODEC_NONE, compress
from zkbroker.protocol.message_set import LOG_APPEND_TIME, InvalidMessageError, build_message_set, encode_message

ZK = "127.0.0.1:2181/kafka"
SCHEMA = to_arrow_schema(kafka_schema(), timezone="UTC")


def options(**extra: str) -> dict[str, str]:
    return {"zookeeper.connect": ZK, **extra}


# ---- message sets to Arrow ------------------------------------------------------------------------------------


def entry(offset: int, message: bytes) -> bytes:
    return struct.pack(">qi", offset, len(message)) + message


def expected_rows(batch: pa.RecordBatch) -> list[tuple]:
    return list(zip(*(batch.column(name).to_pylist() for name in ("offset", "key", "value", "timestampType"))))


keys_and_values = st.one_of(st.none(), st.binary(max_size=20))


def micros(batch: pa.RecordBatch) -> list[int | None]:
    return batch.column("timestamp").cast(pa.int64()).to_pylist()


@st.composite
def message_sets(draw):
    """A message set as a broker stores it, the (offset, key, value, timestampType) of each message in it, each
    one's timestamp in ms (None for magic 0), and (end in bytes, messages so far) after each stored entry."""
    offset = draw(st.integers(0, 2**40))
    parts, rows, timestamps, ends = [], [], [], []
    for _ in range(draw(st.integers(1, 4))):
        magic = draw(st.sampled_from([0, 1]))
        log_append = magic == 1 and draw(st.booleans())
        compressed = draw(st.sampled_from([False, False, True]))
        items = draw(st.lists(st.tuples(keys_and_values, keys_and_values, st.integers(0, 2**41)), min_size=1,
                              max_size=8))
        attributes = LOG_APPEND_TIME if log_append else 0
        ts_type = -1 if magic == 0 else int(log_append)
        if compressed:
            # Inner offsets absolute in magic 0 and relative in magic 1; a LogAppendTime wrapper's time is every
            # inner message's.
            inner = b"".join(entry(offset + i if magic == 0 else i, encode_message(k, v, magic=magic, timestamp=ts))
                             for i, (k, v, ts) in enumerate(items))
            wrapper_ts = draw(st.integers(0, 2**41))
            parts.append(entry(offset + len(items) - 1, encode_message(
                None, compress(CODEC_GZIP, inner, magic), magic=magic, attributes=CODEC_GZIP | attributes,
                timestamp=wrapper_ts)))
            ends.append((sum(map(len, parts)), len(rows) + len(items)))
        else:
            for i, (k, v, ts) in enumerate(items):
                parts.append(entry(offset + i, encode_message(k, v, magic=magic, attributes=attributes, timestamp=ts)))
                ends.append((sum(map(len, parts)), len(rows) + i + 1))
        for i, (key, value, ts) in enumerate(items):
            rows.append((offset + i, key, value, ts_type))
            timestamps.append(None if magic == 0 else (wrapper_ts if compressed and log_append else ts))
        offset += len(items)
    return b"".join(parts), rows, timestamps, ends


@settings(max_examples=300, deadline=None)
@given(message_sets(), st.data())
def test_any_message_set_decodes_to_its_messages(case, data):
    records, rows, timestamps, ends = case
    # A fetch may end anywhere: the messages of every entry it holds completely come out.
    cut = data.draw(st.integers(ends[0][0], len(records)), label="fetched bytes")
    kept = max(count for end, count in ends if end <= cut)
    records, rows, timestamps = records[:cut], rows[:kept], timestamps[:kept]
    batch, next_offset, count = message_set_batch(records, "t", 7, 0, 2**62, SCHEMA)
    assert batch.schema.equals(SCHEMA)
    assert expected_rows(batch) == rows
    assert micros(batch) == [None if t is None else t * 1000 for t in timestamps]
    assert set(batch.column("topic").to_pylist()) == {"t"} and set(batch.column("partition").to_pylist()) == {7}
    assert (next_offset, count) == (rows[-1][0] + 1, len(rows))


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 60), st.sampled_from([0, 1]), st.one_of(st.none(), st.integers(0, 6)), st.integers(0, 30),
       st.integers(0, 60), st.data())
def test_equal_sized_sets_decode_alike_wherever_a_fetch_ends_or_a_message_differs(count, magic, key_size,
                                                                                    value_size, odd_at, data):
    items = [(None if key_size is None else b"k" * key_size, bytes([i % 256]) * value_size, i) for i in range(count)]
    if odd_at < count:  # one message of another size somewhere, or none
        items[odd_at] = (b"odd key", b"odd", 0)
    records = build_message_set(items, magic=magic, base_offset=9)
    cut = data.draw(st.integers(0, len(records)), label="fetched bytes")
    entries = [len(build_message_set(items[:i + 1], magic=magic)) for i in range(count)]
    kept = sum(1 for end in entries if end <= cut)
    batch, next_offset, complete = message_set_batch(records[:cut], "t", 0, 0, 10**6, SCHEMA)
    assert complete == kept and next_offset == (9 + kept if kept else 0)
    if kept:
        assert expected_rows(batch) == [(9 + i, k, v, -1 if magic == 0 else 0) for i, (k, v, _) in
                                        enumerate(items[:kept])]


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_sets_take_the_columnar_path_with_nulls_and_empties(magic):
    items = [(None, b"v0", 5), (b"", b"", 6), (b"k2", None, 7), (b"key-3", b"x" * 300, 8)]
    records = build_message_set(items, magic=magic, base_offset=100)
    batch, next_offset, count = message_set_batch(records, "t", 0, 0, 1000, SCHEMA)
    assert expected_rows(batch) == [(100 + i, k, v, -1 if magic == 0 else 0) for i, (k, v, _) in enumerate(items)]
    assert micros(batch) == ([None] * 4 if magic == 0 else [5000, 6000, 7000, 8000])
    assert (next_offset, count) == (104, 4)


def test_only_the_requested_offsets_come_out_but_the_next_offset_passes_them():
    records = build_message_set([(None, b"v%d" % i) for i in range(10)], base_offset=50)
    batch, next_offset, count = message_set_batch(records, "t", 0, 53, 57, SCHEMA)
    assert batch.column("offset").to_pylist() == [53, 54, 55, 56]
    assert (next_offset, count) == (60, 10)
    batch, next_offset, _ = message_set_batch(records, "t", 0, 70, 80, SCHEMA)
    assert batch is None and next_offset == 60


def test_a_torn_last_message_is_left_for_the_next_fetch():
    records = build_message_set([(None, b"v%d" % i) for i in range(5)], base_offset=0)
    batch, next_offset, count = message_set_batch(records[:-3], "t", 0, 0, 100, SCHEMA)
    assert batch.num_rows == 4 and (next_offset, count) == (4, 4)
    assert message_set_batch(records[:20], "t", 0, 0, 100, SCHEMA) == (None, 0, 0)


@pytest.mark.parametrize("compressed", [False, True])
def test_a_corrupt_message_fails_its_crc(compressed):
    records = bytearray(build_message_set([(None, b"value-%d" % i) for i in range(5)], base_offset=0,
                                          codec=CODEC_GZIP if compressed else CODEC_NONE))
    records[-2] ^= 0xFF
    with pytest.raises(InvalidMessageError, match="CRC"):
        message_set_batch(bytes(records), "t", 0, 0, 100, SCHEMA)


def test_headers_column_is_null():
    schema = to_arrow_schema(kafka_schema(True), timezone="UTC")
    batch, _, _ = message_set_batch(build_message_set([(None, b"v")]), "t", 0, 0, 1, schema)
    assert batch.schema.equals(schema) and batch.column("headers").to_pylist() == [None]



def test_a_set_of_equal_sized_messages_with_a_different_one_decodes_every_message():
    same = [(None, b"v%03d" % i) for i in range(20)]
    for odd_at, odd in ((0, b"longer value"), (7, b"longer value"), (7, b"v"), (19, b"longer value")):
        items = list(same)
        items[odd_at] = (b"key", odd)
        batch, next_offset, _ = message_set_batch(build_message_set(items, base_offset=500), "t", 0, 0, 10**4, SCHEMA)
        assert expected_rows(batch) == [(500 + i, k, v, -1) for i, (k, v) in enumerate(items)]
        assert next_offset == 520


def test_equal_sized_messages_then_a_torn_or_shorter_last_one():
    items = [(None, b"v%03d" % i) for i in range(19)] + [(None, b"v")]
    records = build_message_set(items, base_offset=500)
    batch, next_offset, count = message_set_batch(records, "t", 0, 0, 10_000, SCHEMA)
    assert batch.column("value").to_pylist() == [v for _, v in items] and (next_offset, count) == (520, 20)
    batch, next_offset, count = message_set_batch(records[:-3], "t", 0, 0, 10_000, SCHEMA)
    assert batch.column("offset").to_pylist() == list(range(500, 519)) and (next_offset, count) == (519, 19)


def test_record_batches_decode_with_their_headers_and_timestamp_types():
    from zkbroker.protocol.record_batch import build_record_batch

    schema = to_arrow_schema(kafka_schema(True), timezone="UTC")
    first = [(b"k", b"a", 1500000000000, [("trace", b"1"), ("n", None)]), (None, b"b", 1500000000001)]
    data = (build_record_batch(first, base_offset=4)
            + build_record_batch([(None, b"c", 5)], base_offset=6, codec=CODEC_GZIP, log_append_time=True)
            + build_message_set([(None, b"m0")], base_offset=7))
    batch, next_offset, count = message_set_batch(data, "t", 0, 5, 100, schema)
    assert (next_offset, count) == (8, 4)
    rows = batch.to_pylist()
    assert [(r["offset"], r["value"], r["timestampType"]) for r in rows] == [(5, b"b", 0), (6, b"c", 1), (7, b"m0", -1)]
    assert [r["headers"] for r in rows] == [[], [], None]
    first, _, _ = message_set_batch(data, "t", 0, 4, 5, schema)
    assert first.column("headers").to_pylist() == [[{"key": "trace", "value": b"1"}, {"key": "n", "value": None}]]
