"""CreateAcls (30, KIP-140): ACLs to add, one result each. v1 (KIP-290) adds the pattern type; v2 is flexible."""

from ..types import Array, Int8, Int16, Int32, NullableString, Schema, String


def _request(version: int) -> Schema:
    return Schema(("creations", Array(("resource_type", Int8), ("resource_name", String),
                                      *([("resource_pattern_type", Int8)] if version >= 1 else []),
                                      ("principal", String), ("host", String), ("operation", Int8),
                                      ("permission_type", Int8))),
                  name=f"CreateAclsRequestV{version}")


API_KEY = 30
REQUEST = {version: _request(version) for version in range(2)}
RESPONSE = {version: Schema(("throttle_time_ms", Int32),
                            ("results", Array(("error_code", Int16), ("error_message", NullableString))),
                            name=f"CreateAclsResponseV{version}") for version in range(2)}
