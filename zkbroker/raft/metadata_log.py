"""The metadata log on disk (Kafka's KafkaMetadataLog): `DIR/__cluster_metadata-0/`, a RaftLog kept in the
broker's own segment files (zkbroker.log.Log: magic 2 batches, offset and time indexes, recovery of a torn
tail at open), with the quorum's snapshots beside the segments as `%020d-%010d.checkpoint` files.

What this adds to a partition's log:
* the epoch of every offset, from the batches' partitionLeaderEpoch (rebuilt by a walk of the batch headers at
  open: the metadata log is small), for `end_offset_for_epoch`;
* truncation to any offset: the segment code cuts whole batches, so a batch that straddles the target is cut
  and its first records written again;
* snapshots: the newest one is the log's floor; segments wholly below it are deleted, and a replica that was
  sent one starts its log empty at the snapshot's end.

Durability is the driver's (effects.FlushLog): `flush(end)` fsyncs the segments up to `end`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from zkbroker.fsync import fsync_path
from zkbroker.log.log import Log
from zkbroker.protocol.metadata_records import METADATA_TOPIC, parse_snapshot_file_name, snapshot_file_name
from zkbroker.protocol.record_batch import BATCH_OVERHEAD, read_header

from .batches import batch_headers, batches_to_entries, entries_to_batches
from .log import check_continues, end_offset_for_epoch
from .messages import LogEntry, OffsetAndEpoch, SnapshotId

logger = logging.getLogger(__name__)

PARTITION_DIR = f"{METADATA_TOPIC}-0"
#: Kafka's default metadata.log.segment.bytes (1 GiB); tests pass smaller ones to see segments go.
DEFAULT_SEGMENT_BYTES = 1024**3
#: The metadata log's max.message.bytes: Kafka's KafkaMetadataLog sets it to the Raft client's largest batch
#: (KafkaRaftClient.MAX_BATCH_SIZE_BYTES, 8 MiB), not the broker's message.max.bytes (1,000,012). Recovery at open
#: cuts the log at the first batch larger than this; with the broker's bound it cut a valid 4.6 MB batch and the
#: 15 MB after it.
MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024


class MetadataLog:
    """A RaftLog (raft/log.py) on disk. Call from one thread (the driver's event loop)."""

    def __init__(self, log_dir: str, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        self.dir = os.path.join(log_dir, PARTITION_DIR)
        os.makedirs(self.dir, exist_ok=True)
        config = {"segment.bytes": segment_bytes, "max.message.bytes": MAX_BATCH_SIZE_BYTES,
                  "flush.messages": 2**62, "flush.ms": 2**62, "retention.ms": -1, "retention.bytes": -1,
                  "file.delete.delay.ms": 0}
        self._log = Log(self.dir, config)
        self._remove_partial_snapshots()
        self.snapshots = self._find_snapshots()
        self._epoch_starts: list[tuple[int, int]] = []
        for segment in self._log.segments:
            data = os.pread(segment.file.fileno(), segment.size, 0) if segment.size else b""
            for _, base, _, epoch in batch_headers(data):
                if not self._epoch_starts or self._epoch_starts[-1][0] != epoch:
                    self._epoch_starts.append((epoch, base))
        snapshot = self.latest_snapshot
        if snapshot is not None and self.end_offset < snapshot.end_offset:
            # A replica sent a snapshot crashed before its log restarted at the snapshot's end.
            self._start_at(snapshot.end_offset)
        logger.info("[MetadataLog %s] Loaded: offsets %d to %d, last epoch %d, %d snapshot(s)", self.dir,
                    self.start_offset, self.end_offset, self.last_fetched_epoch, len(self.snapshots))

    # --- RaftLog --------------------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        if self._epoch_starts:
            return self._epoch_starts[-1][0]
        snapshot = self.latest_snapshot
        return snapshot.epoch if snapshot is not None else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found = end_offset_for_epoch(self._epoch_starts, epoch, self.start_offset, self.end_offset)
        snapshot = self.latest_snapshot
        if found.epoch == 0 and snapshot is not None and snapshot.epoch <= epoch:
            # The log holds no epoch that small, but the snapshot ends one: its end is where that epoch ends.
            first = self._epoch_starts[0][1] if self._epoch_starts else self.end_offset
            return OffsetAndEpoch(max(first, snapshot.end_offset) if snapshot.epoch == epoch else first,
                                  snapshot.epoch)
        return found

    def read(self, start_offset: int, max_bytes: int) -> tuple[LogEntry, ...]:
        if start_offset >= self.end_offset:
            return ()
        size = max(max_bytes, BATCH_OVERHEAD)
        while True:
            data = self._log.read(start_offset, size).read_bytes()
            whole = [(position, base) for position, base, _, _ in batch_headers(data)]
            if whole and whole[0][1] == start_offset:  # whole batches from the offset asked: sent as stored
                last = whole[-1][0]
                return batches_to_entries(data[:last + read_header(data, last).size])
            entries = tuple(e for e in batches_to_entries(data) if e.offset >= start_offset)
            if entries or len(data) < BATCH_OVERHEAD:
                return entries
            # max_bytes cut the first batch: at least one batch goes out whatever its size
            size = max(size * 2, read_header(data, 0).size)

    def read_batches(self, start_offset: int, max_bytes: int) -> list[tuple[LogEntry, ...]]:
        """As `read`, the entries grouped as the batches on disk hold them (those before `start_offset` left out):
        what was appended together is handed to the listeners together."""
        if start_offset >= self.end_offset:
            return []
        data = self._log.read(start_offset, max(max_bytes, BATCH_OVERHEAD)).read_bytes()
        batches = []
        for position, _, _, _ in batch_headers(data):
            size = read_header(data, position).size
            entries = tuple(e for e in batches_to_entries(data[position:position + size]) if e.offset >= start_offset)
            if entries:
                batches.append(entries)
        if not batches:
            entries = self.read(start_offset, max_bytes)  # the first batch is larger than max_bytes
            return [entries] if entries else []
        return batches

    def append(self, entries: Sequence[LogEntry]) -> None:
        if not entries:
            return
        check_continues(entries, self.end_offset, self.last_fetched_epoch)
        self._log.append(entries_to_batches(entries), assign_offsets=False)
        for entry in entries:
            if not self._epoch_starts or self._epoch_starts[-1][0] != entry.epoch:
                self._epoch_starts.append((entry.epoch, entry.offset))

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset < self.start_offset:
            raise ValueError(f"cannot truncate to {offset}, before the log start {self.start_offset}")
        head = self._log.read(offset, BATCH_OVERHEAD).read_bytes()
        base = read_header(head, 0).base_offset if len(head) >= BATCH_OVERHEAD else offset
        kept = [e for e in self.read(base, 2**31 - 1) if e.offset < offset] if base < offset else []
        self._log.truncate_to(base)
        while self._epoch_starts and self._epoch_starts[-1][1] >= base:
            self._epoch_starts.pop()
        self.append(kept)
        logger.info("[MetadataLog %s] Truncated to offset %d", self.dir, offset)

    # --- durability -----------------------------------------------------------------------------------------

    def flush(self, end_offset: int | None = None) -> None:
        self._log.flush(end_offset)

    def close(self) -> None:
        self._log.close()

    # --- snapshots ------------------------------------------------------------------------------------------

    @property
    def latest_snapshot(self) -> SnapshotId | None:
        return self.snapshots[-1] if self.snapshots else None

    def snapshot_path(self, snapshot: SnapshotId) -> str:
        return os.path.join(self.dir, snapshot_file_name(snapshot.end_offset, snapshot.epoch))

    def read_snapshot_bytes(self, snapshot: SnapshotId, position: int = 0, max_bytes: int = 2**31 - 1) -> bytes:
        with open(self.snapshot_path(snapshot), "rb") as f:
            f.seek(position)
            return f.read(max_bytes)

    def snapshot_size(self, snapshot: SnapshotId) -> int:
        return os.path.getsize(self.snapshot_path(snapshot))

    def write_snapshot(self, snapshot: SnapshotId, data: bytes) -> None:
        """Stores a whole snapshot durably, then drops older snapshots and the segments wholly below it."""
        if self.is_newer(snapshot):
            self.store_snapshot_file(snapshot, data)
            self.add_snapshot(snapshot, len(data))

    def is_newer(self, snapshot: SnapshotId) -> bool:
        latest = self.latest_snapshot
        return latest is None or (snapshot.end_offset, snapshot.epoch) > (latest.end_offset, latest.epoch)

    def store_snapshot_file(self, snapshot: SnapshotId, data: bytes) -> None:
        """The file alone, durably (a fsynced `.checkpoint.part` renamed into place, as Kafka's): touches no state
        of this log, so a thread of its own may do it while the log goes on (RaftManager.create_snapshot)."""
        path = self.snapshot_path(snapshot)
        partial = path + ".part"
        with open(partial, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
        fsync_path(self.dir)

    def add_snapshot(self, snapshot: SnapshotId, size: int) -> None:
        """A stored snapshot file becomes the latest snapshot: older snapshots and the segments wholly below it go.
        One that is no longer newer (a newer one came meanwhile, from the leader) is removed instead."""
        path = self.snapshot_path(snapshot)
        if not self.is_newer(snapshot):
            if snapshot not in self.snapshots:
                os.remove(path)
            return
        self.snapshots.append(snapshot)
        logger.info("[MetadataLog %s] Snapshot %s written (%d bytes)", self.dir, path, size)
        self.delete_before_snapshot()

    def delete_before_snapshot(self) -> None:
        snapshot = self.latest_snapshot
        if snapshot is None:
            return
        for old in self.snapshots[:-1]:
            os.remove(self.snapshot_path(old))
        self.snapshots = [snapshot]
        bases = [segment.base_offset for segment in self._log.segments] + [self.end_offset]
        # A segment goes when the next one starts at or below the snapshot's end: all it holds is in the snapshot.
        deletable = {bases[i] for i in range(len(bases) - 1) if bases[i + 1] <= snapshot.end_offset}
        deleted = self._log.delete_segments_while(lambda segment: segment.base_offset in deletable)
        if deleted:
            start = self.start_offset
            self._epoch_starts = [(e, max(o, start)) for i, (e, o) in enumerate(self._epoch_starts)
                                  if i + 1 == len(self._epoch_starts) or self._epoch_starts[i + 1][1] > start]
            logger.info("[MetadataLog %s] Deleted %d segment(s) below snapshot end %d; log starts at %d",
                        self.dir, deleted, snapshot.end_offset, start)

    def install_snapshot(self, snapshot: SnapshotId, data: bytes) -> None:
        """A replica sent a snapshot by the leader: store it, and start the log empty at its end."""
        self.write_snapshot(snapshot, data)
        if self.end_offset != snapshot.end_offset or self.start_offset != snapshot.end_offset:
            self._start_at(snapshot.end_offset)

    def _start_at(self, offset: int) -> None:
        self._log.truncate_fully_and_start_at(offset)
        self._epoch_starts = []

    def _find_snapshots(self) -> list[SnapshotId]:
        found = []
        for name in os.listdir(self.dir):
            parsed = parse_snapshot_file_name(name)
            if parsed is not None:
                found.append(SnapshotId(*parsed))
        return sorted(found, key=lambda s: (s.end_offset, s.epoch))

    def _remove_partial_snapshots(self) -> None:
        for name in os.listdir(self.dir):
            if name.endswith(".checkpoint.part"):
                os.remove(os.path.join(self.dir, name))
