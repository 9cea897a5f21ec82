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
assembled here because the broken checksum is not something a frame library will write.
"""

from __future__ import annotations

import struct
import zlib

from .errors import LocalProtocolError, RemoteProtocolError

try:
    import cramjam
except ImportError:  # gzip still works; snappy and lz4 say what is missing when used
    cramjam = None

__all__ = [
    "CODEC_GZIP",
    "CODEC_LZ4",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_NAMES",
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


def _lz4_decompress(data: Buffer) -> bytes:
    lz4 = _cramjam("lz4", local=False).lz4  # type: ignore[attr-defined]
    frame = bytearray(data)
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        raise RemoteProtocolError("lz4: not an LZ4 frame")
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)  # content size, dictionary id
    if len(frame) <= end:
        raise RemoteProtocolError("lz4: truncated frame header")
    # Accept the pre-KIP-57 checksum by rewriting the header checksum to the correct one.
    frame[end] = (xxh32(frame[4:end]) >> 8) & 0xFF
    try:
        return bytes(lz4.decompress(bytes(frame)))
    except cramjam.DecompressionError as exc:
        raise RemoteProtocolError(f"lz4: {exc}") from None


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


def _snappy_block(snappy: object, block: memoryview) -> bytes:
    # A raw block starts with its uncompressed length; no snappy op expands more than ~22x, so a
    # larger claim is corrupt, and refusing it first keeps a forged length from allocating.
    try:
        declared = snappy.decompress_raw_len(block)  # type: ignore[attr-defined]
        if declared > 32 * len(block) + 64:
            raise RemoteProtocolError(f"snappy: block claims {declared} bytes")
        return bytes(snappy.decompress_raw(block))  # type: ignore[attr-defined]
    except cramjam.DecompressionError as exc:
        raise RemoteProtocolError(f"snappy: {exc}") from None


def _snappy_decompress(data: Buffer) -> bytes:
    snappy = _cramjam("snappy", local=False).snappy  # type: ignore[attr-defined]
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_HEADER[:8]:
        return _snappy_block(snappy, view)
    out = []
    pos = 16
    while pos < len(view):
        if pos + 4 > len(view):
            raise RemoteProtocolError("snappy: truncated xerial block length")
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise RemoteProtocolError("snappy: truncated xerial block")
        out.append(_snappy_block(snappy, view[pos : pos + size]))
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


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress a wrapper message's value; RemoteProtocolError if it does not decompress."""
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
        return _snappy_decompress(data)
    if codec == CODEC_LZ4:
        return _lz4_decompress(data)
    raise RemoteProtocolError(f"unknown compression codec {codec}")
