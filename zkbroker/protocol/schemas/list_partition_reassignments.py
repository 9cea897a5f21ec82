"""ListPartitionReassignments (46, Kafka 2.4, KIP-455): the reassignments in progress at the controller, of the
partitions named (topics null: all of them), each with its replicas and the ones it is adding and removing.
v0 is flexible."""

from ..types import (
    CompactArray,
    CompactNullableArray,
    CompactNullableString,
    CompactString,
    FlexibleSchema,
    Int16,
    Int32,
)

API_KEY = 46

REQUEST = {0: FlexibleSchema(
    ("timeout_ms", Int32),
    ("topics", CompactNullableArray(("name", CompactString), ("partition_indexes", CompactArray(Int32)))),
    name="ListPartitionReassignmentsRequestV0")}

RESPONSE = {0: FlexibleSchema(
    ("throttle_time_ms", Int32),
    ("error_code", Int16),
    ("error_message", CompactNullableString),
    ("topics", CompactArray(("name", CompactString), ("partitions", CompactArray(
        ("partition_index", Int32), ("replicas", CompactArray(Int32)), ("adding_replicas", CompactArray(Int32)),
        ("removing_replicas", CompactArray(Int32)))))),
    name="ListPartitionReassignmentsResponseV0")}
