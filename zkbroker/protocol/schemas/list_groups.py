"""ListGroups (16): the groups this broker coordinates, with their protocol type (Kafka 0.9)."""

from ..types import Array, Int16, Schema, String

API_KEY = 16

REQUEST = {0: Schema(name="ListGroupsRequestV0")}

RESPONSE = {
    0: Schema(
        ("error_code", Int16),
        ("groups", Array(("group_id", String), ("protocol_type", String))),
        name="ListGroupsResponseV0",
    )
}
