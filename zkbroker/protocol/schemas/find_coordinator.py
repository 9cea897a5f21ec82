"""FindCoordinator (10) -- ConsumerMetadataRequest in 0.8.2: which broker serves a group.

v0 carries only the group id; the answer is an error code and one broker. v1 (Kafka 0.11, KIP-98) asks by
coordinator_key and coordinator_type (0 a group, 1 a transactional id) and answers with throttle_time_ms first
and an error_message; v2 (Kafka 2.0) is the same on the wire; v3 (Kafka 2.4) is its flexible form.
"""

from ..types import (
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

API_KEY = 10

COORDINATOR_TYPE_GROUP = 0
COORDINATOR_TYPE_TRANSACTION = 1


def _request(version: int) -> Schema:
    if version == 3:
        return FlexibleSchema(("coordinator_key", CompactString), ("coordinator_type", Int8),
                              name="FindCoordinatorRequestV3")
    if version == 0:
        return Schema(("group_id", String), name="FindCoordinatorRequestV0")
    return Schema(("coordinator_key", String), ("coordinator_type", Int8), name=f"FindCoordinatorRequestV{version}")


def _response(version: int) -> Schema:
    if version == 3:
        return FlexibleSchema(("throttle_time_ms", Int32), ("error_code", Int16),
                              ("error_message", CompactNullableString), ("node_id", Int32), ("host", CompactString),
                              ("port", Int32), name="FindCoordinatorResponseV3")
    head = [("error_code", Int16)]
    if version >= 1:
        head = [("throttle_time_ms", Int32), ("error_code", Int16), ("error_message", NullableString)]
    return Schema(*head, ("node_id", Int32), ("host", String), ("port", Int32),
                  name=f"FindCoordinatorResponseV{version}")


REQUEST = {version: _request(version) for version in range(4)}
RESPONSE = {version: _response(version) for version in range(4)}
