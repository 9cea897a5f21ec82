"""EndQuorumEpoch (54): a resigning leader names the voters best placed to succeed it (KIP-595).

Kafka 3.7 speaks version 0, not flexible (as BeginQuorumEpoch). Request: ClusterId (nullable), then per
partition LeaderId, LeaderEpoch and PreferredSuccessors (voter ids, best first). Response: ErrorCode, then per
partition ErrorCode, LeaderId, LeaderEpoch.
"""

from ..types import Array, Int16, Int32, NullableString, Schema, String

API_KEY = 54

REQUEST = {
    0: Schema(
        ("cluster_id", NullableString),
        ("topics", Array(
            ("topic_name", String),
            ("partitions", Array(
                ("partition_index", Int32),
                ("leader_id", Int32),
                ("leader_epoch", Int32),
                ("preferred_successors", Array(Int32)),
            )),
        )),
        name="EndQuorumEpochRequestV0",
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
        name="EndQuorumEpochResponseV0",
    ),
}
