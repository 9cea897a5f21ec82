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
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from typing import TextIO

from zkbroker.protocol.compression import CODEC_NONE, decompress
from zkbroker.protocol.message_set import LOG_OVERHEAD, Entry, iter_entries, iter_messages

from .segment import INDEX_SUFFIX, LOG_SUFFIX

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
_CODEC_NAMES = {
    0: "NoCompressionCodec",
    1: "GZIPCompressionCodec",
    2: "SnappyCompressionCodec",
    3: "LZ4CompressionCodec",
}
_INDEX_ENTRY = struct.Struct(">ii")
_CODEC_MASK = 0x07


def dump_log_segments(
    files: list[str],
    *,
    print_data_log: bool = False,
    verify_index_only: bool = False,
    deep_iteration: bool = False,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> None:
    """Print each file as DumpLogSegments does: to `out` (default stdout); index mismatches and offset gaps
    found along the way to `err` (default stderr) at the end."""
    out = out or sys.stdout
    err = err or sys.stderr
    index_mismatches: dict[str, list[tuple[int, int]]] = {}
    non_consecutive: dict[str, list[tuple[int, int]]] = {}
    for path in files:
        name = os.path.basename(path)
        if name.endswith(LOG_SUFFIX):
            print(f"Dumping {path}", file=out)
            _dump_log(path, print_data_log, deep_iteration, max_message_size, non_consecutive, out)
        elif name.endswith(INDEX_SUFFIX):
            print(f"Dumping {path}", file=out)
            _dump_index(path, verify_index_only, max_message_size, index_mismatches, out)
    for path, mismatches in index_mismatches.items():
        print(f"Mismatches in :{path}", file=err)
        for index_offset, log_offset in reversed(mismatches):
            print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=err)
    for path, pairs in non_consecutive.items():
        print(f"Non-secutive offsets in :{path}", file=err)
        for before, after in reversed(pairs):
            print(f"  {before} is followed by {after}", file=err)


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
