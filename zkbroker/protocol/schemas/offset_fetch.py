"""OffsetFetch (9): read a consumer group's committed offsets (-1 and "" when none).

v0 and v1 have the same layout; v0 reads ZooKeeper and v1+ `__consumer_offsets`, as in Kafka 0.8.2-2.x.
v2 (Kafka 0.10.2, KIP-88) lets topics be null -- every offset the group has -- and adds a top-level error_code
after the topics (a group-level error then comes there, with no partitions, instead of in every partition);
v3 puts throttle_time_ms first; v4 is v3; v5 (Kafka 2.1, KIP-320) adds each partition's committed_leader_epoch;
v6 is the first flexible version; v7 (Kafka 2.5, KIP-447) adds require_stable: a partition whose offset awaits
a transaction's marker answers UNSTABLE_OFFSET_COMMIT instead of the offset before it.
"""

from ..types import (
    Array,
    Boolean,
    CompactArray,
    CompactNullableArray,
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

API_KEY = 9


def _request(version: int) -> Schema:
    if version >= 6:
        fields = [("group_id", CompactString),
                  ("topics", CompactNullableArray(("topic", CompactString), ("partitions", CompactArray(Int32))))]
        if version >= 7:
            fields.append(("require_stable", Boolean))
        return FlexibleSchema(*fields, name=f"OffsetFetchRequestV{version}")
    topics = Array(("topic", String), ("partitions", Array(Int32)), nullable=version >= 2)
    return Schema(("group_id", String), ("topics", topics), name=f"OffsetFetchRequestV{version}")


def _response(version: int) -> Schema:
    if version >= 6:
        return FlexibleSchema(
            ("throttle_time_ms", Int32),
            ("topics", CompactArray(("topic", CompactString), ("partitions", CompactArray(
                ("partition", Int32), ("offset", Int64), ("committed_leader_epoch", Int32),
                ("metadata", CompactNullableString), ("error_code", Int16))))),
            ("error_code", Int16), name=f"OffsetFetchResponseV{version}")
    partition = [("partition", Int32), ("offset", Int64)]
    if version >= 5:
        partition.append(("committed_leader_epoch", Int32))
    partition += [("metadata", NullableString), ("error_code", Int16)]
    fields = [("throttle_time_ms", Int32)] if version >= 3 else []
    fields.append(("topics", Array(("topic", String), ("partitions", Array(*partition)))))
    if version >= 2:
        fields.append(("error_code", Int16))
    return Schema(*fields, name=f"OffsetFetchResponseV{version}")


REQUEST = {version: _request(version) for version in range(8)}
RESPONSE = {version: _response(version) for version in range(8)}
