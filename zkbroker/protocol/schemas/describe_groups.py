"""DescribeGroups (15): the state, protocol and members of groups this broker coordinates (Kafka 0.9).

Members carry their metadata and assignment only while the group is Stable; an unknown group reads as Dead.
"""

from ..types import Array, Bytes, Int16, Schema, String

API_KEY = 15

REQUEST = {0: Schema(("group_ids", Array(String)), name="DescribeGroupsRequestV0")}

RESPONSE = {
    0: Schema(
        (
            "groups",
            Array(
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
            ),
        ),
        name="DescribeGroupsResponseV0",
    )
}
