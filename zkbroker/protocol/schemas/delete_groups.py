"""DeleteGroups (42, Kafka 1.1, KIP-229): forget empty groups and their offsets, at their coordinator. v1 is v0
(throttled after the answer, KIP-219); v2 is v1, flexible."""

from ..types import Array, CompactArray, CompactString, FlexibleSchema, Int16, Int32, Schema, String

API_KEY = 42

REQUEST = {version: Schema(("groups_names", Array(String)), name=f"DeleteGroupsRequestV{version}")
           for version in range(2)}
REQUEST[2] = FlexibleSchema(("groups_names", CompactArray(CompactString)), name="DeleteGroupsRequestV2")

RESPONSE = {version: Schema(("throttle_time_ms", Int32),
                            ("results", Array(("group_id", String), ("error_code", Int16))),
                            name=f"DeleteGroupsResponseV{version}")
            for version in range(2)}
RESPONSE[2] = FlexibleSchema(("throttle_time_ms", Int32),
                             ("results", CompactArray(("group_id", CompactString), ("error_code", Int16))),
                             name="DeleteGroupsResponseV2")
