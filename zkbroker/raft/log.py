"""The replicated log as the Raft node sees it (Kafka's ReplicatedLog), and an in-memory model of it.

The node reads and writes the log through `RaftLog` only; the `__cluster_metadata` log of magic 2 batches
implements the same interface (metadata_log.py). Durability is not the log's business here: after changing the log the
node emits `FlushLog`, and the driver must make the log durable up to that point before it performs the
effects that follow (a follower's next Fetch acknowledges what it holds; a leader counts its own end offset).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from zkbroker.raft.messages import LeaderChangeMessage, LogEntry, OffsetAndEpoch, SnapshotId

# Sizes the model charges for an entry, so that Fetch's partition_max_bytes bounds a read as it would on disk.
RECORD_OVERHEAD_BYTES = 20


def entry_size(entry: LogEntry) -> int:
    if isinstance(entry.record, LeaderChangeMessage):
        return RECORD_OVERHEAD_BYTES + 8 + 4 * (len(entry.record.voters) + len(entry.record.granting_voters))
    return RECORD_OVERHEAD_BYTES + len(entry.record)


class RaftLog(Protocol):
    @property
    def start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last entry (0 for an empty log): what a Fetch and a Vote carry beside the end."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` in the log and the offset where it ends (the next epoch's first offset,
        or the log end); (start offset, 0) if the log holds no epoch that small."""
        ...

    def read(self, start_offset: int, max_bytes: int) -> tuple[LogEntry, ...]:
        """Entries from `start_offset`: at least one if any, then as many as fit in `max_bytes`."""
        ...

    def append(self, entries: Sequence[LogEntry]) -> None:
        """Raises ValueError unless the entries continue the log: contiguous offsets from the end offset and
        epochs that never go down."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Removes every entry at or after `offset`."""
        ...

    @property
    def latest_snapshot(self) -> SnapshotId | None:
        """The newest snapshot: a replica whose fetch offset is below the log start is sent it."""
        ...


def end_offset_for_epoch(epoch_starts: Sequence[tuple[int, int]], epoch: int, start_offset: int,
                         end_offset: int) -> OffsetAndEpoch:
    """RaftLog.end_offset_for_epoch from a log's (epoch, first offset) list, epochs increasing: a bisect."""
    lo, hi = 0, len(epoch_starts)
    while lo < hi:  # the first epoch greater than `epoch`
        mid = (lo + hi) // 2
        if epoch_starts[mid][0] <= epoch:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return OffsetAndEpoch(start_offset, 0)
    end = epoch_starts[lo][1] if lo < len(epoch_starts) else end_offset
    return OffsetAndEpoch(end, epoch_starts[lo - 1][0])


def check_continues(entries: Sequence[LogEntry], end_offset: int, last_epoch: int) -> None:
    """Raises ValueError unless `entries` continue a log ending at `end_offset` in `last_epoch`."""
    for i, entry in enumerate(entries):
        if entry.offset != end_offset + i:
            raise ValueError(f"entry at offset {entry.offset} does not continue the log at {end_offset + i}")
        if entry.epoch < last_epoch:
            raise ValueError(f"entry at offset {entry.offset} has epoch {entry.epoch} below {last_epoch}")
        last_epoch = entry.epoch


class InMemoryLog:
    """RaftLog in a list, offsets from 0 (no snapshots yet), with the epochs' start offsets kept beside it (the
    leader-epoch cache of a real log), so end_offset_for_epoch is a bisect rather than a scan."""

    def __init__(self, entries: Sequence[LogEntry] = ()) -> None:
        self.entries: list[LogEntry] = []
        self._epoch_starts: list[tuple[int, int]] = []  # (epoch, first offset), epochs increasing
        self.append(entries)

    @property
    def start_offset(self) -> int:
        return 0

    @property
    def latest_snapshot(self) -> SnapshotId | None:
        return None

    @property
    def end_offset(self) -> int:
        return len(self.entries)

    @property
    def last_fetched_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        return end_offset_for_epoch(self._epoch_starts, epoch, self.start_offset, self.end_offset)

    def read(self, start_offset: int, max_bytes: int) -> tuple[LogEntry, ...]:
        out: list[LogEntry] = []
        budget = max_bytes
        for entry in self.entries[start_offset:]:
            size = entry_size(entry)
            if out and size > budget:
                break
            out.append(entry)
            budget -= size
        return tuple(out)

    def append(self, entries: Sequence[LogEntry]) -> None:
        check_continues(entries, self.end_offset, self.last_fetched_epoch)
        for entry in entries:
            if not self._epoch_starts or self._epoch_starts[-1][0] != entry.epoch:
                self._epoch_starts.append((entry.epoch, entry.offset))
            self.entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset < self.start_offset:
            raise ValueError(f"cannot truncate to {offset}, before the log start {self.start_offset}")
        del self.entries[offset:]
        while self._epoch_starts and self._epoch_starts[-1][1] >= offset:
            self._epoch_starts.pop()
