"""Fetch (1): read message sets from partition leaders (consumers and follower replicas).

Request: replica_id (-1 for consumers; a broker id for followers), max_wait_ms, min_bytes, and
per partition fetch_offset and max_bytes; v3 adds a response-wide max_bytes; v4 (Kafka 0.11) adds
isolation_level and may receive record batches (magic 2); v5 adds each partition's log_start_offset
(followers'); v7 adds incremental fetch sessions (KIP-227: session_id, session_epoch, forgotten topics;
a broker may always answer session 0, "no session", and does here); v9 adds each partition's
current_leader_epoch (KIP-320); v10 may receive zstd. Responses: v1+ put throttle_time_ms *first*; per
partition error_code, high_watermark and the message set; v4 adds last_stable_offset and
aborted_transactions; v5 log_start_offset; v7 a top-level error_code and session_id. The server encodes
responses with ``zkbroker.protocol.fetch_response`` so message sets go from the segment files with
sendfile; these schemas serve clients, followers and tests. v11 adds rack_id and preferred_read_replica; v12
is the first flexible version (KIP-482) and carries KIP-595's Raft fields: the cluster_id tag, each
partition's last_fetched_epoch, and the response's diverging_epoch, current_leader and snapshot_id tags; v13
names topics by id (KIP-516), v15 moves replica_id into the replica_state tag (KIP-903), v16 adds the
node_endpoints tag (KIP-951), v17 each partition's replica_directory_id tag (KIP-853, Kafka 3.8+; the response is
v16's). 11-17 are registered for the metadata quorum, not advertised.
"""

from ..types import (
    Array,
    CompactArray,
    CompactNullableArray,
    CompactNullableString,
    CompactRecords,
    CompactString,
    FlexibleSchema,
    Int8,
    Int16,
    Int32,
    Int64,
    NullableArray,
    Records,
    Schema,
    String,
    TaggedField,
    Uuid,
)

API_KEY = 1

#: The first flexible version (KIP-482): compact types, tag buffers, and KIP-595's Raft fields.
FIRST_FLEXIBLE = 12

_EPOCH_END_OFFSET = FlexibleSchema(("epoch", Int32), ("end_offset", Int64), name="EpochEndOffset")
_LEADER_ID_AND_EPOCH = FlexibleSchema(("leader_id", Int32), ("leader_epoch", Int32), name="LeaderIdAndEpoch")
_SNAPSHOT_ID = FlexibleSchema(("end_offset", Int64), ("epoch", Int32), name="SnapshotId")
_REPLICA_STATE = FlexibleSchema(("replica_id", Int32), ("replica_epoch", Int64), name="ReplicaState")
_NODE_ENDPOINT = FlexibleSchema(
    ("node_id", Int32), ("host", CompactString), ("port", Int32), ("rack", CompactNullableString), name="NodeEndpoint")

#: Each tagged struct's default: Kafka writes the field only when it differs from a struct of its defaults.
NO_DIVERGING_EPOCH = _EPOCH_END_OFFSET(-1, -1)
NO_CURRENT_LEADER = _LEADER_ID_AND_EPOCH(-1, -1)
NO_SNAPSHOT_ID = _SNAPSHOT_ID(-1, -1)
NO_REPLICA_STATE = _REPLICA_STATE(-1, -1)
NO_DIRECTORY_ID = bytes(16)  # Uuid.ZERO_UUID


def _request(version: int) -> Schema:
    flexible = version >= FIRST_FLEXIBLE
    array = CompactArray if flexible else Array
    string = CompactString if flexible else String
    partition = [("partition", Int32)]
    if version >= 9:
        partition.append(("current_leader_epoch", Int32))
    partition.append(("fetch_offset", Int64))
    if version >= 12:
        partition.append(("last_fetched_epoch", Int32))
    if version >= 5:
        partition.append(("log_start_offset", Int64))
    partition.append(("max_bytes", Int32))
    topic = ("topic_id", Uuid) if version >= 13 else ("topic", string)
    fields = [] if version >= 15 else [("replica_id", Int32)]  # v15+: in the ReplicaState tag (KIP-903)
    fields += [("max_wait_ms", Int32), ("min_bytes", Int32)]
    if version >= 3:
        fields.append(("max_bytes", Int32))
    if version >= 4:
        fields.append(("isolation_level", Int8))
    if version >= 7:
        fields += [("session_id", Int32), ("session_epoch", Int32)]
    if version >= 17:
        # KIP-853: which log dir the fetching replica runs on (a voter restarted on an empty disk has another)
        partition_type = array(FlexibleSchema(*partition, tagged=(
            TaggedField(0, "replica_directory_id", Uuid, NO_DIRECTORY_ID),), name="FetchPartition"))
    else:
        partition_type = array(*partition)
    fields.append(("topics", array(topic, ("partitions", partition_type))))
    if version >= 7:
        fields.append(("forgotten_topics", array(topic, ("partitions", array(Int32)))))
    if version >= 11:
        fields.append(("rack_id", string))
    name = f"FetchRequestV{version}"
    if not flexible:
        return Schema(*fields, name=name)
    tagged = [TaggedField(0, "cluster_id", CompactNullableString, None)]
    if version >= 15:
        tagged.append(TaggedField(1, "replica_state", _REPLICA_STATE, NO_REPLICA_STATE))
    return FlexibleSchema(*fields, tagged=tuple(tagged), name=name)


def _response(version: int) -> Schema:
    flexible = version >= FIRST_FLEXIBLE
    array = CompactArray if flexible else Array
    partition = [("partition", Int32), ("error_code", Int16), ("high_watermark", Int64)]
    if version >= 4:
        partition.append(("last_stable_offset", Int64))
    if version >= 5:
        partition.append(("log_start_offset", Int64))
    if version >= 4:
        aborted = (("producer_id", Int64), ("first_offset", Int64))
        aborted_type = CompactNullableArray(*aborted) if flexible else NullableArray(*aborted)
        partition.append(("aborted_transactions", aborted_type))
    if version >= 11:
        partition.append(("preferred_read_replica", Int32))
    partition.append(("records", CompactRecords if flexible else Records))
    topic = ("topic_id", Uuid) if version >= 13 else ("topic", CompactString if flexible else String)
    fields = []
    if version >= 1:
        fields.append(("throttle_time_ms", Int32))
    if version >= 7:
        fields += [("error_code", Int16), ("session_id", Int32)]
    name = f"FetchResponseV{version}"
    if not flexible:
        fields.append(("topics", Array(topic, ("partitions", Array(*partition)))))
        return Schema(*fields, name=name)
    partition_struct = FlexibleSchema(*partition, tagged=(
        TaggedField(0, "diverging_epoch", _EPOCH_END_OFFSET, NO_DIVERGING_EPOCH),
        TaggedField(1, "current_leader", _LEADER_ID_AND_EPOCH, NO_CURRENT_LEADER),
        TaggedField(2, "snapshot_id", _SNAPSHOT_ID, NO_SNAPSHOT_ID),
    ), name="PartitionData")
    fields.append(("topics", array(topic, ("partitions", array(partition_struct)))))
    tagged = (TaggedField(0, "node_endpoints", CompactArray(_NODE_ENDPOINT), []),) if version >= 16 else ()
    return FlexibleSchema(*fields, tagged=tagged, name=name)


#: Versions 0-16, Kafka 3.7's, and 17 (Kafka 3.8's). Only 0-10 are advertised (README's table); 12-17, flexible,
#: carry the Raft fields the metadata quorum's controllers fetch with (KIP-595: last_fetched_epoch, the diverging
#: epoch, the current leader, the snapshot id; v13 topic ids, v15 the ReplicaState tag, v16 node endpoints, v17
#: the replica's directory id).
REQUEST = {version: _request(version) for version in range(18)}
RESPONSE = {version: _response(version) for version in range(18)}
