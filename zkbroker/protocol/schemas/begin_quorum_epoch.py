"""BeginQuorumEpoch (53): a newly elected leader tells the voters (KIP-595, controller listener only).

Kafka 3.7 speaks version 0, which is *not* flexible, so int16-length strings and int32-count arrays. Request:
ClusterId (nullable), then per partition the LeaderId and LeaderEpoch. Response: ErrorCode, then per partition
ErrorCode, LeaderId, LeaderEpoch.

Version 1 (KIP-853, Kafka 3.8+) is the first flexible one and adds the voter's key (VoterId after ClusterId,
VoterDirectoryId first in the partition, after PartitionIndex) and the leader's endpoints (LeaderEndpoints: name,
host, port) after the topics; its response may carry the leaders' endpoints as tag 0.
"""

from ..types import (
    Array,
    CompactArray,
    CompactNullableString,
    CompactString,
    FlexibleSchema,
    Int16,
    Int32,
    NullableString,
    Schema,
    String,
    TaggedField,
    UInt16,
    Uuid,
)

API_KEY = 53

_NODE_ENDPOINT = FlexibleSchema(("node_id", Int32), ("host", CompactString), ("port", UInt16),
                                name="NodeEndpoint")

REQUEST = {
    0: Schema(
        ("cluster_id", NullableString),
        ("topics", Array(
            ("topic_name", String),
            ("partitions", Array(("partition_index", Int32), ("leader_id", Int32), ("leader_epoch", Int32))),
        )),
        name="BeginQuorumEpochRequestV0",
    ),
    1: FlexibleSchema(
        ("cluster_id", CompactNullableString),
        ("voter_id", Int32),
        ("topics", CompactArray(
            ("topic_name", CompactString),
            ("partitions", CompactArray(
                ("partition_index", Int32), ("voter_directory_id", Uuid), ("leader_id", Int32),
                ("leader_epoch", Int32))),
        )),
        ("leader_endpoints", CompactArray(("name", CompactString), ("host", CompactString), ("port", UInt16))),
        name="BeginQuorumEpochRequestV1",
    ),
}

_PARTITIONS_V0 = Array(("partition_index", Int32), ("error_code", Int16), ("leader_id", Int32), ("leader_epoch", Int32))

RESPONSE = {
    0: Schema(
        ("error_code", Int16),
        ("topics", Array(("topic_name", String), ("partitions", _PARTITIONS_V0))),
        name="BeginQuorumEpochResponseV0",
    ),
    1: FlexibleSchema(
        ("error_code", Int16),
        ("topics", CompactArray(
            ("topic_name", CompactString),
            ("partitions", CompactArray(
                ("partition_index", Int32), ("error_code", Int16), ("leader_id", Int32), ("leader_epoch", Int32))),
        )),
        tagged=(TaggedField(0, "node_endpoints", CompactArray(_NODE_ENDPOINT), []),),
        name="BeginQuorumEpochResponseV1",
    ),
}
