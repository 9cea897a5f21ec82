"""OffsetCommit (8): a consumer group's committed offsets: v0 in ZooKeeper, v1 and later in `__consumer_offsets`.

v0: group_id and per partition (offset, metadata). v1 adds generation_id and member_id, and a per-partition
commit timestamp. v2 replaces the timestamp with a request-wide retention_time_ms (v3 and v4 keep it); v5
(Kafka 2.1, KIP-211) drops it -- the broker's offsets.retention.minutes decides; v6 (Kafka 2.1, KIP-320) adds
each partition's committed_leader_epoch. The response is an error code per partition, with throttle_time_ms
first from v3.
"""

from ..types import Array, Int16, Int32, Int64, NullableString, Schema, String

API_KEY = 8


def _topics(*partition_fields):
    return Array(("topic", String), ("partitions", Array(*partition_fields)))


def _request(version: int) -> Schema:
    partition = [("partition", Int32), ("offset", Int64)]
    if version == 1:
        partition.append(("timestamp", Int64))
    if version >= 6:
        partition.append(("committed_leader_epoch", Int32))
    partition.append(("metadata", NullableString))
    fields = [("group_id", String)]
    if version >= 1:
        fields += [("generation_id", Int32), ("member_id", String)]
    if 2 <= version <= 4:
        fields.append(("retention_time_ms", Int64))
    fields.append(("topics", _topics(*partition)))
    return Schema(*fields, name=f"OffsetCommitRequestV{version}")


def _response(version: int) -> Schema:
    return Schema(*([("throttle_time_ms", Int32)] if version >= 3 else []),
                  ("topics", _topics(("partition", Int32), ("error_code", Int16))),
                  name=f"OffsetCommitResponseV{version}")


REQUEST = {version: _request(version) for version in range(7)}
RESPONSE = {version: _response(version) for version in range(7)}
