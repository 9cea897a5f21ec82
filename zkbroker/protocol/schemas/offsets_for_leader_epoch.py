"""OffsetsForLeaderEpoch (23, KIP-101; beyond 0.8.2): a follower asks the leader where an epoch
ends, to truncate to that instead of to its high watermark. Advertised only with
``replication.truncation=leader-epoch``. Note the v0 response puts error_code before partition.
"""

from ..types import Array, Int16, Int32, Int64, Schema, String

API_KEY = 23

REQUEST = {
    0: Schema(
        (
            "topics",
            Array(
                ("topic", String),
                ("partitions", Array(("partition", Int32), ("leader_epoch", Int32))),
            ),
        ),
        name="OffsetsForLeaderEpochRequestV0",
    )
}

RESPONSE = {
    0: Schema(
        (
            "topics",
            Array(
                ("topic", String),
                (
                    "partitions",
                    Array(("error_code", Int16), ("partition", Int32), ("end_offset", Int64)),
                ),
            ),
        ),
        name="OffsetsForLeaderEpochResponseV0",
    )
}
