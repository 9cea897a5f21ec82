"""The metadata layer of a controller until the quorum controller exists (issue 24, part 2, registers in its
place): a RaftListener whose state is every committed metadata record, in order, and which snapshots that state
when the SnapshotPolicy says so. It lets the quorum be run, measured and taught on its own: what is committed
is replayed, snapshots are written and loaded, a replica far behind is sent one."""

from __future__ import annotations

import logging
from collections.abc import Callable

from zkbroker.protocol.metadata_records import encode_frame

from .listener import MetadataRecord, RaftClient
from .snapshot_policy import SnapshotPolicy

logger = logging.getLogger(__name__)


class RecordKeeper:
    def __init__(self, client: RaftClient, policy: SnapshotPolicy, clock: Callable[[], int]) -> None:
        self.client = client
        self.policy = policy
        self.clock = clock
        self.records: list[MetadataRecord] = []
        self.next_offset = 0  # the offset after the last record replayed (the snapshot's end after a load)
        self.epoch = 0  # the epoch of the last record replayed
        self.leader: tuple[int | None, int] = (None, 0)

    def handle_commit(self, base_offset: int, last_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        self.records.extend(records)
        self.next_offset, self.epoch = last_offset + 1, epoch
        if self.policy.committed(sum(len(encode_frame(*r)) for r in records), self.clock()):
            self.client.create_snapshot(self.next_offset, self.epoch, list(self.records))
            self.policy.taken(self.clock())
            logger.info("[RecordKeeper] Snapshot at offset %d, epoch %d: %d records", self.next_offset, self.epoch,
                        len(self.records))

    def handle_load_snapshot(self, end_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        self.records = list(records)
        self.next_offset, self.epoch = end_offset, epoch
        self.policy.taken(self.clock())

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        self.leader = (leader_id, epoch)
