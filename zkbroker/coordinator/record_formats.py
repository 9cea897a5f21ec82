"""The key and value formats of `__consumer_offsets` (Kafka's GroupMetadataManager schemas), as data.

Every key starts with an int16 version that says what the record is:
- versions 0 and 1: an offset commit, keyed by (group, topic, partition); 0.8.2 wrote version 0, 0.9+ write 1;
- version 2: a group's metadata, keyed by group.
A null value is a tombstone: the offset, or the group, is gone (the log cleaner then drops the key).

Values carry their own int16 version. Offset values: v1 (with an expire timestamp, Kafka 0.10.1's), or v3 (Kafka
2.1's, with the committed leader epoch of OffsetCommit v6 and no expire timestamp) for a commit that carries a leader
epoch and leaves retention to the broker -- as Kafka 2.1 writes v1 only for a commit naming its own retention time.
Group metadata: v1 (members with their rebalance timeout). Every version up to Kafka 2.x's is read (offset v2 drops
the expire timestamp; group v2 adds the state timestamp, v3 each member's group instance id).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from zkbroker.protocol.errors import RemoteProtocolError
from zkbroker.protocol.types import Array, Bytes, Int32, Int64, NullableString, Schema, String

_VERSION = struct.Struct(">h")

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 1
OFFSET_VALUE_VERSION_WITH_EPOCH = 3
GROUP_VALUE_VERSION = 1

_OFFSET_KEY = Schema(("group", String), ("topic", String), ("partition", Int32), name="OffsetCommitKey")
_GROUP_KEY = Schema(("group", String), name="GroupMetadataKey")

_OFFSET_VALUES = {
    0: Schema(("offset", Int64), ("metadata", String), ("commit_timestamp", Int64), name="OffsetCommitValueV0"),
    1: Schema(("offset", Int64), ("metadata", String), ("commit_timestamp", Int64), ("expire_timestamp", Int64),
              name="OffsetCommitValueV1"),
    2: Schema(("offset", Int64), ("metadata", String), ("commit_timestamp", Int64), name="OffsetCommitValueV2"),
    3: Schema(("offset", Int64), ("leader_epoch", Int32), ("metadata", String), ("commit_timestamp", Int64),
              name="OffsetCommitValueV3"),
}

_MEMBER_FIELDS = {
    0: (("member_id", String), ("client_id", String), ("client_host", String), ("session_timeout", Int32),
        ("subscription", Bytes), ("assignment", Bytes)),
    1: (("member_id", String), ("client_id", String), ("client_host", String), ("rebalance_timeout", Int32),
        ("session_timeout", Int32), ("subscription", Bytes), ("assignment", Bytes)),
    3: (("member_id", String), ("group_instance_id", NullableString), ("client_id", String),
        ("client_host", String), ("rebalance_timeout", Int32), ("session_timeout", Int32),
        ("subscription", Bytes), ("assignment", Bytes)),
}
_MEMBER_FIELDS[2] = _MEMBER_FIELDS[1]


def _group_value(version: int) -> Schema:
    head = [("protocol_type", String), ("generation", Int32), ("protocol", NullableString),
            ("leader", NullableString)]
    if version >= 2:
        head.append(("current_state_timestamp", Int64))
    return Schema(*head, ("members", Array(*_MEMBER_FIELDS[version])), name=f"GroupMetadataValueV{version}")


_GROUP_VALUES = {version: _group_value(version) for version in range(4)}


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # -1: none stored (v0, v2, v3); the broker's offsets.retention.minutes applies
    leader_epoch: int = -1  # v3 only; -1: none


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberRecord, ...]


# Offset commits are the hot path (one key and value per committed partition): packed with struct directly;
# tests/unit/coordinator/test_record_formats.py holds them to the schemas above.
_INT32 = struct.Struct(">i")
_OFFSET_VALUE_V1 = struct.Struct(">hq")
_TIMESTAMPS = struct.Struct(">qq")


def _string(text: str) -> bytes:
    data = text.encode()
    return _VERSION.pack(len(data)) + data


def encode_offset_key(key: OffsetKey) -> bytes:
    return b"".join((_VERSION.pack(OFFSET_KEY_VERSION), _string(key.group), _string(key.topic),
                     _INT32.pack(key.partition)))


def encode_group_key(key: GroupKey) -> bytes:
    return _VERSION.pack(GROUP_KEY_VERSION) + _GROUP_KEY.encode(key)


def encode_offset_value(value: OffsetValue) -> bytes:
    """v1 when the value has an expire timestamp, else v3 (with the leader epoch)."""
    if value.expire_timestamp < 0:
        return _VERSION.pack(OFFSET_VALUE_VERSION_WITH_EPOCH) + _OFFSET_VALUES[OFFSET_VALUE_VERSION_WITH_EPOCH].encode(
            value)
    return b"".join((_OFFSET_VALUE_V1.pack(OFFSET_VALUE_VERSION, value.offset), _string(value.metadata),
                     _TIMESTAMPS.pack(value.commit_timestamp, value.expire_timestamp)))


def encode_group_value(value: GroupValue) -> bytes:
    return _VERSION.pack(GROUP_VALUE_VERSION) + _GROUP_VALUES[GROUP_VALUE_VERSION].encode(
        {"protocol_type": value.protocol_type, "generation": value.generation, "protocol": value.protocol,
         "leader": value.leader, "members": value.members})


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise RemoteProtocolError(f"{what}: too short for a version")
    return _VERSION.unpack_from(data)[0]


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    """An offsets-topic key: an offset commit's (versions 0 and 1) or a group's (version 2)."""
    version = _version(data, "offsets topic key")
    if version in (0, 1):
        struct_, _ = _OFFSET_KEY.decode(data, 2)
        return OffsetKey(struct_.group, struct_.topic, struct_.partition)
    if version == 2:
        struct_, _ = _GROUP_KEY.decode(data, 2)
        return GroupKey(struct_.group)
    raise RemoteProtocolError(f"offsets topic key: unknown version {version}")


def decode_offset_value(data: bytes) -> OffsetValue:
    version = _version(data, "offset commit value")
    schema = _OFFSET_VALUES.get(version)
    if schema is None:
        raise RemoteProtocolError(f"offset commit value: unknown version {version}")
    v, _ = schema.decode(data, 2)
    expire = v.expire_timestamp if version == 1 else -1
    epoch = v.leader_epoch if version == 3 else -1
    return OffsetValue(v.offset, v.metadata, v.commit_timestamp, expire, epoch)


def decode_group_value(data: bytes) -> GroupValue:
    version = _version(data, "group metadata value")
    schema = _GROUP_VALUES.get(version)
    if schema is None:
        raise RemoteProtocolError(f"group metadata value: unknown version {version}")
    v, _ = schema.decode(data, 2)
    members = tuple(
        MemberRecord(m.member_id, m.client_id, m.client_host,
                     m.rebalance_timeout if version >= 1 else m.session_timeout, m.session_timeout,
                     bytes(m.subscription), bytes(m.assignment))
        for m in v.members)
    return GroupValue(v.protocol_type, v.generation, v.protocol, v.leader, members)
