"""Decompression bombs built the way an attacker would: compressed as they are written, so building one holds a
few hundred KB however large the value it inflates to."""

from __future__ import annotations

import struct
import zlib

CHUNK = bytes(1024 * 1024)


def gzip_bomb(value_bytes: int) -> bytes:
    """A gzip stream of a magic-0 inner message set holding one message at offset 0: a null key and a value of
    `value_bytes` zero bytes -- what a gzip wrapper message carries as its value."""
    chunks, tail = divmod(value_bytes, len(CHUNK))
    body_head = struct.pack(">bbii", 0, 0, -1, value_bytes)  # magic, attributes, null key, value length
    crc = zlib.crc32(body_head)
    for _ in range(chunks):
        crc = zlib.crc32(CHUNK, crc)
    crc = zlib.crc32(CHUNK[:tail], crc)
    size = 4 + len(body_head) + value_bytes
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [compressor.compress(struct.pack(">qiI", 0, size, crc) + body_head)]
    for _ in range(chunks):
        out.append(compressor.compress(CHUNK))
    out.append(compressor.compress(CHUNK[:tail]))
    out.append(compressor.flush())
    return b"".join(out)
