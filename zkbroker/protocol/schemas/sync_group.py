"""SyncGroup (14): after a JoinGroup round, the leader sends every member's assignment and each member
receives its own (Kafka 0.9). Followers send an empty assignment list.

Requests v0-v2 are identical; responses v1+ put throttle_time_ms first (v2, Kafka 2.0: the same).
"""

from ..types import Array, Bytes, Int16, Int32, Schema, String

API_KEY = 14

REQUEST = {
    version: Schema(
        ("group_id", String),
        ("generation_id", Int32),
        ("member_id", String),
        ("group_assignment", Array(("member_id", String), ("member_assignment", Bytes))),
        name=f"SyncGroupRequestV{version}",
    )
    for version in range(3)
}

RESPONSE = {
    version: Schema(*([("throttle_time_ms", Int32)] if version >= 1 else []), ("error_code", Int16),
                    ("member_assignment", Bytes), name=f"SyncGroupResponseV{version}")
    for version in range(3)
}
