"""AlterPartitionReassignments (45, Kafka 2.4, KIP-455): move each partition to the replicas given, or cancel its
reassignment (replicas null), at the controller; answered once the moves have started. v0 is flexible."""

from ..types import (
    CompactArray,
    CompactNullableArray,
    CompactNullableString,
    CompactString,
    FlexibleSchema,
    Int16,
    Int32,
)

API_KEY = 45

REQUEST = {0: FlexibleSchema(
    ("timeout_ms", Int32),
    ("topics", CompactArray(("name", CompactString), ("partitions", CompactArray(
        ("partition_index", Int32), ("replicas", CompactNullableArray(Int32)))))),
    name="AlterPartitionReassignmentsRequestV0")}

RESPONSE = {0: FlexibleSchema(
    ("throttle_time_ms", Int32),
    ("error_code", Int16),
    ("error_message", CompactNullableString),
    ("responses", CompactArray(("name", CompactString), ("partitions", CompactArray(
        ("partition_index", Int32), ("error_code", Int16), ("error_message", CompactNullableString))))),
    name="AlterPartitionReassignmentsResponseV0")}
