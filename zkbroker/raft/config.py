"""The quorum's settings a Raft node needs, named and defaulted as Kafka 3.7's `controller.quorum.*` keys
(DESIGN §17). The node reads only this; parsing server.properties into it belongs to the process."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class QuorumConfig:
    node_id: int
    voters: frozenset[int]
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    # How long a leader parks a Fetch that has nothing new to return (Kafka's raft client uses 500 ms).
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 8 * 1024 * 1024
    cluster_id: str = ""
    # KIP-996's Pre-Vote (Kafka 3.9/4.0), off as in Kafka 3.7: a voter whose timer runs out first asks whether a
    # majority would vote for it, and stands (bumping the epoch) only if so, so that a voter cut off from the
    # quorum cannot come back with a higher epoch and unseat a healthy leader. The lab's `kraft-fixed` switch.
    pre_vote: bool = False
    # KIP-853's directory ids (Kafka 3.8+), off as in Kafka 3.7: each voter is known by its id *and* the id of the
    # log dir it was formatted with. A voter that lost its disk and was formatted again has a new directory id:
    # it is no longer the voter it was, so it neither votes nor counts toward the high watermark with the log it
    # no longer has (it replicates as an observer). The lab's `kraft-fixed` switch for a controller that lost
    # its disk. None: voters are known by id alone.
    directory_id: str | None = None  # this node's log dir's
    voter_directories: Mapping[int, str] | None = None  # voter id -> the directory id it was formatted with

    def __post_init__(self) -> None:
        if not self.voters:
            raise ValueError("controller.quorum.voters names no voter")
        if self.election_timeout_ms <= 0 or self.fetch_timeout_ms <= 0:
            raise ValueError("controller.quorum.election.timeout.ms and fetch.timeout.ms must be positive")

    @property
    def is_voter(self) -> bool:
        return self.is_voter_replica(self.node_id, self.directory_id)

    def is_voter_replica(self, replica_id: int, directory_id: str | None) -> bool:
        """Whether a replica is one of the voters: by id, and with directory ids by its log dir's id too."""
        if replica_id not in self.voters:
            return False
        return self.voter_directories is None or self.voter_directories.get(replica_id) == directory_id

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader that a majority has not fetched from within this long resigns (KIP-595's check quorum)."""
        return self.fetch_timeout_ms * 3 // 2
