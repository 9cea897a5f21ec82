"""The quorum's half of the checker (DESIGN §17, issue 26): what every voter's metadata log and the timeline say
about Raft's safety, as pure logic beside the data verdicts of checker.py.

The invariants are the ones Kafka's RaftEventSimulationTest checks, read here from what a real run leaves:

- **one leader per epoch**: the LeaderChange record that opens each epoch in any voter's log, and every
  `raft_state` event with state `leader`, name one node per epoch;
- **committed records are identical**: below the highest high watermark any voter reported (a high watermark
  is only ever learnt from the leader, so everything below it was committed by a majority), two voters that
  both hold an offset hold the same record in the same epoch there;
- **no committed record is lost**: each `metadata_committed` event (offset: the leader's high watermark, so
  every record below it was committed; epoch: the leader's, which is that of the record just below it, since a
  high watermark moves only within the leader's own epoch), and everything below the highest high watermark,
  is still held (the record below each event's offset with its epoch) by a majority of the voters (a voter
  whose snapshot covers the offset holds it in the snapshot).

A voter's log is read from its log dir as the driver writes it: the segments of `__cluster_metadata-0` and the
newest `.checkpoint` beside them (the offsets below a snapshot's end are covered, not compared)."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zkbroker.protocol.errors import RemoteProtocolError
from zkbroker.protocol.metadata_records import (
    LEADER_CHANGE,
    METADATA_TOPIC,
    ControlRecord,
    iter_metadata_log,
    parse_snapshot_file_name,
)

ONE_LEADER = "one-leader-per-epoch"
DIVERGED = "committed-diverged"
LOST = "committed-lost"


@dataclass(frozen=True)
class VoterLog:
    """One voter's metadata log at the end of a run: offset -> (epoch, the record as decoded, in a form that
    compares equal exactly when the bytes do), the snapshot end below which offsets are covered, the high
    watermark it reported (None if it knew none), and the leader each LeaderChange record names per epoch."""

    node: int
    entries: Mapping[int, tuple[int, str]]
    snapshot_end: int = 0
    high_watermark: int | None = None
    leaders: Mapping[int, int] = field(default_factory=dict)

    def holds(self, offset: int, epoch: int | None = None) -> bool:
        if offset < self.snapshot_end:
            return True
        entry = self.entries.get(offset)
        return entry is not None and (epoch is None or entry[0] == epoch)


@dataclass(frozen=True)
class Violation:
    invariant: str  # ONE_LEADER, DIVERGED or LOST
    detail: str


@dataclass(frozen=True)
class QuorumReport:
    violations: tuple[Violation, ...]
    committed_end: int  # the highest high watermark reported: every offset below it was committed

    @property
    def ok(self) -> bool:
        return not self.violations


def voter_log(node: int, entries: Iterable[tuple[int, int, object]], *, snapshot_end: int = 0,
              high_watermark: int | None = None) -> VoterLog:
    """A VoterLog from `(offset, epoch, record)` as metadata_records.iter_metadata_log yields them."""
    held: dict[int, tuple[int, str]] = {}
    leaders: dict[int, int] = {}
    for offset, epoch, record in entries:
        held[offset] = (epoch, repr(record))
        if isinstance(record, ControlRecord) and record.type == LEADER_CHANGE:
            leaders[epoch] = record.value.leader_id
    return VoterLog(node, held, snapshot_end, high_watermark, leaders)


def read_voter_log(node: int, log_dir: str | os.PathLike[str], high_watermark: int | None = None) -> VoterLog:
    """A voter's log as its log dir holds it (segments in offset order; a torn last batch, which a crash can
    leave and the node truncates at its next start, ends the read instead of failing it)."""
    partition = Path(log_dir) / f"{METADATA_TOPIC}-0"
    snapshots = [parsed for name in os.listdir(partition) if (parsed := parse_snapshot_file_name(name))]
    snapshot_end = max((end for end, _ in snapshots), default=0)
    entries: list[tuple[int, int, object]] = []
    segments = sorted(partition.glob("*.log"))
    for segment in segments:
        try:
            entries.extend(iter_metadata_log(segment.read_bytes()))
        except (RemoteProtocolError, struct.error) as exc:
            if segment != segments[-1]:  # only the active segment is written to, so only it can be torn
                raise RemoteProtocolError(f"node {node}'s metadata log segment {segment} is corrupt: {exc}") from None
    return voter_log(node, entries, snapshot_end=snapshot_end, high_watermark=high_watermark)


def check_quorum(voters: Sequence[VoterLog], events: Sequence[Mapping] = ()) -> QuorumReport:
    """The violations of the three invariants, each named with the offsets, epochs and nodes involved."""
    violations = _leaders(voters, events)
    reported = [v.high_watermark for v in voters if v.high_watermark is not None]
    reported += [e["offset"] for e in events if e.get("kind") == "metadata_committed"]
    committed_end = max(reported, default=0)
    violations += _divergences(voters, committed_end)
    violations += _losses(voters, events, committed_end)
    return QuorumReport(tuple(violations), committed_end)


def _leaders(voters: Sequence[VoterLog], events: Sequence[Mapping]) -> list[Violation]:
    named: dict[int, dict[int, str]] = {}  # epoch -> leader -> where it was seen first
    for voter in voters:
        for epoch, leader in voter.leaders.items():
            named.setdefault(epoch, {}).setdefault(leader, f"LeaderChange in node {voter.node}'s log")
    for event in events:
        if event.get("kind") == "raft_state" and event.get("state") == "leader":
            named.setdefault(event["epoch"], {}).setdefault(event["node"], f"the timeline at {event.get('ts')}")
    return [Violation(ONE_LEADER, f"epoch {epoch} has leaders " + ", ".join(
                f"{leader} ({where})" for leader, where in sorted(leaders.items())))
            for epoch, leaders in sorted(named.items()) if len(leaders) > 1]


def _divergences(voters: Sequence[VoterLog], committed_end: int) -> list[Violation]:
    found = []
    offsets = sorted({o for v in voters for o in v.entries if o < committed_end})
    for offset in offsets:
        held = {v.node: v.entries[offset] for v in voters if offset in v.entries}
        if len(set(held.values())) > 1:
            found.append(Violation(DIVERGED, f"committed offset {offset} differs: " + "; ".join(
                f"node {node} epoch {epoch} {record[:80]}" for node, (epoch, record) in sorted(held.items()))))
    return found


def _losses(voters: Sequence[VoterLog], events: Sequence[Mapping], committed_end: int) -> list[Violation]:
    majority = len(voters) // 2 + 1
    # offset -> the epochs in which it was reported committed: two epochs for one offset mean a committed record
    # was replaced (a leader elected without it, e.g. by a voter that lost its disk), and one of them is lost
    wanted: dict[int, set[int | None]] = {offset: {None} for offset in range(committed_end)}
    for event in events:
        if event.get("kind") == "metadata_committed" and event["offset"] > 0:
            epochs = wanted.setdefault(event["offset"] - 1, set())
            epochs.discard(None)
            epochs.add(event["epoch"])
    found = []
    for offset, epoch in sorted((o, e) for o, epochs in wanted.items() for e in epochs):
        holders = [v.node for v in voters if v.holds(offset, epoch)]
        if len(holders) < majority:
            said = "" if epoch is None else f" in epoch {epoch}"
            found.append(Violation(LOST, f"committed offset {offset}{said} is held by {len(holders)} of "
                                         f"{len(voters)} voters ({holders or 'none'}), fewer than a majority"))
    return found
