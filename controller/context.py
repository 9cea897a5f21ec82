"""ControllerContext: what the active controller knows about the cluster (Kafka's ControllerContext).

It is owned by the controller's event thread alone, so it needs no locks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zkbroker.log.log_config import LogConfig
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk.znodes import BrokerRegistration


@dataclass(frozen=True)
class LeaderIsrAndZkVersion:
    """A partition's `state` znode (leader, leader epoch, ISR, deciding controller's epoch) and its zkVersion,
    which every conditional write of the node must expect."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int


@dataclass
class ControllerContext:
    # This controller's broker id and epoch: every decision's log lines name them.
    controller_id: int = -1
    epoch: int = 0
    epoch_zk_version: int = 0
    # Every registered broker (/brokers/ids), shutting down or not: 0.8.2's liveOrShuttingDownBrokers.
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    # Brokers in a controlled shutdown: still registered and sent requests, but no longer "live" for leader
    # elections (0.8.2's liveBrokerIds excludes them).
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    # Every child of /brokers/topics this controller has seen (0.8.2's allTopics), readable or not.
    all_topics: set[str] = field(default_factory=set)
    # AR: the assigned replicas of every partition, head = preferred replica (from /brokers/topics/<t>).
    assignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsrAndZkVersion] = field(default_factory=dict)
    # Each topic's settings, with its overrides, for the controller's decisions (unclean.leader.election.enable).
    topic_configs: dict[str, LogConfig] = field(default_factory=dict)
    # RAR of every partition being reassigned (/admin/reassign_partitions, or the Admin API's KIP-455).
    partitions_being_reassigned: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    # OAR of each partition being reassigned (what ListPartitionReassignments reports as the replicas it is
    # adding and removing, and what a cancellation goes back to).
    reassignment_origins: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    # The reassignments the Admin API started: kept in the topic znode (version 2), not /admin/reassign_partitions.
    api_reassignments: set[TopicPartition] = field(default_factory=set)
    partitions_undergoing_preferred_election: set[TopicPartition] = field(default_factory=set)

    @property
    def live_broker_ids(self) -> set[int]:
        return set(self.live_brokers) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.assignments if tp[0] == topic)

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, replicas in self.assignments.items() if broker_id in replicas)

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of(topic):
            self.assignments.pop(tp, None)
            self.leadership.pop(tp, None)
        self.topic_configs.pop(topic, None)
        self.all_topics.discard(topic)
