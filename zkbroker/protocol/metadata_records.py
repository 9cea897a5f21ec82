"""The metadata log's formats (KIP-500, KIP-595, KIP-630; DESIGN §17), as Kafka 3.7 writes them.

* **Metadata records.** Each record value of ``__cluster_metadata-0`` is an ApiMessageAndVersion frame:
  unsigned varint frame version (1), unsigned varint api key, unsigned varint record version, then the record
  in its flexible encoding (every metadata record schema is flexible from version 0). ``RECORD_SCHEMAS`` holds
  the records part 2 of issue 24 uses, by api key and version, from Kafka's metadata/*.json.
* **Control records** of the quorum itself, in control batches (attribute bit 5): the record key is
  ``version int16 (0) | type int16`` and the value the record at version 0 with no frame: LeaderChange (2),
  a new leader's first entry; SnapshotHeader (3) and SnapshotFooter (4), the first and last batch of a
  snapshot.
* **Snapshots**: ``%020d-%010d.checkpoint`` (end offset, epoch) holding a SnapshotHeader control batch at
  offset 0, the records' batches, then a SnapshotFooter control batch, all in the snapshot's epoch.

Batches are built and read by :mod:`record_batch`, the one home of magic 2; this module only says what goes
in them. Pure: bytes in, bytes out.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from .compression import CODEC_NONE, decompress
from .errors import LocalProtocolError, RemoteProtocolError
from .record_batch import build_record_batch, iter_records, read_header, records_start
from .types import (
    Array,
    Boolean,
    CompactArray,
    CompactBytes,
    CompactNullableArray,
    CompactNullableString,
    CompactString,
    FlexibleSchema,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedField,
    UInt16,
    Uuid,
    WireType,
)
from .varint import encode_unsigned_varint, read_unsigned_varint

__all__ = [
    "CONTROL_NAMES",
    "CONTROL_SCHEMAS",
    "FRAME_VERSION",
    "LEADER_CHANGE",
    "METADATA_TOPIC",
    "METADATA_TOPIC_ID",
    "RECORD_NAMES",
    "RECORD_SCHEMAS",
    "SNAPSHOT_FOOTER",
    "SNAPSHOT_HEADER",
    "ControlRecord",
    "build_control_batch",
    "build_metadata_batch",
    "build_snapshot",
    "control_record_json",
    "decode_control_key",
    "decode_frame",
    "encode_control_key",
    "encode_frame",
    "iter_metadata_log",
    "metadata_record_json",
    "parse_snapshot_file_name",
    "read_snapshot",
    "record_type_name",
    "snapshot_file_name",
]

METADATA_TOPIC = "__cluster_metadata"
#: Kafka's fixed id of the metadata topic (Uuid.METADATA_TOPIC_ID, 0...01): Fetch v13+ names it by id.
METADATA_TOPIC_ID = bytes(15) + b"\x01"
#: The ApiMessageAndVersion frame's own version (AbstractApiMessageSerde's DEFAULT_FRAME_VERSION).
FRAME_VERSION = 1

_ENDPOINTS = CompactArray(("name", CompactString), ("host", CompactString), ("port", UInt16),
                          ("security_protocol", Int16))
_FEATURES = CompactArray(("name", CompactString), ("min_supported_version", Int16),
                         ("max_supported_version", Int16))


def _register_broker(version: int) -> FlexibleSchema:
    fields = [("broker_id", Int32)]
    if version >= 2:
        fields.append(("is_migrating_zk_broker", Boolean))
    fields += [("incarnation_id", Uuid), ("broker_epoch", Int64), ("end_points", _ENDPOINTS),
               ("features", _FEATURES), ("rack", CompactNullableString), ("fenced", Boolean)]
    if version >= 1:
        fields.append(("in_controlled_shutdown", Boolean))
    tagged = (TaggedField(0, "log_dirs", CompactArray(Uuid), []),) if version >= 3 else ()
    return FlexibleSchema(*fields, tagged=tagged, name=f"RegisterBrokerRecordV{version}")


def _partition(version: int) -> FlexibleSchema:
    fields = [("partition_id", Int32), ("topic_id", Uuid), ("replicas", CompactArray(Int32)),
              ("isr", CompactArray(Int32)), ("removing_replicas", CompactArray(Int32)),
              ("adding_replicas", CompactArray(Int32)), ("leader", Int32), ("leader_epoch", Int32),
              ("partition_epoch", Int32)]
    if version >= 1:
        fields.append(("directories", CompactArray(Uuid)))
    tagged = [TaggedField(0, "leader_recovery_state", Int8, 0)]
    if version >= 2:
        tagged += [TaggedField(1, "eligible_leader_replicas", CompactNullableArray(Int32), None),
                   TaggedField(2, "last_known_elr", CompactNullableArray(Int32), None)]
    return FlexibleSchema(*fields, tagged=tuple(tagged), name=f"PartitionRecordV{version}")


def _partition_change(version: int) -> FlexibleSchema:
    ints = CompactNullableArray(Int32)
    tagged = [TaggedField(0, "isr", ints, None), TaggedField(1, "leader", Int32, -2),
              TaggedField(2, "replicas", ints, None), TaggedField(3, "removing_replicas", ints, None),
              TaggedField(4, "adding_replicas", ints, None), TaggedField(5, "leader_recovery_state", Int8, -1)]
    if version >= 2:
        tagged += [TaggedField(6, "eligible_leader_replicas", ints, None), TaggedField(7, "last_known_elr", ints, None)]
    if version >= 1:
        tagged.append(TaggedField(8, "directories", CompactNullableArray(Uuid), None))
    return FlexibleSchema(("partition_id", Int32), ("topic_id", Uuid), tagged=tuple(tagged),
                          name=f"PartitionChangeRecordV{version}")


def _broker_registration_change(version: int) -> FlexibleSchema:
    tagged = [TaggedField(0, "fenced", Int8, 0)]
    if version >= 1:
        tagged.append(TaggedField(1, "in_controlled_shutdown", Int8, 0))
    if version >= 2:
        tagged.append(TaggedField(2, "log_dirs", CompactArray(Uuid), []))
    return FlexibleSchema(("broker_id", Int32), ("broker_epoch", Int64), tagged=tuple(tagged),
                          name=f"BrokerRegistrationChangeRecordV{version}")


def _one(name: str, *fields: tuple[str, Any]) -> dict[int, FlexibleSchema]:
    return {0: FlexibleSchema(*fields, name=f"{name}V0")}


#: Kafka 3.7's metadata record types, every one of metadata/src/main/resources/common/metadata/: api key ->
#: (name, {version: schema}).
_RECORDS: dict[int, tuple[str, dict[int, FlexibleSchema]]] = {
    0: ("RegisterBrokerRecord", {v: _register_broker(v) for v in range(4)}),
    1: ("UnregisterBrokerRecord", _one("UnregisterBrokerRecord", ("broker_id", Int32), ("broker_epoch", Int64))),
    2: ("TopicRecord", _one("TopicRecord", ("name", CompactString), ("topic_id", Uuid))),
    3: ("PartitionRecord", {v: _partition(v) for v in range(3)}),
    4: ("ConfigRecord", _one("ConfigRecord", ("resource_type", Int8), ("resource_name", CompactString),
                             ("name", CompactString), ("value", CompactNullableString))),
    5: ("PartitionChangeRecord", {v: _partition_change(v) for v in range(3)}),
    7: ("FenceBrokerRecord", _one("FenceBrokerRecord", ("id", Int32), ("epoch", Int64))),
    8: ("UnfenceBrokerRecord", _one("UnfenceBrokerRecord", ("id", Int32), ("epoch", Int64))),
    9: ("RemoveTopicRecord", _one("RemoveTopicRecord", ("topic_id", Uuid))),
    12: ("FeatureLevelRecord", _one("FeatureLevelRecord", ("name", CompactString), ("feature_level", Int16))),
    15: ("ProducerIdsRecord", _one("ProducerIdsRecord", ("broker_id", Int32), ("broker_epoch", Int64),
                                   ("next_producer_id", Int64))),
    17: ("BrokerRegistrationChangeRecord", {v: _broker_registration_change(v) for v in range(3)}),
    20: ("NoOpRecord", _one("NoOpRecord")),
    10: ("DelegationTokenRecord", _one(
        "DelegationTokenRecord", ("owner", CompactString), ("requester", CompactString),
        ("renewers", CompactArray(CompactString)), ("issue_timestamp", Int64), ("max_timestamp", Int64),
        ("expiration_timestamp", Int64), ("token_id", CompactString))),
    11: ("UserScramCredentialRecord", _one(
        "UserScramCredentialRecord", ("name", CompactString), ("mechanism", Int8), ("salt", CompactBytes),
        ("stored_key", CompactBytes), ("server_key", CompactBytes), ("iterations", Int32))),
    14: ("ClientQuotaRecord", _one(
        "ClientQuotaRecord", ("entity", CompactArray(("entity_type", CompactString),
                                                    ("entity_name", CompactNullableString))),
        ("key", CompactString), ("value", Float64), ("remove", Boolean))),
    18: ("AccessControlEntryRecord", _one(
        "AccessControlEntryRecord", ("id", Uuid), ("resource_type", Int8), ("resource_name", CompactString),
        ("pattern_type", Int8), ("principal", CompactString), ("host", CompactString), ("operation", Int8),
        ("permission_type", Int8))),
    19: ("RemoveAccessControlEntryRecord", _one("RemoveAccessControlEntryRecord", ("id", Uuid))),
    21: ("ZkMigrationStateRecord", _one("ZkMigrationStateRecord", ("zk_migration_state", Int8))),
    22: ("RemoveUserScramCredentialRecord", _one(
        "RemoveUserScramCredentialRecord", ("name", CompactString), ("mechanism", Int8))),
    23: ("BeginTransactionRecord", {0: FlexibleSchema(
        tagged=(TaggedField(0, "name", CompactNullableString, None),), name="BeginTransactionRecordV0")}),
    24: ("EndTransactionRecord", _one("EndTransactionRecord")),
    25: ("AbortTransactionRecord", {0: FlexibleSchema(
        tagged=(TaggedField(0, "reason", CompactNullableString, None),), name="AbortTransactionRecordV0")}),
    26: ("RemoveDelegationTokenRecord", _one("RemoveDelegationTokenRecord", ("token_id", CompactString))),
    27: ("RegisterControllerRecord", _one(
        "RegisterControllerRecord", ("controller_id", Int32), ("incarnation_id", Uuid), ("zk_migration_ready", Boolean),
        ("end_points", _ENDPOINTS), ("features", _FEATURES))),
}
RECORD_NAMES: dict[int, str] = {key: name for key, (name, _) in _RECORDS.items()}
RECORD_SCHEMAS: dict[tuple[int, int], FlexibleSchema] = {
    (key, version): schema for key, (_, versions) in _RECORDS.items() for version, schema in versions.items()
}


#: Where a schema declares a tagged field among its regular ones (Kafka's JSON converters write the fields in
#: their declared order; the wire puts every tagged field at the end): (api key, version) -> field order.
_DECLARED_ORDER: dict[tuple[int, int], tuple[str, ...]] = {}
for _v in range(3):
    _DECLARED_ORDER[(3, _v)] = ("partition_id", "topic_id", "replicas", "isr", "removing_replicas",
                                "adding_replicas", "leader", "leader_recovery_state", "leader_epoch",
                                "partition_epoch", *(("directories",) if _v >= 1 else ()),
                                *(("eligible_leader_replicas", "last_known_elr") if _v >= 2 else ()))
    _DECLARED_ORDER[(5, _v)] = ("partition_id", "topic_id", "isr", "leader", "replicas", "removing_replicas",
                                "adding_replicas", "leader_recovery_state", *(("directories",) if _v >= 1 else ()),
                                *(("eligible_leader_replicas", "last_known_elr") if _v >= 2 else ()))


def record_type_name(api_key: int) -> str:
    """MetadataRecordType's constant: TopicRecord -> TOPIC_RECORD (as DumpLogSegments prints ``type``)."""
    name = RECORD_NAMES.get(api_key)
    if name is None:
        return f"UNKNOWN({api_key})"
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


#: Kafka names whose lower-camel form is not the plain conversion of our snake_case name.
_JSON_NAMES = {"last_known_elr": "lastKnownELR"}


def _json_name(field: str) -> str:
    if field in _JSON_NAMES:
        return _JSON_NAMES[field]
    head, *rest = field.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _json_value(wire_type: WireType, value: Any) -> Any:
    if value is None:
        return None
    if wire_type is Uuid:
        return base64.urlsafe_b64encode(bytes(value)).decode("ascii").rstrip("=")  # Kafka's Uuid.toString
    if isinstance(wire_type, Schema):
        return _json_struct(wire_type, value)
    if isinstance(wire_type, (Array, CompactArray)):
        return [_json_value(wire_type.element, item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def _json_struct(schema: Schema, value: Any, order: tuple[str, ...] | None = None) -> dict[str, Any]:
    """A decoded struct as Kafka's generated JsonConverter writes it: fields in declared order, camelCase,
    a tagged field only when it differs from its default (compared as encoded bytes, as on the wire)."""
    types = dict(schema.fields)
    tagged = {field.name: field for field in getattr(schema, "tagged", ())}
    names = order or (*types, *tagged)
    out: dict[str, Any] = {}
    for name in names:
        item = getattr(value, name)
        if name in tagged:
            field = tagged[name]
            if item is None and field.default is None:
                continue
            if field.default is not None and field.type.encode(item) == field.type.encode(field.default):
                continue
            out[_json_name(name)] = _json_value(field.type, item)
        else:
            out[_json_name(name)] = _json_value(types[name], item)
    return out


def _json_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def metadata_record_json(api_key: int, version: int, record: Any) -> str:
    """What DumpLogSegments --cluster-metadata-decoder prints as a record's payload:
    ``{"type":"TOPIC_RECORD","version":0,"data":{"name":"t","topicId":"..."}}``."""
    schema = RECORD_SCHEMAS[(api_key, version)]
    data = _json_struct(schema, record, _DECLARED_ORDER.get((api_key, version)))
    return _json_text({"type": record_type_name(api_key), "version": version, "data": data})


def control_record_json(control_type: int, value: Any) -> str:
    """A quorum control record as Kafka's JsonConverter writes it (the SnapshotHeader/Footer lines)."""
    return _json_text(_json_struct(CONTROL_SCHEMAS[control_type], value))


def encode_frame(api_key: int, version: int, record: Any) -> bytes:
    """One metadata record as an ApiMessageAndVersion frame (a record value of the metadata log)."""
    fast = _FAST_ENCODERS.get((api_key, version))
    if fast is not None:
        frame = fast(record)
        if frame is not None:
            return frame
    try:
        schema = RECORD_SCHEMAS[(api_key, version)]
    except KeyError:
        raise LocalProtocolError(f"no metadata record schema for api key {api_key} version {version}") from None
    return (encode_unsigned_varint(FRAME_VERSION) + encode_unsigned_varint(api_key)
            + encode_unsigned_varint(version) + schema.encode(record))


def decode_frame(buf: bytes | bytearray | memoryview) -> tuple[int, int, Any]:
    """An ApiMessageAndVersion frame: (api key, version, record struct). The record must fill the frame."""
    frame_version, offset = read_unsigned_varint(buf, 0)
    if frame_version != FRAME_VERSION:
        raise RemoteProtocolError(f"metadata record frame version {frame_version}, expected {FRAME_VERSION}")
    api_key, offset = read_unsigned_varint(buf, offset)
    version, offset = read_unsigned_varint(buf, offset)
    fast = _FAST_DECODERS.get((api_key, version))
    if fast is not None:
        record = fast(buf, offset, len(buf))
        if record is not None:
            return api_key, version, record
    schema = RECORD_SCHEMAS.get((api_key, version))
    if schema is None:
        raise RemoteProtocolError(f"unknown metadata record: api key {api_key} version {version}")
    record, end = schema.decode(memoryview(buf), offset)
    if end != len(buf):
        raise RemoteProtocolError(f"{schema.name}: {len(buf) - end} bytes after the record")
    return api_key, version, record


# --- the hot records, by hand ---------------------------------------------------------------------------------
# A broker's step at a million partitions writes PartitionChangeRecords by the thousand, and a topic's creation and
# every snapshot PartitionRecords: their frames are built and read here with struct formats compiled once, byte for
# byte what their schemas write and read (tests/unit/protocol/test_metadata_records.py compares the two on random
# records). Anything out of the ordinary (a dict or another type for the record, an unknown tagged field, a value
# out of range, an array of 31 or more replicas, a varint of more than one byte, a tag out of order, bytes left
# over) returns None and takes the schema's path, which also gives its errors.

_PARTITION_CHANGE_V0 = RECORD_SCHEMAS[(5, 0)].struct
_PARTITION_V0 = RECORD_SCHEMAS[(3, 0)].struct
_CHANGE_HEAD = struct.Struct(">BBBi16s")  # frame version, api key, version (one varint byte each), the two ids
_PARTITION_HEAD = _CHANGE_HEAD  # the same five: PartitionRecord's ids come first too
_IDS = struct.Struct(">i16s")
_INT32 = struct.Struct(">i")
_INT8 = struct.Struct(">b")
_EPOCHS = struct.Struct(">iii")  # PartitionRecord's leader, leader_epoch, partition_epoch
#: A list of n int32s, n below 31: its compact count (n + 1) and the ints fit a one-byte tagged-field size.
_MAX_INTS = 31
_INTS = [struct.Struct(f">B{n}i") for n in range(_MAX_INTS)]
_INTS_BODY = [struct.Struct(f">{n}i") for n in range(_MAX_INTS)]


def _compact_ints(ints: Any) -> bytes | None:
    n = len(ints)
    return _INTS[n].pack(n + 1, *ints) if n < _MAX_INTS else None


def _tagged_ints(tag: int, ints: Any) -> bytes | None:
    data = _compact_ints(ints)
    return None if data is None else bytes((tag, len(data))) + data


def _encode_partition_change_v0(rec: Any) -> bytes | None:
    if type(rec) is not _PARTITION_CHANGE_V0 or rec.unknown_tagged_fields:
        return None
    partition_id, topic_id, isr, leader, replicas, removing, adding, recovery, _ = rec
    if type(topic_id) is not bytes or len(topic_id) != 16:
        return None
    try:
        tags = []
        if isr is not None:
            tags.append(_tagged_ints(0, isr))
        if leader != -2:
            tags.append(b"\x01\x04" + _INT32.pack(leader))
        if replicas is not None:
            tags.append(_tagged_ints(2, replicas))
        if removing is not None:
            tags.append(_tagged_ints(3, removing))
        if adding is not None:
            tags.append(_tagged_ints(4, adding))
        if recovery != -1:
            tags.append(b"\x05\x01" + _INT8.pack(recovery))
        if None in tags:
            return None
        return _CHANGE_HEAD.pack(FRAME_VERSION, 5, 0, partition_id, topic_id) + bytes((len(tags),)) + b"".join(tags)
    except (struct.error, TypeError):
        return None


def _decode_partition_change_v0(buf: Any, offset: int, end: int) -> Any:
    try:
        partition_id, topic_id = _IDS.unpack_from(buf, offset)
        pos = offset + 20
        count = buf[pos]
        if count >= 0x80:
            return None
        pos += 1
        values: list[Any] = [None, -2, None, None, None, -1]
        previous = -1
        for _ in range(count):
            tag, size = buf[pos], buf[pos + 1]
            pos += 2
            if tag <= previous or tag > 5 or size >= 0x80 or pos + size > end:
                return None
            previous = tag
            if tag == 1:
                if size != 4:
                    return None
                values[1] = _INT32.unpack_from(buf, pos)[0]
            elif tag == 5:
                if size != 1:
                    return None
                values[5] = _INT8.unpack_from(buf, pos)[0]
            else:
                n = buf[pos] - 1
                if n < 0:
                    if size != 1:
                        return None
                    values[tag] = None
                elif n >= _MAX_INTS or size != 1 + 4 * n:
                    return None
                else:
                    values[tag] = list(_INTS_BODY[n].unpack_from(buf, pos + 1))
            pos += size
    except (IndexError, struct.error):
        return None
    if pos != end:
        return None
    return _PARTITION_CHANGE_V0(partition_id, topic_id, *values, [])


def _encode_partition_v0(rec: Any) -> bytes | None:
    if type(rec) is not _PARTITION_V0 or rec.unknown_tagged_fields:
        return None
    (partition_id, topic_id, replicas, isr, removing, adding, leader, leader_epoch, partition_epoch, recovery,
     _) = rec
    if type(topic_id) is not bytes or len(topic_id) != 16 or None in (replicas, isr, removing, adding):
        return None
    try:
        arrays = [_compact_ints(replicas), _compact_ints(isr), _compact_ints(removing), _compact_ints(adding)]
        if None in arrays:
            return None
        tags = b"\x00" if recovery == 0 else b"\x01\x00\x01" + _INT8.pack(recovery)
        return (_PARTITION_HEAD.pack(FRAME_VERSION, 3, 0, partition_id, topic_id) + b"".join(arrays)
                + _EPOCHS.pack(leader, leader_epoch, partition_epoch) + tags)
    except (struct.error, TypeError):
        return None


def _decode_partition_v0(buf: Any, offset: int, end: int) -> Any:
    try:
        partition_id, topic_id = _IDS.unpack_from(buf, offset)
        pos = offset + 20
        arrays = []
        for _ in range(4):
            n = buf[pos] - 1
            if n < 0 or n >= _MAX_INTS:
                return None
            arrays.append(list(_INTS_BODY[n].unpack_from(buf, pos + 1)))
            pos += 1 + 4 * n
        leader, leader_epoch, partition_epoch = _EPOCHS.unpack_from(buf, pos)
        pos += 12
        count = buf[pos]
        recovery = 0
        if count == 1:
            if buf[pos + 1] != 0 or buf[pos + 2] != 1:
                return None
            recovery = _INT8.unpack_from(buf, pos + 3)[0]
            pos += 4
        elif count == 0:
            pos += 1
        else:
            return None
    except (IndexError, struct.error):
        return None
    if pos != end:
        return None
    return _PARTITION_V0(partition_id, topic_id, *arrays, leader, leader_epoch, partition_epoch, recovery, [])


_FAST_ENCODERS = {(5, 0): _encode_partition_change_v0, (3, 0): _encode_partition_v0}
_FAST_DECODERS = {(5, 0): _decode_partition_change_v0, (3, 0): _decode_partition_v0}


# --- control records ------------------------------------------------------------------------------------------

LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4

_VOTERS = CompactArray(("voter_id", Int32))
#: The quorum's control records (ControlRecordType), each at version 0, by type.
CONTROL_SCHEMAS: dict[int, FlexibleSchema] = {
    LEADER_CHANGE: FlexibleSchema(("version", Int16), ("leader_id", Int32), ("voters", _VOTERS),
                                  ("granting_voters", _VOTERS), name="LeaderChangeMessage"),
    SNAPSHOT_HEADER: FlexibleSchema(("version", Int16), ("last_contained_log_timestamp", Int64),
                                    name="SnapshotHeaderRecord"),
    SNAPSHOT_FOOTER: FlexibleSchema(("version", Int16), name="SnapshotFooterRecord"),
}
CONTROL_NAMES = {LEADER_CHANGE: "LeaderChange", SNAPSHOT_HEADER: "SnapshotHeader", SNAPSHOT_FOOTER: "SnapshotFooter"}

_CONTROL_KEY = struct.Struct(">hh")


def encode_control_key(control_type: int) -> bytes:
    return _CONTROL_KEY.pack(0, control_type)


def decode_control_key(key: bytes | bytearray | memoryview | None) -> int:
    """The control record type of a control record's key (version 0; Kafka refuses other versions)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise RemoteProtocolError(f"a control record key is 4 bytes, not {None if key is None else len(key)}")
    version, control_type = _CONTROL_KEY.unpack_from(key, 0)
    if version != 0:
        raise RemoteProtocolError(f"control record key version {version}, expected 0")
    return control_type


class ControlRecord(NamedTuple):
    """A control record of the metadata log: its type (2, 3 or 4) and its decoded value."""

    type: int
    value: Any


def build_control_batch(control_type: int, value: Any, *, base_offset: int, epoch: int, timestamp: int) -> bytes:
    """A control batch of one record (Kafka writes each quorum control record in a batch of its own)."""
    schema = CONTROL_SCHEMAS[control_type]
    return build_record_batch([(encode_control_key(control_type), schema.encode(value))], base_offset=base_offset,
                              timestamp=timestamp, partition_leader_epoch=epoch, control=True)


def build_metadata_batch(records: Iterable[tuple[int, int, Any]], *, base_offset: int, epoch: int,
                         timestamp: int) -> bytes:
    """A data batch of metadata records, each ``(api_key, version, record)``, as frames with null keys."""
    return build_record_batch([(None, encode_frame(*item)) for item in records], base_offset=base_offset,
                              timestamp=timestamp, partition_leader_epoch=epoch)


def iter_metadata_log(data: bytes | bytearray | memoryview) -> Iterator[tuple[int, int, ControlRecord | tuple]]:
    """Every record of a run of batches (a segment's or a snapshot's bytes): ``(offset, batch epoch, record)``,
    the record a :class:`ControlRecord` or a decoded frame ``(api_key, version, struct)``."""
    pos = 0
    view = memoryview(data)
    while pos < len(view):
        header = read_header(view, pos)
        end = pos + header.size
        if end > len(view):
            raise RemoteProtocolError(f"batch at position {pos} runs past the end ({end} > {len(view)})")
        body: Any = view[records_start(pos):end]
        if header.codec != CODEC_NONE:
            body = decompress(header.codec, body)
        for record in iter_records(header, body):
            value = bytes(record.value or b"")
            if header.is_control:
                control_type = decode_control_key(record.key)
                schema = CONTROL_SCHEMAS.get(control_type)
                if schema is None:
                    yield record.offset, header.partition_leader_epoch, ControlRecord(control_type, value)
                    continue
                decoded, _ = schema.decode(memoryview(value), 0)
                yield record.offset, header.partition_leader_epoch, ControlRecord(control_type, decoded)
            else:
                yield record.offset, header.partition_leader_epoch, decode_frame(value)
        pos = end


# --- snapshots ------------------------------------------------------------------------------------------------

_SNAPSHOT_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    """Kafka's name of a snapshot: its end offset (the next offset after it) and the epoch of that offset."""
    return f"{end_offset:020d}-{epoch:010d}.checkpoint"


def parse_snapshot_file_name(name: str) -> tuple[int, int] | None:
    """(end offset, epoch) of a snapshot file name, or None for any other file."""
    match = _SNAPSHOT_NAME.fullmatch(name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def build_snapshot(batches: Iterable[Iterable[tuple[int, int, Any]]], *, epoch: int, timestamp: int,
                   last_contained_log_timestamp: int) -> bytes:
    """A .checkpoint file's bytes: a SnapshotHeader control batch at offset 0, then one data batch per item of
    ``batches`` (each an iterable of ``(api_key, version, record)``), then a SnapshotFooter control batch; the
    offsets count on from 0, as Kafka's snapshot writer counts them, every batch in the snapshot's epoch."""
    parts = [build_control_batch(SNAPSHOT_HEADER, {"version": 0, "last_contained_log_timestamp":
                                                   last_contained_log_timestamp},
                                 base_offset=0, epoch=epoch, timestamp=timestamp)]
    offset = 1
    for batch in batches:
        items = list(batch)
        if items:
            parts.append(build_metadata_batch(items, base_offset=offset, epoch=epoch, timestamp=timestamp))
            offset += len(items)
    parts.append(build_control_batch(SNAPSHOT_FOOTER, {"version": 0}, base_offset=offset, epoch=epoch,
                                     timestamp=timestamp))
    return b"".join(parts)


def read_snapshot(data: bytes | bytearray | memoryview) -> tuple[Any, list[tuple[int, int, Any]]]:
    """A snapshot's header record and its metadata records ``(api_key, version, record)``; a snapshot that does
    not start with a SnapshotHeader or end with a SnapshotFooter is refused (Kafka's reader refuses it too)."""
    entries = [record for _, _, record in iter_metadata_log(data)]
    if not entries or not isinstance(entries[0], ControlRecord) or entries[0].type != SNAPSHOT_HEADER:
        raise RemoteProtocolError("a snapshot starts with a SnapshotHeader control record")
    if len(entries) < 2 or not isinstance(entries[-1], ControlRecord) or entries[-1].type != SNAPSHOT_FOOTER:
        raise RemoteProtocolError("a snapshot ends with a SnapshotFooter control record")
    records = []
    for entry in entries[1:-1]:
        if isinstance(entry, ControlRecord):
            raise RemoteProtocolError(f"control record {entry.type} inside a snapshot")
        records.append(entry)
    return entries[0].value, records
