"""SyncGroup (14): after a JoinGroup round, the leader sends every member's assignment and each member
receives its own (Kafka 0.9). v0 only: followers send an empty assignment list.
"""

from ..types import Array, Bytes, Int16, Int32, Schema, String

API_KEY = 14

REQUEST = {
    0: Schema(
        ("group_id", String),
        ("generation_id", Int32),
        ("member_id", String),
        ("group_assignment", Array(("member_id", String), ("member_assignment", Bytes))),
        name="SyncGroupRequestV0",
    )
}

RESPONSE = {0: Schema(("error_code", Int16), ("member_assignment", Bytes), name="SyncGroupResponseV0")}
