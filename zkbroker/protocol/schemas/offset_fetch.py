"""OffsetFetch (9): read a consumer group's committed offsets (-1 and "" when none).

v0 and v1 have the same layout; v0 reads ZooKeeper and v1 `__consumer_offsets`, as in Kafka 0.8.2-2.x.
"""

from ..types import Array, Int16, Int32, Int64, NullableString, Schema, String

API_KEY = 9

REQUEST = {
    version: Schema(
        ("group_id", String),
        ("topics", Array(("topic", String), ("partitions", Array(Int32)))),
        name=f"OffsetFetchRequestV{version}",
    )
    for version in (0, 1)
}

RESPONSE = {
    version: Schema(
        (
            "topics",
            Array(
                ("topic", String),
                (
                    "partitions",
                    Array(
                        ("partition", Int32),
                        ("offset", Int64),
                        ("metadata", NullableString),
                        ("error_code", Int16),
                    ),
                ),
            ),
        ),
        name=f"OffsetFetchResponseV{version}",
    )
    for version in (0, 1)
}
