"""DeleteAcls (31, KIP-140): filters; each answers the ACLs it removed. v1 (KIP-290) adds the pattern type (a
filter's: 1 any, 2 match, 3 literal, 4 prefixed); v2 is flexible (not served)."""

from ..types import Array, Int8, Int16, Int32, NullableString, Schema, String


def _request(version: int) -> Schema:
    return Schema(("filters", Array(("resource_type_filter", Int8), ("resource_name_filter", NullableString),
                                    *([("pattern_type_filter", Int8)] if version >= 1 else []),
                                    ("principal_filter", NullableString), ("host_filter", NullableString),
                                    ("operation", Int8), ("permission_type", Int8))),
                  name=f"DeleteAclsRequestV{version}")


def _response(version: int) -> Schema:
    return Schema(("throttle_time_ms", Int32),
                  ("filter_results", Array(
                      ("error_code", Int16), ("error_message", NullableString),
                      ("matching_acls", Array(("error_code", Int16), ("error_message", NullableString),
                                              ("resource_type", Int8), ("resource_name", String),
                                              *([("pattern_type", Int8)] if version >= 1 else []),
                                              ("principal", String), ("host", String), ("operation", Int8),
                                              ("permission_type", Int8))))),
                  name=f"DeleteAclsResponseV{version}")


API_KEY = 31
REQUEST = {version: _request(version) for version in range(2)}
RESPONSE = {version: _response(version) for version in range(2)}
