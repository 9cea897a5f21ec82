"""LeaveGroup (13): a member leaves at once instead of letting its session expire (Kafka 0.9)."""

from ..types import Int16, Schema, String

API_KEY = 13

REQUEST = {0: Schema(("group_id", String), ("member_id", String), name="LeaveGroupRequestV0")}

RESPONSE = {0: Schema(("error_code", Int16), name="LeaveGroupResponseV0")}
