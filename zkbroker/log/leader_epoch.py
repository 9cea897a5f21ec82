"""LeaderEpochCache: a partition's `leader-epoch-checkpoint` (KIP-101, beyond 0.8.2).

Entries `(leader epoch, start offset)`: the first offset written under each leader epoch. A follower that
must truncate asks its new leader for the end offset of its own latest epoch (OffsetsForLeaderEpoch) and
truncates there, instead of to its high watermark — which is what lost acknowledged data in KAFKA-1211.

File format as Kafka's LeaderEpochCheckpointFile: a version line `0`, a count line, then `epoch offset`
lines; written to `.tmp`, fsynced and renamed. A cache with `defer_sync` set renames without the fsync and leaves
`sync()` to its owner, off the event loop: a broker opening and leading thousands of partitions at once (a KRaft
broker's restart at 10,000 partitions) spent seconds of its one loop in these fsyncs, one a partition. The window
is the log's own: appended batches are not fsynced either until a flush, and they carry their leader epoch, which
is what recovery rebuilds entries from (Kafka 3.8 likewise moved the truncation's checkpoint flush to a background
thread, KAFKA-15046).

Messages of format 0 and 1 carry no epoch (KIP-101 added it to format 2), so a follower attributes the
messages it fetches to the epoch of the leader it follows; the leader's own entries are exact. The
difference can only make a follower truncate more than needed (and fetch the same messages again).
"""

from __future__ import annotations

import bisect
import logging
import os

from .checkpoint import CheckpointError

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH_OFFSET = -1

log = logging.getLogger(__name__)


class LeaderEpochCache:
    def __init__(self, partition_dir: str, defer_sync: bool = False) -> None:
        self.path = os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT_FILE)
        self.entries: list[tuple[int, int]] = self._read()
        self.defer_sync = defer_sync
        self.unsynced = False  # written with defer_sync and not yet fsynced

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (no-op unless the epoch is newer than the latest)."""
        if epoch <= self.latest_epoch:
            return
        # An older entry at or past this offset can only be a leftover of data since truncated away.
        self.entries = [(e, o) for e, o in self.entries if o < start_offset]
        self.entries.append((epoch, start_offset))
        self._write()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> int:
        """OffsetsForLeaderEpoch: the first offset *after* `epoch` in this log — the start of the next newer
        epoch, or the log end offset if `epoch` is the latest; UNDEFINED for an epoch older than every entry."""
        if not self.entries or epoch < self.entries[0][0]:
            return UNDEFINED_EPOCH_OFFSET
        if epoch >= self.latest_epoch:
            return log_end_offset
        epochs = [e for e, _ in self.entries]
        return self.entries[bisect.bisect_right(epochs, epoch)][1]

    def epoch_and_end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch v1+: the largest epoch we know at or below `epoch`, and where it ends (see
        end_offset_for); (-1, UNDEFINED) for an epoch older than every entry."""
        end = self.end_offset_for(epoch, log_end_offset)
        known = [e for e, _ in self.entries if e <= epoch]
        return (known[-1] if known and end != UNDEFINED_EPOCH_OFFSET else -1), end

    def truncate_from_end(self, end_offset: int) -> None:
        """After the log was truncated to end_offset: forget epochs that start at or after it."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._write()

    def clear(self) -> None:
        """After the log was emptied to restart at some offset: no epoch history remains."""
        if self.entries:
            self.entries = []
            self._write()

    def _read(self) -> list[tuple[int, int]]:
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        try:
            if not lines:
                return []
            if int(lines[0]) != 0:
                raise ValueError(f"unknown version {lines[0]}")
            count = int(lines[1])
            entries = [tuple(int(x) for x in line.split()) for line in lines[2:2 + count]]
            if len(entries) != count or any(len(e) != 2 for e in entries):
                raise ValueError("entry count does not match")
        except (ValueError, IndexError) as e:
            raise CheckpointError(f"Malformed leader epoch checkpoint file {self.path}: {e}") from None
        return [(e[0], e[1]) for e in entries]

    def sync(self) -> None:
        """fsync what a deferred write left unsynced (any thread; a later write's rename is atomic either way)."""
        if not self.unsynced:
            return
        self.unsynced = False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:  # the partition was deleted meanwhile
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _write(self) -> None:
        tmp = self.path + ".tmp"
        text = "0\n" + f"{len(self.entries)}\n" + "".join(f"{e} {o}\n" for e, o in self.entries)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            if not self.defer_sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.unsynced = self.defer_sync
