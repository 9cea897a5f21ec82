"""Fetched message sets into Arrow record batches of Spark's Kafka schema, without a Python object per message.

The set is checked, and its entries found, by the codec's one walk over message sets (`analyze`,
`entry_starts`); a set of uncompressed messages of one format -- what 0.8 producers write without
compression -- is then cut into columns by Arrow kernels on little-endian hosts; anything else goes message by
message through the codec's `iter_messages`.
"""

from __future__ import annotations

import functools
import struct
import sys

import pyarrow as pa
import pyarrow.compute as pc

from zkbroker.protocol.compression import CODEC_NONE
from zkbroker.protocol.message_set import (
    LOG_APPEND_TIME,
    InflationBoundError,
    analyze,
    entry_starts,
    inflation_bound,
    iter_messages,
)

__all__ = ["message_set_batch"]

_SIZE = struct.Struct(">i")
_KEY_LENGTH_AT = {0: 18, 1: 26}  # offset 8, size 4, crc 4, magic 1, attributes 1, [timestamp 8]
_LITTLE_ENDIAN = sys.byteorder == "little"
_INT32_MAX = 2**31 - 1
_NULL_LENGTH = b"\xff\xff\xff\xff"
_TIMESTAMP = pa.timestamp("us", tz="UTC")


def message_set_batch(records, topic: str, partition: int, start: int, end: int, schema: pa.Schema,
                      max_inflated_bytes: int | None = None) -> tuple[pa.RecordBatch | None, int, int]:
    """The messages of a fetched message set with start <= offset < end, as one record batch of `schema`.

    Returns (batch or None, the offset after the last complete message in the set, how many complete
    messages the set held). The codec's walk checks the set (sizes, CRCs, key and value lengths: a corrupt
    message raises InvalidMessageError) and says where its complete entries end. A set of uncompressed
    messages of one format -- what 0.8 producers write without compression -- is then decoded column by
    column on little-endian hosts: where the messages start comes from the codec's `entry_starts` (or from
    Arrow, when they all have the same size), and Arrow kernels cut out offsets, keys and values. Anything
    else (compressed wrappers, formats mixed) goes message by message through the codec's `iter_messages`;
    a compressed message that would inflate past `max_inflated_bytes` (default: the codec's inflation_bound)
    raises InflationBoundError naming topic, partition and offset.
    """
    view = memoryview(records).cast("B") if not isinstance(records, memoryview) else records.cast("B")
    checked = analyze(view)
    view = view[: checked.valid_bytes]
    columns = None
    if _LITTLE_ENDIAN and checked.codec == CODEC_NONE and checked.shallow_count:
        columns = _plain_columns(view)
    if columns is None:
        try:
            columns = _general_columns(view, inflation_bound() if max_inflated_bytes is None else max_inflated_bytes)
        except InflationBoundError as e:
            raise e.in_partition(topic, partition) from None
    offsets, keys, values, timestamps, ts_types, count, headers = columns
    if count == 0:
        # Complete entries but no message: control batches only (transaction markers), which readers pass
        if checked.shallow_count:
            return None, checked.last_offset + 1, checked.shallow_count
        return None, start, 0
    next_offset = max(offsets[count - 1].as_py(), checked.last_offset) + 1  # past a trailing marker too
    if offsets[0].as_py() < start or offsets[count - 1].as_py() >= end:
        keep = pc.and_(pc.greater_equal(offsets, start), pc.less(offsets, end))
        offsets, keys, values, timestamps, ts_types = (pc.filter(c, keep) for c in
                                                       (offsets, keys, values, timestamps, ts_types))
        if headers is not None:
            headers = [h for h, k in zip(headers, keep.to_pylist()) if k]
    rows = len(offsets)
    if rows == 0:
        return None, next_offset, count
    arrays = [keys, values, pa.repeat(pa.scalar(topic, pa.string()), rows),
              pa.repeat(pa.scalar(partition, pa.int32()), rows), offsets, timestamps, ts_types]
    if len(schema) > len(arrays):
        header_type = schema.field("headers").type
        if headers is None:
            arrays.append(pa.nulls(rows, header_type))
        else:  # a record's headers; null for messages of magic 0 and 1, which have none (as Spark's source)
            arrays.append(pa.array([None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers],
                                   header_type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema), next_offset, count


def _plain_columns(view: memoryview):
    """Columns of a checked set of uncompressed messages of one magic and attributes, or None for a set whose
    formats are mixed."""
    if len(view) > _INT32_MAX:
        return None  # Arrow's 32-bit offsets
    bounds = _entry_bounds(view)
    count = len(bounds) - 1
    buffer = pa.py_buffer(view)
    entries = pa.Array.from_buffers(pa.binary(), count, [None, bounds.buffers()[1], buffer])
    magic, attributes = view[16], view[17]
    if magic not in _KEY_LENGTH_AT:
        return None  # record batches: varint records, read by the codec
    same_head = pc.equal(pc.binary_slice(entries, 16, 18), _scalar(bytes(view[16:18])))  # magic, attributes
    if not pc.all(same_head).as_py():
        return None  # formats mixed
    key_at = _KEY_LENGTH_AT[magic]
    entry_starts = bounds.slice(0, count)
    entry_stops = bounds.slice(1, count)
    offsets = _big_endian(pc.binary_slice(entries, 0, 8), pa.int64())
    key_lengths = _big_endian(pc.binary_slice(entries, key_at, key_at + 4), pa.int32())
    key_starts = pc.add(entry_starts, _scalar(key_at + 4))
    key_stops = pc.add(key_starts, pc.max_element_wise(key_lengths, _scalar(0)))
    value_starts = pc.add(key_stops, _scalar(4))
    keys = _cut(buffer, key_starts, key_stops, pc.equal(key_lengths, _scalar(-1)))
    null_values = pc.and_(pc.equal(value_starts, entry_stops),
                          pc.equal(pc.binary_slice(entries, -4, _INT32_MAX), _scalar(_NULL_LENGTH)))
    values = _cut(buffer, value_starts, entry_stops, null_values)
    if magic == 0:
        timestamps = pa.nulls(count, _TIMESTAMP)
        ts_types = pa.repeat(_scalar(-1), count)
    else:
        millis = _big_endian(pc.binary_slice(entries, 18, 26), pa.int64())
        timestamps = pc.cast(pc.multiply_checked(millis, _scalar(1000, pa.int64())), _TIMESTAMP)
        ts_types = pa.repeat(_scalar(1 if attributes & LOG_APPEND_TIME else 0), count)
    return offsets, keys, values, timestamps, ts_types, count, None


def _entry_bounds(view: memoryview) -> pa.Array:
    """Where each entry of a checked set starts, and where the last one ends, as an Arrow int32 array: from
    Arrow when every entry has the first one's size (a producer writing records of one size, as the
    benchmark's: the set is cut into equal strides and Arrow checks that each stride's size field says so),
    else from the codec's `entry_starts`."""
    n = len(view)
    stride = 12 + _SIZE.unpack_from(view, 8)[0]
    count = n // stride
    if count >= 2 and count * stride == n:
        strides = pa.FixedSizeBinaryArray.from_buffers(pa.binary(stride), count, [None, pa.py_buffer(view)])
        sizes = pc.binary_slice(strides, 8, 12)
        if pc.all(pc.equal(sizes, _scalar(bytes(view[8:12]), pa.binary(4)))).as_py():
            return pc.multiply(_indices(count + 1), _scalar(stride))
    return pa.array(entry_starts(view) + [n], pa.int32())


@functools.lru_cache(maxsize=16)
def _indices(count: int) -> pa.Array:
    return pa.array(range(count), pa.int32())


@functools.lru_cache(maxsize=64)
def _scalar(value, type_: pa.DataType = None) -> pa.Scalar:
    """Arrow scalars made once: a Python value passed to a compute function is converted on every call."""
    if type_ is None:
        type_ = pa.binary() if isinstance(value, bytes) else pa.int32()
    return pa.scalar(value, type_)


def _big_endian(fixed: pa.Array, type_: pa.DataType) -> pa.Array:
    """Equal-width big-endian binary values as integers: reverse each value's bytes, then reinterpret the
    contiguous data buffer (little-endian hosts only)."""
    reversed_ = pc.binary_reverse(fixed)
    return pa.Array.from_buffers(type_, len(fixed), [None, reversed_.buffers()[2]])


@functools.lru_cache(maxsize=16)
def _even_indices(count: int) -> pa.Array:
    return pa.array(range(0, 2 * count, 2), pa.int32())


def _cut(buffer: pa.Buffer, starts: pa.Array, stops: pa.Array, nulls: pa.Array) -> pa.Array:
    """Binary values buffer[starts[i]:stops[i]] (ascending, not overlapping), null where `nulls`.

    The pairs interleaved -- start0, stop0, start1, stop1... -- are the offsets of a binary array over the
    whole buffer whose even elements are the values and odd ones the bytes between; `take` copies the even
    ones out. Interleaving: an int64 stop * 2**32 + start is, in little-endian memory, the int32 pair
    (start, stop).
    """
    count = len(starts)
    pairs = pc.add(pc.cast(starts, pa.int64()), pc.multiply(pc.cast(stops, pa.int64()), _scalar(1 << 32, pa.int64())))
    spans = pa.Array.from_buffers(pa.binary(), 2 * count - 1, [None, pairs.buffers()[1], buffer])
    values = pc.take(spans, _even_indices(count))
    if pc.any(nulls).as_py():
        values = pc.if_else(nulls, _scalar(None, pa.binary()), values)
    return values


def _general_columns(view: memoryview, max_inflated_bytes: int):
    """Columns of any checked message set, message by message (compressed wrappers opened by the codec)."""
    offsets, keys, values, timestamps, ts_types, headers = [], [], [], [], [], []
    starts = entry_starts(view)
    for pos, stop in zip(starts, starts[1:] + [len(view)]):
        magic = view[pos + 16]
        attributes = view[pos + 22] if magic == 2 else view[pos + 17]  # a batch's: the low byte of its int16
        ts_type = -1 if magic == 0 else (1 if attributes & LOG_APPEND_TIME else 0)
        for message in iter_messages(view[pos:stop], max_inflated_bytes=max_inflated_bytes):
            offsets.append(message.offset)
            keys.append(message.key)
            values.append(message.value)
            timestamps.append(message.timestamp * 1000 if magic else None)
            ts_types.append(ts_type)
            headers.append(message.headers if magic == 2 else None)
    return (pa.array(offsets, pa.int64()), pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
            pa.array(timestamps, pa.int64()).cast(pa.timestamp("us", tz="UTC")), pa.array(ts_types, pa.int32()),
            len(offsets), headers)


