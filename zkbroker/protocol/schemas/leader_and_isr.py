"""LeaderAndIsr (4): controller -> broker, "become leader or follower of these partitions".

v0 lists each partition with its topic (ungrouped) and the live leaders' endpoints. Brokers
reject it when controller_epoch is stale, and ignore a partition whose leader_epoch is not
newer than the one they know.
"""

from ..types import Array, Int16, Int32, Schema, String

API_KEY = 4

#: Also the partition state of UpdateMetadata v0 (Kafka's PartitionStateInfo).
PARTITION_STATE = Schema(
    ("topic", String),
    ("partition", Int32),
    ("controller_epoch", Int32),
    ("leader", Int32),
    ("leader_epoch", Int32),
    ("isr", Array(Int32)),
    ("zk_version", Int32),
    ("replicas", Array(Int32)),
    name="PartitionState",
)

REQUEST = {
    0: Schema(
        ("controller_id", Int32),
        ("controller_epoch", Int32),
        ("partition_states", Array(PARTITION_STATE)),
        ("live_leaders", Array(("broker_id", Int32), ("host", String), ("port", Int32))),
        name="LeaderAndIsrRequestV0",
    )
}

RESPONSE = {
    0: Schema(
        ("error_code", Int16),
        ("partitions", Array(("topic", String), ("partition", Int32), ("error_code", Int16))),
        name="LeaderAndIsrResponseV0",
    )
}
