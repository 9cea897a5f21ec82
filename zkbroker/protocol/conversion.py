"""Message format conversion (Kafka 0.10/0.11's up- and down-conversion): message sets from one magic to another.

Two users, one rule set:

* **Down-conversion on fetch** (:func:`down_convert`): a client whose Fetch version cannot carry record batches
  (v0-v1 read magic 0, v2-v3 magic 1) gets each batch as messages of the magic it reads -- one message per
  record, or one compressed wrapper per compressed batch with the batch's codec -- records below the fetch
  offset left out, headers dropped, LogAppendTime kept where magic 1 can say it. Messages of magic 0 and 1
  pass unchanged, magic-1 ones to Fetch v0-v1 clients too, as this broker always served them (0.8.2 sent the
  bytes it had; kafka-python and librdkafka read either magic at any version), so old and new clients share
  one topic.
* **Conversion on write** (:func:`convert_for_write`): a topic whose ``message.format.version`` is set stores
  every entry in that magic: up (magic 0 and 1 messages into one record batch per run of them, magic 0 into
  magic 1 with no timestamp) or down, as Kafka's LogValidator does, refusing what the target cannot hold --
  producer ids and headers below magic 2 (UNSUPPORTED_FOR_MESSAGE_FORMAT).

zstd exists only in record batches: a zstd batch cannot become older messages (UNSUPPORTED_COMPRESSION_TYPE),
whichever way. Offsets are kept: down-converted entries carry the batch's record offsets (a wrapper its last
one, its inner messages relative for magic 1 and absolute for magic 0); on write the walker numbers the
converted set afterwards.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

from .compression import CODEC_NONE, CODEC_ZSTD, compress
from .errors import ErrorCode, RemoteProtocolError
from .message_set import (
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    encode_message,
    entry_starts,
    iter_batch_records,
    iter_messages,
)
from .record_batch import build_record_batch, read_header

__all__ = ["ConversionError", "convert_for_write", "down_convert", "highest_magic", "needs_conversion"]

_OFFSET_SIZE = struct.Struct(">qi")
_CODEC_MASK = 0x07

Buffer = bytes | bytearray | memoryview


class ConversionError(RemoteProtocolError):
    """A set that cannot be converted to the magic asked for; ``error_code`` is Kafka's answer for it."""


def _view(buf: Buffer) -> memoryview:
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def highest_magic(buf: Buffer) -> int:
    """The highest magic among the complete entries of a set (-1 for none): a walk of the sizes only."""
    view = _view(buf)
    return max((view[pos + 16] for pos in entry_starts(view)), default=-1)


def needs_conversion(buf: Buffer, to_magic: int) -> bool:
    """Whether any complete entry of the set is not of ``to_magic``."""
    view = _view(buf)
    return any(view[pos + 16] != to_magic for pos in entry_starts(view))


# -- down-conversion on fetch ---------------------------------------------------------------------


def down_convert(buf: Buffer, to_magic: int, fetch_offset: int, max_bytes: int | None = None) -> bytes:
    """The complete entries of a fetched range as a client reading at most ``to_magic`` (0 or 1) can read them.

    ``max_bytes``: the converted set is cut at an entry boundary to at most this many bytes, but keeps its
    first entry whole (messages grow when converted; a client must always get one). Raises
    :class:`ConversionError` (UNSUPPORTED_COMPRESSION_TYPE) for a zstd batch, InvalidMessageError for a
    corrupt one."""
    view = _view(buf)
    out: list[bytes] = []
    size = 0
    for pos in entry_starts(view):
        end = pos + LOG_OVERHEAD + _OFFSET_SIZE.unpack_from(view, pos)[1]
        if view[pos + 16] < 2:
            converted = bytes(view[pos:end])  # messages of magic 0 and 1 pass as they are (see below)
        else:
            converted = b"".join(_batch_as_messages(view, pos, to_magic, fetch_offset))
        if max_bytes is not None and out and size + len(converted) > max_bytes:
            break
        out.append(converted)
        size += len(converted)
    return b"".join(out)


def _batch_as_messages(view: memoryview, pos: int, to_magic: int, first_offset: int) -> Iterator[bytes]:
    header = read_header(view, pos)
    if header.is_control:
        return  # an end-transaction marker: older formats have no control records, and Kafka drops them
    if header.codec == CODEC_ZSTD:
        raise ConversionError(
            f"a zstd record batch (offsets {header.base_offset}-{header.last_offset}) cannot be converted to "
            f"magic {to_magic}",
            error_code=ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        )
    _, records = iter_batch_records(view, pos)
    records = [r for r in records if r.offset >= first_offset]
    if not records:
        return
    append_time = header.log_append_time and to_magic == 1
    attributes = LOG_APPEND_TIME if append_time else 0
    if header.codec == CODEC_NONE:
        for r in records:
            message = encode_message(r.key, r.value, magic=to_magic, attributes=attributes,
                                     timestamp=r.timestamp if to_magic else NO_TIMESTAMP)
            yield _OFFSET_SIZE.pack(r.offset, len(message)) + message
        return
    yield _wrapper(
        [(r.offset, r.key, r.value, r.timestamp) for r in records], to_magic, header.codec, attributes,
        header.max_timestamp,
    )


def _wrapper(items: list[tuple], magic: int, codec: int, attributes: int, max_timestamp: int) -> bytes:
    """One compressed wrapper of ``(offset, key, value, timestamp)`` items: inner offsets absolute for magic 0,
    relative to the first for magic 1; the wrapper carries the last offset and the largest timestamp."""
    first = items[0][0]
    inner = []
    for offset, key, value, timestamp in items:
        message = encode_message(key, value, magic=magic, timestamp=timestamp if magic else NO_TIMESTAMP)
        inner += [_OFFSET_SIZE.pack(offset if magic == 0 else offset - first, len(message)), message]
    value = compress(codec, b"".join(inner), magic)
    wrapper = encode_message(None, value, magic=magic, attributes=codec | attributes,
                             timestamp=max_timestamp if magic else NO_TIMESTAMP)
    return _OFFSET_SIZE.pack(items[-1][0], len(wrapper)) + wrapper


# -- conversion on write --------------------------------------------------------------------------


def convert_for_write(buf: Buffer, to_magic: int) -> bytes:
    """A produced set with every complete entry in ``to_magic`` (message.format.version), offsets as placeholders
    (the walker numbers them). Raises :class:`ConversionError` for what the target cannot hold, and
    InvalidMessageError for corrupt entries."""
    view = _view(buf)
    out: list[bytes] = []
    run: list[tuple] = []  # messages of magic 0 and 1 waiting to become one record batch
    run_codec = CODEC_NONE
    for pos in entry_starts(view):
        end = pos + LOG_OVERHEAD + _OFFSET_SIZE.unpack_from(view, pos)[1]
        magic = view[pos + 16]
        entry = view[pos:end]
        if magic == to_magic:
            if run:
                out.append(build_record_batch(run, codec=run_codec))
                run, run_codec = [], CODEC_NONE
            out.append(bytes(entry))
        elif to_magic == 2:  # up: magic 0 and 1 messages into one batch, the codec of their wrappers
            run_codec = max(run_codec, view[pos + 17] & _CODEC_MASK)
            run += [(m.key, m.value, m.timestamp) for m in iter_messages(entry)]
        elif magic == 2:
            out.append(_batch_for_write(view, pos, to_magic))
        else:  # magic 0 <-> 1: each message, or each wrapper with its codec
            out.append(_messages_for_write(entry, view[pos + 17], to_magic))
    if run:
        out.append(build_record_batch(run, codec=run_codec))
    return b"".join(out)


def _batch_for_write(view: memoryview, pos: int, to_magic: int) -> bytes:
    header = read_header(view, pos)
    if header.producer_id >= 0:
        raise ConversionError(
            f"idempotent or transactional record batches need message format 0.11.0, not magic {to_magic}",
            error_code=ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        )
    _, records = iter_batch_records(view, pos)
    if any(r.headers for r in records):
        raise ConversionError(f"record headers need message format 0.11.0, not magic {to_magic}",
                              error_code=ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT)
    return b"".join(_batch_as_messages(view, pos, to_magic, header.base_offset))


def _messages_for_write(entry: memoryview, attributes: int, to_magic: int) -> bytes:
    messages = [(m.offset, m.key, m.value, m.timestamp) for m in iter_messages(entry)]
    codec = attributes & _CODEC_MASK
    if codec == CODEC_NONE:
        return b"".join(_plain(messages, to_magic))
    return _wrapper(messages, to_magic, codec, 0, max(m[3] for m in messages))


def _plain(messages: Iterable[tuple], magic: int) -> Iterator[bytes]:
    for offset, key, value, timestamp in messages:
        message = encode_message(key, value, magic=magic, timestamp=timestamp if magic else NO_TIMESTAMP)
        yield _OFFSET_SIZE.pack(offset, len(message)) + message
