"""Bounded inflation: a compressed message that would inflate past the bound derived from message.max.bytes --
a decompression bomb, in any codec -- is refused with MESSAGE_TOO_LARGE while it is decompressed (never inflated
first), nothing is appended, and every reader names the topic, partition and offset; a large set under the
bound goes through."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from consumer.decode import decode_messages
from consumer.spark.arrow import message_set_batch
from consumer.spark.source import kafka_schema
from zkbroker.log.log import Log
from zkbroker.log.log_config import LogConfig
from zkbroker.protocol.compression import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_SNAPPY,
    InflationBoundExceeded,
    compress,
    decompress,
)
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.message_set import (
    INFLATION_FACTOR,
    InflationBoundError,
    assign_offsets,
    build_message_set,
    inflation_bound,
    iter_messages,
)

CODECS = [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4]
MAX_MESSAGE_BYTES = 64 * 1024  # a small message.max.bytes keeps the bombs small
BOUND = INFLATION_FACTOR * MAX_MESSAGE_BYTES
BOMB = BOUND + MAX_MESSAGE_BYTES  # past the bound, and small once compressed even by snappy (at most ~21x)


def bomb(codec: int, inflated: int, magic: int = 0, base_offset: int = 0) -> bytes:
    """One wrapper holding one message whose value is `inflated` zero bytes."""
    return build_message_set([(None, bytes(inflated))], magic=magic, codec=codec, base_offset=base_offset)


def test_the_bound_is_the_factor_times_message_max_bytes():
    assert inflation_bound(MAX_MESSAGE_BYTES) == BOUND
    assert inflation_bound() == INFLATION_FACTOR * 1_000_012


@pytest.mark.parametrize("codec", CODECS)
def test_decompression_stops_at_the_bound(codec):
    data = compress(codec, bytes(BOUND + 1))
    with pytest.raises(InflationBoundExceeded) as caught:
        decompress(codec, data, BOUND)
    assert caught.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert decompress(codec, compress(codec, bytes(BOUND)), BOUND) == bytes(BOUND)


def test_a_forged_snappy_block_length_past_the_bound_is_refused_before_inflating():
    data = compress(CODEC_SNAPPY, b"\0" * 20_000)  # one xerial block claiming 20,000 bytes
    with pytest.raises(InflationBoundExceeded):
        decompress(CODEC_SNAPPY, data, 10_000)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_is_refused_by_the_produce_path_with_message_too_large(codec, magic):
    records = bytearray(bomb(codec, BOMB, magic))
    assert len(records) < MAX_MESSAGE_BYTES  # it passes the size check: only inflating tells
    with pytest.raises(InflationBoundError) as caught:
        assign_offsets(records, 100, max_message_bytes=MAX_MESSAGE_BYTES)
    assert caught.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert caught.value.offset == 0 and caught.value.bound == BOUND


@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_appends_nothing_to_the_log(tmp_path, codec):
    log = Log(str(tmp_path / "t-0"), LogConfig(max_message_bytes=MAX_MESSAGE_BYTES), 0)
    try:
        log.append(bytearray(build_message_set([(None, b"before")])))
        size = log.size
        with pytest.raises(InflationBoundError):
            log.append(bytearray(bomb(codec, BOMB)))
        assert (log.log_end_offset, log.size) == (1, size)
        info = log.append(bytearray(build_message_set([(None, b"after")])))
        assert info.first_offset == 1
    finally:
        log.close()


@pytest.mark.parametrize("codec", CODECS)
def test_a_large_set_under_the_bound_is_accepted(tmp_path, codec):
    log = Log(str(tmp_path / "t-0"), LogConfig(max_message_bytes=MAX_MESSAGE_BYTES), 0)
    try:
        items = [(None, bytes(BOUND // 8 - 100))] * 7  # ~7/8 of the bound once inflated
        info = log.append(bytearray(build_message_set(items, codec=codec)))
        assert (info.first_offset, info.last_offset, info.count) == (0, 6, 7)
    finally:
        log.close()


@pytest.mark.parametrize("codec", CODECS)
def test_readers_refuse_a_stored_bomb_naming_topic_partition_and_offset(codec):
    """A bomb stored by an older broker: our consumer's decoder, the simple consumer's reader and the Spark
    source's Arrow decoder each fail with the topic, partition and offset, without inflating it."""
    records = build_message_set([(None, b"fine")], base_offset=41) + bomb(codec, BOMB, base_offset=42)
    expected = rf"offset 42 of \[orders,3\] inflates past {BOUND} bytes"
    with pytest.raises(InflationBoundError, match=expected):
        decode_messages(records, "orders", 3, 0, BOUND)
    with pytest.raises(InflationBoundError, match=rf"offset 42 inflates past {BOUND} bytes"):
        list(iter_messages(records, max_inflated_bytes=BOUND))
    schema = to_arrow_schema(kafka_schema(), timezone="UTC")
    with pytest.raises(InflationBoundError, match=expected) as caught:
        message_set_batch(records, "orders", 3, 0, 100, schema, BOUND)
    assert caught.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    batch, _, _ = message_set_batch(records[: len(records) - 1], "orders", 3, 0, 100, schema, BOUND)
    assert isinstance(batch, pa.RecordBatch) and batch.column("value").to_pylist() == [b"fine"]
