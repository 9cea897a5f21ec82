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
assembled here because the broken checksum is not something a frame library will write, and read
with the ``lz4`` package's streaming frame decompressor (once the checksum is put right).

Decompression is bounded: :func:`decompress` takes ``max_bytes`` and never holds more than that
much inflated output -- gzip and LZ4 stream into the bound (``max_length``), snappy checks each
block's declared length before inflating it -- and raises :class:`InflationBoundExceeded` when a
value would inflate past it (a decompression bomb: a few hundred KB that inflate to gigabytes).
"""

from __future__ import annotations

import struct
import zlib

from .errors import ErrorCode, LocalProtocolError, RemoteProtocolError

try:
    import cramjam
except ImportError:  # gzip still works; snappy and lz4 say what is missing when used
    cramjam = None
try:
    import lz4.frame as lz4_frame
except ImportError:  # reading lz4 says what is missing when used
    lz4_frame = None

__all__ = [
    "CODEC_GZIP",
    "CODEC_LZ4",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_NAMES",
    "InflationBoundExceeded",
    "compress",
    "decompress",
    "xxh32",
]

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_NAMES = {CODEC_NONE: "none", CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy", CODEC_LZ4: "lz4"}

Buffer = bytes | bytearray | memoryview

#: Output asked of a streaming decompressor at a time: what it allocates at once.
_CHUNK = 1024 * 1024
_UNBOUNDED = 1 << 62


class InflationBoundExceeded(RemoteProtocolError):
    """A compressed value would inflate past the bound its reader allows (MESSAGE_TOO_LARGE)."""

    def __init__(self, codec: str, max_bytes: int) -> None:
        super().__init__(f"{codec}: inflates past {max_bytes} bytes", error_code=ErrorCode.MESSAGE_TOO_LARGE)
        self.max_bytes = max_bytes


def _cramjam(codec: str, local: bool) -> object:
    if cramjam is None:
        error = LocalProtocolError if local else RemoteProtocolError
        raise error(f"{codec} needs the cramjam package")
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
    lz4 = _cramjam("lz4", local=True).lz4  # type: ignore[attr-defined]
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


def _lz4_decompress(data: Buffer, max_bytes: int) -> bytes:
    if lz4_frame is None:
        raise RemoteProtocolError("lz4 needs the lz4 package")
    frame = bytearray(data)
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        raise RemoteProtocolError("lz4: not an LZ4 frame")
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)  # content size, dictionary id
    if len(frame) <= end:
        raise RemoteProtocolError("lz4: truncated frame header")
    # Accept the pre-KIP-57 checksum by rewriting the header checksum to the correct one.
    frame[end] = (xxh32(frame[4:end]) >> 8) & 0xFF
    decompressor = lz4_frame.LZ4FrameDecompressor()
    out = []
    total = 0
    pending = bytes(frame)
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


# -- snappy ---------------------------------------------------------------------------------------

_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")


def _snappy_compress(data: Buffer) -> bytes:
    snappy = _cramjam("snappy", local=True).snappy  # type: ignore[attr-defined]
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts += [_INT32.pack(len(block)), block]
    return b"".join(parts)


def _snappy_block(snappy: object, block: memoryview, room: int, max_bytes: int) -> bytes:
    # A raw block starts with its uncompressed length; no snappy op expands more than ~22x, so a
    # larger claim is corrupt, and refusing it first keeps a forged length from allocating. A claim
    # past the room left under the bound is refused before inflating too.
    try:
        declared = snappy.decompress_raw_len(block)  # type: ignore[attr-defined]
        if declared > 32 * len(block) + 64:
            raise RemoteProtocolError(f"snappy: block claims {declared} bytes")
        if declared > room:
            raise InflationBoundExceeded("snappy", max_bytes)
        return bytes(snappy.decompress_raw(block))  # type: ignore[attr-defined]
    except cramjam.DecompressionError as exc:
        raise RemoteProtocolError(f"snappy: {exc}") from None


def _snappy_decompress(data: Buffer, max_bytes: int) -> bytes:
    snappy = _cramjam("snappy", local=False).snappy  # type: ignore[attr-defined]
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_HEADER[:8]:
        return _snappy_block(snappy, view, max_bytes, max_bytes)
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
        block = _snappy_block(snappy, view[pos : pos + size], max_bytes - total, max_bytes)
        total += len(block)
        out.append(block)
        pos += size
    return b"".join(out)


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


def decompress(codec: int, data: Buffer, max_bytes: int | None = None) -> bytes:
    """Decompress a wrapper message's value, holding at most ``max_bytes`` of output (no bound when
    None); RemoteProtocolError if it does not decompress, its InflationBoundExceeded if it would
    inflate past the bound."""
    bound = _UNBOUNDED if max_bytes is None else max_bytes
    if codec == CODEC_GZIP:
        return _gzip_decompress(data, bound)
    if codec == CODEC_SNAPPY:
        return _snappy_decompress(data, bound)
    if codec == CODEC_LZ4:
        return _lz4_decompress(data, bound)
    raise RemoteProtocolError(f"unknown compression codec {codec}")
