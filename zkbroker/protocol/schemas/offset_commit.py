"""OffsetCommit (8): a consumer group's committed offsets: v0 in ZooKeeper, v1 and later in `__consumer_offsets`.

v0: group_id and per partition (offset, metadata). v1 adds generation_id and member_id, and a
per-partition commit timestamp. v2 replaces the timestamp with a request-wide retention_time_ms.
Responses v0-v2 are identical: an error code per partition.
"""

from ..types import Array, Int16, Int32, Int64, NullableString, Schema, String

API_KEY = 8


def _topics(*partition_fields):
    return Array(("topic", String), ("partitions", Array(*partition_fields)))


REQUEST = {
    0: Schema(
        ("group_id", String),
        ("topics", _topics(("partition", Int32), ("offset", Int64), ("metadata", NullableString))),
        name="OffsetCommitRequestV0",
    ),
    1: Schema(
        ("group_id", String),
        ("generation_id", Int32),
        ("member_id", String),
        (
            "topics",
            _topics(
                ("partition", Int32),
                ("offset", Int64),
                ("timestamp", Int64),
                ("metadata", NullableString),
            ),
        ),
        name="OffsetCommitRequestV1",
    ),
    2: Schema(
        ("group_id", String),
        ("generation_id", Int32),
        ("member_id", String),
        ("retention_time_ms", Int64),
        ("topics", _topics(("partition", Int32), ("offset", Int64), ("metadata", NullableString))),
        name="OffsetCommitRequestV2",
    ),
}

RESPONSE = {
    version: Schema(
        ("topics", _topics(("partition", Int32), ("error_code", Int16))),
        name=f"OffsetCommitResponseV{version}",
    )
    for version in (0, 1, 2)
}
