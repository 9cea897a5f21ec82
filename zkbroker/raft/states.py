"""The epoch states of a Raft node (Kafka's EpochState family): each holds only what its state needs.

    Unattached  knows the epoch, not its leader, has not voted in it (an observer's only state besides Follower)
    Voted       granted its vote in this epoch, waits for a leader or its election timeout
    Prospective (Pre-Vote only) asks whether a majority would vote for it in the next epoch, without leaving its
                own; stands as a candidate if so, else backs off and asks again
    Candidate   asked for votes in the epoch it started; backs off after a lost election
    Leader      writes the log, tracks each replica's end offset, the high watermark and check-quorum
    Follower    fetches from the epoch's leader
    Resigned    was leader of this epoch, tells the voters (EndQuorumEpoch), waits before a new election
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zkbroker.raft.messages import FetchRequest


@dataclass
class Unattached:
    epoch: int
    election_deadline: int | None  # None for an observer, which never stands
    name = "unattached"


@dataclass
class Voted:
    epoch: int
    voted_id: int
    election_deadline: int
    name = "voted"


@dataclass
class Candidate:
    epoch: int
    retries: int  # elections this node has started in a row, for the backoff
    election_deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backoff_until: int | None = None  # set once this election is lost (timed out or rejected by a majority)
    name = "candidate"


@dataclass
class Prospective:
    epoch: int  # its current epoch, unchanged: the pre-vote asks about epoch + 1
    leader_id: int | None  # the leader it followed, if any (its fetches timed out, or it would not be here)
    voted_id: int | None  # the vote it granted in this epoch, if any (kept: quorum-state still says so)
    retries: int
    election_deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backoff_until: int | None = None
    name = "prospective"


@dataclass
class ParkedFetch:
    """A Fetch the leader holds (Kafka's fetch purgatory) until it can return records, the high watermark
    moves, or its max wait ends."""

    correlation_id: int
    request: FetchRequest
    deadline: int


@dataclass(frozen=True)
class ReplicaState:
    """What the leader knows of a replica from its last Fetch (DescribeQuorum's ReplicaState). A replica is
    caught up when it fetches from the leader's end offset, or from the end the leader had at its previous fetch
    (it was then caught up as of that previous fetch)."""

    end_offset: int  # the replica's fetch offset: what it holds and acknowledges
    last_fetch_ms: int
    last_caught_up_ms: int  # -1: never
    leader_end_offset_at_fetch: int


@dataclass
class Leader:
    epoch: int
    epoch_start_offset: int  # where this epoch's LeaderChange record sits
    check_quorum_deadline: int
    replicas: dict[int, ReplicaState] = field(default_factory=dict)  # voters (but itself) and observers that fetched
    acknowledged: set[int] = field(default_factory=set)  # voters that answered BeginQuorumEpoch or fetched
    fetched_voters: set[int] = field(default_factory=set)  # voters seen since the check-quorum timer last reset
    parked: dict[int, ParkedFetch] = field(default_factory=dict)  # by replica id
    name = "leader"

    def end_offset(self, replica: int) -> int:
        """The replica's acknowledged end offset, -1 before its first fetch in this epoch."""
        state = self.replicas.get(replica)
        return -1 if state is None else state.end_offset


@dataclass
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline: int
    name = "follower"


@dataclass
class Resigned:
    epoch: int
    election_deadline: int
    preferred_successors: tuple[int, ...]
    unacknowledged: set[int]  # voters still to be sent EndQuorumEpoch
    name = "resigned"


EpochState = Unattached | Voted | Prospective | Candidate | Leader | Follower | Resigned
