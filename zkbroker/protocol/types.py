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

Flexible versions (KIP-482, Kafka 2.4) are written with their own types: ``CompactString``,
``CompactBytes``, ``CompactArray`` (and the nullable forms) carry an unsigned varint of length + 1
(0 is null) instead of an int16/int32, and every struct -- the body, each nested struct, each array
element -- is a ``FlexibleSchema``, which ends with a tag buffer: an unsigned varint count, then per
field its tag, its size and its bytes, tags strictly ascending. Known tags (``TaggedField``) decode
to named fields with Kafka's defaults and are written only when they differ from the default, as
Kafka writes them; unknown tags are kept (``unknown_tagged_fields``) so a decoded struct re-encodes
them. A compact null where Kafka's schema says non-nullable is refused (Kafka's flexible readers
refuse it; 0.8.2's leniency above predates them). Each type says which world it belongs to
(``flexible``: True, False, or None for the fixed-width ones both share), and a schema refuses a
field of the other world, so a flexible struct cannot silently hold an int16-length string.
Every length and count is checked against the bytes left before anything is allocated for it.
"""

from __future__ import annotations

import collections
import keyword
import struct
from typing import Any

from .errors import LocalProtocolError, RemoteProtocolError
from .varint import encode_unsigned_varint, read_unsigned_varint

__all__ = [
    "MAX_TAGGED_FIELDS",
    "Array",
    "Boolean",
    "Bytes",
    "CompactArray",
    "CompactBytes",
    "CompactNullableArray",
    "CompactNullableBytes",
    "CompactNullableString",
    "CompactRecords",
    "CompactString",
    "FlexibleSchema",
    "Float64",
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
    "TaggedField",
    "UInt16",
    "UInt32",
    "UnsignedVarint",
    "Uuid",
    "WireType",
    "skip_tagged_fields",
    "to_dict",
]

Buffer = bytes | bytearray | memoryview

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _truncated(what: str, offset: int) -> RemoteProtocolError:
    return RemoteProtocolError(f"{what}: truncated at offset {offset}")


class WireType:
    """A wire type: a pair of pure functions, ``decode`` and ``encode``.

    ``flexible`` says where the type may appear: True only in flexible versions (compact types, tagged
    structs), False only in the others (int16/int32-length types, plain structs), None in both.
    """

    __slots__ = ("name",)
    flexible: bool | None = None

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
UInt16 = _Fixed("UInt16", "H")
UInt32 = _Fixed("UInt32", "I")
Float64 = _Fixed("Float64", "d")
Boolean = _Boolean("Boolean")


class _Uuid(WireType):
    """16 raw bytes (Kafka's Uuid: topic ids, KIP-516); decodes to ``bytes``."""

    __slots__ = ()

    def decode(self, buf: Buffer, offset: int) -> tuple[bytes, int]:
        end = offset + 16
        if end > len(buf):
            raise _truncated(self.name, offset)
        return bytes(buf[offset:end]), end

    def encode(self, value: bytes) -> bytes:
        if not isinstance(value, (bytes, bytearray)) or len(value) != 16:
            raise LocalProtocolError(f"{self.name}: a Uuid is 16 bytes, not {value!r}")
        return bytes(value)


class _UnsignedVarint(WireType):
    """An unsigned varint of 1 to 5 bytes (the lengths, counts and tags of flexible versions)."""

    __slots__ = ()

    def decode(self, buf: Buffer, offset: int) -> tuple[int, int]:
        return read_unsigned_varint(buf, offset)

    def encode(self, value: int) -> bytes:
        try:
            return encode_unsigned_varint(value)
        except (OverflowError, TypeError) as exc:
            raise LocalProtocolError(f"{self.name}: {exc}") from None


Uuid = _Uuid("Uuid")
UnsignedVarint = _UnsignedVarint("UnsignedVarint")


class _String(WireType):
    """int16 length + UTF-8 bytes; -1 is null."""

    __slots__ = ("nullable",)
    flexible = False

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
    flexible = False

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


class _CompactString(_String):
    """Unsigned varint (length + 1) + UTF-8 bytes; 0 is null. Flexible versions only."""

    __slots__ = ()
    flexible = True

    def decode(self, buf: Buffer, offset: int) -> tuple[str | None, int]:
        n, start = read_unsigned_varint(buf, offset)
        if n == 0:
            if self.nullable:
                return None, start
            raise RemoteProtocolError(f"{self.name}: null where a string is required at offset {offset}")
        end = start + n - 1
        if end > len(buf):
            raise _truncated(self.name, offset)
        try:
            return str(buf[start:end], "utf-8"), end
        except UnicodeDecodeError:
            raise RemoteProtocolError(f"{self.name}: invalid UTF-8 at offset {offset}") from None

    def encode(self, value: str | None) -> bytes:
        if value is None:
            if self.nullable:
                return b"\x00"
            raise LocalProtocolError(f"{self.name}: None where a string is required")
        try:
            data = value.encode("utf-8")
        except AttributeError:
            raise LocalProtocolError(f"{self.name}: cannot encode {value!r}") from None
        if len(data) > 32767:  # Kafka's limit for every string, compact or not
            raise LocalProtocolError(f"{self.name}: {len(data)} bytes is longer than 32767")
        return encode_unsigned_varint(len(data) + 1) + data


class _CompactBytes(_Bytes):
    """Unsigned varint (length + 1) + raw bytes; 0 is null. ``CompactRecords`` decodes to a view."""

    __slots__ = ()
    flexible = True

    def decode(self, buf: Buffer, offset: int) -> tuple[Any, int]:
        n, start = read_unsigned_varint(buf, offset)
        if n == 0:
            if self.nullable:
                return None, start
            raise RemoteProtocolError(f"{self.name}: null where bytes are required at offset {offset}")
        end = start + n - 1
        if end > len(buf):
            raise _truncated(self.name, offset)
        data = buf[start:end]
        return (bytes(data) if self.copy else data), end

    def encode(self, value: Buffer | None) -> bytes:
        if value is None:
            if self.nullable:
                return b"\x00"
            raise LocalProtocolError(f"{self.name}: None where bytes are required")
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise LocalProtocolError(f"{self.name}: cannot encode {type(value).__name__}")
        return encode_unsigned_varint(memoryview(value).nbytes + 1) + value


CompactString = _CompactString("CompactString", nullable=False)
CompactNullableString = _CompactString("CompactNullableString", nullable=True)
CompactBytes = _CompactBytes("CompactBytes", nullable=False, copy=True)
CompactNullableBytes = _CompactBytes("CompactNullableBytes", nullable=True, copy=True)
#: The records of flexible Produce and Fetch versions, decoded as a view of the input buffer; 0 reads as None.
CompactRecords = _CompactBytes("CompactRecords", nullable=True, copy=False)


class Array(WireType):
    """int32 count + that many elements. ``Array(T)`` or ``Array(("f", T), ...)``."""

    __slots__ = ("_many", "element", "nullable")
    flexible = False

    def __init__(self, *element: WireType | tuple[str, WireType], nullable: bool = False) -> None:
        if len(element) == 1 and isinstance(element[0], WireType):
            item = element[0]
        else:
            item = self._struct(*element)  # type: ignore[arg-type]
        super().__init__(f"{'Nullable' if nullable else ''}{type(self).__name__}({item!r})")
        _check_world(self, "element", item)
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
        return self._elements(buf, offset, n)

    def _elements(self, buf: Buffer, offset: int, n: int) -> tuple[list, int]:
        """The n elements from offset (n already checked against the bytes left): both kinds of count share it."""
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

    #: The bytes of a null array, and of a count, on the wire (int32 here; CompactArray's unsigned varint + 1).
    _NULL = b"\xff\xff\xff\xff"

    @staticmethod
    def _count(n: int) -> bytes:
        return _INT32.pack(n)

    def encode(self, value: Any) -> bytes:
        if value is None:
            if self.nullable:
                return self._NULL
            raise LocalProtocolError(f"{self.name}: None where an array is required")
        try:
            items = list(value)
        except TypeError:
            raise LocalProtocolError(f"{self.name}: cannot encode {value!r}") from None
        count = self._count(len(items))
        if self._many is not None:
            try:
                return count + struct.pack(f">{len(items)}{self._many}", *items)
            except (struct.error, TypeError) as exc:
                raise LocalProtocolError(f"{self.name}: {exc}") from None
        encode = self.element.encode
        parts = [count]
        for i, item in enumerate(items):
            try:
                parts.append(encode(item))
            except LocalProtocolError as exc:
                raise LocalProtocolError(f"[{i}].{exc}") from None
        return b"".join(parts)


    @staticmethod
    def _struct(*fields: tuple[str, WireType]) -> Schema:
        return Schema(*fields)


def NullableArray(*element: WireType | tuple[str, WireType]) -> Array:
    """An ``Array`` whose count may be -1 (null)."""
    return Array(*element, nullable=True)


class CompactArray(Array):
    """Unsigned varint (count + 1) + that many elements; 0 is null. Flexible versions only:
    ``CompactArray(("f", T), ...)`` is shorthand for ``CompactArray(FlexibleSchema(...))``."""

    __slots__ = ()
    flexible = True

    @staticmethod
    def _struct(*fields: tuple[str, WireType]) -> Schema:
        return FlexibleSchema(*fields)

    def decode(self, buf: Buffer, offset: int) -> tuple[list | None, int]:
        n, start = read_unsigned_varint(buf, offset)
        if n == 0:
            if self.nullable:
                return None, start
            raise RemoteProtocolError(f"{self.name}: null where an array is required at offset {offset}")
        n -= 1
        if n > len(buf) - start:  # every element takes at least one byte
            raise _truncated(self.name, offset)
        return self._elements(buf, start, n)

    _NULL = b"\x00"

    @staticmethod
    def _count(n: int) -> bytes:
        return encode_unsigned_varint(n + 1)


def CompactNullableArray(*element: WireType | tuple[str, WireType]) -> CompactArray:
    """A ``CompactArray`` whose count may be null (0 on the wire)."""
    return CompactArray(*element, nullable=True)


def _check_world(container: WireType, what: str, member: WireType) -> None:
    """A flexible container holds no non-flexible member and the other way round (see ``flexible``)."""
    if member.flexible is not None and member.flexible != container.flexible:
        kind = "flexible" if container.flexible else "non-flexible"
        raise TypeError(f"{container.name}: {what} {member!r} does not belong in a {kind} version "
                        f"(flexible versions use the Compact types and FlexibleSchema, the others never do)")


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


def _check_names(name: str, names: list[str] | tuple[str, ...]) -> None:
    """What collections.namedtuple would refuse, checked when the schema is declared (its struct comes later)."""
    if not name.isidentifier() or keyword.iskeyword(name):
        raise TypeError(f"{name!r} cannot name a struct")
    for n in names:
        if not n.isidentifier() or keyword.iskeyword(n) or n.startswith("_"):
            raise TypeError(f"{name}: {n!r} cannot name a field")


class Schema(WireType):
    """An ordered list of named fields; decodes to a named tuple of class ``name``.

    Runs of fixed-width integer fields are read and written with a single ``struct`` call.
    """

    __slots__ = ("_build", "_names", "_steps", "_struct", "fields")
    flexible = False

    def __init__(self, *fields: tuple[str, WireType], name: str = "Struct") -> None:
        super().__init__(name)
        for field in fields:
            if not (
                isinstance(field, tuple) and len(field) == 2 and isinstance(field[1], WireType)
            ):
                raise TypeError(f"Schema fields are (name, WireType) pairs, not {field!r}")
            _check_world(self, f"field {field[0]!r}", field[1])
        self.fields = fields
        self._names = tuple(name for name, _ in fields)
        _check_names(name, self._names)
        # The struct class is made when first used: a named tuple costs an eval, and every process that imports
        # the codec (each broker, tool and client) would make one for every version of every API, most of which
        # it never sees.
        self._struct: type | None = None
        self._build = self._first_build  # what decode makes of the field values (FlexibleSchema: keeps the list)
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

    @property
    def struct(self) -> type:
        """The named tuple class a decoded value of this schema is."""
        if self._struct is None:
            self._struct = self._make_struct()
        return self._struct

    def _make_struct(self) -> type:
        base = collections.namedtuple(self.name, self._names)
        return type(self.name, (base,), {"__slots__": (), "to_dict": _struct_to_dict})

    def _first_build(self, values: list[Any]) -> tuple:
        self._build = self.struct._make
        return self._build(values)

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
        return self._build(values), offset

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


#: The most tagged fields one struct may carry. Kafka sets no number, but no message of Kafka's declares more
#: than a handful of tags; a frame that packs thousands is hostile and closes its connection (README, Hardening).
MAX_TAGGED_FIELDS = 256


class TaggedField(collections.namedtuple("TaggedField", "tag name type default")):
    """A field of a flexible struct sent in its tag buffer (KIP-482): written only when its value differs
    from ``default`` (compared as encoded bytes, as Kafka compares values), read as ``default`` when absent."""

    __slots__ = ()


def _read_tag_header(buf: Buffer, offset: int, previous: int, where: str) -> tuple[int, int, int]:
    """One tagged field's tag and size: returns (tag, start of its bytes, end of its bytes)."""
    tag, offset = read_unsigned_varint(buf, offset)
    if tag <= previous:
        # Kafka's TaggedFields reader refuses a repeated or out-of-order tag ("Invalid or out-of-order tag").
        raise RemoteProtocolError(f"{where}: tag {tag} after tag {previous} (repeated or out of order)")
    size, offset = read_unsigned_varint(buf, offset)
    end = offset + size
    if end > len(buf):
        raise RemoteProtocolError(f"{where}: tagged field {tag} of {size} bytes runs past the end of the frame")
    return tag, offset, end


def _read_tag_count(buf: Buffer, offset: int, where: str) -> tuple[int, int]:
    count, offset = read_unsigned_varint(buf, offset)
    if count > MAX_TAGGED_FIELDS:
        raise RemoteProtocolError(f"{where}: {count} tagged fields, more than {MAX_TAGGED_FIELDS}")
    if 2 * count > len(buf) - offset:  # a tag and a size take at least one byte each
        raise RemoteProtocolError(f"{where}: {count} tagged fields do not fit in the frame")
    return count, offset


def skip_tagged_fields(buf: Buffer, offset: int, where: str = "tagged fields") -> int:
    """Read past a tag buffer none of whose tags we know (request header v2); checks it as a struct's."""
    count, offset = _read_tag_count(buf, offset, where)
    previous = -1
    for _ in range(count):
        previous, _start, offset = _read_tag_header(buf, offset, previous, where)
    return offset


_UNKNOWN = "unknown_tagged_fields"


class FlexibleSchema(Schema):
    """A struct of a flexible version: its fields, then a tag buffer (KIP-482).

    ``tagged`` declares the known tags as ``TaggedField(tag, name, type, default)``; they decode to fields of
    the struct after the regular ones, and a last field, ``unknown_tagged_fields``, holds the tags this schema
    does not know as ``(tag, bytes)`` pairs, so a decoded struct re-encodes them (Kafka's generated code keeps
    them the same way). When encoding, a dict or object may leave out any tagged field (its default is used)
    and ``unknown_tagged_fields``.
    """

    __slots__ = ("_all_names", "_defaults", "_empty", "_make", "_regular", "_tags", "tagged")
    flexible = True

    def __init__(self, *fields: tuple[str, WireType], tagged: tuple[TaggedField, ...] = (),
                 name: str = "Struct") -> None:
        super().__init__(*fields, name=name)
        tagged = tuple(sorted((TaggedField(*t) for t in tagged), key=lambda t: t.tag))
        names = [n for n, _ in fields]
        for i, field in enumerate(tagged):
            if not isinstance(field.type, WireType) or field.tag < 0:
                raise TypeError(f"{name}: bad tagged field {field!r}")
            if i and tagged[i - 1].tag == field.tag:
                raise TypeError(f"{name}: tag {field.tag} declared twice")
            _check_world(self, f"tagged field {field.name!r}", field.type)
            names.append(field.name)
        names.append(_UNKNOWN)
        if len(set(names)) != len(names):
            raise TypeError(f"{name}: field names {names} repeat")
        self.tagged = tagged
        self._regular = len(fields)
        self._tags = {field.tag: (i, field) for i, field in enumerate(tagged)}
        # Each default's encoding: a value that encodes the same is not written.
        self._defaults = {field.tag: _encoded_default(field) for field in tagged}
        _check_names(name, names)
        self._all_names = tuple(names)
        self._empty = not tagged  # nothing to merge when writing: only unknown tags, if any
        self._build = _values  # Schema.decode reads the regular fields and hands their values back as a list
        self._make = self._first_make  # what decode makes of every field's value, regular, tagged and unknown

    def _first_make(self, values: list[Any]) -> tuple:
        self._make = self.struct._make
        return self._make(values)

    def _make_struct(self) -> type:
        defaults = [field.default for field in self.tagged] + [()]
        base = collections.namedtuple(self.name, self._all_names, defaults=defaults)
        return type(self.name, (base,), {"__slots__": (), "to_dict": _struct_to_dict})

    def decode(self, buf: Buffer, offset: int) -> tuple[tuple, int]:
        values, offset = Schema.decode(self, buf, offset)
        where = self.name
        count, offset = _read_tag_count(buf, offset, where)
        known = [_fresh(field.default) for field in self.tagged]
        unknown = []
        previous = -1
        for _ in range(count):
            tag, start, end = _read_tag_header(buf, offset, previous, where)
            previous = tag
            slot = self._tags.get(tag)
            if slot is None:
                unknown.append((tag, bytes(buf[start:end])))
            else:
                i, field = slot
                value, at = field.type.decode(memoryview(buf)[:end], start)
                if at != end:
                    raise RemoteProtocolError(
                        f"{where}: tagged field {field.name!r} declares {end - start} bytes and holds {at - start}")
                known[i] = value
            offset = end
        values.extend(known)
        values.append(unknown)
        return self._make(values), offset

    def values_of(self, value: Any) -> list[Any]:
        """Every field's value, regular, tagged and unknown, in struct order; tagged ones default."""
        tagged = self.tagged
        if isinstance(value, dict):
            values = Schema.values_of(self, value)  # the regular fields, each required
            values.extend(value.get(field.name, field.default) for field in tagged)
            values.append(value.get(_UNKNOWN, ()))
            return values
        if isinstance(value, (tuple, list)):
            if len(value) == len(self._names):
                return [*value, *(field.default for field in tagged), ()]
            if len(value) == len(self.struct._fields):
                return list(value)
            raise LocalProtocolError(f"{self.name}: {len(value)} values for the fields {self.struct._fields}")
        values = Schema.values_of(self, value)
        values.extend(getattr(value, field.name, field.default) for field in tagged)
        values.append(getattr(value, _UNKNOWN, ()))
        return values

    def encode(self, value: Any) -> bytes:
        values = self.values_of(value)
        body = Schema.encode(self, values)  # the regular fields (values_of passes a whole list through)
        unknown = values[-1]
        if self._empty and not unknown:
            return body + b"\x00"
        written: list[tuple[int, bytes]] = []
        for field, item in zip(self.tagged, values[self._regular : -1], strict=True):
            if item is field.default:
                continue
            try:
                data = field.type.encode(item)
            except LocalProtocolError as exc:
                raise LocalProtocolError(f"{field.name}: {exc}") from None
            if data != self._defaults[field.tag]:
                written.append((field.tag, data))
        for tag, data in unknown:
            if tag in self._tags:
                raise LocalProtocolError(f"{self.name}: tag {tag} is {self._tags[tag][1].name!r}, not an unknown tag")
            written.append((tag, bytes(data)))
        written.sort(key=lambda pair: pair[0])
        parts = [body, encode_unsigned_varint(len(written))]
        previous = -1
        for tag, data in written:
            if tag == previous:
                raise LocalProtocolError(f"{self.name}: tag {tag} written twice")
            previous = tag
            try:
                parts += (encode_unsigned_varint(tag), encode_unsigned_varint(len(data)), data)
            except (OverflowError, TypeError) as exc:
                raise LocalProtocolError(f"{self.name}: tag {tag!r}: {exc}") from None
        return b"".join(parts)


def _encoded_default(field: TaggedField) -> bytes | None:
    if field.default is None and not getattr(field.type, "nullable", False):
        return None  # no default on the wire: any value set is written
    try:
        return field.type.encode(field.default)
    except LocalProtocolError as exc:
        raise TypeError(f"tagged field {field.name!r}: default {field.default!r} cannot be encoded ({exc})") from None


def _values(values: list[Any]) -> list[Any]:
    return values


def _fresh(default: Any) -> Any:
    """A decoded struct's own copy of a mutable default."""
    return list(default) if isinstance(default, list) else default
