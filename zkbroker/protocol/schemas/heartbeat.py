"""Heartbeat (12): a member says it is alive; the answer REBALANCE_IN_PROGRESS tells it to rejoin (Kafka 0.9).

Requests v0-v2 are identical; responses v1+ put throttle_time_ms first (v2, Kafka 2.0: the same).
"""

from ..types import Int16, Int32, Schema, String

API_KEY = 12

REQUEST = {
    version: Schema(("group_id", String), ("generation_id", Int32), ("member_id", String),
                    name=f"HeartbeatRequestV{version}")
    for version in range(3)
}

RESPONSE = {
    version: Schema(*([("throttle_time_ms", Int32)] if version >= 1 else []), ("error_code", Int16),
                    name=f"HeartbeatResponseV{version}")
    for version in range(3)
}
