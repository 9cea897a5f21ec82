"""What a follower does when its leader answers a Fetch with OFFSET_OUT_OF_RANGE, decided without I/O (the
fetcher asks the leader for the offsets this needs, zkbroker/server/replica_fetcher.py, and carries it out).

The fetch offset (our log end) lies outside the leader's log one of two ways: past its end, because the leader
has less than we have (an unclean election made a shorter log the leader), or below its start, because
retention has deleted what we would fetch next. The leader's log end tells them apart:

- leader end below ours: truncate to the leader's end and fetch from there (the records in between are lost;
  the same in every version);
- otherwise, 0.8.2 (`replica.out.of.range.reset=leader-start`) takes it for retention: it drops its whole log
  and starts again at the leader's log start. That is wrong when the fetch was past the leader's end and a
  write reached the leader before we asked for its end (KAFKA-2143): the follower then throws away a log it
  could have kept, fetches all of it again and is no full replica meanwhile (and what lay below a log start
  above zero is gone from it for good);
- `keep-log` (KAFKA-2143, Kafka 0.9.0.1) fetches on from the higher of the leader's start and our own end,
  dropping the log only when the leader's start is above our end. It does not make the two logs agree: what
  we hold between the leader's old end and ours differs from what the leader wrote there (leader epochs,
  KIP-101, fix that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LEADER_START = "leader-start"  # 0.8.2
KEEP_LOG = "keep-log"  # KAFKA-2143
POLICIES = (LEADER_START, KEEP_LOG)


@dataclass(frozen=True)
class OutOfRangeDecision:
    """`truncate_to`: truncate the log to `offset` (the leader's end); `start_at`: drop the whole log and start
    again at `offset` (the leader's start); `resume_at`: keep the log and fetch on from `offset` (our own end)."""

    action: Literal["truncate_to", "start_at", "resume_at"]
    offset: int


def needs_leader_start(log_end: int, leader_end: int) -> bool:
    """Whether the decision needs the leader's log start too (the fetcher asks for it only then, as 0.8.2 did)."""
    return leader_end >= log_end


def decide(log_end: int, leader_end: int, leader_start: int | None = None,
           policy: str = LEADER_START) -> OutOfRangeDecision:
    """The follower's move, given its own log end, the leader's log end and (when `needs_leader_start`) the
    leader's log start, under `replica.out.of.range.reset` = `policy`."""
    if policy not in POLICIES:
        raise ValueError(f"unknown replica.out.of.range.reset {policy!r}; allowed: {', '.join(POLICIES)}")
    if not needs_leader_start(log_end, leader_end):
        return OutOfRangeDecision("truncate_to", leader_end)
    if leader_start is None:
        raise ValueError("the leader's log end is at or past ours: the decision needs the leader's log start")
    if policy == LEADER_START or leader_start > log_end:
        return OutOfRangeDecision("start_at", leader_start)
    return OutOfRangeDecision("resume_at", log_end)
