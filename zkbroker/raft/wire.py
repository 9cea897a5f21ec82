"""The quorum's messages (``messages``) to and from Kafka 3.7's wire structs, both directions, pure.

A driver sends ``message`` as ``api.encode_request(api_key_of(message), version, correlation_id, client_id,
to_body(message, version))`` (or ``api.encode_response`` for an answer) and turns a decoded body back with
``from_body(api_key, version, is_request, body)``. The wire nests everything in ``Topics[].Partitions[]``;
the metadata quorum has one partition, ``__cluster_metadata-0`` (by name, or by Kafka's fixed topic id in
Fetch 13+), so the dataclasses hold that partition's fields flat. A response whose request-wide error_code is
set and which carries no partition maps to that error with the partition's fields unknown (-1).

Fetch's records travel as magic 2 batches, as the log holds them (``batches``).
"""

from __future__ import annotations

import base64
from typing import Any

from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from zkbroker.protocol.metadata_records import METADATA_TOPIC, METADATA_TOPIC_ID
from zkbroker.protocol.schemas import fetch as fetch_schemas

from . import messages as m
from .batches import batches_to_entries, entries_to_batches

__all__ = ["KAFKA_37_VERSIONS", "api_key_of", "from_body", "quorum_versions", "to_body"]

#: The versions Kafka 3.7's controllers speak to each other (Fetch: its latest; DescribeQuorum: the tool's).
KAFKA_37_VERSIONS = {
    ApiKey.VOTE: 0,
    ApiKey.BEGIN_QUORUM_EPOCH: 0,
    ApiKey.END_QUORUM_EPOCH: 0,
    ApiKey.FETCH: 16,
    ApiKey.DESCRIBE_QUORUM: 1,
    ApiKey.FETCH_SNAPSHOT: 0,
}


def quorum_versions(pre_vote: bool = False, directory_ids: bool = False) -> dict[int, int]:
    """The versions a controller sends with the later fixes switched on: Pre-Vote needs Vote v2 (KIP-996, Kafka
    4.0), directory ids Vote v1, BeginQuorumEpoch v1 and Fetch v17 (KIP-853, Kafka 3.8). Every voter of a quorum
    has the same switches (they are the quorum's), so the versions are fixed rather than negotiated."""
    versions = dict(KAFKA_37_VERSIONS)
    if directory_ids:
        versions.update({ApiKey.VOTE: 1, ApiKey.BEGIN_QUORUM_EPOCH: 1, ApiKey.FETCH: 17})
    if pre_vote:
        versions[ApiKey.VOTE] = 2
    return versions


#: Uuid.ZERO_UUID, what the wire carries for a directory id not known (None here).
_ZERO_UUID = bytes(16)


def _uuid(directory_id: str | None) -> bytes:
    """A directory id (22 characters of base64url, as meta.properties holds it) as the wire's 16 bytes."""
    if directory_id is None:
        return _ZERO_UUID
    raw = base64.urlsafe_b64decode(directory_id + "==")
    if len(raw) != 16:
        raise LocalProtocolError(f"directory id {directory_id!r} is not a Kafka Uuid")
    return raw


def _directory_id(raw: bytes) -> str | None:
    raw = bytes(raw)
    return None if raw == _ZERO_UUID else base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

#: The request-wide MaxBytes of a Raft Fetch (KafkaRaftClient's MAX_FETCH_SIZE_BYTES, 8 MiB).
MAX_FETCH_SIZE_BYTES = 8 * 1024 * 1024

_KEYS = {
    m.VoteRequest: ApiKey.VOTE, m.VoteResponse: ApiKey.VOTE,
    m.BeginQuorumEpochRequest: ApiKey.BEGIN_QUORUM_EPOCH, m.BeginQuorumEpochResponse: ApiKey.BEGIN_QUORUM_EPOCH,
    m.EndQuorumEpochRequest: ApiKey.END_QUORUM_EPOCH, m.EndQuorumEpochResponse: ApiKey.END_QUORUM_EPOCH,
    m.FetchRequest: ApiKey.FETCH, m.FetchResponse: ApiKey.FETCH,
    m.DescribeQuorumRequest: ApiKey.DESCRIBE_QUORUM, m.DescribeQuorumResponse: ApiKey.DESCRIBE_QUORUM,
    m.FetchSnapshotRequest: ApiKey.FETCH_SNAPSHOT, m.FetchSnapshotResponse: ApiKey.FETCH_SNAPSHOT,
}


def api_key_of(message: m.Message) -> int:
    return _KEYS[type(message)]



def _topics(version_uses_id: bool, partition: dict[str, Any], name_key: str = "topic_name") -> list[dict]:
    topic: dict[str, Any] = {name_key: METADATA_TOPIC, "partitions": [partition]}
    if version_uses_id:
        topic["topic_id"] = METADATA_TOPIC_ID
    return [topic]


#: Errors Kafka's KafkaRaftClient answers for the whole request, with no partition: a request from another
#: cluster, or one that does not name `__cluster_metadata-0` alone.
REQUEST_WIDE_ERRORS = frozenset({int(ErrorCode.INCONSISTENT_CLUSTER_ID), int(ErrorCode.INVALID_REQUEST)})


def to_body(message: m.Message, version: int) -> dict[str, Any]:
    """The wire body (a dict the registry's schema encodes) of ``message`` at ``version``. A response whose error
    is request-wide (``REQUEST_WIDE_ERRORS``) carries it at the top with no partition, as Kafka answers it."""
    if not isinstance(message, m.Request) and message.error_code in REQUEST_WIDE_ERRORS:
        return {"throttle_time_ms": 0, "error_code": message.error_code, "session_id": 0, "topics": []}
    if isinstance(message, m.VoteRequest):
        if message.pre_vote and version < 2:
            raise LocalProtocolError(f"Vote v{version} has no PreVote field (v2+, KIP-996)")
        return {"cluster_id": message.cluster_id, "voter_id": message.voter_id, "topics": _topics(False, {
            "partition_index": 0, "candidate_epoch": message.candidate_epoch, "candidate_id": message.candidate_id,
            "candidate_directory_id": _uuid(message.candidate_directory_id),
            "voter_directory_id": _uuid(message.voter_directory_id),
            "last_offset_epoch": message.last_offset_epoch, "last_offset": message.last_offset,
            "pre_vote": message.pre_vote})}
    if isinstance(message, m.VoteResponse):
        return {"error_code": 0, "topics": _topics(False, {
            "partition_index": 0, "error_code": message.error_code, "leader_id": message.leader_id,
            "leader_epoch": message.leader_epoch, "vote_granted": message.vote_granted}), "node_endpoints": []}
    if isinstance(message, m.BeginQuorumEpochRequest):
        # LeaderEndpoints (v1) names the leader's listeners for a voter that does not know them (KIP-853's
        # dynamic quorums); here every voter knows them from controller.quorum.voters, so none are sent.
        return {"cluster_id": message.cluster_id, "voter_id": message.voter_id, "topics": _topics(False, {
            "partition_index": 0, "voter_directory_id": _uuid(message.voter_directory_id),
            "leader_id": message.leader_id, "leader_epoch": message.leader_epoch}), "leader_endpoints": []}
    if isinstance(message, (m.BeginQuorumEpochResponse, m.EndQuorumEpochResponse)):
        return {"error_code": 0, "topics": _topics(False, {
            "partition_index": 0, "error_code": message.error_code, "leader_id": message.leader_id,
            "leader_epoch": message.leader_epoch}), "node_endpoints": []}
    if isinstance(message, m.EndQuorumEpochRequest):
        return {"cluster_id": message.cluster_id, "topics": _topics(False, {
            "partition_index": 0, "leader_id": message.leader_id, "leader_epoch": message.leader_epoch,
            "preferred_successors": list(message.preferred_successors)})}
    if isinstance(message, m.FetchRequest):
        if version < fetch_schemas.FIRST_FLEXIBLE:
            raise LocalProtocolError(f"Fetch v{version} has no Raft fields (v12+)")
        partition = {"partition": 0, "current_leader_epoch": message.current_leader_epoch,
                     "fetch_offset": message.fetch_offset, "last_fetched_epoch": message.last_fetched_epoch,
                     "log_start_offset": message.log_start_offset, "max_bytes": message.partition_max_bytes,
                     "replica_directory_id": _uuid(message.replica_directory_id)}
        return {"cluster_id": message.cluster_id, "replica_id": message.replica_id,
                "replica_state": {"replica_id": message.replica_id, "replica_epoch": -1},
                "max_wait_ms": message.max_wait_ms, "min_bytes": 0, "max_bytes": MAX_FETCH_SIZE_BYTES,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": _topics(version >= 13, partition, "topic"), "forgotten_topics": [], "rack_id": ""}
    if isinstance(message, m.FetchResponse):
        if version < fetch_schemas.FIRST_FLEXIBLE:
            raise LocalProtocolError(f"Fetch v{version} has no Raft fields (v12+)")
        de, sid, cl = message.diverging_epoch, message.snapshot_id, message.current_leader
        partition = {
            "partition": 0, "error_code": message.error_code, "high_watermark": message.high_watermark,
            "last_stable_offset": -1, "log_start_offset": message.log_start_offset, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": entries_to_batches(message.records),
            "diverging_epoch": ({"epoch": de.epoch, "end_offset": de.end_offset} if de
                                else fetch_schemas.NO_DIVERGING_EPOCH),
            "current_leader": {"leader_id": cl.leader_id, "leader_epoch": cl.leader_epoch},
            "snapshot_id": ({"end_offset": sid.end_offset, "epoch": sid.epoch} if sid
                            else fetch_schemas.NO_SNAPSHOT_ID),
        }
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                "topics": _topics(version >= 13, partition, "topic")}
    if isinstance(message, m.DescribeQuorumRequest):
        return {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]}
    if isinstance(message, m.DescribeQuorumResponse):
        def states(replicas: tuple[m.ReplicaState, ...]) -> list[dict]:
            return [{"replica_id": r.replica_id, "log_end_offset": r.log_end_offset,
                     "last_fetch_timestamp": r.last_fetch_timestamp,
                     "last_caught_up_timestamp": r.last_caught_up_timestamp} for r in replicas]
        return {"error_code": 0, "topics": _topics(False, {
            "partition_index": 0, "error_code": message.error_code, "leader_id": message.leader_id,
            "leader_epoch": message.leader_epoch, "high_watermark": message.high_watermark,
            "current_voters": states(message.current_voters), "observers": states(message.observers)})}
    if isinstance(message, m.FetchSnapshotRequest):
        return {"cluster_id": message.cluster_id, "replica_id": message.replica_id, "max_bytes": message.max_bytes,
                "topics": [{"name": METADATA_TOPIC, "partitions": [{
                    "partition": 0, "current_leader_epoch": message.current_leader_epoch,
                    "snapshot_id": {"end_offset": message.snapshot_id.end_offset, "epoch": message.snapshot_id.epoch},
                    "position": message.position}]}]}
    if isinstance(message, m.FetchSnapshotResponse):
        return {"throttle_time_ms": 0, "error_code": 0, "topics": [{"name": METADATA_TOPIC, "partitions": [{
            "index": 0, "error_code": message.error_code,
            "snapshot_id": {"end_offset": message.snapshot_id.end_offset, "epoch": message.snapshot_id.epoch},
            "current_leader": {"leader_id": message.current_leader.leader_id,
                               "leader_epoch": message.current_leader.leader_epoch},
            "size": message.size, "position": message.position, "unaligned_records": message.unaligned_records}]}]}
    raise LocalProtocolError(f"no wire form for {type(message).__name__}")


def _partition(body: Any, what: str) -> Any | None:
    """The one partition of the metadata quorum in a decoded body, or None when there is none."""
    topics = body.topics
    if not topics:
        return None
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise RemoteProtocolError(f"{what}: the metadata quorum has one partition, the message names "
                                  f"{sum(len(t.partitions) for t in topics)}")
    return topics[0].partitions[0]


def from_body(api_key: int, version: int, is_request: bool, body: Any) -> m.Message:
    """The message a decoded request or response body carries (the inverse of :func:`to_body`)."""
    what = f"api key {api_key} v{version} {'request' if is_request else 'response'}"
    p = _partition(body, what)
    if p is None and is_request and api_key != ApiKey.DESCRIBE_QUORUM:
        raise RemoteProtocolError(f"{what}: no partition")
    error = getattr(body, "error_code", 0)
    if api_key == ApiKey.VOTE:
        if is_request:
            if version == 0:
                return m.VoteRequest(body.cluster_id, p.candidate_epoch, p.candidate_id, p.last_offset_epoch,
                                     p.last_offset)
            return m.VoteRequest(body.cluster_id, p.candidate_epoch, p.candidate_id, p.last_offset_epoch,
                                 p.last_offset, bool(getattr(p, "pre_vote", False)),
                                 _directory_id(p.candidate_directory_id), body.voter_id,
                                 _directory_id(p.voter_directory_id))
        if p is None:
            return m.VoteResponse(error, -1, -1, False)
        return m.VoteResponse(p.error_code, p.leader_id, p.leader_epoch, p.vote_granted)
    if api_key in (ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH):
        begin = api_key == ApiKey.BEGIN_QUORUM_EPOCH
        if is_request:
            if begin and version >= 1:
                return m.BeginQuorumEpochRequest(body.cluster_id, p.leader_id, p.leader_epoch, body.voter_id,
                                                 _directory_id(p.voter_directory_id))
            if begin:
                return m.BeginQuorumEpochRequest(body.cluster_id, p.leader_id, p.leader_epoch)
            return m.EndQuorumEpochRequest(body.cluster_id, p.leader_id, p.leader_epoch, tuple(p.preferred_successors))
        cls = m.BeginQuorumEpochResponse if begin else m.EndQuorumEpochResponse
        return cls(error, -1, -1) if p is None else cls(p.error_code, p.leader_id, p.leader_epoch)
    if api_key == ApiKey.FETCH:
        if is_request:
            replica_id = body.replica_state.replica_id if version >= 15 else body.replica_id
            directory = _directory_id(p.replica_directory_id) if version >= 17 else None
            return m.FetchRequest(body.cluster_id, replica_id, body.max_wait_ms, p.current_leader_epoch,
                                  p.fetch_offset, p.last_fetched_epoch, p.log_start_offset, p.max_bytes, directory)
        if p is None:
            return m.FetchResponse(error, -1, -1, m.LeaderIdAndEpoch(-1, -1))
        de, sid, cl = p.diverging_epoch, p.snapshot_id, p.current_leader
        return m.FetchResponse(
            p.error_code, p.high_watermark, p.log_start_offset, m.LeaderIdAndEpoch(cl.leader_id, cl.leader_epoch),
            None if (de.epoch, de.end_offset) == (-1, -1) else m.EpochEndOffset(de.epoch, de.end_offset),
            None if (sid.end_offset, sid.epoch) == (-1, -1) else m.SnapshotId(sid.end_offset, sid.epoch),
            batches_to_entries(p.records).decoded())
    if api_key == ApiKey.DESCRIBE_QUORUM:
        if is_request:
            return m.DescribeQuorumRequest()
        if p is None:
            return m.DescribeQuorumResponse(error, -1, -1, -1, (), ())

        def states(replicas: list) -> tuple[m.ReplicaState, ...]:
            return tuple(m.ReplicaState(r.replica_id, r.log_end_offset, getattr(r, "last_fetch_timestamp", -1),
                                        getattr(r, "last_caught_up_timestamp", -1)) for r in replicas)
        return m.DescribeQuorumResponse(p.error_code, p.leader_id, p.leader_epoch, p.high_watermark,
                                        states(p.current_voters), states(p.observers))
    if api_key == ApiKey.FETCH_SNAPSHOT:
        if is_request:
            return m.FetchSnapshotRequest(body.cluster_id, body.replica_id, body.max_bytes, p.current_leader_epoch,
                                          m.SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch), p.position)
        if p is None:
            return m.FetchSnapshotResponse(error, m.SnapshotId(-1, -1), m.LeaderIdAndEpoch(-1, -1), -1, -1, b"")
        return m.FetchSnapshotResponse(
            p.error_code, m.SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch),
            m.LeaderIdAndEpoch(p.current_leader.leader_id, p.current_leader.leader_epoch), p.size, p.position,
            bytes(p.unaligned_records or b""))
    raise RemoteProtocolError(f"{what}: not a quorum API")
