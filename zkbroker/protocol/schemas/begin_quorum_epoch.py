"""BeginQuorumEpoch (53): a newly elected leader tells the voters (KIP-595, controller listener only).

Kafka 3.7 speaks version 0, which is *not* flexible (its first flexible version, 1, came with KIP-853 in
3.9), so int16-length strings and int32-count arrays. Request: ClusterId (nullable), then per partition the
LeaderId and LeaderEpoch. Response: ErrorCode, then per partition ErrorCode, LeaderId, LeaderEpoch.
"""

from ..types import Array, Int16, Int32, NullableString, Schema, String

API_KEY = 53

REQUEST = {
    0: Schema(
        ("cluster_id", NullableString),
        ("topics", Array(
            ("topic_name", String),
            ("partitions", Array(("partition_index", Int32), ("leader_id", Int32), ("leader_epoch", Int32))),
        )),
        name="BeginQuorumEpochRequestV0",
    ),
}

RESPONSE = {
    0: Schema(
        ("error_code", Int16),
        ("topics", Array(
            ("topic_name", String),
            ("partitions", Array(
                ("partition_index", Int32), ("error_code", Int16), ("leader_id", Int32), ("leader_epoch", Int32))),
        )),
        name="BeginQuorumEpochResponseV0",
    ),
}
