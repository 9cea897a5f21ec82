"""CreatePartitions (37, Kafka 1.0, KIP-195): raise a topic's partition count, with the new partitions'
replicas given or assigned by the broker. v1 is v0 (the throttle applies after the response, KIP-219); v2 is
flexible; v3 is v2 (it may be throttled, KIP-599)."""

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
    NullableArray,
    NullableString,
    Schema,
    String,
)

API_KEY = 37


def _request(version: int) -> Schema:
    if version >= 2:
        return FlexibleSchema(
            ("topics", CompactArray(("name", CompactString), ("count", Int32),
                                    ("assignments", CompactNullableArray(("broker_ids", CompactArray(Int32)))))),
            ("timeout_ms", Int32),
            ("validate_only", Boolean),
            name=f"CreatePartitionsRequestV{version}")
    return Schema(
        ("topics", Array(("name", String), ("count", Int32),
                         ("assignments", NullableArray(("broker_ids", Array(Int32)))))),
        ("timeout_ms", Int32),
        ("validate_only", Boolean),
        name=f"CreatePartitionsRequestV{version}")


def _response(version: int) -> Schema:
    if version >= 2:
        return FlexibleSchema(
            ("throttle_time_ms", Int32),
            ("results", CompactArray(("name", CompactString), ("error_code", Int16),
                                     ("error_message", CompactNullableString))),
            name=f"CreatePartitionsResponseV{version}")
    return Schema(
        ("throttle_time_ms", Int32),
        ("results", Array(("name", String), ("error_code", Int16), ("error_message", NullableString))),
        name=f"CreatePartitionsResponseV{version}")


REQUEST = {version: _request(version) for version in range(4)}
RESPONSE = {version: _response(version) for version in range(4)}
