"""CreateTopics (19, Kafka 0.10.1, KIP-4): topics with a partition count and replication factor, or an explicit
assignment, and config overrides; answered by the controller once leaders are elected or the timeout passes.

v1 adds validate_only to the request and error_message to the response; v2 puts throttle_time_ms first in the
response; v3 is the same; v4 (Kafka 2.4, KIP-464) lets num_partitions and replication_factor be -1 (the
broker's num.partitions and default.replication.factor). v5 (Kafka 2.4, KIP-525) is flexible and answers each
topic's partition count, replication factor and configs; v6 is v5 (it may be throttled, KIP-599). v7 adds topic
ids (KIP-516), which ZooKeeper-mode zkbroker does not keep.
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
    NullableString,
    Schema,
    String,
    TaggedField,
)

API_KEY = 19

NO_NUM_PARTITIONS = -1
NO_REPLICATION_FACTOR = -1


def _request(version: int) -> Schema:
    if version >= 5:
        return FlexibleSchema(
            ("topics", CompactArray(
                ("name", CompactString),
                ("num_partitions", Int32),
                ("replication_factor", Int16),
                ("assignments", CompactArray(("partition_index", Int32), ("broker_ids", CompactArray(Int32)))),
                ("configs", CompactArray(("name", CompactString), ("value", CompactNullableString))),
            )),
            ("timeout_ms", Int32),
            ("validate_only", Boolean),
            name=f"CreateTopicsRequestV{version}")
    topic = Array(
        ("name", String),
        ("num_partitions", Int32),
        ("replication_factor", Int16),
        ("assignments", Array(("partition_index", Int32), ("broker_ids", Array(Int32)))),
        ("configs", Array(("name", String), ("value", NullableString))),
    )
    fields = [("topics", topic), ("timeout_ms", Int32)]
    if version >= 1:
        fields.append(("validate_only", Boolean))
    return Schema(*fields, name=f"CreateTopicsRequestV{version}")


def _response(version: int) -> Schema:
    if version >= 5:
        result = FlexibleSchema(
            ("name", CompactString),
            ("error_code", Int16),
            ("error_message", CompactNullableString),
            ("num_partitions", Int32),
            ("replication_factor", Int16),
            ("configs", CompactNullableArray(("name", CompactString), ("value", CompactNullableString),
                                             ("read_only", Boolean), ("config_source", Int8),
                                             ("is_sensitive", Boolean))),
            tagged=(TaggedField(0, "topic_config_error_code", Int16, 0),))
        return FlexibleSchema(("throttle_time_ms", Int32), ("topics", CompactArray(result)),
                              name=f"CreateTopicsResponseV{version}")
    result = [("name", String), ("error_code", Int16)]
    if version >= 1:
        result.append(("error_message", NullableString))
    fields = [("throttle_time_ms", Int32)] if version >= 2 else []
    fields.append(("topics", Array(*result)))
    return Schema(*fields, name=f"CreateTopicsResponseV{version}")


REQUEST = {version: _request(version) for version in range(7)}
RESPONSE = {version: _response(version) for version in range(7)}
