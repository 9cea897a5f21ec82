"""Vote (52): a candidate asks the voters for their vote (KIP-595, controller listener only).

Flexible from version 0. Request: ClusterId (nullable), then per topic and partition (the metadata quorum's
one, ``__cluster_metadata-0``) the candidate's epoch and id and where its log ends (LastOffsetEpoch,
LastOffset). Response: a request-wide ErrorCode, then per partition its ErrorCode, the leader the voter knows
(-1 none) and its epoch, and VoteGranted.

Kafka 3.7 speaks version 0 only. Version 1 (KIP-853, Kafka 3.8+) adds the voter's key: VoterId after
ClusterId, and per partition the candidate's and the voter's directory ids (Uuids) after CandidateId; its
response may carry the leaders' endpoints as tag 0. Version 2 (KIP-996, Kafka 4.0) adds PreVote after
LastOffset ("would you vote for me?", which moves no epoch) and renames the candidate fields to replica
fields; the bytes are the same.
"""

from ..types import (
    Boolean,
    CompactArray,
    CompactNullableString,
    CompactString,
    FlexibleSchema,
    Int16,
    Int32,
    Int64,
    TaggedField,
    UInt16,
    Uuid,
)

API_KEY = 52

#: Uuid.ZERO_UUID: a directory id not sent.
ZERO_UUID = bytes(16)

_NODE_ENDPOINT = FlexibleSchema(("node_id", Int32), ("host", CompactString), ("port", UInt16),
                                name="NodeEndpoint")


def _request(version: int) -> FlexibleSchema:
    fields = [("cluster_id", CompactNullableString)]
    if version >= 1:
        fields.append(("voter_id", Int32))
    partition = [("partition_index", Int32), ("candidate_epoch", Int32), ("candidate_id", Int32)]
    if version >= 1:
        partition += [("candidate_directory_id", Uuid), ("voter_directory_id", Uuid)]
    partition += [("last_offset_epoch", Int32), ("last_offset", Int64)]
    if version >= 2:
        partition.append(("pre_vote", Boolean))
    fields.append(("topics", CompactArray(("topic_name", CompactString), ("partitions", CompactArray(*partition)))))
    return FlexibleSchema(*fields, name=f"VoteRequestV{version}")


def _response(version: int) -> FlexibleSchema:
    fields = (
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
    )
    tagged = (TaggedField(0, "node_endpoints", CompactArray(_NODE_ENDPOINT), []),) if version >= 1 else ()
    return FlexibleSchema(*fields, tagged=tagged, name=f"VoteResponseV{version}")


REQUEST = {version: _request(version) for version in range(3)}
RESPONSE = {version: _response(version) for version in range(3)}
