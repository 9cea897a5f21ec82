"""DescribeLogDirs (35, Kafka 1.0, KIP-113): each log directory of the broker asked, with the size of every
partition's log in it (null topics: every partition). v1 is v0 (throttled after the answer, KIP-219); v2 is v1,
flexible."""

from ..types import (
    Array,
    Boolean,
    CompactArray,
    CompactNullableArray,
    CompactString,
    FlexibleSchema,
    Int16,
    Int32,
    Int64,
    NullableArray,
    Schema,
    String,
)

API_KEY = 35

_PARTITION = (("partition_index", Int32), ("partition_size", Int64), ("offset_lag", Int64), ("is_future_key", Boolean))

REQUEST = {version: Schema(("topics", NullableArray(("topic", String), ("partitions", Array(Int32)))),
                           name=f"DescribeLogDirsRequestV{version}")
           for version in range(2)}
REQUEST[2] = FlexibleSchema(
    ("topics", CompactNullableArray(("topic", CompactString), ("partitions", CompactArray(Int32)))),
    name="DescribeLogDirsRequestV2")

RESPONSE = {version: Schema(("throttle_time_ms", Int32),
                            ("results", Array(("error_code", Int16), ("log_dir", String),
                                              ("topics", Array(("name", String), ("partitions", Array(*_PARTITION)))))),
                            name=f"DescribeLogDirsResponseV{version}")
            for version in range(2)}
RESPONSE[2] = FlexibleSchema(
    ("throttle_time_ms", Int32),
    ("results", CompactArray(
        ("error_code", Int16), ("log_dir", CompactString),
        ("topics", CompactArray(("name", CompactString), ("partitions", CompactArray(*_PARTITION)))))),
    name="DescribeLogDirsResponseV2")
