"""DescribeConfigs (32, Kafka 0.11, KIP-133): the configs of topics and brokers, each with its value and where
it comes from.

Resource types are Kafka's ConfigResource.Type: 2 topic, 4 broker (8 broker logger). v0 says per entry only
whether it is a default; v1 (Kafka 1.1, KIP-226) says its source and, when asked (include_synonyms), every
synonym in precedence order; v2 is v1; v3 (Kafka 2.6, KIP-569) adds each entry's type and, when asked, its
documentation. v4 (Kafka 2.8) is v3, flexible.
"""

from ..types import (
    Array,
    Boolean,
    CompactArray,
    CompactNullableArray,
    CompactNullableString,
    CompactString,
    FlexibleSchema,
    Int8,
    Int16,
    Int32,
    NullableArray,
    NullableString,
    Schema,
    String,
)

API_KEY = 32

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8

# DescribeConfigsResponse.ConfigSource
SOURCE_UNKNOWN = 0
SOURCE_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5

# DescribeConfigsResponse.ConfigType
TYPE_UNKNOWN, TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = range(8)


def _request(version: int) -> Schema:
    if version >= 4:
        return FlexibleSchema(
            ("resources", CompactArray(("resource_type", Int8), ("resource_name", CompactString),
                                       ("configuration_keys", CompactNullableArray(CompactString)))),
            ("include_synonyms", Boolean),
            ("include_documentation", Boolean),
            name=f"DescribeConfigsRequestV{version}")
    fields = [("resources", Array(("resource_type", Int8), ("resource_name", String),
                                  ("configuration_keys", NullableArray(String))))]
    if version >= 1:
        fields.append(("include_synonyms", Boolean))
    if version >= 3:
        fields.append(("include_documentation", Boolean))
    return Schema(*fields, name=f"DescribeConfigsRequestV{version}")


def _response(version: int) -> Schema:
    if version >= 4:
        entry = CompactArray(
            ("name", CompactString), ("value", CompactNullableString), ("read_only", Boolean), ("config_source", Int8),
            ("is_sensitive", Boolean),
            ("synonyms", CompactArray(("name", CompactString), ("value", CompactNullableString), ("source", Int8))),
            ("config_type", Int8), ("documentation", CompactNullableString))
        return FlexibleSchema(
            ("throttle_time_ms", Int32),
            ("results", CompactArray(("error_code", Int16), ("error_message", CompactNullableString),
                                     ("resource_type", Int8), ("resource_name", CompactString), ("configs", entry))),
            name=f"DescribeConfigsResponseV{version}")
    entry = [("name", String), ("value", NullableString), ("read_only", Boolean)]
    if version == 0:
        entry += [("is_default", Boolean), ("is_sensitive", Boolean)]
    else:
        entry += [("config_source", Int8), ("is_sensitive", Boolean),
                  ("synonyms", Array(("name", String), ("value", NullableString), ("source", Int8)))]
    if version >= 3:
        entry += [("config_type", Int8), ("documentation", NullableString)]
    return Schema(
        ("throttle_time_ms", Int32),
        ("results", Array(("error_code", Int16), ("error_message", NullableString), ("resource_type", Int8),
                          ("resource_name", String), ("configs", Array(*entry)))),
        name=f"DescribeConfigsResponseV{version}")


REQUEST = {version: _request(version) for version in range(5)}
RESPONSE = {version: _response(version) for version in range(5)}
