"""The consumer's hot path: a fetched message set straight into the MessageAndMetadata tuples a stream hands
out, one object per message.

The set is checked by the codec's one walk over message sets (`analyze`: sizes, magic, CRCs, key and value
lengths, where the complete entries end), as 0.8.2's ConsumerIterator checked CRCs; this then cuts keys and
values out of the uncompressed entries it already knows to be sound, and hands compressed wrappers to
`iter_messages`, which opens them -- as it opens record batches (magic 2). Creating the final tuple directly,
instead of a Message and then a MessageAndMetadata, takes about a third off the consumer's time per message
(bench/consumer.py).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from zkbroker.protocol.message_set import (
    CODEC_MASK,
    LOG_OVERHEAD,
    InflationBoundError,
    analyze,
    entry_starts,
    inflation_bound,
    iter_messages,
)


class MessageAndMetadata(NamedTuple):
    """What a stream hands out (0.8.2's MessageAndMetadata)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None

__all__ = ["MessageAndMetadata", "decode_messages", "last_offset"]

_OFFSET = struct.Struct(">q")
_HEAD = struct.Struct(">qiIbbi")  # offset, size, crc, magic, attributes, then magic 0's key length
_INT32 = struct.Struct(">i")
_new = tuple.__new__


def decode_messages(records, topic: str, partition: int, start: int,
                    max_inflated_bytes: int | None = None) -> tuple[list[MessageAndMetadata], bool]:
    """The messages of `records` at offsets >= start, and whether the set held any complete message at all
    (False with bytes present means the first message is larger than the fetch size).

    Raises InvalidMessageError (a RemoteProtocolError) for a corrupt message, as iter_messages does, and its
    InflationBoundError, naming topic, partition and offset, for a compressed message that would inflate past
    `max_inflated_bytes` (default: the codec's inflation_bound).
    """
    bound = inflation_bound() if max_inflated_bytes is None else max_inflated_bytes
    checked = analyze(records)
    out: list[MessageAndMetadata] = []
    append = out.append
    buf = bytes(records[: checked.valid_bytes])
    unpack_head = _HEAD.unpack_from
    unpack_int = _INT32.unpack_from
    n = len(buf)
    pos = 0
    while pos < n:
        offset, size, _, magic, attributes, key_size = unpack_head(buf, pos)
        end = pos + LOG_OVERHEAD + size
        if magic == 2 or attributes & CODEC_MASK:
            try:
                for m in iter_messages(memoryview(buf)[pos:end], max_inflated_bytes=bound):
                    if m.offset >= start:
                        append(_new(MessageAndMetadata, (topic, partition, m.offset, m.key, m.value)))
            except InflationBoundError as e:
                raise e.in_partition(topic, partition) from None
            pos = end
            continue
        if magic:
            (key_size,) = unpack_int(buf, pos + 26)  # after the timestamp
            at = pos + 30
        else:
            at = pos + 22
        if key_size < 0:
            key = None
        else:
            key = buf[at : at + key_size]
            at += key_size
        if offset >= start:
            append(_new(MessageAndMetadata, (topic, partition, offset, key,
                                             None if unpack_int(buf, at)[0] < 0 else buf[at + 4 : end])))
        pos = end
    return out, checked.shallow_count > 0


def last_offset(records) -> int | None:
    """The offset of the last complete entry of a set (a compressed wrapper carries its last inner offset, a
    record batch its base offset and lastOffsetDelta), from the set's boundaries alone; None if not even the
    first entry is complete."""
    starts = entry_starts(records)
    if not starts:
        return None
    (offset,) = _OFFSET.unpack_from(records, starts[-1])
    if records[starts[-1] + 16] == 2:
        offset += _INT32.unpack_from(records, starts[-1] + 23)[0]
    return offset
