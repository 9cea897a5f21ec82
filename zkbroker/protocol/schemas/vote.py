"""Vote (52): a candidate asks the voters for their vote (KIP-595, controller listener only).

Kafka 3.7 speaks version 0, flexible from the start. Request: ClusterId (nullable), then per topic and
partition (the metadata quorum's one, ``__cluster_metadata-0``) the candidate's epoch and id and where its
log ends (LastOffsetEpoch, LastOffset). Response: a request-wide ErrorCode, then per partition its ErrorCode,
the leader the voter knows (-1 none) and its epoch, and VoteGranted.
"""

from ..types import Boolean, CompactArray, CompactNullableString, CompactString, FlexibleSchema, Int16, Int32, Int64

API_KEY = 52

REQUEST = {
    0: FlexibleSchema(
        ("cluster_id", CompactNullableString),
        ("topics", CompactArray(
            ("topic_name", CompactString),
            ("partitions", CompactArray(
                ("partition_index", Int32),
                ("candidate_epoch", Int32),
                ("candidate_id", Int32),
                ("last_offset_epoch", Int32),
                ("last_offset", Int64),
            )),
        )),
        name="VoteRequestV0",
    ),
}

RESPONSE = {
    0: FlexibleSchema(
        ("error_code", Int16),
        ("topics", CompactArray(
            ("topic_name", CompactString),
            ("partitions", CompactArray(
                ("partition_index", Int32),
                ("error_code", Int16),
                ("leader_id", Int32),
                ("leader_epoch", Int32),
                ("vote_granted", Boolean),
            )),
        )),
        name="VoteResponseV0",
    ),
}
