"""What the metadata log offers the quorum controller and what it calls back (Kafka's RaftClient and
RaftClient.Listener), as two protocols: the controller is written against these, the driver implements them.

Records are ``(api_key, version, record)`` as ``protocol.metadata_records`` decodes an ApiMessageAndVersion
frame. The listener is called from the driver's one event loop, in log order:

* ``handle_commit`` for each run of committed data records (below the high watermark), never for control
  records, never twice for an offset (after a snapshot load it resumes after the snapshot's end); on the leader,
  a batch it appended may come back as the very records appended (already in the decoded form, not decoded
  again), so a listener never changes a record it is handed;
* ``handle_load_snapshot`` when the node starts from a snapshot or is sent one by the leader: it replaces the
  listener's whole state with the snapshot's records, and commits continue from ``end_offset``;
* ``handle_leader_change`` whenever the leader or the epoch this node knows changes (``None``: no leader known).
"""

from __future__ import annotations

from typing import Any, Protocol

from zkbroker.raft.node import NotLeaderError

__all__ = ["MetadataRecord", "NotLeaderError", "RaftClient", "RaftListener"]

MetadataRecord = tuple[int, int, Any]


class RaftListener(Protocol):
    def handle_commit(self, base_offset: int, last_offset: int, epoch: int,
                      records: list[MetadataRecord]) -> None: ...

    def handle_load_snapshot(self, end_offset: int, epoch: int, records: list[MetadataRecord]) -> None: ...

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None: ...


class RaftClient(Protocol):
    def register(self, listener: RaftListener) -> None:
        """Adds a listener; it is told the current leader, then the snapshot and committed batches it missed."""
        ...

    def schedule_append(self, epoch: int, records: list[MetadataRecord]) -> int:
        """Appends the records as one batch on the leader of `epoch`; returns the batch's last offset. Raises
        NotLeaderError when this node is not the leader of `epoch` (a controller that lost leadership must not
        write in a later epoch what it decided in an earlier one)."""
        ...

    def create_snapshot(self, end_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        """Writes the listener's state as of `end_offset` (committed, exclusive) as a snapshot; the log before
        it may then be deleted."""
        ...

    def leader_and_epoch(self) -> tuple[int | None, int]: ...
