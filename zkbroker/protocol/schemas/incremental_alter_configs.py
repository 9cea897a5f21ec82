"""IncrementalAlterConfigs (44, Kafka 2.3, KIP-339): change single configs of a topic or broker, each by an
operation: 0 SET, 1 DELETE (back to the default), 2 APPEND and 3 SUBTRACT (list configs). v1 is v0, flexible."""

from ..types import (
    Array,
    Boolean,
    CompactArray,
    CompactNullableString,
    CompactString,
    FlexibleSchema,
    Int8,
    Int16,
    Int32,
    NullableString,
    Schema,
    String,
)

API_KEY = 44

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

REQUEST = {
    0: Schema(
        ("resources", Array(("resource_type", Int8), ("resource_name", String),
                            ("configs", Array(("name", String), ("config_operation", Int8),
                                              ("value", NullableString))))),
        ("validate_only", Boolean),
        name="IncrementalAlterConfigsRequestV0"),
    1: FlexibleSchema(
        ("resources", CompactArray(("resource_type", Int8), ("resource_name", CompactString),
                                   ("configs", CompactArray(("name", CompactString), ("config_operation", Int8),
                                                            ("value", CompactNullableString))))),
        ("validate_only", Boolean),
        name="IncrementalAlterConfigsRequestV1"),
}

RESPONSE = {
    0: Schema(
        ("throttle_time_ms", Int32),
        ("responses", Array(("error_code", Int16), ("error_message", NullableString), ("resource_type", Int8),
                            ("resource_name", String))),
        name="IncrementalAlterConfigsResponseV0"),
    1: FlexibleSchema(
        ("throttle_time_ms", Int32),
        ("responses", CompactArray(("error_code", Int16), ("error_message", CompactNullableString),
                                   ("resource_type", Int8), ("resource_name", CompactString))),
        name="IncrementalAlterConfigsResponseV1"),
}
