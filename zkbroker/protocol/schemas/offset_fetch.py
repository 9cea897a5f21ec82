"""OffsetFetch (9): read a consumer group's committed offsets (-1 and "" when none).

v0 and v1 have the same layout; v0 reads ZooKeeper and v1+ `__consumer_offsets`, as in Kafka 0.8.2-2.x.
v2 (Kafka 0.10.2, KIP-88) lets topics be null -- every offset the group has -- and adds a top-level error_code
after the topics (a group-level error then comes there, with no partitions, instead of in every partition);
v3 puts throttle_time_ms first; v4 is v3; v5 (Kafka 2.1, KIP-320) adds each partition's committed_leader_epoch.
"""

from ..types import Array, Int16, Int32, Int64, NullableString, Schema, String

API_KEY = 9


def _request(version: int) -> Schema:
    topics = Array(("topic", String), ("partitions", Array(Int32)), nullable=version >= 2)
    return Schema(("group_id", String), ("topics", topics), name=f"OffsetFetchRequestV{version}")


def _response(version: int) -> Schema:
    partition = [("partition", Int32), ("offset", Int64)]
    if version >= 5:
        partition.append(("committed_leader_epoch", Int32))
    partition += [("metadata", NullableString), ("error_code", Int16)]
    fields = [("throttle_time_ms", Int32)] if version >= 3 else []
    fields.append(("topics", Array(("topic", String), ("partitions", Array(*partition)))))
    if version >= 2:
        fields.append(("error_code", Int16))
    return Schema(*fields, name=f"OffsetFetchResponseV{version}")


REQUEST = {version: _request(version) for version in range(6)}
RESPONSE = {version: _response(version) for version in range(6)}
