"""ListGroups (16): the groups this broker coordinates, with their protocol type (Kafka 0.9).

Requests v0-v2 are empty; responses v1+ put throttle_time_ms first (v2, Kafka 2.0: the same).
"""

from ..types import Array, Int16, Int32, Schema, String

API_KEY = 16

REQUEST = {version: Schema(name=f"ListGroupsRequestV{version}") for version in range(3)}

RESPONSE = {
    version: Schema(
        *([("throttle_time_ms", Int32)] if version >= 1 else []),
        ("error_code", Int16),
        ("groups", Array(("group_id", String), ("protocol_type", String))),
        name=f"ListGroupsResponseV{version}",
    )
    for version in range(3)
}
