"""DescribeAcls (29, KIP-140): the ACLs matching a filter. v1 (Kafka 2.0, KIP-290) adds the pattern type (filter:
1 any, 2 match, 3 literal, 4 prefixed); v2 is flexible (not served). The Kafka-JSON names; null means any."""

from ..types import Array, Int8, Int16, Int32, NullableString, Schema, String


def _request(version: int) -> Schema:
    return Schema(("resource_type_filter", Int8), ("resource_name_filter", NullableString),
                  *([("pattern_type_filter", Int8)] if version >= 1 else []),
                  ("principal_filter", NullableString), ("host_filter", NullableString), ("operation", Int8),
                  ("permission_type", Int8), name=f"DescribeAclsRequestV{version}")


def _response(version: int) -> Schema:
    return Schema(("throttle_time_ms", Int32), ("error_code", Int16), ("error_message", NullableString),
                  ("resources", Array(("resource_type", Int8), ("resource_name", String),
                                      *([("pattern_type", Int8)] if version >= 1 else []),
                                      ("acls", Array(("principal", String), ("host", String), ("operation", Int8),
                                                     ("permission_type", Int8))))),
                  name=f"DescribeAclsResponseV{version}")


API_KEY = 29
REQUEST = {version: _request(version) for version in range(2)}
RESPONSE = {version: _response(version) for version in range(2)}
