"""`zkbroker dump-log`: print segment and index files as Kafka 0.8.2's kafka.tools.DumpLogSegments does.

For a .log file, one line per message (shallow: a compressed message is one line, its wrapper; with
`deep_iteration`, one line per inner message, at the wrapper's position):

    Dumping 00000000000000000000.log
    Starting offset: 0
    offset: 0 position: 0 isvalid: true payloadsize: 5 magic: 0 compresscodec: NoCompressionCodec crc: 1234

plus ` keysize: N` when the message has a key, and with `print_data_log` ` key: K` (keyed messages only) and
` payload: P` (`null` for a null value), both decoded as UTF-8. Bytes after the last complete message are
reported as `Found N invalid bytes at the end of <name>`. For a .index file, `offset: N position: P` per
entry, stopping at the first empty slot of a preallocated index. Index entries that do not point at the
message with their offset, and messages whose offsets are not consecutive, are listed on stderr at the end
(a compacted segment's gaps are among them, as 0.8.2's tool reported them).
Magic-1 messages print the same fields (as Kafka 0.10 did). Files with other suffixes are skipped.

A record batch (magic 2) prints as Kafka 2.x's DumpLogSegments prints it, one line for the batch:

    baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1
    partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0 CreateTime: 1567500758701
    size: 162 magic: 2 compresscodec: NONE crc: 2221167045 isvalid: true

(one line), and with `print_data_log` or `deep_iteration` one line per record:

    | offset: 0 CreateTime: 1567500758127 keysize: -1 valuesize: 43 sequence: -1 headerKeys: [] payload: ...

(` key: K` before the payload when the record has a key; no payload for a null value). A control batch's record
ends ` endTxnMarker: COMMIT coordinatorEpoch: 0` (or ABORT) instead, with or without `print_data_log`, as
Kafka's tool prints it. A `.timeindex` file
prints `timestamp: T offset: O` per entry, stopping at the first empty slot; entries that do not point at the
last offset of an entry of the log, or whose timestamp is not that entry's largest, or not above the previous
entry's, are listed on stderr at the end, in Kafka 2.x's words. A `.txnindex` prints each aborted transaction
(`version: 0 producerId: 7 firstOffset: 0 lastOffset: 4 lastStableOffset: 2`) and a producer state `.snapshot`
each producer (`producerId: 7 producerEpoch: 0 coordinatorEpoch: 3 currentTxnFirstOffset: -1 firstSequence: 0
lastSequence: 1 lastOffset: 1 offsetDelta: 1 timestamp: T`), as Kafka 2.x's tool does.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from typing import TextIO

from zkbroker.protocol.compression import CODEC_NONE, decompress
from zkbroker.protocol.errors import RemoteProtocolError
from zkbroker.protocol.message_set import (
    LOG_OVERHEAD,
    Entry,
    InvalidMessageError,
    iter_batch_records,
    iter_entries,
    iter_messages,
)
from zkbroker.protocol.metadata_records import (
    CONTROL_NAMES,
    CONTROL_SCHEMAS,
    control_record_json,
    decode_control_key,
    decode_frame,
    metadata_record_json,
    parse_snapshot_file_name,
)
from zkbroker.protocol.record_batch import (
    BatchHeader,
    ControlRecordType,
    CorruptRecordError,
    Record,
    control_record_type,
    parse_end_txn_marker,
)

from .producer_state import SNAPSHOT_SUFFIX, read_snapshot
from .segment import INDEX_SUFFIX, LOG_SUFFIX
from .time_index import TIME_INDEX_SUFFIX
from .transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
_CODEC_NAMES = {
    0: "NoCompressionCodec",
    1: "GZIPCompressionCodec",
    2: "SnappyCompressionCodec",
    3: "LZ4CompressionCodec",
}
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_INDEX_ENTRY = struct.Struct(">qi")
_CODEC_MASK = 0x07
#: Kafka's CompressionType names, as record batch lines print them.
_BATCH_CODEC_NAMES = {0: "NONE", 1: "GZIP", 2: "SNAPPY", 3: "LZ4", 4: "ZSTD"}


class _TimeIndexErrors:
    """What a time index dump found wrong, printed at the end as Kafka's TimeIndexDumpErrors prints it."""

    def __init__(self) -> None:
        self.mismatches: dict[str, list[tuple[int, int]]] = {}
        self.out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.not_found: dict[str, list[tuple[int, int]]] = {}

    def print(self, err: TextIO) -> None:
        for path, pairs in self.mismatches.items():
            print(f"Found timestamp mismatch in :{path}", file=err)
            for index_timestamp, log_timestamp in pairs:
                print(f"  Index timestamp: {index_timestamp}, log timestamp: {log_timestamp}", file=err)
        for path, pairs in self.out_of_order.items():
            print(f"Found out of order timestamp in :{path}", file=err)
            for index_timestamp, previous in pairs:
                print(f"  Index timestamp: {index_timestamp}, Previously indexed timestamp: {previous}", file=err)
        for pairs in self.not_found.values():
            print("The following indexed offsets are not found in the log.", file=err)
            for indexed, found in pairs:
                print(f"Indexed offset: {indexed}, found log offset: {found}", file=err)


def dump_log_segments(
    files: list[str],
    *,
    print_data_log: bool = False,
    verify_index_only: bool = False,
    deep_iteration: bool = False,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    cluster_metadata_decoder: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> None:
    """Print each file as DumpLogSegments does: to `out` (default stdout); index mismatches and offset gaps
    found along the way to `err` (default stderr) at the end."""
    out = out or sys.stdout
    err = err or sys.stderr
    index_mismatches: dict[str, list[tuple[int, int]]] = {}
    non_consecutive: dict[str, list[tuple[int, int]]] = {}
    time_index_errors = _TimeIndexErrors()
    for path in files:
        name = os.path.basename(path)
        if cluster_metadata_decoder and (name.endswith(LOG_SUFFIX) or name.endswith(CHECKPOINT_SUFFIX)):
            print(f"Dumping {path}", file=out)
            _dump_metadata_log(path, non_consecutive, out)
        elif name.endswith(LOG_SUFFIX):
            print(f"Dumping {path}", file=out)
            _dump_log(path, print_data_log, deep_iteration, max_message_size, non_consecutive, out)
        elif name.endswith(INDEX_SUFFIX):
            print(f"Dumping {path}", file=out)
            _dump_index(path, verify_index_only, max_message_size, index_mismatches, out)
        elif name.endswith(TIME_INDEX_SUFFIX):
            print(f"Dumping {path}", file=out)
            _dump_time_index(path, verify_index_only, max_message_size, time_index_errors, out)
        elif name.endswith(TXN_INDEX_SUFFIX):
            print(f"Dumping {path}", file=out)
            for txn in TransactionIndex(path).entries:
                print(f"version: 0 producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
                      f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}", file=out)
        elif name.endswith(SNAPSHOT_SUFFIX):
            print(f"Dumping {path}", file=out)
            _dump_snapshot(path, out, err)
    time_index_errors.print(err)
    for path, mismatches in index_mismatches.items():
        print(f"Mismatches in :{path}", file=err)
        for index_offset, log_offset in reversed(mismatches):
            print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=err)
    for path, pairs in non_consecutive.items():
        print(f"Non-secutive offsets in :{path}", file=err)
        for before, after in reversed(pairs):
            print(f"  {before} is followed by {after}", file=err)


def _dump_snapshot(path: str, out: TextIO, err: TextIO) -> None:
    try:
        producers = read_snapshot(path)
    except (OSError, ValueError, struct.error) as exc:
        print(f"{path}: {exc}", file=err)
        return
    for e in producers.values():
        line = (f"producerId: {e.producer_id} producerEpoch: {e.epoch} coordinatorEpoch: {e.coordinator_epoch} "
                f"currentTxnFirstOffset: {e.current_txn_first_offset} ")
        if e.batches:
            b = e.batches[-1]
            line += (f"firstSequence: {b.first_seq} lastSequence: {b.last_seq} lastOffset: {b.last_offset} "
                     f"offsetDelta: {b.last_offset - b.first_offset} timestamp: {b.timestamp}")
        print(line, file=out)


def _map(path: str) -> mmap.mmap | bytes:
    """The file's bytes, mapped rather than read: segments run to a gigabyte."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _base_offset(path: str) -> int:
    return int(os.path.basename(path).split(".")[0])


def _dump_log(
    path: str,
    print_data: bool,
    deep: bool,
    max_message_size: int,
    non_consecutive: dict[str, list[tuple[int, int]]],
    out: TextIO,
) -> None:
    print(f"Starting offset: {_base_offset(path)}", file=out)
    data = _map(path)
    valid_bytes = 0
    last_offset = -1
    for entry in iter_entries(data, max_message_bytes=max_message_size):
        if entry.batch is not None:
            if last_offset != -1 and entry.offset != last_offset + 1:
                non_consecutive.setdefault(os.path.abspath(path), []).append((last_offset, entry.offset))
            last_offset = entry.batch.last_offset
            out.write(_batch_line(entry, valid_bytes) + "\n")
            if print_data or deep:
                for record in _records(data, entry):
                    out.write(_record_line(entry.batch, record, print_data) + "\n")
            valid_bytes += LOG_OVERHEAD + entry.size
            continue
        for offset, message in _messages(entry, deep):
            codec = message.attributes & _CODEC_MASK
            if last_offset == -1:
                last_offset = offset
            elif codec == CODEC_NONE and offset != last_offset + 1:
                non_consecutive.setdefault(os.path.abspath(path), []).append((last_offset, offset))
            last_offset = offset
            out.write(_message_line(offset, valid_bytes, message, print_data) + "\n")
        valid_bytes += LOG_OVERHEAD + entry.size
    trailing = len(data) - valid_bytes
    if trailing > 0:
        print(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}", file=out)


CHECKPOINT_SUFFIX = ".checkpoint"  # a metadata log snapshot (a producer state snapshot is SNAPSHOT_SUFFIX)
#: Kafka 3.7's ControlRecordType constants.
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER"}
_DELETE_HORIZON = 0x40  # batch attribute bit 6 (KIP-534): the first timestamp is the delete horizon


def _dump_metadata_log(path: str, non_consecutive: dict[str, list[tuple[int, int]]], out: TextIO) -> None:
    """A metadata log segment or snapshot in Kafka 3.7's --cluster-metadata-decoder layout."""
    name = os.path.basename(path)
    if name.endswith(CHECKPOINT_SUFFIX):
        if name == "bootstrap.checkpoint":
            print("KRaft bootstrap snapshot", file=out)
        else:
            end_offset, epoch = parse_snapshot_file_name(name) or (-1, -1)
            print(f"Snapshot end offset: {end_offset}, epoch: {epoch}", file=out)
    else:
        print(f"Log starting offset: {_base_offset(path)}", file=out)
    data = _map(path)
    valid_bytes = 0
    last_offset = -1
    for entry in iter_entries(data):
        b = entry.batch
        if b is None:  # the metadata log is magic 2 only; Kafka 3.7 prints an old entry as its offset
            out.write(f"offset: {entry.offset} position: {valid_bytes} isvalid: {_bool(entry.valid)}\n")
            valid_bytes += LOG_OVERHEAD + entry.size
            continue
        horizon = f"OptionalLong[{b.first_timestamp}]" if b.attributes & _DELETE_HORIZON else "OptionalLong.empty"
        out.write(
            f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.record_count}"
            f" baseSequence: {b.base_sequence} lastSequence: {b.last_sequence}"
            f" producerId: {b.producer_id} producerEpoch: {b.producer_epoch}"
            f" partitionLeaderEpoch: {b.partition_leader_epoch} isTransactional: {_bool(b.is_transactional)}"
            f" isControl: {_bool(b.is_control)} deleteHorizonMs: {horizon}"
            f" position: {valid_bytes} {_timestamp_type(b)}: {b.max_timestamp} size: {LOG_OVERHEAD + entry.size}"
            f" magic: {b.magic} compresscodec: {_BATCH_CODEC_NAMES.get(b.codec, 'UNKNOWN').lower()}"
            f" crc: {b.crc} isvalid: {_bool(entry.valid)}\n")
        for record in _records(data, entry):
            if last_offset != -1 and record.offset != last_offset + 1:
                non_consecutive.setdefault(os.path.abspath(path), []).append((last_offset, record.offset))
            last_offset = record.offset
            line = (f"| offset: {record.offset} {_timestamp_type(b)}: {record.timestamp}"
                    f" keySize: {_size(record.key)} valueSize: {_size(record.value)}"
                    f" sequence: {record.sequence} headerKeys: [{','.join(key for key, _ in record.headers)}]")
            out.write(line + (_metadata_control_text(record) if b.is_control else _payload_text(record)) + "\n")
        valid_bytes += LOG_OVERHEAD + entry.size
    trailing = len(data) - valid_bytes
    if trailing > 0:
        print(f"Found {trailing} invalid bytes at the end of {name}", file=out)


def _metadata_control_text(record: Record) -> str:
    """A control record of the metadata log (Raft's, or a transaction marker) as --cluster-metadata-decoder shows it."""
    try:
        control_type = decode_control_key(record.key)
        value = memoryview(record.value or b"")
        if control_type in (3, 4):
            decoded, _ = CONTROL_SCHEMAS[control_type].decode(value, 0)
            return f" {CONTROL_NAMES[control_type]} {control_record_json(control_type, decoded)}"
        if control_type in ControlRecordType.NAMES:
            return _control_text(record)
        return f" controlType: {_CONTROL_TYPES.get(control_type, 'UNKNOWN')}({control_type})"
    except (RemoteProtocolError, struct.error) as exc:
        return f" controlType: UNKNOWN ({exc})"


def _payload_text(record: Record) -> str:
    try:
        api_key, version, decoded = decode_frame(record.value or b"")
        return f" payload: {metadata_record_json(api_key, version, decoded)}"
    except RemoteProtocolError as exc:  # Kafka's parser words a record it cannot read the same way
        return f" payload: Error at {record.offset}, skipping. {exc}"


def _records(data: bytes, entry: Entry) -> list[Record]:
    try:
        return iter_batch_records(data, entry.position)[1]
    except InvalidMessageError as exc:  # a batch that fails its CRC may not parse: say so and go on
        print(f"Could not read the records of the batch at position {entry.position}: {exc}", file=sys.stderr)
        return []


def _timestamp_type(batch: BatchHeader) -> str:
    return "LogAppendTime" if batch.log_append_time else "CreateTime"


def _batch_line(entry: Entry, position: int) -> str:
    b = entry.batch
    assert b is not None
    return (
        f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.record_count}"
        f" baseSequence: {b.base_sequence} lastSequence: {b.last_sequence}"
        f" producerId: {b.producer_id} producerEpoch: {b.producer_epoch}"
        f" partitionLeaderEpoch: {b.partition_leader_epoch} isTransactional: {_bool(b.is_transactional)}"
        f" isControl: {_bool(b.is_control)} position: {position} {_timestamp_type(b)}: {b.max_timestamp}"
        f" size: {LOG_OVERHEAD + entry.size} magic: {b.magic}"
        f" compresscodec: {_BATCH_CODEC_NAMES.get(b.codec, f'UNKNOWN({b.codec})')} crc: {b.crc}"
        f" isvalid: {_bool(entry.valid)}"
    )


def _record_line(batch: BatchHeader, record: Record, print_data: bool) -> str:
    parts = [
        f"| offset: {record.offset} {_timestamp_type(batch)}: {record.timestamp}"
        f" keysize: {_size(record.key)} valuesize: {_size(record.value)}"
        f" sequence: {record.sequence} headerKeys: [{','.join(key for key, _ in record.headers)}]"
    ]
    if batch.is_control:
        parts.append(_control_text(record))
    elif print_data:
        if record.key is not None:
            parts.append(f" key: {_text(record.key)}")
        if record.value is not None:
            parts.append(f" payload: {_text(record.value)}")
    return "".join(parts)


def _control_text(record: Record) -> str:
    """A control record as DumpLogSegments shows one, in place of its key and payload."""
    try:
        control_type = control_record_type(record.key)
        if control_type in ControlRecordType.NAMES:
            marker = parse_end_txn_marker(record.key, record.value)
            return f" endTxnMarker: {marker.name} coordinatorEpoch: {marker.coordinator_epoch}"
        return f" controlType: UNKNOWN({control_type})"
    except CorruptRecordError as exc:
        return f" controlType: unreadable ({exc})"


def _size(field: bytes | None) -> int:
    return -1 if field is None else len(field)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _messages(entry: Entry, deep: bool) -> list[tuple[int, Entry]]:
    """The entry itself, or with deep iteration and a codec, its inner messages with absolute offsets."""
    codec = entry.attributes & _CODEC_MASK
    if not deep or codec == CODEC_NONE:
        return [(entry.offset, entry)]
    inner = list(iter_entries(decompress(codec, entry.value or b"")))
    # magic 1 keeps inner offsets relative to the wrapper, whose own offset is the last inner one's
    base = entry.offset - inner[-1].offset if entry.magic and inner else 0
    return [(base + message.offset, message) for message in inner]


def _message_line(offset: int, position: int, message: Entry, print_data: bool) -> str:
    codec = message.attributes & _CODEC_MASK
    payload_size = -1 if message.value is None else len(message.value)
    parts = [
        f"offset: {offset} position: {position} isvalid: {'true' if message.valid else 'false'}"
        f" payloadsize: {payload_size} magic: {message.magic}"
        f" compresscodec: {_CODEC_NAMES.get(codec, f'UnknownCompressionCodec({codec})')} crc: {message.crc}"
    ]
    if message.key is not None:
        parts.append(f" keysize: {len(message.key)}")
    if print_data:
        if message.key is not None:
            parts.append(f" key: {_text(message.key)}")
        parts.append(f" payload: {'null' if message.value is None else _text(message.value)}")
    return "".join(parts)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _dump_index(
    path: str,
    verify_only: bool,
    max_message_size: int,
    mismatches: dict[str, list[tuple[int, int]]],
    out: TextIO,
) -> None:
    base = _base_offset(path)
    log_path = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(path).split(".")[0] + LOG_SUFFIX)
    index = _map(path)
    log = _map(log_path)
    for i in range(len(index) // _INDEX_ENTRY.size):
        relative, position = _INDEX_ENTRY.unpack_from(index, i * _INDEX_ENTRY.size)
        log_offset = _first_offset_at(log, position, max_message_size)
        if log_offset != base + relative:
            mismatches.setdefault(os.path.abspath(path), []).append((base + relative, log_offset))
        # a preallocated index ends in empty slots: stop at the first
        if relative == 0 and i > 0:
            return
        if not verify_only:
            print(f"offset: {base + relative} position: {position}", file=out)


def _dump_time_index(
    path: str, verify_only: bool, max_message_size: int, errors: _TimeIndexErrors, out: TextIO
) -> None:
    """Each entry, checked as Kafka's dumpTimeIndex checks it: the entry of the log whose last offset reaches the
    indexed offset must end exactly there and carry exactly the indexed timestamp as its largest."""
    base = _base_offset(path)
    stem = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(path).split(".")[0])
    time_index = _map(path)
    offset_index = _map(stem + INDEX_SUFFIX)
    log = _map(stem + LOG_SUFFIX)
    entries = [_INDEX_ENTRY.unpack_from(offset_index, i * 8) for i in range(len(offset_index) // 8)]
    previous = -1
    name = os.path.abspath(path)
    for i in range(len(time_index) // _TIME_INDEX_ENTRY.size):
        timestamp, relative = _TIME_INDEX_ENTRY.unpack_from(time_index, i * _TIME_INDEX_ENTRY.size)
        offset = base + relative
        if relative == 0 and i > 0:  # a preallocated index ends in empty slots: stop at the first
            return
        position = max((p for r, p in entries if base + r <= offset), default=0)
        found = _entry_reaching(log, position, offset, max_message_size)
        if found is None:
            errors.not_found.setdefault(name, []).append((offset, -1))
        elif found[0] != offset:
            errors.not_found.setdefault(name, []).append((offset, found[0]))
        else:
            if found[1] != timestamp:
                errors.mismatches.setdefault(name, []).append((timestamp, found[1]))
            if previous >= timestamp:
                errors.out_of_order.setdefault(name, []).append((timestamp, previous))
        if not verify_only:
            print(f"timestamp: {timestamp} offset: {offset}", file=out)
        previous = timestamp


def _entry_reaching(log: bytes, position: int, offset: int, max_message_size: int) -> tuple[int, int] | None:
    """(last offset, largest timestamp of its messages) of the first entry from `position` whose last offset is
    at least `offset`."""
    if not 0 <= position <= len(log):
        return None
    window = memoryview(log)[position:]
    for entry in iter_entries(window, max_message_bytes=max_message_size):
        if entry.batch is not None:
            last = entry.batch.last_offset
        elif entry.attributes & _CODEC_MASK:
            last = entry.offset  # a wrapper carries its last inner offset
        else:
            last = entry.offset
        if last >= offset:
            stored = window[entry.position : entry.position + LOG_OVERHEAD + entry.size]
            timestamps = [m.timestamp for m in iter_messages(stored, verify_crc=False)]
            return last, max(timestamps, default=-1)
    return None


def _first_offset_at(log: bytes, position: int, max_message_size: int) -> int:
    """The offset of the first message (inner, for a compressed one) at `position`; -1 if there is none."""
    if not 0 <= position <= len(log):
        return -1
    window = memoryview(log)[position : position + LOG_OVERHEAD + max_message_size]
    first = next(iter_entries(window, max_message_bytes=max_message_size), None)
    if first is None:
        return -1
    if first.attributes & _CODEC_MASK == CODEC_NONE:
        return first.offset
    entry_bytes = window[: LOG_OVERHEAD + first.size]
    message = next(iter_messages(entry_bytes, verify_crc=False), None)
    return -1 if message is None else message.offset
