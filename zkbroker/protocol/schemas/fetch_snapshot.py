"""FetchSnapshot (59): a replica too far behind the leader's log start reads a snapshot in chunks (KIP-630).

Version 0, flexible. Request: ClusterId as tagged field 0 (null by default), ReplicaId, MaxBytes, then per
partition CurrentLeaderEpoch, the SnapshotId wanted (EndOffset, Epoch) and the Position to read from.
Response: ThrottleTimeMs, ErrorCode, then per partition (``index``) ErrorCode, SnapshotId, CurrentLeader as
tagged field 0 (written unless it is all zeros, the struct's default), the snapshot's Size, the Position of
this chunk and its bytes (UnalignedRecords: a slice of the .checkpoint file, not cut at batch boundaries).
"""

from ..types import (
    CompactArray,
    CompactNullableString,
    CompactRecords,
    CompactString,
    FlexibleSchema,
    Int16,
    Int32,
    Int64,
    TaggedField,
)

API_KEY = 59

SNAPSHOT_ID = FlexibleSchema(("end_offset", Int64), ("epoch", Int32), name="SnapshotId")
LEADER_ID_AND_EPOCH = FlexibleSchema(("leader_id", Int32), ("leader_epoch", Int32), name="LeaderIdAndEpoch")

REQUEST = {
    0: FlexibleSchema(
        ("replica_id", Int32),
        ("max_bytes", Int32),
        ("topics", CompactArray(
            ("name", CompactString),
            ("partitions", CompactArray(
                ("partition", Int32),
                ("current_leader_epoch", Int32),
                ("snapshot_id", SNAPSHOT_ID),
                ("position", Int64),
            )),
        )),
        tagged=(TaggedField(0, "cluster_id", CompactNullableString, None),),
        name="FetchSnapshotRequestV0",
    ),
}

RESPONSE = {
    0: FlexibleSchema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("topics", CompactArray(
            ("name", CompactString),
            ("partitions", CompactArray(FlexibleSchema(
                ("index", Int32),
                ("error_code", Int16),
                ("snapshot_id", SNAPSHOT_ID),
                ("size", Int64),
                ("position", Int64),
                ("unaligned_records", CompactRecords),
                tagged=(TaggedField(0, "current_leader", LEADER_ID_AND_EPOCH, LEADER_ID_AND_EPOCH(0, 0)),),
                name="PartitionSnapshot",
            ))),
        )),
        name="FetchSnapshotResponseV0",
    ),
}
