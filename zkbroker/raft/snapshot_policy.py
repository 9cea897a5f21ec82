"""When the metadata layer writes a snapshot (Kafka's SnapshotGenerator): after
`metadata.log.max.record.bytes.between.snapshots` bytes of committed records, or when committed records wait
`metadata.log.max.snapshot.interval.ms` since the last snapshot (0: no time limit). Pure: bytes and times in."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SnapshotPolicy:
    max_bytes: int
    max_interval_ms: int
    bytes_since: int = 0
    last_snapshot_ms: int | None = None  # None: not yet (the first commit starts the clock)

    def committed(self, nbytes: int, now: int) -> bool:
        """Records of `nbytes` were committed: True when a snapshot is due now."""
        self.bytes_since += nbytes
        if self.last_snapshot_ms is None:
            self.last_snapshot_ms = now
        if self.bytes_since <= 0:
            return False
        if self.bytes_since >= self.max_bytes:
            return True
        return self.max_interval_ms > 0 and now - self.last_snapshot_ms >= self.max_interval_ms

    def taken(self, now: int) -> None:
        self.bytes_since = 0
        self.last_snapshot_ms = now
