"""StopReplica (5): controller -> broker, stop fetching (and, if delete_partitions, delete)."""

from ..types import Array, Boolean, Int16, Int32, Schema, String

API_KEY = 5

REQUEST = {
    0: Schema(
        ("controller_id", Int32),
        ("controller_epoch", Int32),
        ("delete_partitions", Boolean),
        ("partitions", Array(("topic", String), ("partition", Int32))),
        name="StopReplicaRequestV0",
    )
}

RESPONSE = {
    0: Schema(
        ("error_code", Int16),
        ("partitions", Array(("topic", String), ("partition", Int32), ("error_code", Int16))),
        name="StopReplicaResponseV0",
    )
}
