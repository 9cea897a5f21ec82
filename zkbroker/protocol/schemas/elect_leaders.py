"""ElectLeaders (43, Kafka 2.2, KIP-183; KIP-460 in 2.4): elect the preferred replica (or, v1+, any live replica,
"unclean") as leader of the partitions named, null naming every partition. v1 adds the election type to the
request and a top-level error code to the response; v2 is v1, flexible."""

from ..types import (
    Array,
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

API_KEY = 43

PREFERRED, UNCLEAN = 0, 1


def _request(version: int) -> Schema:
    if version >= 2:
        return FlexibleSchema(
            ("election_type", Int8),
            ("topic_partitions", CompactNullableArray(("topic", CompactString), ("partitions", CompactArray(Int32)))),
            ("timeout_ms", Int32),
            name=f"ElectLeadersRequestV{version}")
    fields = [("election_type", Int8)] if version >= 1 else []
    fields += [("topic_partitions", NullableArray(("topic", String), ("partitions", Array(Int32)))),
               ("timeout_ms", Int32)]
    return Schema(*fields, name=f"ElectLeadersRequestV{version}")


def _response(version: int) -> Schema:
    if version >= 2:
        return FlexibleSchema(
            ("throttle_time_ms", Int32),
            ("error_code", Int16),
            ("replica_election_results", CompactArray(
                ("topic", CompactString),
                ("partition_result", CompactArray(("partition_id", Int32), ("error_code", Int16),
                                                  ("error_message", CompactNullableString))))),
            name=f"ElectLeadersResponseV{version}")
    fields = [("throttle_time_ms", Int32)] + ([("error_code", Int16)] if version >= 1 else [])
    fields.append(("replica_election_results", Array(
        ("topic", String),
        ("partition_result", Array(("partition_id", Int32), ("error_code", Int16),
                                   ("error_message", NullableString))))))
    return Schema(*fields, name=f"ElectLeadersResponseV{version}")


REQUEST = {version: _request(version) for version in range(3)}
RESPONSE = {version: _response(version) for version in range(3)}
