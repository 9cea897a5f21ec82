"""The codecs of Kafka's message sets and record batches, in the framings real clients write.

* gzip (codec 1): a gzip stream (stdlib ``zlib``).
* snappy (codec 2): Java clients (snappy-java's ``SnappyOutputStream``) and kafka-python write
  *xerial* framing -- a 16-byte header (``\\x82SNAPPY\\x00``, version 1, compatible 1) and then
  blocks of (int32 length, raw snappy) -- while librdkafka writes one raw snappy block. We read
  both and write xerial, as a 0.8.2 broker and producer did.
* lz4 (codec 3): an LZ4 frame with independent 64 KiB blocks (Kafka's KafkaLZ4BlockOutputStream).
  Before KIP-57 Kafka computed the frame descriptor checksum (HC) over the magic number too; that
  broken checksum is the format of magic-0 messages, the correct one of magic-1 messages. We
  write whichever the magic asks for and accept either when reading.
* zstd (codec 4, Kafka 2.1, KIP-110; record batches only): one standard zstd frame, from ``zstandard``.

Magic-2 record batches compress their records section with the same four framings (KIP-98 changed what is
compressed, not how).

Snappy and LZ4 blocks come from ``cramjam`` (one Rust-backed wheel for both); LZ4 frames are
assembled here because the broken checksum is not something a frame library will write. Reading
needs only a :class:`Decoder` of raw snappy blocks and standard LZ4 frames -- Kafka's framings
(xerial blocks, the old header checksum) are undone here: ``cramjam`` and the ``lz4`` package's
streaming frame decompressor where they are installed, else pyarrow's codecs, so a Spark executor
that has only pyspark and pyarrow reads every codec. zstd
is ``zstandard``'s streaming reader, or pyarrow's zstd stream there. gzip is the standard library's ``zlib`` in
both cases (pyarrow's gzip codec is the same zlib, and wants the inflated size Kafka does not record).

Decompression is bounded: :func:`decompress` takes ``max_bytes`` and never holds more than that
much inflated output -- gzip and LZ4 stream into the bound, snappy checks each block's declared
length before inflating it -- and raises :class:`InflationBoundExceeded` when a
value would inflate past it (a decompression bomb: a few hundred KB that inflate to gigabytes).
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, Protocol

from .errors import ErrorCode, LocalProtocolError, RemoteProtocolError

try:
    import cramjam
except ImportError:  # reading falls back to pyarrow; writing snappy or lz4 says what is missing
    cramjam = None
try:
    import lz4.frame as lz4_frame
except ImportError:  # reading falls back to pyarrow
    lz4_frame = None
try:
    import zstandard
except ImportError:  # reading falls back to pyarrow; writing zstd says what is missing
    zstandard = None

__all__ = [
    "CODEC_GZIP",
    "CODEC_LZ4",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_ZSTD",
    "CODEC_NAMES",
    "BATCH_CODEC_NAMES",
    "Decoder",
    "InflationBoundExceeded",
    "compress",
    "decoders",
    "decompress",
    "xxh32",
]

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4
#: The codecs of message sets magic 0 and 1 (0.8.2's three); zstd is for record batches (magic 2) only.
CODEC_NAMES = {CODEC_NONE: "none", CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy", CODEC_LZ4: "lz4"}
#: Every codec a record batch may carry.
BATCH_CODEC_NAMES = {**CODEC_NAMES, CODEC_ZSTD: "zstd"}

Buffer = bytes | bytearray | memoryview

#: Output asked of a streaming decompressor at a time: what it allocates at once.
_CHUNK = 1024 * 1024
_UNBOUNDED = 1 << 62


class InflationBoundExceeded(RemoteProtocolError):
    """A compressed value would inflate past the bound its reader allows (MESSAGE_TOO_LARGE)."""

    def __init__(self, codec: str, max_bytes: int) -> None:
        super().__init__(f"{codec}: inflates past {max_bytes} bytes", error_code=ErrorCode.MESSAGE_TOO_LARGE)
        self.max_bytes = max_bytes


def _cramjam(codec: str) -> object:
    """cramjam, for compressing (decompressing has a fallback: see Decoder)."""
    if cramjam is None:
        raise LocalProtocolError(f"{codec} needs the cramjam package")
    return cramjam


# -- xxHash32, for the LZ4 frame header checksum (a handful of bytes per message set) -------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """xxHash32 of ``data`` (the algorithm as specified by its author, Yann Collet)."""
    data = bytes(data)
    n = len(data)
    i = 0
    if n >= 16:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed, (seed - _P1) & _M32
        while i + 16 <= n:
            a, b, c, d = struct.unpack_from("<4I", data, i)
            v1 = _rotl((v1 + a * _P2) & _M32, 13) * _P1 & _M32
            v2 = _rotl((v2 + b * _P2) & _M32, 13) * _P1 & _M32
            v3 = _rotl((v3 + c * _P2) & _M32, 13) * _P1 & _M32
            v4 = _rotl((v4 + d * _P2) & _M32, 13) * _P1 & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, i)
        h = _rotl((h + lane * _P3) & _M32, 17) * _P4 & _M32
        i += 4
    while i < n:
        h = _rotl((h + data[i] * _P5) & _M32, 11) * _P1 & _M32
        i += 1
    h ^= h >> 15
    h = h * _P2 & _M32
    h ^= h >> 13
    h = h * _P3 & _M32
    h ^= h >> 16
    return h


# -- LZ4 frames -----------------------------------------------------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, independent blocks, no block/content checksum, no content size
_LZ4_BD = 0x40  # 64 KiB maximum block size
_LZ4_BLOCK = 64 * 1024
_LZ4_UNCOMPRESSED = 0x80000000
_UINT32_LE = struct.Struct("<I")


def _lz4_compress(data: Buffer, broken_checksum: bool) -> bytes:
    lz4 = _cramjam("lz4").lz4  # type: ignore[attr-defined]
    descriptor = bytes((_LZ4_FLG, _LZ4_BD))
    checked = _LZ4_MAGIC + descriptor if broken_checksum else descriptor
    parts = [_LZ4_MAGIC, descriptor, bytes(((xxh32(checked) >> 8) & 0xFF,))]
    view = memoryview(data)
    for start in range(0, len(view), _LZ4_BLOCK):
        chunk = view[start : start + _LZ4_BLOCK]
        block = bytes(lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):  # incompressible: store it
            parts += [_UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED), bytes(chunk)]
        else:
            parts += [_UINT32_LE.pack(len(block)), block]
    parts.append(b"\x00\x00\x00\x00")  # end mark
    return b"".join(parts)


def _lz4_decompress(data: Buffer, max_bytes: int, decoder: Decoder) -> bytes:
    frame = bytearray(data)
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        raise RemoteProtocolError("lz4: not an LZ4 frame")
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)  # content size, dictionary id
    if len(frame) <= end:
        raise RemoteProtocolError("lz4: truncated frame header")
    # Accept the pre-KIP-57 checksum by rewriting the header checksum to the correct one.
    frame[end] = (xxh32(frame[4:end]) >> 8) & 0xFF
    return decoder.lz4_frame(bytes(frame), max_bytes)


# -- snappy ---------------------------------------------------------------------------------------

_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")


def _snappy_compress(data: Buffer) -> bytes:
    snappy = _cramjam("snappy").snappy  # type: ignore[attr-defined]
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts += [_INT32.pack(len(block)), block]
    return b"".join(parts)


def _snappy_length(block: memoryview) -> int:
    """The uncompressed length a raw snappy block starts with (a little-endian base-128 varint)."""
    length = 0
    for i, byte in enumerate(block[:5]):
        length |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return length
    raise RemoteProtocolError("snappy: corrupt block length")


def _snappy_block(block: memoryview, room: int, max_bytes: int, decoder: Decoder) -> bytes:
    # No snappy op expands more than ~22x, so a larger claim is corrupt, and refusing it first keeps
    # a forged length from allocating. A claim past the room left under the bound is refused before
    # inflating too.
    declared = _snappy_length(block)
    if declared > 32 * len(block) + 64:
        raise RemoteProtocolError(f"snappy: block claims {declared} bytes")
    if declared > room:
        raise InflationBoundExceeded("snappy", max_bytes)
    return decoder.snappy_block(block, declared)


def _snappy_decompress(data: Buffer, max_bytes: int, decoder: Decoder) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_HEADER[:8]:
        return _snappy_block(view, max_bytes, max_bytes, decoder)
    out = []
    total = 0
    pos = 16
    while pos < len(view):
        if pos + 4 > len(view):
            raise RemoteProtocolError("snappy: truncated xerial block length")
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise RemoteProtocolError("snappy: truncated xerial block")
        block = _snappy_block(view[pos : pos + size], max_bytes - total, max_bytes, decoder)
        total += len(block)
        out.append(block)
        pos += size
    return b"".join(out)


# -- zstd frames ----------------------------------------------------------------------------------

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE = 0x184D2A50  # ..0x184D2A5F: skippable frames
_ZSTD_DICTIONARY_ID_SIZES = (0, 1, 2, 4)


def _check_zstd_frames(data: Buffer) -> None:
    """Walk the frames' headers and block headers (RFC 8878) to the exact end of ``data``, without
    decompressing: zstandard's bounded stream reader ends a truncated frame silently, as if it were whole."""
    view = memoryview(data)
    n = len(view)
    pos = 0
    if n == 0:
        raise RemoteProtocolError("zstd: empty data")
    while pos < n:
        if pos + 4 > n:
            raise RemoteProtocolError("zstd: truncated frame")
        (magic,) = _UINT32_LE.unpack_from(view, pos)
        if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE:
            if pos + 8 > n:
                raise RemoteProtocolError("zstd: truncated skippable frame")
            pos += 8 + _UINT32_LE.unpack_from(view, pos + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise RemoteProtocolError("zstd: not a zstd frame")
        if pos + 5 > n:
            raise RemoteProtocolError("zstd: truncated frame header")
        descriptor = view[pos + 4]
        single_segment = (descriptor >> 5) & 1
        content_size_bytes = (single_segment, 2, 4, 8)[descriptor >> 6]
        pos += 5 + (1 - single_segment) + _ZSTD_DICTIONARY_ID_SIZES[descriptor & 3] + content_size_bytes
        while True:
            if pos + 3 > n:
                raise RemoteProtocolError("zstd: truncated frame")
            block = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            kind = (block >> 1) & 3
            if kind == 3:
                raise RemoteProtocolError("zstd: reserved block type")
            pos += 3 + (1 if kind == 1 else block >> 3)  # an RLE block holds one byte
            if block & 1:  # the last block
                break
        pos += 4 if descriptor & 0x04 else 0  # the content checksum
    if pos != n:
        raise RemoteProtocolError("zstd: truncated frame")


# -- decoders: raw snappy blocks and standard LZ4 frames ------------------------------------------


class Decoder(Protocol):
    """What reading needs of compression libraries; failures raise RemoteProtocolError."""

    name: str

    def snappy_block(self, block: memoryview, length: int) -> bytes:
        """A raw snappy block whose uncompressed length (from its header) is ``length``."""

    def lz4_frame(self, frame: bytes, max_bytes: int) -> bytes:
        """A standard LZ4 frame (header checksum already the correct one), streamed into at most
        ``max_bytes`` of output: InflationBoundExceeded past it."""

    def zstd_frame(self, frame: Buffer, max_bytes: int) -> bytes:
        """Standard zstd frames, streamed into at most ``max_bytes`` of output: InflationBoundExceeded past it."""


class _NativeDecoder:
    """cramjam's snappy, the lz4 package's streaming frame decompressor and zstandard's stream reader."""

    name = "cramjam+lz4+zstandard"

    def snappy_block(self, block: memoryview, length: int) -> bytes:
        try:
            return bytes(cramjam.snappy.decompress_raw(block))
        except cramjam.DecompressionError as exc:
            raise RemoteProtocolError(f"snappy: {exc}") from None

    def lz4_frame(self, frame: bytes, max_bytes: int) -> bytes:
        decompressor = lz4_frame.LZ4FrameDecompressor()
        out = []
        total = 0
        pending = frame
        try:
            while not decompressor.eof:
                chunk = decompressor.decompress(pending, max_length=min(_CHUNK, max_bytes - total + 1))
                pending = b""
                total += len(chunk)
                if total > max_bytes:
                    raise InflationBoundExceeded("lz4", max_bytes)
                out.append(chunk)
                if not chunk and decompressor.needs_input and not decompressor.eof:
                    raise RemoteProtocolError("lz4: truncated frame")
        except RuntimeError as exc:  # what the lz4 package raises for a corrupt frame
            raise RemoteProtocolError(f"lz4: {exc}") from None
        return b"".join(out)

    def zstd_frame(self, frame: Buffer, max_bytes: int) -> bytes:
        # A frame declares the window its decoder must hold, which a streaming writer sets from its level
        # alone (Kafka's default level 3: 2 MiB): refuse a window larger than the output bound allows (at
        # least 8 MiB, what level 19 asks), so that a tiny frame cannot make us allocate 128 MiB.
        # read_across_frames: Java's ZstdInputStream reads concatenated frames, as gzip members are read.
        window = min(1 << 27, max(1 << 23, 1 << (max_bytes - 1).bit_length()))
        reader = zstandard.ZstdDecompressor(max_window_size=window).stream_reader(
            bytes(frame), read_across_frames=True
        )
        out = []
        total = 0
        try:
            while chunk := reader.read(min(_CHUNK, max_bytes - total + 1)):
                total += len(chunk)
                if total > max_bytes:
                    raise InflationBoundExceeded("zstd", max_bytes)
                out.append(chunk)
        except zstandard.ZstdError as exc:
            raise RemoteProtocolError(f"zstd: {exc}") from None
        return b"".join(out)


class _ArrowDecoder:
    """pyarrow's snappy codec and LZ4 frame stream: what a Spark executor with only pyspark and pyarrow has."""

    name = "pyarrow"

    def __init__(self, pa: Any) -> None:
        self._pa = pa
        self._snappy = pa.Codec("snappy")
        self._errors = (OSError, pa.ArrowException)

    def snappy_block(self, block: memoryview, length: int) -> bytes:
        try:
            return self._snappy.decompress(block, length, asbytes=True)
        except self._errors as exc:
            raise RemoteProtocolError(f"snappy: {exc}") from None

    def lz4_frame(self, frame: bytes, max_bytes: int) -> bytes:
        pa = self._pa
        out = []
        total = 0
        try:
            with pa.input_stream(pa.py_buffer(frame), compression="lz4") as stream:
                while chunk := stream.read(min(_CHUNK, max_bytes - total + 1)):
                    total += len(chunk)
                    if total > max_bytes:
                        raise InflationBoundExceeded("lz4", max_bytes)
                    out.append(chunk)
        except self._errors as exc:
            raise RemoteProtocolError(f"lz4: {exc}") from None
        return b"".join(out)

    def zstd_frame(self, frame: Buffer, max_bytes: int) -> bytes:
        pa = self._pa
        out = []
        total = 0
        try:
            with pa.input_stream(pa.py_buffer(bytes(frame)), compression="zstd") as stream:
                while chunk := stream.read(min(_CHUNK, max_bytes - total + 1)):
                    total += len(chunk)
                    if total > max_bytes:
                        raise InflationBoundExceeded("zstd", max_bytes)
                    out.append(chunk)
        except self._errors as exc:
            raise RemoteProtocolError(f"zstd: {exc}") from None
        return b"".join(out)


class _Missing:
    name = "none"

    def snappy_block(self, block: memoryview, length: int) -> bytes:
        raise RemoteProtocolError("snappy needs the cramjam or the pyarrow package")

    def lz4_frame(self, frame: bytes, max_bytes: int) -> bytes:
        raise RemoteProtocolError("lz4 needs the lz4 or the pyarrow package")

    def zstd_frame(self, frame: Buffer, max_bytes: int) -> bytes:
        raise RemoteProtocolError("zstd needs the zstandard or the pyarrow package")


def decoders() -> list[Decoder]:
    """The decoders this interpreter can use, the preferred (the native packages, the faster) first."""
    native = cramjam is not None and lz4_frame is not None and zstandard is not None
    found: list[Decoder] = [_NativeDecoder()] if native else []
    try:
        import pyarrow
    except ImportError:
        return found
    if all(pyarrow.Codec.is_available(codec) for codec in ("snappy", "lz4_frame", "zstd")):
        found.append(_ArrowDecoder(pyarrow))
    return found


_decoder: Decoder | None = None


def _default_decoder() -> Decoder:
    # Chosen on first use, not at import: the broker never imports pyarrow unless it must.
    global _decoder
    if _decoder is None:
        _decoder = next(iter(decoders()), _Missing())
    return _decoder


# -- the two entry points -------------------------------------------------------------------------


def compress(codec: int, data: Buffer, magic: int = 1) -> bytes:
    """Compress an inner message set for a wrapper message of ``magic`` (0 or 1), or the records of a
    record batch (magic 2)."""
    if codec == CODEC_GZIP:
        # mtime=0 keeps the output deterministic; level 6 is zlib's (and Java's) default.
        compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
        return compressor.compress(data) + compressor.flush()
    if codec == CODEC_SNAPPY:
        return _snappy_compress(data)
    if codec == CODEC_LZ4:
        return _lz4_compress(data, broken_checksum=magic == 0)
    if codec == CODEC_ZSTD:
        if magic < 2:
            raise LocalProtocolError("zstd needs record batches (magic 2)")
        if zstandard is None:
            raise LocalProtocolError("zstd needs the zstandard package")
        # level 3: zstd's default, and Kafka's (ZstdOutputStream's)
        return zstandard.ZstdCompressor(level=3).compress(data)
    raise LocalProtocolError(f"unknown compression codec {codec}")


def _gzip_decompress(data: Buffer, max_bytes: int) -> bytes:
    out = []
    total = 0
    rest = bytes(data)
    if not rest:
        raise RemoteProtocolError("gzip: empty stream")
    try:
        while rest:  # a gzip stream may hold several members (Java reads them all)
            decompressor = zlib.decompressobj(47)  # gzip or zlib header, detected
            while not decompressor.eof:
                chunk = decompressor.decompress(rest, min(_CHUNK, max_bytes - total + 1))
                rest = decompressor.unconsumed_tail
                total += len(chunk)
                if total > max_bytes:
                    raise InflationBoundExceeded("gzip", max_bytes)
                out.append(chunk)
                if not chunk and not rest and not decompressor.eof:
                    raise RemoteProtocolError("gzip: truncated stream")
            rest = decompressor.unused_data
    except zlib.error as exc:
        raise RemoteProtocolError(f"gzip: {exc}") from None
    return b"".join(out)


def decompress(codec: int, data: Buffer, max_bytes: int | None = None, decoder: Decoder | None = None) -> bytes:
    """Decompress a wrapper message's value, holding at most ``max_bytes`` of output (no bound when
    None); RemoteProtocolError if it does not decompress, its InflationBoundExceeded if it would
    inflate past the bound. ``decoder``: one of :func:`decoders` (default: the first)."""
    bound = _UNBOUNDED if max_bytes is None else max_bytes
    if codec == CODEC_GZIP:
        return _gzip_decompress(data, bound)
    if codec == CODEC_SNAPPY:
        return _snappy_decompress(data, bound, decoder or _default_decoder())
    if codec == CODEC_LZ4:
        return _lz4_decompress(data, bound, decoder or _default_decoder())
    if codec == CODEC_ZSTD:
        _check_zstd_frames(data)
        return (decoder or _default_decoder()).zstd_frame(data, bound)
    raise RemoteProtocolError(f"unknown compression codec {codec}")
