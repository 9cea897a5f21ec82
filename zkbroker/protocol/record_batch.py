"""Record batches, magic 2 (Kafka 0.11, KIP-98): the batch header, its varint records, CRC-32C.

A batch is one entry of a message set, laid out so that its first 17 bytes line up with a magic-0/1
entry's (offset, size, 4 bytes, magic): the one walker in :mod:`message_set` finds the magic at byte 16 of
every entry and walks all three formats alike. Layout (a 61-byte header, then the records)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (2) | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | firstTimestamp int64 | maxTimestamp int64 |
    producerId int64 | producerEpoch int16 | baseSequence int32 | recordCount int32 | records...

The CRC is CRC-32C (Castagnoli) over attributes..end, so a broker assigning offsets patches baseOffset and
partitionLeaderEpoch without touching it. Attributes: bits 0-2 the codec (0 none, 1 gzip, 2 snappy, 3 lz4,
4 zstd), bit 3 LogAppendTime, bit 4 transactional, bit 5 control. A compressed batch compresses its records
section (everything after the header) as one stream. Each record::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint |
    [headerKeyLength varint | headerKey (UTF-8) | headerValueLength varint | headerValue]...

Lengths of -1 mean null (a header key may not be null). A record's offset is baseOffset + offsetDelta, its
timestamp firstTimestamp + timestampDelta (or maxTimestamp for a LogAppendTime batch), its sequence
baseSequence + offsetDelta (-1 without a producer id).

A control batch (attributes bit 5, always transactional too) holds one control record written by the broker,
never by a client: key ``version int16 (0) | type int16`` and, for the two end-transaction markers (type 0
ABORT, 1 COMMIT), value ``version int16 (0) | coordinatorEpoch int32`` (Kafka's EndTransactionMarker). It
carries the producer id and epoch of the transaction it ends, baseSequence -1.

Pure and sans-I/O: :func:`read_header`, :func:`check_records` (the produce path's validation of a
batch's records in one loop, no object per record), :func:`iter_records`, :func:`build_record_batch`, and for
the log cleaner :func:`rebuild_batch` and :func:`build_empty_batch`.
Malformed records raise :class:`CorruptRecordError` (CORRUPT_MESSAGE); :mod:`message_set` says where.

CRC-32C comes from the ``crc32c`` package (hardware CRC where the CPU has it). A Spark executor with only
pyspark and pyarrow cannot have it (compiled packages do not travel in the project's zip): there batches are
read without checking their CRC-32C -- what Kafka's consumers do with ``check.crcs=false``; the broker checked
each one when it was produced. Writing a batch, and the broker's checks, need the package.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .compression import CODEC_NONE, compress
from .errors import LocalProtocolError, RemoteProtocolError
from .varint import VarintError, encode_varint, read_varint, read_varlong, zigzag_decode, zigzag_encode

try:
    from crc32c import crc32c
except ImportError:  # a Spark executor: see the module's docstring
    crc32c = None

__all__ = [
    "BATCH_OVERHEAD",
    "CRC32C_CHECKED",
    "BatchHeader",
    "ControlRecordType",
    "CorruptRecordError",
    "EndTxnMarker",
    "MIN_BATCH_SIZE",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "Record",
    "batch_crc",
    "build_empty_batch",
    "build_end_txn_marker_batch",
    "build_record_batch",
    "check_records",
    "control_record_type",
    "encode_record",
    "iter_records",
    "last_sequence",
    "parse_end_txn_marker",
    "read_header",
    "rebuild_batch",
    "records_start",
]

MAGIC = 2
#: Whether this interpreter checks batches' CRC-32C (it has the crc32c package).
CRC32C_CHECKED = crc32c is not None
#: The header: bytes before the first record.
BATCH_OVERHEAD = 61
#: The smallest batchLength (a batch without records): the header less baseOffset and batchLength.
MIN_BATCH_SIZE = BATCH_OVERHEAD - 12
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# Field positions from the batch start.
PARTITION_LEADER_EPOCH_AT = 12
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21
LAST_OFFSET_DELTA_AT = 23
MAX_TIMESTAMP_AT = 35
RECORD_COUNT_AT = 57

CODEC_MASK = 0x07
LOG_APPEND_TIME = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_INT16 = struct.Struct(">h")
_INT32_MAX = (1 << 31) - 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch

Buffer = bytes | bytearray | memoryview


class CorruptRecordError(RemoteProtocolError):
    """A record of a batch whose fields do not fill it, or whose offset delta is out of place."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """A batch's header as stored (DumpLogSegments prints these fields)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """The whole batch, baseOffset and batchLength included."""
        return self.batch_length + 12

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & LOG_APPEND_TIME)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL)

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, self.last_offset_delta)


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """The header of the batch at ``pos`` (at least 61 bytes must follow)."""
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record: sequences wrap from Integer.MAX_VALUE to 0 (Kafka's rule)."""
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    if base_sequence > _INT32_MAX - last_offset_delta:
        return last_offset_delta - (_INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def batch_crc(buf: Buffer, pos: int, end: int) -> int:
    """The CRC-32C a batch from ``pos`` to ``end`` should carry: over attributes..end."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    return _crc32c()(view[pos + ATTRIBUTES_AT : end])


def _crc32c():
    if crc32c is None:
        raise LocalProtocolError("record batches' CRC-32C needs the crc32c package")
    return crc32c


def records_start(pos: int) -> int:
    return pos + BATCH_OVERHEAD


# -- reading records ------------------------------------------------------------------------------


class Record(NamedTuple):
    """One record of a batch, offset and timestamp absolute."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    sequence: int


def _corrupt(reason: str, index: int) -> CorruptRecordError:
    return CorruptRecordError(f"record {index} of the batch: {reason}")


def check_records(data: Buffer, pos: int, end: int, count: int) -> None:
    """Validate the records in ``data[pos:end]`` (a batch's records section, decompressed): exactly
    ``count`` records, each one's fields filling its length, offset deltas 0..count-1, no negative lengths
    but -1, no null header key.

    The produce path's per-record work, as Kafka's LogValidator parses each record: one loop over a bytes
    copy (indexing bytes is cheaper than a memoryview), no object per record, and the varints of one and two
    bytes -- every length below 8 KiB -- read inline; longer ones and headers take the general readers."""
    data = bytes(data[pos:end]) if pos or end != len(data) or not isinstance(data, bytes) else data
    end = len(data)
    pos = i = 0
    try:
        while pos < end:
            if i == count:
                raise _corrupt(f"more records than the batch's count {count}", i)
            b = data[pos]
            if b < 0x80:
                length = b
                pos += 1
            elif data[pos + 1] < 0x80:
                length = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                length, pos = read_varint(data, pos)
                length = zigzag_encode(length)
            if length & 1:
                raise _corrupt("negative length", i)
            length >>= 1
            record_end = pos + length
            if length < 6 or record_end > end:
                raise _corrupt(f"length {length} does not fit the batch", i)
            at = start = pos + 1  # after the attributes, unused: the timestamp delta, a varlong
            while data[at] >= 0x80:
                at += 1
            if at - start >= 10:
                raise _corrupt("timestamp delta longer than 10 bytes", i)
            at += 1
            b = data[at]
            if b < 0x80:
                delta = b
                at += 1
            elif data[at + 1] < 0x80:
                delta = (b & 0x7F) | (data[at + 1] << 7)
                at += 2
            else:
                delta, at = read_varint(data, at)
                delta = zigzag_encode(delta)
            if delta != i << 1:
                raise _corrupt(f"offset delta {zigzag_decode(delta)}", i)
            # the key, then the value (unrolled: this loop is the produce path's per-record cost): -1 (null) or
            # a length and that many bytes
            b = data[at]
            if b < 0x80:
                size = b
                at += 1
            elif data[at + 1] < 0x80:
                size = (b & 0x7F) | (data[at + 1] << 7)
                at += 2
            else:
                size, at = read_varint(data, at)
                size = zigzag_encode(size)
            if size & 1:
                if size != 1:
                    raise _corrupt(f"negative length {zigzag_decode(size)}", i)
            else:
                at += size >> 1
            b = data[at]
            if b < 0x80:
                size = b
                at += 1
            elif data[at + 1] < 0x80:
                size = (b & 0x7F) | (data[at + 1] << 7)
                at += 2
            else:
                size, at = read_varint(data, at)
                size = zigzag_encode(size)
            if size & 1:
                if size != 1:
                    raise _corrupt(f"negative length {zigzag_decode(size)}", i)
            else:
                at += size >> 1
            if at >= record_end:
                raise _corrupt("key or value runs past the record", i)
            if data[at]:
                at = _skip_headers(data, at, record_end, i)
            else:
                at += 1
            if at != record_end:
                raise _corrupt(f"fields fill {at - pos} of its {length} bytes", i)
            pos = record_end
            i += 1
    except IndexError:
        raise _corrupt("runs past the end of the batch", i) from None
    except VarintError as exc:
        raise _corrupt(str(exc), i) from None
    if i != count:
        raise _corrupt(f"the batch holds {i} records, its count says {count}", i)


def _skip_headers(data: bytes, at: int, record_end: int, i: int) -> int:
    count, at = read_varint(data, at)
    if count < 0:
        raise _corrupt(f"negative header count {count}", i)
    for _ in range(count):
        size, at = read_varint(data, at)
        if size < 0:
            raise _corrupt("null header key", i)
        at += size
        size, at = read_varint(data, at)
        if size < -1:
            raise _corrupt(f"negative header value length {size}", i)
        at += max(size, 0)
        if at > record_end:
            raise _corrupt("header runs past the record", i)
    return at


def iter_records(header: BatchHeader, data: Buffer, pos: int = 0, end: int | None = None) -> Iterator[Record]:
    """The records of the batch ``header`` heads, from its records section ``data[pos:end]``
    (decompressed), with absolute offsets, timestamps and sequences. Parses a bytes copy (slices of bytes are
    the keys and values themselves, and indexing bytes is cheaper than a memoryview)."""
    buf = bytes(data[pos:end]) if pos or end is not None or not isinstance(data, bytes) else data
    n = len(buf)
    pos = i = 0
    base_offset = header.base_offset
    first_timestamp = header.first_timestamp
    append_time = header.max_timestamp if header.log_append_time else None
    with_sequence = header.producer_id >= 0 and header.base_sequence >= 0
    try:
        while pos < n:
            length, pos = read_varint(buf, pos)
            record_end = pos + length
            if length < 6 or record_end > n:
                raise _corrupt(f"length {length} does not fit the batch", i)
            timestamp_delta, at = read_varlong(buf, pos + 1)
            offset_delta, at = read_varint(buf, at)
            size, at = read_varint(buf, at)
            if size >= 0:
                key = buf[at : at + size]
                at += size
            elif size == -1:
                key = None
            else:
                raise _corrupt(f"negative length {size}", i)
            size, at = read_varint(buf, at)
            if size >= 0:
                value = buf[at : at + size]
                at += size
            elif size == -1:
                value = None
            else:
                raise _corrupt(f"negative length {size}", i)
            header_count, at = read_varint(buf, at)
            headers: tuple = ()
            if header_count:
                headers, at = _read_headers(buf, at, record_end, header_count, i)
            if at != record_end:
                raise _corrupt(f"fields fill {at - pos} of its {length} bytes", i)
            sequence = last_sequence(header.base_sequence, offset_delta) if with_sequence else NO_SEQUENCE
            timestamp = append_time if append_time is not None else first_timestamp + timestamp_delta
            yield Record(base_offset + offset_delta, timestamp, key, value, headers, sequence)
            pos = record_end
            i += 1
    except IndexError:
        raise _corrupt("runs past the end of the batch", i) from None
    except VarintError as exc:
        raise _corrupt(str(exc), i) from None


def _read_headers(buf: bytes, at: int, record_end: int, count: int, i: int) -> tuple[tuple, int]:
    if count < 0:
        raise _corrupt(f"negative header count {count}", i)
    headers = []
    for _ in range(count):
        size, at = read_varint(buf, at)
        if size < 0:
            raise _corrupt("null header key", i)
        key = buf[at : at + size].decode("utf-8", "replace")
        at += size
        size, at = read_varint(buf, at)
        if size < -1:
            raise _corrupt(f"negative header value length {size}", i)
        value = None if size < 0 else buf[at : at + size]
        at += max(size, 0)
        if at > record_end:
            raise _corrupt("header runs past the record", i)
        headers.append((key, value))
    return tuple(headers), at


# -- control records -----------------------------------------------------------------------------


class ControlRecordType:
    """The type in a control record's key (Kafka's ControlRecordType)."""

    ABORT = 0
    COMMIT = 1
    NAMES = {ABORT: "ABORT", COMMIT: "COMMIT"}
    #: The metadata quorum's own control records (LeaderChange, SnapshotHeader, SnapshotFooter: KIP-595, KIP-630);
    #: their schemas live in metadata_records. A log holds them, but they end no transaction.
    QUORUM = frozenset({2, 3, 4})


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """An end-transaction marker (Kafka's EndTransactionMarker): COMMIT or ABORT, and the epoch of the
    transaction coordinator that wrote it (a coordinator with an older epoch is fenced)."""

    control_type: int
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type == ControlRecordType.COMMIT

    @property
    def name(self) -> str:
        return ControlRecordType.NAMES.get(self.control_type, f"UNKNOWN({self.control_type})")

    def key(self) -> bytes:
        return _CONTROL_KEY.pack(0, self.control_type)

    def value(self) -> bytes:
        return _END_TXN_VALUE.pack(0, self.coordinator_epoch)


def control_record_type(key: bytes | None) -> int:
    """The type of a control record from its key (version 0; Kafka reads the type of any later version too)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError(f"control record key of {0 if key is None else len(key)} bytes, not 4")
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record key version {version}")
    return control_type


def parse_end_txn_marker(key: bytes | None, value: bytes | None) -> EndTxnMarker:
    """The marker a control record's key and value hold; CorruptRecordError for any other control record."""
    control_type = control_record_type(key)
    if control_type not in ControlRecordType.NAMES:
        raise CorruptRecordError(f"control record of type {control_type} is not an end-transaction marker")
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise CorruptRecordError(f"end-transaction marker value of {0 if value is None else len(value)} bytes")
    version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"end-transaction marker version {version}")
    return EndTxnMarker(control_type, coordinator_epoch)


def build_end_txn_marker_batch(
    marker: EndTxnMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """The control batch a partition leader appends for WriteTxnMarkers (Kafka's
    MemoryRecords.withEndTransactionMarker): one record, transactional and control, no sequence."""
    return build_record_batch(
        [(marker.key(), marker.value(), timestamp)],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


# -- writing --------------------------------------------------------------------------------------

Headers = Sequence[tuple[str, Buffer | None]]


def _sized_field(value: Buffer | None) -> list:
    if value is None:
        return [b"\x01"]  # -1 zigzagged
    return [encode_varint(memoryview(value).nbytes), value]


def encode_record(
    offset_delta: int, timestamp_delta: int, key: Buffer | None, value: Buffer | None, headers: Headers = ()
) -> bytes:
    """One record, its length varint first."""
    parts = [b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta)]
    parts += _sized_field(key)
    parts += _sized_field(value)
    parts.append(encode_varint(len(headers)))
    for header_key, header_value in headers:
        if header_key is None:
            raise LocalProtocolError("a record header key cannot be null")
        parts += _sized_field(header_key.encode("utf-8"))
        parts += _sized_field(header_value)
    try:
        body = b"".join(parts)
    except TypeError as exc:
        raise LocalProtocolError(f"record: {exc}") from None
    return encode_varint(len(body)) + body


def build_record_batch(
    records: Iterable[tuple],
    *,
    codec: int = CODEC_NONE,
    base_offset: int = 0,
    timestamp: int = -1,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    log_append_time: bool = False,
    control: bool = False,
) -> bytes:
    """One batch of ``(key, value)``, ``(key, value, timestamp)`` or ``(key, value, timestamp, headers)``
    items (``headers``: ``(str, bytes | None)`` pairs); ``timestamp`` is that of items without their own.

    Offsets count from ``base_offset`` (a producer's are placeholders the broker replaces), timestamps are
    deltas from the first record's, as Kafka's producers write them. An empty batch is refused. ``control``
    sets the control attribute: each record's key is then a control record type, its value that record
    (transaction markers; the metadata log's LeaderChange and snapshot header and footer)."""
    items = list(records)
    if not items:
        raise LocalProtocolError("a record batch needs at least one record")
    timestamps = [item[2] if len(item) > 2 and item[2] is not None else timestamp for item in items]
    first_timestamp = timestamps[0]
    body = b"".join(
        encode_record(i, ts - first_timestamp, item[0], item[1], item[3] if len(item) > 3 else ())
        for i, (item, ts) in enumerate(zip(items, timestamps))
    )
    if codec != CODEC_NONE:
        body = compress(codec, body, magic=MAGIC)
    attributes = codec | (LOG_APPEND_TIME if log_append_time else 0) | (TRANSACTIONAL if transactional else 0)
    attributes |= CONTROL if control else 0
    return _assemble(
        base_offset, partition_leader_epoch, attributes, len(items) - 1, first_timestamp, max(timestamps),
        producer_id, producer_epoch, base_sequence, len(items), body,
    )


def _assemble(
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    first_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    record_count: int,
    body: bytes,
) -> bytes:
    """A batch from its header fields and its (compressed) records section, its CRC-32C computed."""
    header = bytearray(
        _HEADER.pack(
            base_offset,
            BATCH_OVERHEAD - 12 + len(body),
            partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            last_offset_delta,
            first_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        )
    )
    crc = _crc32c()(body, _crc32c()(memoryview(header)[ATTRIBUTES_AT:]))
    _UINT32.pack_into(header, CRC_AT, crc)
    return bytes(header) + body


def rebuild_batch(header: BatchHeader, records: Sequence[Record]) -> bytes:
    """The batch ``header`` heads with only ``records`` (some of its own, in order), as Kafka's log cleaner
    rebuilds a batch that lost records (MemoryRecords.buildRetainedRecordsInto): the base offset, the last
    offset delta (so that the producer's last sequence stays where it was), the producer id, epoch and base
    sequence, the partition leader epoch and the attributes (codec, timestamp type, transactional, control)
    are the original's; the records are written again with offset deltas from the same base and timestamp
    deltas from the first one left, and the max timestamp is theirs (a LogAppendTime batch keeps its own).
    No records: :func:`build_empty_batch`."""
    if not records:
        return build_empty_batch(header)
    base = header.base_offset
    first_timestamp = records[0].timestamp
    body = b"".join(
        encode_record(r.offset - base, r.timestamp - first_timestamp, r.key, r.value, r.headers) for r in records
    )
    if header.codec != CODEC_NONE:
        body = compress(header.codec, body, magic=MAGIC)
    max_timestamp = header.max_timestamp if header.log_append_time else max(r.timestamp for r in records)
    return _assemble(
        base, header.partition_leader_epoch, header.attributes, header.last_offset_delta, first_timestamp,
        max_timestamp, header.producer_id, header.producer_epoch, header.base_sequence, len(records), body,
    )


def build_empty_batch(header: BatchHeader) -> bytes:
    """The header of the batch ``header`` heads without its records (Kafka's DefaultRecordBatch.writeEmptyHeader):
    what the log cleaner keeps of a producer's last batch whose records all went, so that its producer id, epoch
    and sequences survive. No codec, no first timestamp (-1), no records; the base offset, last offset delta,
    max timestamp, timestamp type, producer fields, partition leader epoch and the transactional and control
    attributes are the original's."""
    attributes = header.attributes & (LOG_APPEND_TIME | TRANSACTIONAL | CONTROL)
    return _assemble(
        header.base_offset, header.partition_leader_epoch, attributes, header.last_offset_delta, -1,
        header.max_timestamp, header.producer_id, header.producer_epoch, header.base_sequence, 0, b"",
    )


def set_log_append_time(buf: bytearray | memoryview, pos: int, end: int, timestamp: int) -> None:
    """Stamp the batch at ``pos`` with the broker's time (log.message.timestamp.type=LogAppendTime): the
    LogAppendTime attribute and maxTimestamp, and the CRC again, as Kafka's broker does."""
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_AT)
    _INT16.pack_into(buf, pos + ATTRIBUTES_AT, attributes | LOG_APPEND_TIME)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_AT, timestamp)
    _UINT32.pack_into(buf, pos + CRC_AT, batch_crc(buf, pos, end))
