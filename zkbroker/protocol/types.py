"""Kafka's primitive wire types and the declarative ``Schema`` that composes them.

Every type has the same two pure functions:

* ``decode(buf, offset) -> (value, new_offset)`` reads from ``bytes``, ``bytearray`` or a
  ``memoryview`` with ``struct.unpack_from``; it never copies the buffer and raises only
  :class:`RemoteProtocolError` on malformed input;
* ``encode(value) -> bytes``; it raises only :class:`LocalProtocolError` on a value the wire
  format cannot carry.

A ``Schema(("field", Type), ...)`` decodes to a light struct: a named tuple with attribute
access and ``to_dict()``. It encodes plain dicts (keys of fields it lacks are ignored, so one
dict serves several versions), tuples (positional) and any object with the field attributes,
so decoded structs re-encode unchanged. Fields are big-endian as in Kafka;
``Array(("a", Int32), ("b", String))`` is shorthand for ``Array(Schema(...))``.

Leniency, as in 0.8.2's readers: a length of -1 where a value is required (0.8.2's
``readShortString`` returned null; its count loops ran zero times) reads as the empty value,
so request handlers never see ``None`` in a field Kafka declares non-nullable.
"""

from __future__ import annotations

import collections
import struct
from typing import Any

from .errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "Array",
    "Boolean",
    "Bytes",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "NullableArray",
    "NullableBytes",
    "NullableString",
    "Records",
    "Schema",
    "String",
    "UInt32",
    "WireType",
    "to_dict",
]

Buffer = bytes | bytearray | memoryview

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _truncated(what: str, offset: int) -> RemoteProtocolError:
    return RemoteProtocolError(f"{what}: truncated at offset {offset}")


class WireType:
    """A wire type: a pair of pure functions, ``decode`` and ``encode``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def decode(self, buf: Buffer, offset: int) -> tuple[Any, int]:
        raise NotImplementedError

    def encode(self, value: Any) -> bytes:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class _Fixed(WireType):
    """A fixed-width big-endian integer. ``code`` is its ``struct`` format character."""

    __slots__ = ("code", "pack", "size", "unpack_from")

    def __init__(self, name: str, code: str) -> None:
        super().__init__(name)
        packer = struct.Struct(">" + code)
        self.code = code
        self.size = packer.size
        self.pack = packer.pack
        self.unpack_from = packer.unpack_from

    def decode(self, buf: Buffer, offset: int) -> tuple[int, int]:
        try:
            return self.unpack_from(buf, offset)[0], offset + self.size
        except struct.error:
            raise _truncated(self.name, offset) from None

    def encode(self, value: int) -> bytes:
        try:
            return self.pack(value)
        except (struct.error, TypeError) as exc:
            raise LocalProtocolError(f"{self.name}: cannot encode {value!r} ({exc})") from None


class _Boolean(WireType):
    __slots__ = ()

    def decode(self, buf: Buffer, offset: int) -> tuple[bool, int]:
        try:
            return buf[offset] != 0, offset + 1
        except IndexError:
            raise _truncated(self.name, offset) from None

    def encode(self, value: bool) -> bytes:
        return b"\x01" if value else b"\x00"


Int8 = _Fixed("Int8", "b")
Int16 = _Fixed("Int16", "h")
Int32 = _Fixed("Int32", "i")
Int64 = _Fixed("Int64", "q")
UInt32 = _Fixed("UInt32", "I")
Boolean = _Boolean("Boolean")


class _String(WireType):
    """int16 length + UTF-8 bytes; -1 is null."""

    __slots__ = ("nullable",)

    def __init__(self, name: str, nullable: bool) -> None:
        super().__init__(name)
        self.nullable = nullable

    def decode(self, buf: Buffer, offset: int) -> tuple[str | None, int]:
        try:
            (n,) = _INT16.unpack_from(buf, offset)
        except struct.error:
            raise _truncated(self.name, offset) from None
        start = offset + 2
        if n < 0:
            if n != -1:
                raise RemoteProtocolError(f"{self.name}: negative length {n} at offset {offset}")
            return (None if self.nullable else ""), start
        end = start + n
        if end > len(buf):
            raise _truncated(self.name, offset)
        try:
            return str(buf[start:end], "utf-8"), end
        except UnicodeDecodeError:
            raise RemoteProtocolError(f"{self.name}: invalid UTF-8 at offset {offset}") from None

    def encode(self, value: str | None) -> bytes:
        if value is None:
            if self.nullable:
                return b"\xff\xff"
            raise LocalProtocolError(f"{self.name}: None where a string is required")
        try:
            data = value.encode("utf-8")
        except AttributeError:
            raise LocalProtocolError(f"{self.name}: cannot encode {value!r}") from None
        if len(data) > 32767:
            raise LocalProtocolError(f"{self.name}: {len(data)} bytes is longer than 32767")
        return _INT16.pack(len(data)) + data


class _Bytes(WireType):
    """int32 length + raw bytes; -1 is null.

    ``Bytes`` decodes to ``bytes`` (a small copy). ``Records`` -- a message set inside Produce and
    Fetch -- decodes to a slice of the input buffer instead, so that a ``memoryview`` frame yields
    a zero-copy (and, over a ``bytearray``, writable) view the log can assign offsets in.
    """

    __slots__ = ("copy", "nullable")

    def __init__(self, name: str, nullable: bool, copy: bool) -> None:
        super().__init__(name)
        self.nullable = nullable
        self.copy = copy

    def decode(self, buf: Buffer, offset: int) -> tuple[Any, int]:
        try:
            (n,) = _INT32.unpack_from(buf, offset)
        except struct.error:
            raise _truncated(self.name, offset) from None
        start = offset + 4
        if n < 0:
            if n != -1:
                raise RemoteProtocolError(f"{self.name}: negative length {n} at offset {offset}")
            return (None if self.nullable else b""), start
        end = start + n
        if end > len(buf):
            raise _truncated(self.name, offset)
        data = buf[start:end]
        return (bytes(data) if self.copy else data), end

    def encode(self, value: Buffer | None) -> bytes:
        if value is None:
            if self.nullable:
                return b"\xff\xff\xff\xff"
            raise LocalProtocolError(f"{self.name}: None where bytes are required")
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise LocalProtocolError(f"{self.name}: cannot encode {type(value).__name__}")
        return _INT32.pack(memoryview(value).nbytes) + value


String = _String("String", nullable=False)
NullableString = _String("NullableString", nullable=True)
Bytes = _Bytes("Bytes", nullable=False, copy=True)
NullableBytes = _Bytes("NullableBytes", nullable=True, copy=True)
#: A message set (int32 size + bytes), decoded as a view of the input buffer; -1 reads as None.
Records = _Bytes("Records", nullable=True, copy=False)


class Array(WireType):
    """int32 count + that many elements. ``Array(T)`` or ``Array(("f", T), ...)``."""

    __slots__ = ("_many", "element", "nullable")

    def __init__(self, *element: WireType | tuple[str, WireType], nullable: bool = False) -> None:
        if len(element) == 1 and isinstance(element[0], WireType):
            item = element[0]
        else:
            item = Schema(*element)  # type: ignore[arg-type]
        super().__init__(f"{'Nullable' if nullable else ''}Array({item!r})")
        self.element = item
        self.nullable = nullable
        # Arrays of integers (ISR, replicas, partition ids) decode with one unpack_from.
        self._many = item.code if isinstance(item, _Fixed) else None

    def decode(self, buf: Buffer, offset: int) -> tuple[list | None, int]:
        try:
            (n,) = _INT32.unpack_from(buf, offset)
        except struct.error:
            raise _truncated(self.name, offset) from None
        offset += 4
        if n < 0:
            if n != -1:
                raise RemoteProtocolError(f"{self.name}: negative count {n} at offset {offset - 4}")
            return (None if self.nullable else []), offset
        if n > len(buf) - offset:  # every element takes at least one byte
            raise _truncated(self.name, offset - 4)
        if self._many is not None:
            try:
                values = struct.unpack_from(f">{n}{self._many}", buf, offset)
            except struct.error:
                raise _truncated(self.name, offset) from None
            return list(values), offset + n * self.element.size  # type: ignore[attr-defined]
        decode = self.element.decode
        out = []
        append = out.append
        for _ in range(n):
            value, offset = decode(buf, offset)
            append(value)
        return out, offset

    def encode(self, value: Any) -> bytes:
        if value is None:
            if self.nullable:
                return b"\xff\xff\xff\xff"
            raise LocalProtocolError(f"{self.name}: None where an array is required")
        try:
            items = list(value)
        except TypeError:
            raise LocalProtocolError(f"{self.name}: cannot encode {value!r}") from None
        if self._many is not None:
            try:
                return _INT32.pack(len(items)) + struct.pack(f">{len(items)}{self._many}", *items)
            except (struct.error, TypeError) as exc:
                raise LocalProtocolError(f"{self.name}: {exc}") from None
        encode = self.element.encode
        parts = [_INT32.pack(len(items))]
        for i, item in enumerate(items):
            try:
                parts.append(encode(item))
            except LocalProtocolError as exc:
                raise LocalProtocolError(f"[{i}].{exc}") from None
        return b"".join(parts)


def NullableArray(*element: WireType | tuple[str, WireType]) -> Array:
    """An ``Array`` whose count may be -1 (null)."""
    return Array(*element, nullable=True)


def _struct_to_dict(self: tuple) -> dict[str, Any]:
    return to_dict(self)


def to_dict(value: Any) -> Any:
    """A decoded value as plain Python data: structs become dicts, views become bytes."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {name: to_dict(item) for name, item in zip(value._fields, value, strict=True)}
    if isinstance(value, list):
        return [to_dict(item) for item in value]
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    return value


class Schema(WireType):
    """An ordered list of named fields; decodes to a named tuple of class ``name``.

    Runs of fixed-width integer fields are read and written with a single ``struct`` call.
    """

    __slots__ = ("_names", "_steps", "fields", "struct")

    def __init__(self, *fields: tuple[str, WireType], name: str = "Struct") -> None:
        super().__init__(name)
        for field in fields:
            if not (
                isinstance(field, tuple) and len(field) == 2 and isinstance(field[1], WireType)
            ):
                raise TypeError(f"Schema fields are (name, WireType) pairs, not {field!r}")
        self.fields = fields
        self._names = tuple(name for name, _ in fields)
        base = collections.namedtuple(name, self._names)
        self.struct = type(name, (base,), {"__slots__": (), "to_dict": _struct_to_dict})
        # Steps: (struct.Struct, field count) for a run of fixed ints, or (WireType, 1).
        steps: list[tuple[Any, int]] = []
        run = ""
        for _, ftype in fields:
            if isinstance(ftype, _Fixed):
                run += ftype.code
                continue
            if run:
                steps.append((struct.Struct(">" + run), len(run)))
                run = ""
            steps.append((ftype, 1))
        if run:
            steps.append((struct.Struct(">" + run), len(run)))
        self._steps = tuple(steps)

    def __call__(self, *args: Any, **kwargs: Any) -> tuple:
        """Build a struct of this schema (handy for encoding and tests)."""
        return self.struct(*args, **kwargs)

    def decode(self, buf: Buffer, offset: int) -> tuple[tuple, int]:
        values: list[Any] = []
        for step, _count in self._steps:
            if isinstance(step, struct.Struct):
                try:
                    values.extend(step.unpack_from(buf, offset))
                except struct.error:
                    raise _truncated(self.name, offset) from None
                offset += step.size
            else:
                value, offset = step.decode(buf, offset)
                values.append(value)
        return self.struct._make(values), offset

    def values_of(self, value: Any) -> list[Any]:
        """The field values of a dict, tuple or object, in schema order."""
        names = self._names
        if isinstance(value, dict):
            try:
                values = [value[name] for name in names]
            except KeyError as exc:
                raise LocalProtocolError(f"{self.name}: missing field {exc.args[0]!r}") from None
            # Keys of other versions are ignored, so one dict can serve every version of a
            # response; a misspelt key still fails, as the field it was meant for is missing.
            return values
        if isinstance(value, (tuple, list)):
            if len(value) != len(names):
                raise LocalProtocolError(
                    f"{self.name}: {len(value)} values for {len(names)} fields {names}"
                )
            return list(value)
        try:
            return [getattr(value, name) for name in names]
        except AttributeError as exc:
            raise LocalProtocolError(f"{self.name}: {exc}") from None

    def encode(self, value: Any) -> bytes:
        values = self.values_of(value)
        parts = []
        i = 0
        for step, count in self._steps:
            if isinstance(step, struct.Struct):
                try:
                    parts.append(step.pack(*values[i : i + count]))
                except (struct.error, TypeError) as exc:
                    fields = self._names[i : i + count]
                    raise LocalProtocolError(f"{self.name}{fields}: {exc}") from None
            else:
                try:
                    parts.append(step.encode(values[i]))
                except LocalProtocolError as exc:
                    raise LocalProtocolError(f"{self._names[i]}: {exc}") from None
            i += count
        return b"".join(parts)
