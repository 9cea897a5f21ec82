"""Heartbeat (12): a member says it is alive; the answer REBALANCE_IN_PROGRESS tells it to rejoin (Kafka 0.9).
"""

from ..types import Int16, Int32, Schema, String

API_KEY = 12

REQUEST = {
    0: Schema(("group_id", String), ("generation_id", Int32), ("member_id", String), name="HeartbeatRequestV0")
}

RESPONSE = {0: Schema(("error_code", Int16), name="HeartbeatResponseV0")}
