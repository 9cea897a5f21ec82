"""Produce (0): append message sets to partition leaders.

Request v0-v2 are identical: acks (0 = no response at all, 1 = leader, -1 = ISR), timeout_ms,
and per partition a message set (magic 0, 1 or 2, stored as received). v3 (Kafka 0.11) puts a
transactional_id first and must carry exactly one record batch (magic 2) per partition; v4-v6 are
the same; v7 (Kafka 2.1) may carry zstd. Responses: v1 adds throttle_time_ms *last*; v2 adds
log_append_time per partition (-1 unless the topic uses LogAppendTime); v5 adds log_start_offset.
``records`` decodes to a zero-copy view of the frame (writable when the frame is a bytearray, for
``message_set.assign_offsets``); a null set is None.
"""

from ..types import Array, Int16, Int32, Int64, NullableString, Records, Schema, String

API_KEY = 0

_REQUEST_TOPICS = Array(
    ("topic", String),
    ("partitions", Array(("partition", Int32), ("records", Records))),
)

REQUEST = {
    version: Schema(
        ("acks", Int16),
        ("timeout_ms", Int32),
        ("topics", _REQUEST_TOPICS),
        name=f"ProduceRequestV{version}",
    )
    for version in (0, 1, 2)
}
REQUEST.update({
    version: Schema(
        ("transactional_id", NullableString),
        ("acks", Int16),
        ("timeout_ms", Int32),
        ("topics", _REQUEST_TOPICS),
        name=f"ProduceRequestV{version}",
    )
    for version in range(3, 8)
})

_PARTITION_V0 = Array(("partition", Int32), ("error_code", Int16), ("base_offset", Int64))
_PARTITION_V2 = Array(
    ("partition", Int32), ("error_code", Int16), ("base_offset", Int64), ("log_append_time", Int64)
)
_PARTITION_V5 = Array(
    ("partition", Int32),
    ("error_code", Int16),
    ("base_offset", Int64),
    ("log_append_time", Int64),
    ("log_start_offset", Int64),
)

RESPONSE = {
    0: Schema(
        ("topics", Array(("topic", String), ("partitions", _PARTITION_V0))),
        name="ProduceResponseV0",
    ),
    1: Schema(
        ("topics", Array(("topic", String), ("partitions", _PARTITION_V0))),
        ("throttle_time_ms", Int32),
        name="ProduceResponseV1",
    ),
}
RESPONSE.update({
    version: Schema(
        ("topics", Array(("topic", String), ("partitions", _PARTITION_V2 if version < 5 else _PARTITION_V5))),
        ("throttle_time_ms", Int32),
        name=f"ProduceResponseV{version}",
    )
    for version in range(2, 8)
})
