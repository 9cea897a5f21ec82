"""JoinGroup (11): a member asks to join a group (Kafka 0.9; not in 0.8.2).

v0: group_id, session_timeout, member_id ("" for a new member), protocol_type and the protocols the member
supports with its metadata for each. v1 (Kafka 0.10.1, KIP-62) adds rebalance_timeout after session_timeout:
the client's max.poll.interval.ms; v2 and v3 (Kafka 0.11, 2.0) are v1 again. The response: the generation,
the chosen protocol, the leader, the member's id, and -- for the leader only -- every member with its
metadata; v2+ put throttle_time_ms first.
"""

from ..types import Array, Bytes, Int16, Int32, Schema, String

API_KEY = 11

_PROTOCOLS = Array(("protocol_name", String), ("protocol_metadata", Bytes))


def _request(version: int) -> Schema:
    return Schema(
        ("group_id", String),
        ("session_timeout", Int32),
        *([("rebalance_timeout", Int32)] if version >= 1 else []),
        ("member_id", String),
        ("protocol_type", String),
        ("group_protocols", _PROTOCOLS),
        name=f"JoinGroupRequestV{version}",
    )


def _response(version: int) -> Schema:
    return Schema(
        *([("throttle_time_ms", Int32)] if version >= 2 else []),
        ("error_code", Int16),
        ("generation_id", Int32),
        ("group_protocol", String),
        ("leader_id", String),
        ("member_id", String),
        ("members", Array(("member_id", String), ("member_metadata", Bytes))),
        name=f"JoinGroupResponseV{version}",
    )


REQUEST = {version: _request(version) for version in range(4)}
RESPONSE = {version: _response(version) for version in range(4)}
