"""The quorum's RPCs and the records the quorum itself writes, as plain frozen dataclasses.

Field names follow Kafka 3.7's JSON schemas (VoteRequest.json, BeginQuorumEpochRequest.json,
EndQuorumEpochRequest.json, FetchRequest.json's Raft fields, FetchSnapshotRequest.json), in snake case. The
wire carries them inside `Topics[].Partitions[]` arrays; the metadata quorum has one partition
(`__cluster_metadata-0`), so these dataclasses hold that one partition's fields flat, beside the
request-level ones; a response's `error_code` is the partition's (the top-level one is the wire's, for errors
that concern the whole request). `wire.py` maps them to the codec's schemas; nothing here encodes bytes.

Which node sent a message, and which request a response answers (the correlation id of Kafka's request
and response headers), travel beside the message, as they do on the wire: see `node.Send`.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkbroker.protocol.errors import ErrorCode

NONE = 0
NOT_LEADER_OR_FOLLOWER = int(ErrorCode.NOT_LEADER_FOR_PARTITION)  # Kafka 2.x renamed code 6
FENCED_LEADER_EPOCH = int(ErrorCode.FENCED_LEADER_EPOCH)
UNKNOWN_LEADER_EPOCH = int(ErrorCode.UNKNOWN_LEADER_EPOCH)
INCONSISTENT_VOTER_SET = int(ErrorCode.INCONSISTENT_VOTER_SET)


@dataclass(frozen=True, order=True)
class OffsetAndEpoch:
    """A log position: `offset` is an end offset (the next offset to write), `epoch` the epoch it ends."""

    offset: int
    epoch: int


@dataclass(frozen=True)
class LeaderChangeMessage:
    """The control record (type 2) a new leader writes first in its epoch: who leads and who elected it."""

    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]
    version: int = 0


@dataclass(frozen=True)
class LogEntry:
    """One record of the replicated log. `record` is a LeaderChangeMessage (a control record) or the bytes
    of a data record (part 2 puts ApiMessageAndVersion frames of metadata records here)."""

    offset: int
    epoch: int
    record: LeaderChangeMessage | bytes

    @property
    def is_control(self) -> bool:
        return isinstance(self.record, LeaderChangeMessage)


# --- Vote (api key 52) ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class VoteRequest:
    cluster_id: str
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    # KIP-996: "would you vote for me in candidate_epoch?", asked before standing; changes nothing at the voter.
    # Vote v2's PreVote field (Kafka 4.0); Kafka 3.7's v0 has no such field.
    pre_vote: bool = False
    # KIP-853 (Vote v1+, Kafka 3.8+), with directory ids only: the candidate's log dir, and the voter asked (its
    # id and the log dir it is known by), so that a voter formatted again answers as the stranger it now is.
    candidate_directory_id: str | None = None
    voter_id: int = -1
    voter_directory_id: str | None = None


@dataclass(frozen=True)
class VoteResponse:
    error_code: int
    leader_id: int  # -1: unknown
    leader_epoch: int
    vote_granted: bool


# --- BeginQuorumEpoch (53): a new leader tells the voters ----------------------------------------------------

@dataclass(frozen=True)
class BeginQuorumEpochRequest:
    cluster_id: str
    leader_id: int
    leader_epoch: int
    # KIP-853 (v1+), with directory ids only: the voter told, by id and log dir.
    voter_id: int = -1
    voter_directory_id: str | None = None


@dataclass(frozen=True)
class BeginQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


# --- EndQuorumEpoch (54): a leader that resigns names the voters best placed to follow it ---------------------

@dataclass(frozen=True)
class EndQuorumEpochRequest:
    cluster_id: str
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True)
class EndQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


# --- Fetch (1) with the Raft fields (KIP-595) ----------------------------------------------------------------

@dataclass(frozen=True)
class FetchRequest:
    cluster_id: str
    replica_id: int  # ReplicaState.ReplicaId in v15+: the fetching voter or observer
    max_wait_ms: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    # KIP-853 (Kafka 3.8+, Fetch v17's ReplicaDirectoryId): which log dir the fetcher runs on, so that a voter
    # restarted on an empty disk is not counted as the voter it was. None: not sent (Kafka 3.7).
    replica_directory_id: str | None = None


@dataclass(frozen=True)
class EpochEndOffset:
    """FetchResponse's DivergingEpoch: the fetcher's log diverges from the leader's after `end_offset`."""

    epoch: int
    end_offset: int


@dataclass(frozen=True)
class LeaderIdAndEpoch:
    """FetchResponse's CurrentLeader."""

    leader_id: int
    leader_epoch: int


@dataclass(frozen=True)
class SnapshotId:
    end_offset: int
    epoch: int


@dataclass(frozen=True)
class FetchResponse:
    error_code: int
    high_watermark: int  # -1: not known yet
    log_start_offset: int
    current_leader: LeaderIdAndEpoch
    diverging_epoch: EpochEndOffset | None = None
    snapshot_id: SnapshotId | None = None
    records: tuple[LogEntry, ...] = ()


# --- FetchSnapshot (59): declared for the wire; snapshots come with the metadata log (part 1, step 4) ------

@dataclass(frozen=True)
class FetchSnapshotRequest:
    cluster_id: str
    replica_id: int
    max_bytes: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int


@dataclass(frozen=True)
class FetchSnapshotResponse:
    error_code: int
    snapshot_id: SnapshotId
    current_leader: LeaderIdAndEpoch
    size: int
    position: int
    unaligned_records: bytes


# --- DescribeQuorum (55): the leader's view of every replica (metadata-quorum describe) -----------------------

@dataclass(frozen=True)
class DescribeQuorumRequest:
    pass


@dataclass(frozen=True)
class ReplicaState:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int = -1  # -1: unknown (v0 does not carry the timestamps)
    last_caught_up_timestamp: int = -1


@dataclass(frozen=True)
class DescribeQuorumResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]


Request = (VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest
           | DescribeQuorumRequest)
Response = (VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse
            | FetchSnapshotResponse | DescribeQuorumResponse)
Message = Request | Response
