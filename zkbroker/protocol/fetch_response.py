"""Fetch responses as pieces, so message sets travel from segment files without a copy.

A Fetch response is small framing around large message sets. ``encode_fetch_response`` writes
the framing (frame size, response header v0, throttle time, topics, partitions, and each
message set's int32 size) as ``bytes`` pieces and leaves each message set as a *slot*: the
object the caller passed (typically a :class:`FileRange`), whose ``len()`` is already counted in
the frame size and the size prefix. The server writes ``bytes`` pieces and fills slots with
``os.sendfile`` (or, for small ones, ``os.pread``). Message sets given as bytes-like objects are
inlined.

Joining the pieces with every slot replaced by its bytes gives exactly what the generic
schema encoder (``encode_response``) produces for the same response.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .errors import LocalProtocolError
from .types import String

__all__ = ["FileRange", "encode_fetch_response", "join_pieces"]

_INT32 = struct.Struct(">i")
_SIZE_CORRELATION = struct.Struct(">ii")
_SIZE_CORRELATION_THROTTLE = struct.Struct(">iii")
_PARTITION_HEADER = struct.Struct(">ihqi")  # partition, error_code, high_watermark, records size
_PARTITION_HEAD = struct.Struct(">ihq")  # partition, error_code, high_watermark
_INT64 = struct.Struct(">q")
_PRODUCER_FIRST_OFFSET = struct.Struct(">qq")  # an aborted transaction: producer_id, first_offset
_SIZE_CORRELATION_THROTTLE_SESSION = struct.Struct(">iiihi")  # v7+: throttle, error_code, session_id
_NULL_ARRAY = _INT32.pack(-1)
_EMPTY_ARRAY = _INT32.pack(0)
_BYTES_LIKE = (bytes, bytearray, memoryview)


@dataclass(frozen=True, slots=True)
class FileRange:
    """``size`` bytes of an open segment file from ``position``: a slot filled by sendfile."""

    file: Any
    position: int
    size: int

    def __len__(self) -> int:
        return self.size


def _fields(value: Any, names: tuple[str, ...]) -> tuple:
    if isinstance(value, dict):
        return tuple(value[name] for name in names)
    if isinstance(value, tuple):
        return value
    return tuple(getattr(value, name) for name in names)


def encode_fetch_response(
    correlation_id: int,
    api_version: int,
    topics: Iterable[Any],
    throttle_time_ms: int = 0,
    isolation_level: int = 0,
) -> list[Any]:
    """The complete Fetch response frame (v0-v10) as ``bytes`` pieces and message-set slots.

    ``topics``: ``(topic, partitions)`` pairs, where each partition is
    ``(partition, error_code, high_watermark, records)`` -- tuples, dicts or structs with those
    names -- or, for v4 and later, ``(partition, error_code, high_watermark, records,
    last_stable_offset, log_start_offset)``, and optionally a seventh, ``aborted_transactions``:
    ``(producer_id, first_offset)`` pairs. ``records`` is None (sent as an empty set), bytes-like
    (inlined) or a slot: any other object whose ``len()`` is its size in bytes. A v4+ partition without
    aborted transactions answers null for read_uncommitted and an empty list for read_committed, as Kafka
    does; v7+ answers session 0, no fetch session (KIP-227 allows it).
    """
    if not 0 <= api_version <= 10:
        raise LocalProtocolError(f"no Fetch response version {api_version}")
    aborted = _EMPTY_ARRAY if isolation_level else _NULL_ARRAY
    pieces: list[Any] = []
    buffer: list[bytes] = []
    total = 0
    try:
        topics = list(topics)
        buffer.append(_INT32.pack(len(topics)))
        for topic_entry in topics:
            topic, partitions = _fields(topic_entry, ("topic", "partitions"))
            partitions = list(partitions)
            buffer.append(String.encode(topic))
            buffer.append(_INT32.pack(len(partitions)))
            for entry in partitions:
                partition, error_code, high_watermark, records = _fields(
                    entry, ("partition", "error_code", "high_watermark", "records")
                )[:4]
                if api_version >= 4:
                    last_stable, log_start = (
                        _fields(entry, _V4_FIELDS)[4:6] if _has_v4_fields(entry) else (high_watermark, -1)
                    )
                    buffer.append(_PARTITION_HEAD.pack(partition, error_code, high_watermark))
                    buffer.append(_INT64.pack(last_stable))
                    if api_version >= 5:
                        buffer.append(_INT64.pack(log_start))
                    txns = _aborted_of(entry)
                    if txns:
                        buffer.append(_INT32.pack(len(txns)))
                        buffer += [_PRODUCER_FIRST_OFFSET.pack(*txn) for txn in txns]
                    else:
                        buffer.append(aborted)
                    head = _INT32
                    fields: tuple = ()
                else:
                    head = _PARTITION_HEADER
                    fields = (partition, error_code, high_watermark)
                if records is None:
                    buffer.append(head.pack(*fields, 0))
                elif isinstance(records, _BYTES_LIKE):
                    size = memoryview(records).nbytes
                    buffer.append(head.pack(*fields, size))
                    buffer.append(records)
                else:
                    size = len(records)
                    buffer.append(head.pack(*fields, size))
                    chunk = b"".join(buffer)
                    pieces.append(chunk)
                    pieces.append(records)
                    total += len(chunk) + size
                    buffer = []
    except (struct.error, TypeError, ValueError, KeyError, AttributeError) as exc:
        raise LocalProtocolError(f"Fetch response: {exc!r}") from None
    if buffer:
        chunk = b"".join(buffer)
        pieces.append(chunk)
        total += len(chunk)
    if api_version == 0:
        head = _SIZE_CORRELATION.pack(total + 4, correlation_id)
    elif api_version < 7:
        head = _SIZE_CORRELATION_THROTTLE.pack(total + 8, correlation_id, throttle_time_ms)
    else:
        head = _SIZE_CORRELATION_THROTTLE_SESSION.pack(total + 14, correlation_id, throttle_time_ms, 0, 0)
    pieces[0] = head + pieces[0]  # always bytes: it starts with the topic count
    return pieces


_V4_FIELDS = ("partition", "error_code", "high_watermark", "records", "last_stable_offset", "log_start_offset")


def _aborted_of(entry: Any) -> Any:
    if isinstance(entry, tuple) and not hasattr(entry, "_fields"):
        return entry[6] if len(entry) > 6 else None
    if isinstance(entry, dict):
        return entry.get("aborted_transactions")
    return getattr(entry, "aborted_transactions", None)


def _has_v4_fields(entry: Any) -> bool:
    if isinstance(entry, tuple) and not hasattr(entry, "_fields"):
        return len(entry) >= 6
    if isinstance(entry, dict):
        return "last_stable_offset" in entry
    return hasattr(entry, "last_stable_offset")


def join_pieces(pieces: Iterable[Any], read_slot: Any = bytes) -> bytes:
    """The pieces as one byte string, each slot replaced by ``read_slot(slot)`` (tests, tools)."""
    return b"".join(piece if isinstance(piece, bytes) else read_slot(piece) for piece in pieces)
