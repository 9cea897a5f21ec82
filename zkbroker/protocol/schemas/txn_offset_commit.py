"""TxnOffsetCommit (28, Kafka 0.11, KIP-98): a transactional producer commits a group's offsets inside its
transaction, sent to the group's coordinator; they stay pending until the transaction's marker.

v1 is the same as v0; v2 adds each partition's committed_leader_epoch; v3 (KIP-447, flexible) adds the
consumer's generation_id, member_id and group_instance_id so the group coordinator can fence a zombie consumer.
Schemas only: the broker does not serve it yet (issue 27).
"""

from ..types import (
    Array,
    CompactArray,
    CompactNullableString,
    CompactString,
    FlexibleSchema,
    Int16,
    Int32,
    Int64,
    NullableString,
    Schema,
    String,
)

API_KEY = 28


def _request(version: int) -> Schema:
    if version < 3:
        partition = [("partition_index", Int32), ("committed_offset", Int64)]
        if version >= 2:
            partition.append(("committed_leader_epoch", Int32))
        partition.append(("committed_metadata", NullableString))
        return Schema(("transactional_id", String), ("group_id", String), ("producer_id", Int64),
                      ("producer_epoch", Int16), ("topics", Array(("name", String), ("partitions", Array(*partition)))),
                      name=f"TxnOffsetCommitRequestV{version}")
    return FlexibleSchema(
        ("transactional_id", CompactString), ("group_id", CompactString), ("producer_id", Int64),
        ("producer_epoch", Int16), ("generation_id", Int32), ("member_id", CompactString),
        ("group_instance_id", CompactNullableString),
        ("topics", CompactArray(("name", CompactString), ("partitions", CompactArray(
            ("partition_index", Int32), ("committed_offset", Int64), ("committed_leader_epoch", Int32),
            ("committed_metadata", CompactNullableString))))),
        name=f"TxnOffsetCommitRequestV{version}")


def _response(version: int) -> Schema:
    if version < 3:
        return Schema(("throttle_time_ms", Int32),
                      ("topics", Array(("name", String),
                                       ("partitions", Array(("partition_index", Int32), ("error_code", Int16))))),
                      name=f"TxnOffsetCommitResponseV{version}")
    return FlexibleSchema(
        ("throttle_time_ms", Int32),
        ("topics", CompactArray(("name", CompactString),
                                ("partitions", CompactArray(("partition_index", Int32), ("error_code", Int16))))),
        name=f"TxnOffsetCommitResponseV{version}")


REQUEST = {version: _request(version) for version in range(4)}
RESPONSE = {version: _response(version) for version in range(4)}
