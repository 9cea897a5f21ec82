"""ListOffsets (2) -- OffsetRequest in 0.8: offsets by time (-1 latest, -2 earliest).

v0 asks for up to max_num_offsets offsets per partition and gets a list (we return exactly one:
kafka-python raises on more). v1 drops max_num_offsets and answers one (timestamp, offset).
"""

from ..types import Array, Int16, Int32, Int64, Schema, String

API_KEY = 2

REQUEST = {
    0: Schema(
        ("replica_id", Int32),
        (
            "topics",
            Array(
                ("topic", String),
                (
                    "partitions",
                    Array(("partition", Int32), ("timestamp", Int64), ("max_num_offsets", Int32)),
                ),
            ),
        ),
        name="ListOffsetsRequestV0",
    ),
    1: Schema(
        ("replica_id", Int32),
        (
            "topics",
            Array(
                ("topic", String),
                ("partitions", Array(("partition", Int32), ("timestamp", Int64))),
            ),
        ),
        name="ListOffsetsRequestV1",
    ),
}

RESPONSE = {
    0: Schema(
        (
            "topics",
            Array(
                ("topic", String),
                (
                    "partitions",
                    Array(("partition", Int32), ("error_code", Int16), ("offsets", Array(Int64))),
                ),
            ),
        ),
        name="ListOffsetsResponseV0",
    ),
    1: Schema(
        (
            "topics",
            Array(
                ("topic", String),
                (
                    "partitions",
                    Array(
                        ("partition", Int32),
                        ("error_code", Int16),
                        ("timestamp", Int64),
                        ("offset", Int64),
                    ),
                ),
            ),
        ),
        name="ListOffsetsResponseV1",
    ),
}
