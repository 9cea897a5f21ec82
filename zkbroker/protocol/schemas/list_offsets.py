"""ListOffsets (2) -- OffsetRequest in 0.8: offsets by time (-1 latest, -2 earliest).

v0 asks for up to max_num_offsets offsets per partition and gets a list (we return exactly one:
kafka-python raises on more), found by segment mtimes as 0.8.2 did. v1 (Kafka 0.10.1) drops
max_num_offsets and answers one (timestamp, offset): for a timestamp, the first message at or after
it, from the time index. v2 adds isolation_level (and throttle_time_ms first in the response), v3 is
the same, v4 (Kafka 2.1) each partition's current_leader_epoch and the answer's leader_epoch.
"""

from ..types import Array, Int8, Int16, Int32, Int64, Schema, String

API_KEY = 2


def _request(version: int) -> Schema:
    partition = [("partition", Int32)]
    if version >= 4:
        partition.append(("current_leader_epoch", Int32))
    partition.append(("timestamp", Int64))
    if version == 0:
        partition.append(("max_num_offsets", Int32))
    fields = [("replica_id", Int32)]
    if version >= 2:
        fields.append(("isolation_level", Int8))
    fields.append(("topics", Array(("topic", String), ("partitions", Array(*partition)))))
    return Schema(*fields, name=f"ListOffsetsRequestV{version}")


def _response(version: int) -> Schema:
    partition = [("partition", Int32), ("error_code", Int16)]
    if version == 0:
        partition.append(("offsets", Array(Int64)))
    else:
        partition += [("timestamp", Int64), ("offset", Int64)]
    if version >= 4:
        partition.append(("leader_epoch", Int32))
    fields = [("throttle_time_ms", Int32)] if version >= 2 else []
    fields.append(("topics", Array(("topic", String), ("partitions", Array(*partition)))))
    return Schema(*fields, name=f"ListOffsetsResponseV{version}")


REQUEST = {version: _request(version) for version in range(5)}
RESPONSE = {version: _response(version) for version in range(5)}
