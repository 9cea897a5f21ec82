"""Metadata (3): brokers, and leader/replicas/ISR of each partition (TopicMetadataRequest in 0.8).

Request topics: v0 ``[]`` means all topics; v1 ``None`` means all and ``[]`` means none; v4 adds
allow_auto_topic_creation. Responses: v1 adds each broker's rack, the controller_id and is_internal
per topic; v2 the cluster_id; v3 throttle_time_ms first; v4 is the same; v5 each partition's
offline_replicas; v6 is the same; v7 (Kafka 2.1) each partition's leader_epoch.
"""

from ..types import Array, Boolean, Int16, Int32, NullableArray, NullableString, Schema, String

API_KEY = 3


def _request(version: int) -> Schema:
    if version == 0:
        return Schema(("topics", Array(String)), name="MetadataRequestV0")
    fields = [("topics", NullableArray(String))]
    if version >= 4:
        fields.append(("allow_auto_topic_creation", Boolean))
    return Schema(*fields, name=f"MetadataRequestV{version}")


def _response(version: int) -> Schema:
    partition = [("error_code", Int16), ("partition", Int32), ("leader", Int32)]
    if version >= 7:
        partition.append(("leader_epoch", Int32))
    partition += [("replicas", Array(Int32)), ("isr", Array(Int32))]
    if version >= 5:
        partition.append(("offline_replicas", Array(Int32)))
    if version == 0:
        return Schema(
            ("brokers", Array(("node_id", Int32), ("host", String), ("port", Int32))),
            ("topics", Array(("error_code", Int16), ("topic", String), ("partitions", Array(*partition)))),
            name="MetadataResponseV0",
        )
    fields = [("throttle_time_ms", Int32)] if version >= 3 else []
    fields.append(("brokers", Array(("node_id", Int32), ("host", String), ("port", Int32), ("rack", NullableString))))
    if version >= 2:
        fields.append(("cluster_id", NullableString))
    fields.append(("controller_id", Int32))
    fields.append((
        "topics",
        Array(("error_code", Int16), ("topic", String), ("is_internal", Boolean), ("partitions", Array(*partition))),
    ))
    return Schema(*fields, name=f"MetadataResponseV{version}")


REQUEST = {version: _request(version) for version in range(8)}
RESPONSE = {version: _response(version) for version in range(8)}
