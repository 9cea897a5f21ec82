"""The three codecs, in the framings Java clients, kafka-python and librdkafka write."""

import os
import struct

import pytest
from kafka import codec as kafka_codec

from zkbroker.protocol.compression import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    InflationBoundExceeded,
    compress,
    decoders,
    decompress,
    xxh32,
)
from zkbroker.protocol.errors import LocalProtocolError, RemoteProtocolError

DATA = os.urandom(3000) + b"kafka " * 40000  # spans several 32/64 KiB blocks


@pytest.mark.parametrize(
    ("data", "digest"),
    [(b"", 0x02CC5D05), (b"a", 0x550D7456), (b"abc", 0x32D153FF)],
)
def test_xxh32_reference_vectors(data, digest):
    assert xxh32(data) == digest


def test_xxh32_against_the_xxhash_package():
    xxhash = pytest.importorskip("xxhash")
    for size in (0, 3, 4, 15, 16, 17, 31, 64, 101):
        data = os.urandom(size)
        assert xxh32(data) == xxhash.xxh32(data).intdigest()
        assert xxh32(data, 99) == xxhash.xxh32(data, seed=99).intdigest()


@pytest.mark.parametrize("codec", [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4])
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("data", [b"", b"x", DATA])
def test_round_trip(codec, magic, data):
    assert decompress(codec, compress(codec, data, magic)) == data


def test_snappy_is_xerial_framed_and_raw_is_read_too():
    out = compress(CODEC_SNAPPY, DATA)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    assert kafka_codec.snappy_decode(out) == DATA
    assert decompress(CODEC_SNAPPY, kafka_codec.snappy_encode(DATA)) == DATA  # kafka-python
    raw = kafka_codec.snappy_encode(DATA, xerial_compatible=False)  # librdkafka's framing
    assert decompress(CODEC_SNAPPY, raw) == DATA


def test_lz4_header_checksum_per_magic():
    lz4_frame = pytest.importorskip("lz4.frame")
    # Magic 1: a standard frame. Magic 0: Kafka's pre-KIP-57 checksum over magic + descriptor.
    assert lz4_frame.decompress(compress(CODEC_LZ4, DATA, 1)) == DATA
    old = compress(CODEC_LZ4, DATA, 0)
    assert old[6] == (xxh32(old[:6]) >> 8) & 0xFF
    assert old[6] != (xxh32(old[4:6]) >> 8) & 0xFF
    # Both forms, and lz4.frame's own (checksums, content size), read back.
    assert decompress(CODEC_LZ4, old) == DATA
    assert decompress(CODEC_LZ4, lz4_frame.compress(DATA, content_checksum=True)) == DATA


def test_lz4_matches_kafka_python_old_kafka_framing():
    pytest.importorskip("xxhash")  # kafka-python needs it for the 0.8/0.9 lz4 framing
    assert compress(CODEC_LZ4, b"abc", 0)[:7] == kafka_codec.lz4_encode_old_kafka(b"abc")[:7]
    assert kafka_codec.lz4_decode_old_kafka(compress(CODEC_LZ4, DATA, 0)) == DATA
    assert decompress(CODEC_LZ4, kafka_codec.lz4_encode_old_kafka(DATA)) == DATA


@pytest.mark.parametrize("codec", [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4])
def test_garbage_is_a_remote_error(codec):
    good = compress(codec, DATA)
    for bad in (b"", b"\x00" * 10, good[: len(good) // 2], good[:7] + b"\xff" * 40, os.urandom(64)):
        with pytest.raises(RemoteProtocolError):
            decompress(codec, bad)


def test_forged_snappy_length_is_refused_before_allocating():
    with pytest.raises(RemoteProtocolError):
        decompress(CODEC_SNAPPY, b"\xff\xff\xff\xff\x0f\x00")


def test_unknown_codecs():
    with pytest.raises(LocalProtocolError):
        compress(5, b"x")
    with pytest.raises(RemoteProtocolError):
        decompress(5, b"x")


# -- the decoders: cramjam and lz4 (the fast path) and pyarrow (what a Spark executor has) read the same bytes --


def test_both_decoders_are_here_so_the_comparisons_below_compare_something():
    assert [d.name for d in decoders()] == ["cramjam+lz4+zstandard", "pyarrow"]


@pytest.mark.parametrize("decoder", decoders(), ids=lambda d: d.name)
@pytest.mark.parametrize("codec", [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4])
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("data", [b"", b"x", DATA])
def test_every_decoder_reads_what_we_write(decoder, codec, magic, data):
    assert decompress(codec, compress(codec, data, magic), decoder=decoder) == data


@pytest.mark.parametrize("decoder", decoders(), ids=lambda d: d.name)
def test_every_decoder_reads_the_framings_of_kafka_python_librdkafka_and_lz4_frame(decoder):
    lz4_frame = pytest.importorskip("lz4.frame")
    pytest.importorskip("xxhash")
    for codec, written in [
        (CODEC_SNAPPY, kafka_codec.snappy_encode(DATA)),  # xerial blocks
        (CODEC_SNAPPY, kafka_codec.snappy_encode(DATA, xerial_compatible=False)),  # one raw block
        (CODEC_LZ4, kafka_codec.lz4_encode_old_kafka(DATA)),  # magic 0: the pre-KIP-57 header checksum
        (CODEC_LZ4, kafka_codec.lz4_encode(DATA)),
        (CODEC_LZ4, lz4_frame.compress(DATA, content_checksum=True)),
    ]:
        assert decompress(codec, written, decoder=decoder) == DATA


@pytest.mark.parametrize("decoder", decoders(), ids=lambda d: d.name)
@pytest.mark.parametrize("data", [b"", b"x", DATA])
def test_every_decoder_reads_zstd_as_we_write_it_for_record_batches(decoder, data):
    assert decompress(CODEC_ZSTD, compress(CODEC_ZSTD, data, magic=2), decoder=decoder) == data


@pytest.mark.parametrize("decoder", decoders(), ids=lambda d: d.name)
def test_every_cut_of_a_zstd_frame_is_a_remote_error_not_a_short_read(decoder):
    good = compress(CODEC_ZSTD, DATA, magic=2)
    for cut in range(len(good)):
        with pytest.raises(RemoteProtocolError):
            decompress(CODEC_ZSTD, good[:cut], decoder=decoder)


def test_zstd_is_for_record_batches_only():
    with pytest.raises(LocalProtocolError, match="magic 2"):
        compress(CODEC_ZSTD, DATA, magic=1)


@pytest.mark.parametrize("decoder", decoders(), ids=lambda d: d.name)
def test_every_decoder_reads_concatenated_zstd_frames_as_java_does(decoder):
    import zstandard

    frames = zstandard.ZstdCompressor().compress(DATA[:100]) + zstandard.ZstdCompressor().compress(DATA[100:])
    assert decompress(CODEC_ZSTD, frames, decoder=decoder) == DATA


@pytest.mark.parametrize("decoder", decoders(), ids=lambda d: d.name)
@pytest.mark.parametrize("codec", [CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD])
def test_garbage_is_a_remote_error_for_every_decoder(decoder, codec):
    good = compress(codec, DATA, magic=2)
    for bad in (b"", b"\x00" * 10, good[: len(good) // 2], good[:7] + b"\xff" * 40, os.urandom(64),
                b"\xff\xff\xff\xff\x0f\x00"):
        with pytest.raises(RemoteProtocolError):
            decompress(codec, bad, decoder=decoder)


@pytest.mark.parametrize("decoder", decoders(), ids=lambda d: d.name)
@pytest.mark.parametrize("codec", [CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD])
def test_every_decoder_stops_at_the_inflation_bound(decoder, codec):
    bound = 300_000
    with pytest.raises(InflationBoundExceeded):
        decompress(codec, compress(codec, bytes(bound + 1), magic=2), bound, decoder=decoder)
    assert decompress(codec, compress(codec, bytes(bound), magic=2), bound, decoder=decoder) == bytes(bound)
