"""AlterConfigs (33, Kafka 0.11, KIP-133): replace the whole set of a topic's overrides, or of a broker's
dynamic configs (Kafka 1.1, KIP-226). v1 is v0; v2 (Kafka 2.8) is v1, flexible."""

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

API_KEY = 33

REQUEST = {
    version: Schema(
        ("resources", Array(("resource_type", Int8), ("resource_name", String),
                            ("configs", Array(("name", String), ("value", NullableString))))),
        ("validate_only", Boolean),
        name=f"AlterConfigsRequestV{version}")
    for version in range(2)
}
REQUEST[2] = FlexibleSchema(
    ("resources", CompactArray(("resource_type", Int8), ("resource_name", CompactString),
                               ("configs", CompactArray(("name", CompactString), ("value", CompactNullableString))))),
    ("validate_only", Boolean),
    name="AlterConfigsRequestV2")

RESPONSE = {
    version: Schema(
        ("throttle_time_ms", Int32),
        ("responses", Array(("error_code", Int16), ("error_message", NullableString), ("resource_type", Int8),
                            ("resource_name", String))),
        name=f"AlterConfigsResponseV{version}")
    for version in range(2)
}
RESPONSE[2] = FlexibleSchema(
    ("throttle_time_ms", Int32),
    ("responses", CompactArray(("error_code", Int16), ("error_message", CompactNullableString),
                               ("resource_type", Int8), ("resource_name", CompactString))),
    name="AlterConfigsResponseV2")
