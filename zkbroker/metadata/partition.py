"""PartitionRegistration: one partition as the metadata log says it is (Kafka's PartitionRegistration), and what
a PartitionRecord or PartitionChangeRecord makes of it. The controller's replay and a broker's delta both use
``merge``, so the two can never disagree about a change.

Epochs (KIP-497, KIP-595's vocabulary for partitions): ``leader_epoch`` grows by one whenever a change names a
leader (even the same one); ``partition_epoch`` grows by one with every change record, and is what an
AlterPartition must name to be accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .records import NO_LEADER, NO_LEADER_CHANGE, NO_RECOVERY_CHANGE, PARTITION, PARTITION_CHANGE, RECOVERED, record


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = RECOVERED

    @classmethod
    def from_record(cls, rec: Any) -> PartitionRegistration:
        """From a PartitionRecord: the partition whole, as created or as a snapshot holds it."""
        return cls(tuple(rec.replicas), tuple(rec.isr), rec.leader, rec.leader_epoch, rec.partition_epoch,
                   tuple(rec.removing_replicas), tuple(rec.adding_replicas), rec.leader_recovery_state)

    def merge(self, change: Any) -> PartitionRegistration:
        """After a PartitionChangeRecord: each field it carries replaces ours (None, -2, -1: unchanged)."""
        leader, leader_epoch = self.leader, self.leader_epoch
        if change.leader != NO_LEADER_CHANGE:
            leader, leader_epoch = change.leader, leader_epoch + 1
        recovery = self.leader_recovery_state
        if change.leader_recovery_state != NO_RECOVERY_CHANGE:
            recovery = change.leader_recovery_state
        return PartitionRegistration(
            self.replicas if change.replicas is None else tuple(change.replicas),
            self.isr if change.isr is None else tuple(change.isr),
            leader, leader_epoch, self.partition_epoch + 1,
            self.removing_replicas if change.removing_replicas is None else tuple(change.removing_replicas),
            self.adding_replicas if change.adding_replicas is None else tuple(change.adding_replicas),
            recovery)

    def to_record(self, topic_id: bytes, partition_id: int) -> tuple:
        return record(PARTITION, partition_id=partition_id, topic_id=topic_id, replicas=list(self.replicas),
                      isr=list(self.isr), removing_replicas=list(self.removing_replicas),
                      adding_replicas=list(self.adding_replicas), leader=self.leader,
                      leader_epoch=self.leader_epoch, partition_epoch=self.partition_epoch,
                      leader_recovery_state=self.leader_recovery_state)

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


def partition_change(topic_id: bytes, partition_id: int, *, isr: tuple[int, ...] | None = None,
                     leader: int = NO_LEADER_CHANGE, replicas: tuple[int, ...] | None = None,
                     leader_recovery_state: int = NO_RECOVERY_CHANGE) -> tuple:
    """A PartitionChangeRecord carrying only what changes."""
    return record(PARTITION_CHANGE, partition_id=partition_id, topic_id=topic_id,
                  isr=None if isr is None else list(isr), leader=leader,
                  replicas=None if replicas is None else list(replicas), leader_recovery_state=leader_recovery_state)
