"""Message sets -- magic 0 (Kafka 0.8), magic 1 (0.10, adds a timestamp) and magic 2 record batches (0.11) --
on the wire and disk.

A message set is a sequence of entries ``offset int64 | size int32 | message``, where a message is::

    crc uint32 | magic int8 | attributes int8 | [timestamp int64, magic 1] | key bytes | value bytes

The CRC (CRC32/IEEE) covers magic..end of value; the offset and size lie outside it, so assigning
offsets never touches a CRC. Attributes: bits 0-2 the codec (0 none, 1 gzip, 2 snappy, 3 lz4),
bit 3 (magic 1) LogAppendTime. A compressed message (a *wrapper*) carries a whole inner message
set as its value and its own offset is that of its last inner message. Inner offsets are
absolute in magic 0 and relative (0..n-1) in magic 1 (KIP-31), so a broker assigns offsets to
a magic-1 wrapper by rewriting the wrapper offset alone, but must decompress, renumber,
recompress and re-CRC a magic-0 one, as 0.8's broker did.

A magic-2 entry is a record batch (:mod:`record_batch`): its offset field is the batch's base offset, its
size field the batch length, and its magic sits at byte 16 as a message's does, so the walk tells the three
apart entry by entry (a set may mix them: a log written by old and new clients). A batch is checked by its
CRC-32C; the produce path also opens it (decompressing a compressed one within the same bound) and checks
every record, then numbers it by writing its base offset -- and the partition leader epoch -- in place.
Nothing else of a batch changes, so its CRC stays the client's.

One walk over a set, ``_walk``, holds every rule about where entries end and what makes one
sound (``_entry_head`` checks one entry; ``_plain_run`` checks a run of uncompressed ones in one
tight loop, no Python object per message: it is most of the broker's CPU when producing). Every
reader goes through it:

* the produce path: :func:`assign_offsets` -- validate every CRC and size, assign offsets in
  place, report the offsets, message count and max timestamp;
* the follower and recovery paths, and the readers of fetched sets: :func:`analyze` -- the same
  checks without assigning, and where the complete entries end. Our consumer's decoder and the
  Spark source's Arrow decoder check a fetched set with it, find its entries with
  :func:`entry_starts` (sizes only) and then cut keys and values out their own fast ways;
* tools, tests and the simple consumer: :func:`iter_messages` yields :class:`Message` objects
  (compressed wrappers and batches opened), :func:`iter_entries` the stored entries for DumpLogSegments,
  and :func:`build_message_set` writes sets (:func:`record_batch.build_record_batch` writes batches);
* the log cleaner: :func:`iter_keys` -- offset, key and whether the value is null, of every
  message -- and :func:`retain_messages` -- the set with only the messages it keeps, offsets
  unchanged, compressed wrappers and record batches that lose some rebuilt with their codec (a batch
  decided record by record and, for transactions, batch by batch: see its docstring).

A message set cut short (Fetch responses may end mid-message; a produce request may carry a torn
tail) ends at its last complete message: readers stop there, and ``valid_bytes`` says where.
Anything malformed raises :class:`InvalidMessageError`, a :class:`RemoteProtocolError` whose
``error_code`` is the Kafka code to answer (CORRUPT_MESSAGE, or MESSAGE_TOO_LARGE) and whose
``position`` is where the bad entry starts.
"""

from __future__ import annotations

import array
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

try:
    # ISA-L's CRC-32 is zlib's (same IEEE polynomial, same results), but ~5x faster on 100-byte messages,
    # where zlib's table-driven loop costs more than everything else the produce path does per message.
    from isal.isal_zlib import crc32
except ImportError:  # a platform without isal wheels: correct, only slower
    from zlib import crc32

from . import record_batch
from .compression import CODEC_LZ4, CODEC_NONE, InflationBoundExceeded, compress, decompress
from .errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from .record_batch import BatchHeader, CorruptRecordError, EndTxnMarker, crc32c, read_header

__all__ = [
    "LOG_OVERHEAD",
    "AppendInfo",
    "BatchInfo",
    "Entry",
    "INFLATION_FACTOR",
    "InflationBoundError",
    "InvalidMessageError",
    "Message",
    "Retained",
    "analyze",
    "assign_offsets",
    "build_message_set",
    "encode_message",
    "entry_starts",
    "iter_batch_records",
    "iter_entries",
    "inflation_bound",
    "iter_messages",
    "read_inflation_bound",
]

#: Bytes before each message in a set: offset int64 + size int32.
LOG_OVERHEAD = 12
#: Smallest message (crc, magic, attributes, key length, value length) per magic; a batch's header.
MIN_MESSAGE_SIZE = {0: 14, 1: 22, 2: record_batch.MIN_BATCH_SIZE}
CODEC_MASK = 0x07
LOG_APPEND_TIME = 0x08
NO_TIMESTAMP = -1

_OFFSET = struct.Struct(">q")
_OFFSET_SIZE = struct.Struct(">qi")
_CRC_MAGIC_ATTRIBUTES = struct.Struct(">Ibb")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_MAGIC0_HEAD = struct.Struct(">bb")  # magic, attributes: the CRC-covered start of a magic-0 message
_MAGIC1_HEAD = struct.Struct(">bbq")
# An entry through the value length of a message with a null key: offset, size, crc, magic and
# attributes as one field, [timestamp], key length, value length. Its size is the smallest entry of that magic.
_PLAIN_ENTRY = {0: struct.Struct(">qiIHii"), 1: struct.Struct(">qiIHqii")}
_MAGIC_CODEC_MASK = 0xFF00 | CODEC_MASK
_NO_LIMIT = 1 << 31

#: A compressed message may inflate to at most this many times message.max.bytes (see the README's
#: Hardening section): clients cap the *uncompressed* batch they compress near their request size,
#: so sound sets stay far below it, while one inflation -- the set, its renumbered copy, the
#: positions of its messages -- stays a few tens of MB in the broker's one event-loop thread.
INFLATION_FACTOR = 16
#: 0.8.2's message.max.bytes default.
_DEFAULT_MESSAGE_MAX_BYTES = 1_000_012


def inflation_bound(max_message_bytes: int = _DEFAULT_MESSAGE_MAX_BYTES) -> int:
    """How many bytes a compressed message may inflate to where messages are at most
    ``max_message_bytes`` (a broker's message.max.bytes)."""
    return INFLATION_FACTOR * max_message_bytes


def read_inflation_bound(fetch_bytes: int) -> int:
    """The bound a reader fetching ``fetch_bytes`` at a time applies: that of its fetch size, and
    never less than a broker with 0.8.2's default message.max.bytes accepts."""
    return inflation_bound(max(fetch_bytes, _DEFAULT_MESSAGE_MAX_BYTES))

Buffer = bytes | bytearray | memoryview


class InvalidMessageError(RemoteProtocolError):
    """A message in a set is corrupt (CRC, size, layout, compression) or too large."""

    def __init__(
        self, message: str, position: int, error_code: int = ErrorCode.CORRUPT_MESSAGE
    ) -> None:
        super().__init__(f"{message} (message at byte {position})", error_code=error_code)
        self.position = position


class InflationBoundError(InvalidMessageError):
    """A compressed message inflates past the bound (a decompression bomb): MESSAGE_TOO_LARGE, which
    clients do not retry, and the offset of the message, for readers to name."""

    def __init__(self, message: str, position: int, offset: int, bound: int) -> None:
        super().__init__(message, position, error_code=ErrorCode.MESSAGE_TOO_LARGE)
        self.offset = offset
        self.bound = bound

    def in_partition(self, topic: str, partition: int) -> InflationBoundError:
        """The same error, its message naming the topic and partition (a reader's report)."""
        return InflationBoundError(
            f"compressed message at offset {self.offset} of [{topic},{partition}] inflates past "
            f"{self.bound} bytes",
            self.position,
            self.offset,
            self.bound,
        )


class Message(NamedTuple):
    """One logical message; a compressed wrapper's inner messages, and a batch's records, come out one by one."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int  # -1 for magic 0 (and magic-1 messages written without one)
    magic: int
    headers: tuple[tuple[str, bytes | None], ...] = ()  # magic 2 only


class BatchInfo(NamedTuple):
    """What the log keeps of each magic-2 batch it appends: where its offsets and epoch go (the leader-epoch
    cache), and who wrote it with which sequences (the idempotent producer's state); a control batch's
    end-transaction marker (None in an empty control batch, whose transaction the cleaner removed)."""

    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    max_timestamp: int
    transactional: bool
    control: bool = False
    end_txn_marker: EndTxnMarker | None = None


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What the log needs to know about a validated message set (Kafka's LogAppendInfo).

    ``records`` are the bytes to append: a view of the input (offsets written in place) or,
    when a magic-0 compressed wrapper had to be rebuilt, new bytes. ``valid_bytes`` is how much
    of the input held complete messages. ``first_offset`` is the first offset in the set (the
    first inner offset of a compressed first message, except in :func:`analyze`, which does not
    open wrappers and reports the wrapper offset); ``count`` counts messages, inner ones
    included, where known (``analyze`` counts entries).
    """

    records: Buffer
    first_offset: int
    last_offset: int
    count: int
    shallow_count: int
    max_timestamp: int
    valid_bytes: int
    codec: int
    offsets_monotonic: bool  # every entry's offset above the last; 0.8.2 refused other replica data
    #: The highest magic among the entries (-1 for none), and the offset of the entry holding max_timestamp
    #: (the last offset of its wrapper or batch): the time index's entry.
    magic: int = -1
    offset_of_max_timestamp: int = -1
    #: The magic-2 batches, in order.
    batches: tuple[BatchInfo, ...] = ()


# -- reading one message --------------------------------------------------------------------------


def _key_value(view: memoryview, start: int, end: int, magic: int) -> tuple[Any, Any, int]:
    """Key and value (views, or None) of the message at ``start`` (its CRC) ending at ``end``,
    and the position of the key length. Checks that the lengths fill the message exactly."""
    key_at = start + (14 if magic else 6)
    (key_size,) = _INT32.unpack_from(view, key_at)
    if key_size < -1:
        raise InvalidMessageError(f"negative key length {key_size}", start - LOG_OVERHEAD)
    value_at = key_at + 4 + max(key_size, 0)
    if value_at + 4 > end:
        raise InvalidMessageError("key runs past the end of the message", start - LOG_OVERHEAD)
    (value_size,) = _INT32.unpack_from(view, value_at)
    if value_size < -1 or value_at + 4 + max(value_size, 0) != end:
        raise InvalidMessageError(
            "value length does not match the message size", start - LOG_OVERHEAD
        )
    key = None if key_size < 0 else view[key_at + 4 : value_at]
    value = None if value_size < 0 else view[value_at + 4 : end]
    return key, value, key_at


def _as_view(buf: Buffer) -> memoryview:
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


# -- the walk shared by assign_offsets and analyze ------------------------------------------------


@dataclass(slots=True)
class _Inner:
    """An opened wrapper: its decompressed inner set and what we learned walking it."""

    data: bytes
    positions: array.array
    relative_ok: bool  # inner offsets are exactly 0..n-1
    max_timestamp: int


def _open_wrapper(
    view: memoryview, pos: int, end: int, magic: int, codec: int, verify_crc: bool, max_inflated: int
) -> _Inner:
    _, value, _ = _key_value(view, pos + LOG_OVERHEAD, end, magic)
    if value is None:
        raise InvalidMessageError("compressed message without a value", pos)
    if codec > CODEC_LZ4:  # zstd came with record batches: a message of magic 0 or 1 cannot carry it
        raise InvalidMessageError(f"compression codec {codec} in a message of magic {magic}", pos)
    try:
        data = decompress(codec, value, max_inflated)
    except InflationBoundExceeded:
        offset = _OFFSET.unpack_from(view, pos)[0]
        raise InflationBoundError(
            f"compressed message at offset {offset} inflates past {max_inflated} bytes",
            pos,
            offset,
            max_inflated,
        ) from None
    except RemoteProtocolError as exc:
        raise InvalidMessageError(f"cannot decompress: {exc}", pos) from None
    inner = memoryview(data)
    positions = array.array("q")  # 8 bytes a message, not a Python int's 36
    relative_ok = True
    max_timestamp = NO_TIMESTAMP
    at = 0
    n = len(inner)
    while at < n:
        if at + LOG_OVERHEAD > n:
            raise InvalidMessageError("torn message inside a compressed message", pos)
        offset, size = _OFFSET_SIZE.unpack_from(inner, at)
        inner_end = at + LOG_OVERHEAD + size
        if size < MIN_MESSAGE_SIZE[0] or inner_end > n:
            raise InvalidMessageError(f"inner message with corrupt size {size}", pos)
        crc, inner_magic, attributes = _CRC_MAGIC_ATTRIBUTES.unpack_from(inner, at + LOG_OVERHEAD)
        if inner_magic not in MIN_MESSAGE_SIZE or size < MIN_MESSAGE_SIZE[inner_magic]:
            raise InvalidMessageError(f"inner message with magic {inner_magic}", pos)
        if verify_crc and crc32(inner[at + 16 : inner_end]) != crc:
            raise InvalidMessageError("inner message fails its CRC", pos)
        if attributes & CODEC_MASK:
            raise InvalidMessageError("compressed message inside a compressed message", pos)
        _key_value(inner, at + LOG_OVERHEAD, inner_end, inner_magic)
        if inner_magic:
            (timestamp,) = _INT64.unpack_from(inner, at + 18)
            max_timestamp = max(max_timestamp, timestamp)
        if offset != len(positions):
            relative_ok = False
        positions.append(at)
        at = inner_end
    if not positions:
        raise InvalidMessageError("compressed message with no inner messages", pos)
    return _Inner(data, positions, relative_ok, max_timestamp)


def _rebuild_wrapper(
    view: memoryview, pos: int, end: int, magic: int, attributes: int, inner: _Inner, first: int
) -> bytes:
    """A wrapper entry renumbered from ``first`` (absolute inner offsets for magic 0, 0..n-1 for
    magic 1), recompressed with its codec and re-CRC'd; the wrapper key and timestamp are kept."""
    key, _, _ = _key_value(view, pos + LOG_OVERHEAD, end, magic)
    renumbered = bytearray(inner.data)
    start = first if magic == 0 else 0
    for i, at in enumerate(inner.positions):
        _OFFSET.pack_into(renumbered, at, start + i)
    timestamp = _INT64.unpack_from(view, pos + 18)[0] if magic else NO_TIMESTAMP
    value = compress(attributes & CODEC_MASK, renumbered, magic)
    message = encode_message(key, value, magic=magic, attributes=attributes, timestamp=timestamp)
    return _OFFSET_SIZE.pack(first + len(inner.positions) - 1, len(message)) + message


def _stamp_message(view: memoryview, pos: int, timestamp: int) -> None:
    """LogAppendTime for the magic-1 message (or wrapper) at ``pos``: the attribute, the time, the CRC again."""
    view[pos + 17] |= LOG_APPEND_TIME
    _INT64.pack_into(view, pos + 18, timestamp)
    (size,) = _INT32.unpack_from(view, pos + 8)
    _UINT32.pack_into(view, pos + 12, crc32(view[pos + 16 : pos + LOG_OVERHEAD + size]))


def _check_size(size: int, max_message_bytes: int | None, pos: int) -> None:
    if max_message_bytes is not None and size > max_message_bytes:
        raise InvalidMessageError(
            f"message of {size} bytes is larger than {max_message_bytes}",
            pos,
            error_code=ErrorCode.MESSAGE_TOO_LARGE,
        )


def _entry_head(
    view: memoryview, pos: int, n: int, max_message_bytes: int | None, verify_crc: bool
) -> tuple[int, int, int, int] | None:
    """The walk's step, shared by every reader: the entry at ``pos`` checked -- its size (at least a
    message, at most ``max_message_bytes``), its magic, its CRC (CRC-32C for a batch) -- as (offset, end,
    magic, attributes); None where the set ends, or where its last entry is torn (a fetch may end inside one)."""
    if pos + LOG_OVERHEAD > n:
        return None
    offset, size = _OFFSET_SIZE.unpack_from(view, pos)
    end = pos + LOG_OVERHEAD + size
    if size < MIN_MESSAGE_SIZE[0]:
        raise InvalidMessageError(f"message with corrupt size {size}", pos)
    if end > n:
        return None
    _check_size(size, max_message_bytes, pos)
    crc, magic, attributes = _CRC_MAGIC_ATTRIBUTES.unpack_from(view, pos + LOG_OVERHEAD)
    if magic == 2 and size >= MIN_MESSAGE_SIZE[2]:
        (crc,) = _UINT32.unpack_from(view, pos + record_batch.CRC_AT)
        (attributes,) = _INT16.unpack_from(view, pos + record_batch.ATTRIBUTES_AT)
        # Without the crc32c package (a Spark executor) a batch is read unchecked: see record_batch.
        if verify_crc and crc32c is not None and crc32c(view[pos + record_batch.ATTRIBUTES_AT : end]) != crc:
            raise InvalidMessageError("record batch fails its CRC-32C", pos)
        return offset, end, magic, attributes
    if magic != 0 and (magic != 1 or size < MIN_MESSAGE_SIZE[1]):
        raise InvalidMessageError(f"message with magic {magic} and size {size}", pos)
    if verify_crc and crc32(view[pos + 16 : end]) != crc:
        raise InvalidMessageError("message fails its CRC", pos)
    return offset, end, magic, attributes


def _batch_records(view: memoryview, pos: int, end: int, header: BatchHeader, max_inflated: int) -> memoryview:
    """The records section of the batch at ``pos``, decompressed within ``max_inflated`` bytes."""
    records = view[pos + record_batch.BATCH_OVERHEAD : end]
    codec = header.codec
    if codec == CODEC_NONE:
        return records
    try:
        return memoryview(decompress(codec, records, max_inflated))
    except InflationBoundExceeded:
        raise InflationBoundError(
            f"record batch at offset {header.base_offset} inflates past {max_inflated} bytes",
            pos,
            header.base_offset,
            max_inflated,
        ) from None
    except RemoteProtocolError as exc:
        raise InvalidMessageError(f"cannot decompress the record batch: {exc}", pos) from None


def control_marker(view: memoryview, pos: int, end: int, header: BatchHeader) -> EndTxnMarker | None:
    """The end-transaction marker of the control batch at ``pos`` (None when the batch is empty, or holds one of
    the metadata quorum's control records)."""
    records = _batch_records(view, pos, end, header, inflation_bound())
    try:
        for record in record_batch.iter_records(header, records):
            if record_batch.control_record_type(record.key) in record_batch.ControlRecordType.QUORUM:
                return None
            return record_batch.parse_end_txn_marker(record.key, record.value)
    except CorruptRecordError as exc:
        raise InvalidMessageError(f"control batch: {exc}", pos) from None
    return None


def _check_batch(
    view: memoryview, pos: int, end: int, header: BatchHeader, max_inflated: int, allow_control: bool = False
) -> None:
    """A produced batch, as Kafka's LogValidator checks it: records and a count that agrees with the offset
    range, no control batch (clients may not write one; the transaction coordinator's markers may), and every
    record whole (see check_records)."""
    count = header.record_count
    if count <= 0 or header.last_offset_delta != count - 1:
        raise InvalidMessageError(
            f"record batch with {count} records and last offset delta {header.last_offset_delta}", pos
        )
    if header.is_control and not allow_control:
        raise InvalidMessageError("clients may not write control batches", pos)
    if crc32c is None:
        raise LocalProtocolError("checking produced record batches needs the crc32c package")
    records = _batch_records(view, pos, end, header, max_inflated)
    try:
        record_batch.check_records(records, 0, len(records), count)
    except CorruptRecordError as exc:
        raise InvalidMessageError(str(exc), pos) from None


def _plain_run(
    view: memoryview, pos: int, next_offset: int | None, previous: int | None, max_timestamp: int, max_size: int
) -> tuple[int, int, int, int, int, int]:
    """Validate the run of uncompressed messages of one magic that starts at ``pos`` -- the common case
    of both the produce path and a follower's append -- in one tight loop (one unpack per entry, no call
    per message, no key or value objects), and with ``next_offset`` number them from it in place. It
    checks what :func:`_walk` checks and stops, without raising, at the first entry that is anything
    else -- compressed, of the other magic, malformed, torn, too large, or (keeping the entries' own
    offsets) not above ``previous``, the offset before the run -- leaving that entry to :func:`_walk`,
    which handles or reports it. Returns the position it stopped at, the number of messages in the run,
    their first and last offsets, the max timestamp so far and the offset of the message in the run that
    holds it (-1 if none does)."""
    n = len(view)
    first = last = max_at = -1
    if pos + 17 > n:
        return pos, 0, first, last, max_timestamp, max_at
    magic = view[pos + 16]
    if magic not in _PLAIN_ENTRY:
        return pos, 0, first, last, max_timestamp, max_at
    unpack = _PLAIN_ENTRY[magic].unpack_from
    head = _PLAIN_ENTRY[magic].size
    min_size = MIN_MESSAGE_SIZE[magic]  # also the size of a message with a null key and an empty value
    plain = magic << 8  # magic and attributes as one 16-bit field: this magic, no codec
    unpack_int32 = _INT32.unpack_from
    pack_offset = _OFFSET.pack_into
    assign = next_offset is not None
    last = (next_offset - 1) if assign else (-(1 << 63) - 1 if previous is None else previous)
    start = pos
    count = 0
    timestamp = NO_TIMESTAMP
    while pos + head <= n:
        if magic:
            offset, size, crc, magic_attributes, timestamp, key_size, value_size = unpack(view, pos)
        else:
            offset, size, crc, magic_attributes, key_size, value_size = unpack(view, pos)
        end = pos + LOG_OVERHEAD + size
        if magic_attributes & _MAGIC_CODEC_MASK != plain or not min_size <= size <= max_size or end > n:
            break
        if key_size == -1:
            if value_size != size - min_size and (value_size != -1 or size != min_size):
                break
        else:
            value_at = pos + head - 4 + key_size  # the value length follows the key
            if key_size < 0 or value_at + 4 > end:
                break
            (value_size,) = unpack_int32(view, value_at)
            if value_size != end - value_at - 4 and (value_size != -1 or value_at + 4 != end):
                break
        if crc32(view[pos + 16 : end]) != crc:
            break
        if assign:
            offset = last + 1
            pack_offset(view, pos, offset)
        elif offset <= last:
            break
        if count == 0:
            first = offset
        last = offset
        count += 1
        if timestamp > max_timestamp:
            max_timestamp = timestamp
            max_at = offset
        pos = end
    if pos == start:
        first = last = -1
    return pos, count, first, last, max_timestamp, max_at


def _walk(
    buf: Buffer,
    base_offset: int | None,
    max_message_bytes: int | None,
    verify_crc: bool,
    max_inflated_bytes: int,
    leader_epoch: int | None = None,
    log_append_time: int | None = None,
    allow_control: bool = False,
) -> AppendInfo:
    """Validate a message set; with ``base_offset``, also assign offsets from it (deep), with
    ``leader_epoch`` stamp it into every record batch, and with ``log_append_time`` stamp that time into
    every message of magic 1 and batch (LogAppendTime)."""
    view = _as_view(buf)
    if base_offset is not None and view.readonly:
        view = memoryview(bytearray(view))
    n = len(view)
    assign = base_offset is not None
    next_offset = base_offset if assign else 0
    first = last = -1
    count = shallow = 0
    max_timestamp = NO_TIMESTAMP
    max_timestamp_offset = -1
    max_codec = CODEC_NONE
    max_magic = -1
    monotonic = True
    rebuilt: list[tuple[int, int, bytes]] = []
    batches: list[BatchInfo] = []
    max_size = _NO_LIMIT if max_message_bytes is None else max_message_bytes
    pos = 0
    while True:
        if verify_crc:
            start = pos
            pos, run, run_first, run_last, max_timestamp, run_max_at = _plain_run(
                view, pos, next_offset if assign else None, last if shallow else None, max_timestamp, max_size
            )
            if run:
                if shallow == 0:
                    first = run_first
                count += run
                shallow += run
                last = run_last
                next_offset += run if assign else 0
                max_magic = max(max_magic, view[start + 16])
                if run_max_at >= 0:
                    max_timestamp_offset = run_max_at
                if log_append_time is not None and view[start + 16] == 1:
                    for at in entry_starts(view[start:pos]):
                        _stamp_message(view, start + at, log_append_time)
        head = _entry_head(view, pos, n, max_message_bytes, verify_crc)
        if head is None:
            break  # the end, or a torn last message: the set ends before it
        offset, end, magic, attributes = head
        codec = attributes & CODEC_MASK
        if magic == 2:
            header = read_header(view, pos)
            if header.last_offset_delta < 0 or header.record_count < 0:
                raise InvalidMessageError(
                    f"record batch with {header.record_count} records and last offset delta "
                    f"{header.last_offset_delta}",
                    pos,
                )
            if assign:
                _check_batch(view, pos, end, header, max_inflated_bytes, allow_control)
                offset = next_offset
                _OFFSET.pack_into(view, pos, offset)
                if leader_epoch is not None:
                    _INT32.pack_into(view, pos + record_batch.PARTITION_LEADER_EPOCH_AT, leader_epoch)
                if log_append_time is not None:
                    record_batch.set_log_append_time(view, pos, end, log_append_time)
                    header = read_header(view, pos)
                next_offset += header.last_offset_delta + 1
            entry_last = offset + header.last_offset_delta
            batch = BatchInfo(
                offset,
                entry_last,
                header.partition_leader_epoch if leader_epoch is None else leader_epoch,
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.last_sequence,
                header.max_timestamp,
                header.is_transactional,
            )
            if header.attributes & record_batch.CONTROL:
                batch = batch._replace(control=True, end_txn_marker=control_marker(view, pos, end, header))
            batches.append(batch)
            if header.max_timestamp > max_timestamp:
                max_timestamp, max_timestamp_offset = header.max_timestamp, entry_last
            if shallow == 0:
                first = offset
            count += header.record_count
        elif codec == CODEC_NONE or not assign:
            _key_value(view, pos + LOG_OVERHEAD, end, magic)
            if assign:
                offset = next_offset
                _OFFSET.pack_into(view, pos, offset)
                next_offset += 1
                if log_append_time is not None and magic == 1:
                    _stamp_message(view, pos, log_append_time)
            if magic:
                (timestamp,) = _INT64.unpack_from(view, pos + 18)
                if timestamp > max_timestamp:
                    max_timestamp, max_timestamp_offset = timestamp, offset
            if shallow == 0:
                first = offset
            count += 1
            entry_last = offset
        else:
            inner = _open_wrapper(view, pos, end, magic, codec, verify_crc, max_inflated_bytes)
            inner_count = len(inner.positions)
            if log_append_time is not None and magic == 1:
                _stamp_message(view, pos, log_append_time)  # the wrapper's time is every inner message's
                attributes |= LOG_APPEND_TIME
            entry_last = next_offset + inner_count - 1
            if magic:
                (timestamp,) = _INT64.unpack_from(view, pos + 18)
                if not attributes & LOG_APPEND_TIME:
                    timestamp = max(timestamp, inner.max_timestamp)
                if timestamp > max_timestamp:
                    max_timestamp, max_timestamp_offset = timestamp, entry_last
            if magic and inner.relative_ok:
                _OFFSET.pack_into(view, pos, entry_last)
            else:
                rebuilt.append((pos, end, _rebuild_wrapper(view, pos, end, magic, attributes, inner, next_offset)))
            offset = entry_last
            if shallow == 0:
                first = next_offset
            next_offset += inner_count
            count += inner_count
        if codec > max_codec:
            max_codec = codec
        if magic > max_magic:
            max_magic = magic
        if shallow and offset <= last:  # a batch's base offset, or a message's (a wrapper's: its last inner)
            monotonic = False
        last = entry_last
        shallow += 1
        pos = end
    records: Buffer = view[:pos]
    if rebuilt:
        pieces = []
        at = 0
        for start, end, entry in rebuilt:
            pieces += [view[at:start], entry]
            at = end
        pieces.append(view[at:pos])
        records = b"".join(pieces)
    if shallow == 0 and assign:
        first, last = base_offset, base_offset - 1
    if log_append_time is not None and max_magic >= 1:
        # Kafka's LogValidator: the set's time is the append time, carried by its last offset in record batches
        # and by its first in messages of magic 1
        max_timestamp, max_timestamp_offset = log_append_time, last if max_magic == 2 else first
    return AppendInfo(
        records,
        first,
        last,
        count,
        shallow,
        max_timestamp,
        pos,
        max_codec,
        monotonic,
        max_magic,
        max_timestamp_offset,
        tuple(batches),
    )


def assign_offsets(
    buf: Buffer,
    base_offset: int,
    *,
    max_message_bytes: int | None = None,
    verify_crc: bool = True,
    max_inflated_bytes: int | None = None,
    leader_epoch: int | None = None,
    log_append_time: int | None = None,
    allow_control: bool = False,
) -> AppendInfo:
    """Validate a produced message set and number its messages from ``base_offset``.

    Offsets are written into ``buf`` in place when it is writable (a ``bytearray`` or a view of
    one); a read-only buffer is copied once. A torn last message is left out (0.8.2 trimmed it).
    A compressed message or batch may inflate to ``max_inflated_bytes`` (default: the
    :func:`inflation_bound` of ``max_message_bytes``, or of 0.8.2's default without one).
    ``leader_epoch``: the leader's epoch, written into each record batch's partitionLeaderEpoch.
    ``log_append_time``: the broker's time, stamped into every message of magic 1 (a compressed one's wrapper)
    and every batch, their CRCs computed again (message.timestamp.type=LogAppendTime).
    ``allow_control``: the set comes from the transaction coordinator (WriteTxnMarkers), which alone may
    write control batches.
    Raises :class:`InvalidMessageError` (:class:`InflationBoundError` past the bound); nothing
    should be appended then.
    """
    if max_inflated_bytes is None:
        max_inflated_bytes = inflation_bound(max_message_bytes or _DEFAULT_MESSAGE_MAX_BYTES)
    return _walk(buf, base_offset, max_message_bytes, verify_crc, max_inflated_bytes, leader_epoch, log_append_time,
                 allow_control)


def analyze(buf: Buffer, *, verify_crc: bool = True) -> AppendInfo:
    """Validate a message set that already has offsets (a follower's fetch, log recovery).

    Checks entry sizes and CRCs without opening compressed wrappers or record batches, as 0.8.2 did
    for replica appends (and Kafka 0.11 for batches); the offsets reported are the entries' own.
    """
    return _walk(buf, None, None, verify_crc, 0)  # wrappers stay closed: nothing inflates


# -- reading messages -----------------------------------------------------------------------------


def iter_messages(
    buf: Buffer, *, verify_crc: bool = True, max_inflated_bytes: int | None = None, control: bool = False
) -> Iterator[Message]:
    """The messages of a set, compressed wrappers and record batches opened, offsets absolute; stops
    at a torn tail. The records of control batches (end-transaction markers) are left out, as Kafka's
    consumers never return them, unless ``control``.

    A wrapper or batch that would inflate past ``max_inflated_bytes`` (default :func:`inflation_bound`
    of 0.8.2's message.max.bytes) raises :class:`InflationBoundError` instead of inflating."""
    if max_inflated_bytes is None:
        max_inflated_bytes = inflation_bound()
    view = _as_view(buf)
    n = len(view)
    pos = 0
    while (head := _entry_head(view, pos, n, None, verify_crc)) is not None:
        offset, end, magic, attributes = head
        if magic == 2:
            if control or not attributes & record_batch.CONTROL:
                yield from _batch_messages(view, pos, end, max_inflated_bytes)
            pos = end
            continue
        timestamp = _INT64.unpack_from(view, pos + 18)[0] if magic else NO_TIMESTAMP
        codec = attributes & CODEC_MASK
        if codec == CODEC_NONE:
            key, value, _ = _key_value(view, pos + LOG_OVERHEAD, end, magic)
            yield Message(offset, _bytes(key), _bytes(value), timestamp, magic)
        else:
            yield from _inner_messages(
                view, pos, end, offset, magic, attributes, timestamp, verify_crc, max_inflated_bytes
            )
        pos = end


def _batch_messages(view: memoryview, pos: int, end: int, max_inflated: int) -> Iterator[Message]:
    header = read_header(view, pos)
    records = _batch_records(view, pos, end, header, max_inflated)
    try:
        for record in record_batch.iter_records(header, records):
            yield Message(record.offset, record.key, record.value, record.timestamp, 2, record.headers)
    except CorruptRecordError as exc:
        raise InvalidMessageError(str(exc), pos) from None


def iter_batch_records(
    buf: Buffer, pos: int, *, max_inflated_bytes: int | None = None
) -> tuple[BatchHeader, list[record_batch.Record]]:
    """The header and the records of the batch at ``pos`` of a set (tools, down-conversion)."""
    view = _as_view(buf)
    header = read_header(view, pos)
    bound = inflation_bound() if max_inflated_bytes is None else max_inflated_bytes
    records = _batch_records(view, pos, pos + LOG_OVERHEAD + header.batch_length, header, bound)
    try:
        return header, list(record_batch.iter_records(header, records))
    except CorruptRecordError as exc:
        raise InvalidMessageError(str(exc), pos) from None


class Entry(NamedTuple):
    """One entry of a set as stored, for tools (DumpLogSegments): a wrapper is left closed, and
    the CRC is checked but not enforced (``valid``). A record batch has its header in ``batch`` (its
    ``timestamp`` is its maxTimestamp, ``key`` and ``value`` None)."""

    offset: int
    position: int  # of the entry's offset field in the set
    size: int  # of the message, without the 12-byte offset and size
    crc: int
    valid: bool
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    batch: BatchHeader | None = None


def iter_entries(buf: Buffer, *, max_message_bytes: int | None = None) -> Iterator[Entry]:
    """The shallow entries of a set as they are, stopping where a complete entry no longer fits
    (a torn tail, or a size too small to be a message -- as 0.8.2's FileMessageSet iterator did).

    Raises :class:`InvalidMessageError` for a size above ``max_message_bytes`` or key and value
    lengths that do not fill the message.
    """
    view = _as_view(buf)
    for pos in entry_starts(view):
        offset, size = _OFFSET_SIZE.unpack_from(view, pos)
        end = pos + LOG_OVERHEAD + size
        _check_size(size, max_message_bytes, pos)
        crc, magic, attributes = _CRC_MAGIC_ATTRIBUTES.unpack_from(view, pos + LOG_OVERHEAD)
        if magic == 2:
            if size < MIN_MESSAGE_SIZE[2]:
                return
            header = read_header(view, pos)
            valid = crc32c is not None and record_batch.batch_crc(view, pos, end) == header.crc
            yield Entry(
                offset, pos, size, header.crc, valid, 2, header.attributes, header.max_timestamp, None, None, header
            )
            continue
        layout = 1 if magic else 0
        if size < MIN_MESSAGE_SIZE[layout]:
            return
        timestamp = _INT64.unpack_from(view, pos + 18)[0] if layout else NO_TIMESTAMP
        key, value, _ = _key_value(view, pos + LOG_OVERHEAD, end, layout)
        valid = crc32(view[pos + 16 : end]) == crc
        yield Entry(
            offset, pos, size, crc, valid, magic, attributes, timestamp, _bytes(key), _bytes(value)
        )


def entry_starts(buf: Buffer) -> list[int]:
    """Where each complete entry of a set starts, walking the sizes only: the boundaries of a set
    :func:`analyze` has checked, or of a fetch before it is decoded. It stops at a torn tail or at a
    size too small to be a message (the validating walk raises there), as 0.8.2's FileMessageSet
    iterator did."""
    view = _as_view(buf)
    n = len(view)
    unpack = _INT32.unpack_from
    starts: list[int] = []
    append = starts.append
    pos = 0
    while pos + LOG_OVERHEAD <= n:
        (size,) = unpack(view, pos + 8)
        if size < MIN_MESSAGE_SIZE[0] or pos + LOG_OVERHEAD + size > n:
            break
        append(pos)
        pos += LOG_OVERHEAD + size
    return starts


def _bytes(view: memoryview | None) -> bytes | None:
    return None if view is None else bytes(view)


def _inner_messages(
    view: memoryview,
    pos: int,
    end: int,
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    verify_crc: bool,
    max_inflated: int,
) -> Iterator[Message]:
    inner = _open_wrapper(view, pos, end, magic, attributes & CODEC_MASK, verify_crc, max_inflated)
    data = memoryview(inner.data)
    # Magic 1: inner offsets are relative and the wrapper holds the last one's absolute offset.
    base = 0
    if magic:
        base = offset - _OFFSET.unpack_from(data, inner.positions[-1])[0]
    for at in inner.positions:
        inner_offset, size = _OFFSET_SIZE.unpack_from(data, at)
        inner_magic = data[at + 16]
        inner_end = at + LOG_OVERHEAD + size
        key, value, _ = _key_value(data, at + LOG_OVERHEAD, inner_end, inner_magic)
        inner_timestamp = NO_TIMESTAMP
        if inner_magic:
            inner_timestamp = (
                timestamp if attributes & LOG_APPEND_TIME else _INT64.unpack_from(data, at + 18)[0]
            )
        yield Message(
            base + inner_offset, _bytes(key), _bytes(value), inner_timestamp, inner_magic
        )


# -- keys, and keeping some messages (log compaction) ----------------------------------------------


def _key_and_null(view: memoryview, start: int, end: int, magic: int) -> tuple[bytes | None, bool]:
    """The key (copied) of the message at ``start`` (its CRC) ending at ``end``, and whether its value
    is null; checks that the lengths fill the message exactly, as :func:`_key_value` does."""
    key_at = start + (14 if magic else 6)
    (key_size,) = _INT32.unpack_from(view, key_at)
    if key_size < -1:
        raise InvalidMessageError(f"negative key length {key_size}", start - LOG_OVERHEAD)
    value_at = key_at + 4 + (key_size if key_size > 0 else 0)
    if value_at + 4 > end:
        raise InvalidMessageError("key runs past the end of the message", start - LOG_OVERHEAD)
    (value_size,) = _INT32.unpack_from(view, value_at)
    if value_size < -1 or value_at + 4 + (value_size if value_size > 0 else 0) != end:
        raise InvalidMessageError(
            "value length does not match the message size", start - LOG_OVERHEAD
        )
    return (None if key_size < 0 else bytes(view[key_at + 4 : value_at])), value_size < 0


def _inner_keys(inner: _Inner, offset: int, magic: int) -> Iterator[tuple[int, bytes | None, bool, int, int]]:
    """(offset, key, value is null, start, end in ``inner.data``) of each message of an opened wrapper
    at ``offset``."""
    data = memoryview(inner.data)
    base = offset - _OFFSET.unpack_from(data, inner.positions[-1])[0] if magic else 0
    for at in inner.positions:
        inner_offset, size = _OFFSET_SIZE.unpack_from(data, at)
        inner_end = at + LOG_OVERHEAD + size
        key, null = _key_and_null(data, at + LOG_OVERHEAD, inner_end, data[at + 16])
        yield base + inner_offset, key, null, at, inner_end


BatchCheck = Callable[[BatchHeader, "EndTxnMarker | None"], Any]


def _batch_record_list(
    view: memoryview, pos: int, end: int, header: BatchHeader, max_inflated: int
) -> list[record_batch.Record]:
    records = _batch_records(view, pos, end, header, max_inflated)
    try:
        return list(record_batch.iter_records(header, records))
    except CorruptRecordError as exc:
        raise InvalidMessageError(str(exc), pos) from None


def iter_keys(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    max_inflated_bytes: int | None = None,
    batch_has_keys: BatchCheck | None = None,
) -> Iterator[tuple[int, bytes | None, bool]]:
    """(offset, key, whether the value is null) of every message of a set, compressed wrappers and record
    batches opened, without copying values: what the log cleaner's offset map needs. Stops at a torn tail;
    raises :class:`InvalidMessageError` as :func:`iter_messages` does.

    The records of a control batch are not keyed data and never come out. Every other batch is first shown
    to ``batch_has_keys(header, None)`` (the cleaner's transaction bookkeeping: a batch of an aborted
    transaction puts no key in the map), and its records come out unless it answers false; control batches
    are shown to it with their end-transaction marker."""
    if max_inflated_bytes is None:
        max_inflated_bytes = inflation_bound()
    view = _as_view(buf)
    n = len(view)
    pos = 0
    while (head := _entry_head(view, pos, n, None, verify_crc)) is not None:
        offset, end, magic, attributes = head
        if magic == 2:
            header = read_header(view, pos)
            if header.is_control:
                if batch_has_keys is not None:
                    batch_has_keys(header, control_marker(view, pos, end, header))
            elif batch_has_keys is None or batch_has_keys(header, None):
                for record in _batch_record_list(view, pos, end, header, max_inflated_bytes):
                    yield record.offset, record.key, record.value is None
            pos = end
            continue
        codec = attributes & CODEC_MASK
        if codec == CODEC_NONE:
            key, null = _key_and_null(view, pos + LOG_OVERHEAD, end, magic)
            yield offset, key, null
        else:
            inner = _open_wrapper(view, pos, end, magic, codec, verify_crc, max_inflated_bytes)
            for inner_offset, key, null, _, _ in _inner_keys(inner, offset, magic):
                yield inner_offset, key, null
        pos = end


#: What the log cleaner does with a record batch (Kafka's RecordFilter.BatchRetention): drop it whole without
#: looking at its records; keep the records it keeps, dropping the batch if none is left; or keep at least
#: its header (a producer's last batch: its producer id, epoch and sequences must survive).
DELETE, DELETE_EMPTY, RETAIN_EMPTY = "delete", "delete-empty", "retain-empty"


@dataclass(frozen=True, slots=True)
class Retained:
    """What :func:`retain_messages` kept of a set.

    ``records`` are the kept entries as a set; ``entries`` gives, for each of its entries, where it
    starts in ``records`` and the offset of its first message (a rebuilt wrapper's first kept inner
    message), which is what an offset index entry for it holds. ``walked`` is how many bytes of the
    input held complete entries: the caller's next read starts there.
    """

    records: bytes
    entries: list[tuple[int, int]]
    walked: int
    kept: int
    dropped: int


def retain_messages(
    buf: Buffer,
    keep: Callable[[int, bytes | None, bool], bool],
    *,
    verify_crc: bool = True,
    max_inflated_bytes: int | None = None,
    batch_retention: BatchCheck | None = None,
) -> Retained:
    """The set with only the messages for which ``keep(offset, key, value is null)`` is true, every
    offset unchanged (gaps where messages went), as Kafka's log cleaner rewrites a segment; stops at
    a torn tail.

    A plain entry kept is copied as it is. A compressed wrapper whose inner messages all stay is
    copied too, one that loses them all goes, and one that loses some is rebuilt from the bytes of
    the inner entries that stay, recompressed with its codec for its magic (LZ4's header checksum as
    that magic wants it); its key, attributes and timestamp stay, its offset becomes its last kept
    message's. Inner offsets stay as they were: absolute for magic 0, and for magic 1 relative ones
    that, with the new wrapper offset, still give every message its absolute offset.

    A record batch is first shown to ``batch_retention(header, marker)`` (``marker``: a control batch's
    end-transaction marker, else None), which answers ``(retention, discard_records)``: :data:`DELETE` drops
    it unread; otherwise its records stay if ``keep`` keeps them (a control batch's, which are no keyed
    data, all stay) unless ``discard_records``, and a batch left without records goes, or with
    :data:`RETAIN_EMPTY` keeps its header (:func:`record_batch.build_empty_batch`). A batch keeping every
    record is copied as it is; one that lost some is rebuilt (:func:`record_batch.rebuild_batch`: same base
    offset, last offset and producer fields). Without ``batch_retention`` a batch is ``(DELETE_EMPTY,
    False)``. An entry of a kept batch is indexed at its base offset, as appends index it.
    Raises :class:`InvalidMessageError` for a malformed entry.
    """
    if max_inflated_bytes is None:
        max_inflated_bytes = inflation_bound()
    view = _as_view(buf)
    n = len(view)
    pieces: list[Buffer] = []
    entries: list[tuple[int, int]] = []
    written = kept = dropped = 0
    pos = 0
    while (head := _entry_head(view, pos, n, None, verify_crc)) is not None:
        offset, end, magic, attributes = head
        if magic == 2:
            batch, stayed, went = _retain_batch(view, pos, end, keep, batch_retention, max_inflated_bytes)
            kept += stayed
            dropped += went
            if batch:
                entries.append((written, offset))
                pieces.append(batch)
                written += len(batch)
            pos = end
            continue
        codec = attributes & CODEC_MASK
        if codec == CODEC_NONE:
            key, null = _key_and_null(view, pos + LOG_OVERHEAD, end, magic)
            if keep(offset, key, null):
                entries.append((written, offset))
                pieces.append(view[pos:end])
                written += end - pos
                kept += 1
            else:
                dropped += 1
            pos = end
            continue
        inner = _open_wrapper(view, pos, end, magic, codec, verify_crc, max_inflated_bytes)
        stay = [
            (inner_offset, start, stop)
            for inner_offset, key, null, start, stop in _inner_keys(inner, offset, magic)
            if keep(inner_offset, key, null)
        ]
        dropped += len(inner.positions) - len(stay)
        kept += len(stay)
        if len(stay) == len(inner.positions):
            entry: Buffer = view[pos:end]
        elif stay:
            data = memoryview(inner.data)
            wrapper_key, _, _ = _key_value(view, pos + LOG_OVERHEAD, end, magic)
            timestamp = _INT64.unpack_from(view, pos + 18)[0] if magic else NO_TIMESTAMP
            value = compress(codec, b"".join(data[start:stop] for _, start, stop in stay), magic)
            message = encode_message(
                wrapper_key, value, magic=magic, attributes=attributes, timestamp=timestamp
            )
            entry = _OFFSET_SIZE.pack(stay[-1][0], len(message)) + message
        else:
            entry = b""
        if entry:
            entries.append((written, stay[0][0]))
            pieces.append(entry)
            written += len(entry)
        pos = end
    return Retained(b"".join(pieces), entries, pos, kept, dropped)


def _retain_batch(
    view: memoryview,
    pos: int,
    end: int,
    keep: Callable[[int, bytes | None, bool], bool],
    batch_retention: BatchCheck | None,
    max_inflated: int,
) -> tuple[Buffer, int, int]:
    """What stays of the batch at ``pos`` (see :func:`retain_messages`): its bytes (empty if it goes), and how
    many of its records stayed and went."""
    header = read_header(view, pos)
    marker = control_marker(view, pos, end, header) if header.is_control else None
    retention, discard = (DELETE_EMPTY, False) if batch_retention is None else batch_retention(header, marker)
    if retention == DELETE:
        return b"", 0, header.record_count
    records = _batch_record_list(view, pos, end, header, max_inflated)
    if discard:
        stay = []
    elif header.is_control:
        stay = records
    else:
        stay = [r for r in records if keep(r.offset, r.key, r.value is None)]
    went = len(records) - len(stay)
    if not went and (stay or retention == RETAIN_EMPTY):
        return view[pos:end], len(stay), 0  # whole (or already empty, and kept so)
    if stay or retention == RETAIN_EMPTY:
        return record_batch.rebuild_batch(header, stay), len(stay), went
    return b"", 0, went


# -- writing --------------------------------------------------------------------------------------


def encode_message(
    key: Buffer | None,
    value: Buffer | None,
    *,
    magic: int = 0,
    attributes: int = 0,
    timestamp: int = NO_TIMESTAMP,
) -> bytes:
    """One message (crc through value), without the offset and size in front."""
    try:
        if magic == 0:
            head = _MAGIC0_HEAD.pack(0, attributes)
        elif magic == 1:
            head = _MAGIC1_HEAD.pack(1, attributes, timestamp)
        else:
            raise LocalProtocolError(f"cannot write magic {magic}")
        body = head + _length_prefixed(key) + _length_prefixed(value)
    except (struct.error, TypeError) as exc:
        raise LocalProtocolError(f"message: {exc}") from None
    return _UINT32.pack(crc32(body)) + body


_NULL_FIELD = b"\xff\xff\xff\xff"


def _length_prefixed(field: Buffer | None) -> bytes:
    if field is None:
        return _NULL_FIELD
    size = len(field) if isinstance(field, bytes) else memoryview(field).nbytes
    return _INT32.pack(size) + field


def build_message_set(
    messages: Iterable[tuple],
    *,
    magic: int = 0,
    codec: int = CODEC_NONE,
    base_offset: int = 0,
    timestamp: int = NO_TIMESTAMP,
) -> bytes:
    """A message set of ``(key, value)`` or ``(key, value, timestamp)`` items.

    Offsets count from ``base_offset`` (a producer's are placeholders the broker replaces).
    With a codec the items become the inner set of one wrapper: inner offsets absolute for
    magic 0, relative for magic 1; the wrapper takes the last offset and the max timestamp.
    """
    entries = []
    max_timestamp = NO_TIMESTAMP
    items = list(messages)
    for i, item in enumerate(items):
        key, value = item[0], item[1]
        ts = item[2] if len(item) > 2 else timestamp
        max_timestamp = max(max_timestamp, ts)
        message = encode_message(key, value, magic=magic, timestamp=ts)
        inner_offset = i if codec and magic else base_offset + i
        entries += [_OFFSET_SIZE.pack(inner_offset, len(message)), message]
    inner = b"".join(entries)
    if codec == CODEC_NONE or not items:
        return inner
    wrapper = encode_message(
        None, compress(codec, inner, magic), magic=magic, attributes=codec, timestamp=max_timestamp
    )
    return _OFFSET_SIZE.pack(base_offset + len(items) - 1, len(wrapper)) + wrapper
