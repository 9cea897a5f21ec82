"""OffsetsForLeaderEpoch (23, KIP-101; beyond 0.8.2): where does an epoch end on the leader?

A follower asks, to truncate to that instead of to its high watermark; consumers ask (KIP-320, from
v2) to check that the log they read was not truncated under them. v0 per partition (partition,
leader_epoch); v2 (Kafka 2.1) adds current_leader_epoch before it. Responses: v0 puts error_code
before partition; v1 adds the leader_epoch the answer is for; v2 throttle_time_ms first.
"""

from ..types import Array, Int16, Int32, Int64, Schema, String

API_KEY = 23


def _request(version: int) -> Schema:
    partition = [("partition", Int32)]
    if version >= 2:
        partition.append(("current_leader_epoch", Int32))
    partition.append(("leader_epoch", Int32))
    return Schema(
        ("topics", Array(("topic", String), ("partitions", Array(*partition)))),
        name=f"OffsetsForLeaderEpochRequestV{version}",
    )


def _response(version: int) -> Schema:
    partition = [("error_code", Int16), ("partition", Int32)]
    if version >= 1:
        partition.append(("leader_epoch", Int32))
    partition.append(("end_offset", Int64))
    fields = [("throttle_time_ms", Int32)] if version >= 2 else []
    fields.append(("topics", Array(("topic", String), ("partitions", Array(*partition)))))
    return Schema(*fields, name=f"OffsetsForLeaderEpochResponseV{version}")


REQUEST = {version: _request(version) for version in range(3)}
RESPONSE = {version: _response(version) for version in range(3)}
