"""DescribeGroups (15): the state, protocol and members of groups this broker coordinates (Kafka 0.9).

Members carry their metadata and assignment only while the group is Stable; an unknown group reads as Dead.
Requests v0-v2 are identical; responses v1+ put throttle_time_ms first (v2, Kafka 2.0: the same).
"""

from ..types import Array, Bytes, Int16, Int32, Schema, String

API_KEY = 15

_GROUPS = Array(
    ("error_code", Int16),
    ("group_id", String),
    ("state", String),
    ("protocol_type", String),
    ("protocol", String),
    (
        "members",
        Array(
            ("member_id", String),
            ("client_id", String),
            ("client_host", String),
            ("member_metadata", Bytes),
            ("member_assignment", Bytes),
        ),
    ),
)

REQUEST = {version: Schema(("group_ids", Array(String)), name=f"DescribeGroupsRequestV{version}")
           for version in range(3)}

RESPONSE = {
    version: Schema(*([("throttle_time_ms", Int32)] if version >= 1 else []), ("groups", _GROUPS),
                    name=f"DescribeGroupsResponseV{version}")
    for version in range(3)
}
