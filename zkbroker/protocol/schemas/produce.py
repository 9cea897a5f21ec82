"""Produce (0): append message sets to partition leaders.

Request v0-v2 are identical: acks (0 = no response at all, 1 = leader, -1 = ISR), timeout_ms,
and per partition a message set (magic 0 or 1, stored as received). Responses: v1 adds
throttle_time_ms *last*; v2 adds log_append_time per partition (-1 unless the topic uses
LogAppendTime, which 0.8.2 has not). ``records`` decodes to a zero-copy view of the frame
(writable when the frame is a bytearray, for ``message_set.assign_offsets``); a null set is None.
"""

from ..types import Array, Int16, Int32, Int64, Records, Schema, String

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

_PARTITION_V0 = Array(("partition", Int32), ("error_code", Int16), ("base_offset", Int64))
_PARTITION_V2 = Array(
    ("partition", Int32), ("error_code", Int16), ("base_offset", Int64), ("log_append_time", Int64)
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
    2: Schema(
        ("topics", Array(("topic", String), ("partitions", _PARTITION_V2))),
        ("throttle_time_ms", Int32),
        name="ProduceResponseV2",
    ),
}
