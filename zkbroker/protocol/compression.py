"""The three codecs of Kafka 0.8.2 message sets, in the framings real clients write.

* gzip (codec 1): a gzip stream (stdlib ``zlib``).
* snappy (codec 2): Java clients (snappy-java's ``SnappyOutputStream``) and kafka-python write
  *xerial* framing -- a 16-byte header (``\\x82SNAPPY\\x00``, version 1, compatible 1) and then
  blocks of (int32 length, raw snappy) -- while librdkafka writes one raw snappy block. We read
  both and write xerial, as a 0.8.2 broker and producer did.
* lz4 (codec 3): an LZ4 frame with independent 64 KiB blocks (Kafka's KafkaLZ4BlockOutputStream).
  Before KIP-57 Kafka computed the frame descriptor checksum (HC) over the magic number too; that
  broken checksum is the format of magic-0 messages, the correct one of magic-1 messages. We
  write whichever the magic asks for and accept either when reading.

Snappy and LZ4 blocks come from ``cramjam`` (one Rust-backed wheel for both); LZ4 frames are
assembled here because the broken checksum is not something a frame library will write. Reading needs
only a *decoder* of raw snappy blocks and standard LZ4 frames -- Kafka's framings (xerial blocks, the
old header checksum) are undone here -- and falls back to pyarrow's codecs when cramjam is missing: a
Spark executor that has only pyspark and pyarrow reads every codec (gzip is the standard library's
``zlib`` in both cases; pyarrow's gzip codec is the same zlib, and wants the decompressed size Kafka
does not record).
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, Protocol

from .errors import LocalProtocolError, RemoteProtocolError

try:
    import cramjam
except ImportError:  # reading falls back to pyarrow; writing snappy or lz4 says what is missing
    cramjam = None

__all__ = [
    "CODEC_GZIP",
    "CODEC_LZ4",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_NAMES",
    "Decoder",
    "compress",
    "decoders",
    "decompress",
    "xxh32",
]

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_NAMES = {CODEC_NONE: "none", CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy", CODEC_LZ4: "lz4"}

Buffer = bytes | bytearray | memoryview


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


def _lz4_decompress(data: Buffer, decoder: Decoder) -> bytes:
    frame = bytearray(data)
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        raise RemoteProtocolError("lz4: not an LZ4 frame")
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)  # content size, dictionary id
    if len(frame) <= end:
        raise RemoteProtocolError("lz4: truncated frame header")
    # Accept the pre-KIP-57 checksum by rewriting the header checksum to the correct one.
    frame[end] = (xxh32(frame[4:end]) >> 8) & 0xFF
    return decoder.lz4_frame(bytes(frame))


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


def _snappy_block(block: memoryview, decoder: Decoder) -> bytes:
    # No snappy op expands more than ~22x, so a larger claim is corrupt, and refusing it first
    # keeps a forged length from allocating.
    declared = _snappy_length(block)
    if declared > 32 * len(block) + 64:
        raise RemoteProtocolError(f"snappy: block claims {declared} bytes")
    return decoder.snappy_block(block, declared)


def _snappy_decompress(data: Buffer, decoder: Decoder) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_HEADER[:8]:
        return _snappy_block(view, decoder)
    out = []
    pos = 16
    while pos < len(view):
        if pos + 4 > len(view):
            raise RemoteProtocolError("snappy: truncated xerial block length")
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise RemoteProtocolError("snappy: truncated xerial block")
        out.append(_snappy_block(view[pos : pos + size], decoder))
        pos += size
    return b"".join(out)


# -- decoders: raw snappy blocks and standard LZ4 frames ------------------------------------------


class Decoder(Protocol):
    """What reading needs of a compression library; failures raise RemoteProtocolError."""

    name: str

    def snappy_block(self, block: memoryview, length: int) -> bytes:
        """A raw snappy block whose uncompressed length (from its header) is ``length``."""

    def lz4_frame(self, frame: bytes) -> bytes:
        """A standard LZ4 frame (header checksum already the correct one)."""


class _CramjamDecoder:
    name = "cramjam"

    def snappy_block(self, block: memoryview, length: int) -> bytes:
        try:
            return bytes(cramjam.snappy.decompress_raw(block))
        except cramjam.DecompressionError as exc:
            raise RemoteProtocolError(f"snappy: {exc}") from None

    def lz4_frame(self, frame: bytes) -> bytes:
        try:
            return bytes(cramjam.lz4.decompress(frame))
        except cramjam.DecompressionError as exc:
            raise RemoteProtocolError(f"lz4: {exc}") from None


class _ArrowDecoder:
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

    def lz4_frame(self, frame: bytes) -> bytes:
        pa = self._pa
        try:
            return pa.input_stream(pa.py_buffer(frame), compression="lz4").read()
        except self._errors as exc:
            raise RemoteProtocolError(f"lz4: {exc}") from None


def decoders() -> list[Decoder]:
    """The decoders this interpreter can use, the preferred (cramjam, the faster) first."""
    found: list[Decoder] = [_CramjamDecoder()] if cramjam is not None else []
    try:
        import pyarrow
    except ImportError:
        return found
    if pyarrow.Codec.is_available("snappy") and pyarrow.Codec.is_available("lz4_frame"):
        found.append(_ArrowDecoder(pyarrow))
    return found


class _Missing:
    name = "none"

    def snappy_block(self, block: memoryview, length: int) -> bytes:
        raise RemoteProtocolError("snappy needs the cramjam or the pyarrow package")

    def lz4_frame(self, frame: bytes) -> bytes:
        raise RemoteProtocolError("lz4 needs the cramjam or the pyarrow package")


_decoder: Decoder | None = None


def _default_decoder() -> Decoder:
    # Chosen on first use, not at import: the broker never imports pyarrow unless it must.
    global _decoder
    if _decoder is None:
        _decoder = next(iter(decoders()), _Missing())
    return _decoder


# -- the two entry points -------------------------------------------------------------------------


def compress(codec: int, data: Buffer, magic: int = 1) -> bytes:
    """Compress an inner message set for a wrapper message of ``magic`` (0 or 1)."""
    if codec == CODEC_GZIP:
        # mtime=0 keeps the output deterministic; level 6 is zlib's (and Java's) default.
        compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
        return compressor.compress(data) + compressor.flush()
    if codec == CODEC_SNAPPY:
        return _snappy_compress(data)
    if codec == CODEC_LZ4:
        return _lz4_compress(data, broken_checksum=magic == 0)
    raise LocalProtocolError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer, decoder: Decoder | None = None) -> bytes:
    """Decompress a wrapper message's value; RemoteProtocolError if it does not decompress.
    ``decoder``: one of :func:`decoders` (default: the first)."""
    if codec == CODEC_GZIP:
        out = []
        rest = bytes(data)
        if not rest:
            raise RemoteProtocolError("gzip: empty stream")
        try:
            while rest:  # a gzip stream may hold several members (Java reads them all)
                decompressor = zlib.decompressobj(47)  # gzip or zlib header, detected
                out.append(decompressor.decompress(rest))
                if not decompressor.eof:
                    raise RemoteProtocolError("gzip: truncated stream")
                rest = decompressor.unused_data
        except zlib.error as exc:
            raise RemoteProtocolError(f"gzip: {exc}") from None
        return b"".join(out)
    if codec == CODEC_SNAPPY:
        return _snappy_decompress(data, decoder or _default_decoder())
    if codec == CODEC_LZ4:
        return _lz4_decompress(data, decoder or _default_decoder())
    raise RemoteProtocolError(f"unknown compression codec {codec}")
