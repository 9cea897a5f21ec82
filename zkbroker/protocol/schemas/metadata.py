"""Metadata (3): brokers, and leader/replicas/ISR of each partition (TopicMetadataRequest in 0.8).

Request topics: v0 ``[]`` means all topics; v1 ``None`` means all and ``[]`` means none.
v1 adds each broker's rack, the controller_id and is_internal per topic.
"""

from ..types import Array, Boolean, Int16, Int32, NullableArray, NullableString, Schema, String

API_KEY = 3

_PARTITIONS = Array(
    ("error_code", Int16),
    ("partition", Int32),
    ("leader", Int32),
    ("replicas", Array(Int32)),
    ("isr", Array(Int32)),
)

REQUEST = {
    0: Schema(("topics", Array(String)), name="MetadataRequestV0"),
    1: Schema(("topics", NullableArray(String)), name="MetadataRequestV1"),
}

RESPONSE = {
    0: Schema(
        ("brokers", Array(("node_id", Int32), ("host", String), ("port", Int32))),
        ("topics", Array(("error_code", Int16), ("topic", String), ("partitions", _PARTITIONS))),
        name="MetadataResponseV0",
    ),
    1: Schema(
        (
            "brokers",
            Array(("node_id", Int32), ("host", String), ("port", Int32), ("rack", NullableString)),
        ),
        ("controller_id", Int32),
        (
            "topics",
            Array(
                ("error_code", Int16),
                ("topic", String),
                ("is_internal", Boolean),
                ("partitions", _PARTITIONS),
            ),
        ),
        name="MetadataResponseV1",
    ),
}
