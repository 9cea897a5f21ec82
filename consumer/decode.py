"""The consumer's hot path: a fetched message set straight into the MessageAndMetadata tuples a stream hands
out, one object per message.

`zkbroker.protocol.message_set.iter_messages` is the reference reader; this walks uncompressed entries itself
(CRC checked, as 0.8.2's ConsumerIterator did) and hands compressed wrappers, and anything that does not look
right, to it -- so both read every set alike, which the unit tests check on random sets. Creating the final
tuple directly, instead of a Message and then a MessageAndMetadata, takes about a third off the consumer's
time per message (bench/consumer.py).
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from zkbroker.protocol.message_set import LOG_OVERHEAD, iter_messages


class MessageAndMetadata(NamedTuple):
    """What a stream hands out (0.8.2's MessageAndMetadata)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None

__all__ = ["MessageAndMetadata", "decode_messages", "last_offset"]

_OFFSET_SIZE = struct.Struct(">qi")
_HEAD = struct.Struct(">qiIbbi")  # offset, size, crc, magic, attributes, then magic 0's key length
_INT32 = struct.Struct(">i")
_MIN_SIZE = 14
_new = tuple.__new__


def decode_messages(records, topic: str, partition: int, start: int) -> tuple[list[MessageAndMetadata], bool]:
    """The messages of `records` at offsets >= start, and whether the set held any complete message at all
    (False with bytes present means the first message is larger than the fetch size).

    Raises InvalidMessageError (a RemoteProtocolError) for a corrupt message, as iter_messages does.
    """
    out: list[MessageAndMetadata] = []
    append = out.append
    buf = bytes(records)
    view = memoryview(buf)
    unpack_head = _HEAD.unpack_from
    unpack_int = _INT32.unpack_from
    crc32 = zlib.crc32
    n = len(buf)
    pos = 0
    seen = False
    while pos + LOG_OVERHEAD + _MIN_SIZE <= n:
        offset, size, crc, magic, attributes, key_size = unpack_head(buf, pos)
        end = pos + LOG_OVERHEAD + size
        if end > n:
            break
        if magic == 1 and size >= 22:
            at = pos + 34  # after the timestamp and the key length
            (key_size,) = unpack_int(buf, at - 4)
        elif magic == 0:
            at = pos + 26
        else:
            at = end  # a bad magic: left to the reference reader below
        if attributes & 0x07 or size < _MIN_SIZE or at + max(key_size, 0) + 4 > end or \
                crc32(view[pos + 16 : end]) != crc:
            _slow(view[pos:], topic, partition, start, out)  # wrappers, and the errors, the reference way
            return out, True
        seen = True
        if key_size < 0:
            key = None
        else:
            key = buf[at : at + key_size]
            at += key_size
        (value_size,) = unpack_int(buf, at)
        if at + 4 + max(value_size, 0) != end or value_size < -1 or key_size < -1:
            _slow(view[pos:], topic, partition, start, out)
            return out, True
        if offset >= start:
            append(_new(MessageAndMetadata, (topic, partition, offset, key,
                                             None if value_size < 0 else buf[at + 4 : end])))
        pos = end
    return out, seen


def last_offset(records) -> int | None:
    """The offset of the last complete entry of a set (a compressed wrapper carries its last inner offset),
    walking sizes only; None if not even the first entry is complete."""
    unpack = _OFFSET_SIZE.unpack_from
    n = len(records)
    pos = 0
    last = None
    while pos + LOG_OVERHEAD <= n:
        offset, size = unpack(records, pos)
        end = pos + LOG_OVERHEAD + size
        if end > n or size < _MIN_SIZE:
            break
        last = offset
        pos = end
    return last


def _slow(view, topic: str, partition: int, start: int, out: list) -> None:
    for m in iter_messages(view):
        if m.offset >= start:
            out.append(_new(MessageAndMetadata, (topic, partition, m.offset, m.key, m.value)))
