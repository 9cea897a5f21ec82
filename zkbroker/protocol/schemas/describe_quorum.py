"""DescribeQuorum (55): the quorum's leader, epoch, high watermark and each replica's progress (KIP-595).

Versions 0-1, flexible from 0; `metadata-quorum describe` sends it. Request: per topic the partitions asked
about. Response: ErrorCode, then per partition ErrorCode, LeaderId, LeaderEpoch, HighWatermark and two lists
of ReplicaState, CurrentVoters and Observers: ReplicaId and LogEndOffset, plus (v1, KIP-836) the
LastFetchTimestamp and LastCaughtUpTimestamp that ``--replication`` prints (-1 when unknown).
"""

from ..types import CompactArray, CompactString, FlexibleSchema, Int16, Int32, Int64

API_KEY = 55


def _replica_state(version: int) -> CompactArray:
    fields = [("replica_id", Int32), ("log_end_offset", Int64)]
    if version >= 1:
        fields += [("last_fetch_timestamp", Int64), ("last_caught_up_timestamp", Int64)]
    return CompactArray(*fields)


def _request(version: int) -> FlexibleSchema:
    return FlexibleSchema(
        ("topics", CompactArray(
            ("topic_name", CompactString), ("partitions", CompactArray(("partition_index", Int32))))),
        name=f"DescribeQuorumRequestV{version}",
    )


def _response(version: int) -> FlexibleSchema:
    return FlexibleSchema(
        ("error_code", Int16),
        ("topics", CompactArray(
            ("topic_name", CompactString),
            ("partitions", CompactArray(
                ("partition_index", Int32),
                ("error_code", Int16),
                ("leader_id", Int32),
                ("leader_epoch", Int32),
                ("high_watermark", Int64),
                ("current_voters", _replica_state(version)),
                ("observers", _replica_state(version)),
            )),
        )),
        name=f"DescribeQuorumResponseV{version}",
    )


REQUEST = {version: _request(version) for version in (0, 1)}
RESPONSE = {version: _response(version) for version in (0, 1)}
