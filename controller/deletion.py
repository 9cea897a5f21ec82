"""Topic deletion (Kafka 0.8.2's TopicDeletionManager), run on the controller's event thread.

`zkbroker topics --delete` creates `/admin/delete_topics/<t>`. With `delete.topic.enable=true` the
controller watches those children and deletes the topic:
1. UpdateMetadata with leader -2 for its partitions, so brokers stop serving them;
2. replicas on dead brokers -> DELETION_INELIGIBLE (and the topic waits); live replicas -> OFFLINE (StopReplica,
   out of the ISR) -> DELETION_STARTED (StopReplica with delete: the broker removes the log);
3. each StopReplica answer moves its replicas to DELETION_SUCCESSFUL (or, on an error, DELETION_INELIGIBLE);
4. when every replica is DELETION_SUCCESSFUL: partitions and replicas -> NON_EXISTENT, and
   `/brokers/topics/<t>`, `/config/topics/<t>` and `/admin/delete_topics/<t>` are removed (one fenced
   transaction here; three unfenced recursive deletes in 0.8.2).
A topic is ineligible while one of its replicas' brokers is down or a reassignment or preferred replica
election touches it; it is retried when the broker returns or the other operation ends.

0.8.2 ran this on its own thread, woken by a condition variable; here the controller calls
`run_if_signalled()` after each event, which is the same loop without the lock. With deletion disabled
(0.8.2's default) nothing watches `/admin/delete_topics` and marked topics simply stay.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from typing import Any

from controller.channel import RequestBatch, StopReplicaCallback
from controller.context import ControllerContext
from controller.partition_state import PartitionState
from controller.partition_state_machine import PartitionStateMachine
from controller.replica_state import PartitionReplica, ReplicaState
from controller.replica_state_machine import ReplicaStateMachine
from controller.zk_writes import FencedWriter
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk import paths

log = logging.getLogger("controller.TopicDeletionManager")

_MAX_ROUNDS = 10


def _names(items: Iterable) -> str:
    return ",".join(str(i) for i in sorted(items))


# ---- the decisions (pure) -----------------------------------------------------------------------------------


class Progress(enum.Enum):
    """Where a queued topic's deletion stands, from its replicas' states (doWork's checks, in its order)."""

    COMPLETE = "every replica deleted"
    IN_PROGRESS = "StopReplica (delete) sent, not all answered"
    FAILED = "some replicas could not be deleted: retry them"
    WAITING = "none of the above"


def progress(states: Iterable[ReplicaState | None]) -> Progress:
    states = list(states)
    if all(s is ReplicaState.DELETION_SUCCESSFUL for s in states):
        return Progress.COMPLETE
    if ReplicaState.DELETION_STARTED in states:
        return Progress.IN_PROGRESS
    if ReplicaState.DELETION_INELIGIBLE in states:
        return Progress.FAILED
    return Progress.WAITING


def split_for_deletion(replicas: list[PartitionReplica], live_or_shutting_down: set[int],
                       deleted: set[PartitionReplica]) -> tuple[list[PartitionReplica], list[PartitionReplica]]:
    """The replicas on dead brokers (they cannot be deleted now), and those to delete (live, not deleted yet)."""
    dead = [r for r in replicas if r[2] not in live_or_shutting_down]
    to_delete = [r for r in replicas if r[2] in live_or_shutting_down and r not in deleted]
    return dead, to_delete


def stop_replica_errors(partitions: list[TopicPartition], response: Any) -> set[TopicPartition]:
    """The partitions a StopReplica (delete) answer failed for: every one on an error of the whole request."""
    if response.error_code != 0:
        return set(partitions)
    return {(p.topic, p.partition) for p in response.partitions if p.error_code != 0}


# ---- the driver ---------------------------------------------------------------------------------------------


class TopicDeletionManager:
    """Disabled until `start`: the controller builds it before it reads what is queued for deletion."""

    def __init__(self, ctx: ControllerContext, partitions: PartitionStateMachine, replicas: ReplicaStateMachine,
                 writer: FencedWriter | None, requests: Callable[[], RequestBatch],
                 stop_watching_topic: Callable[[str], None],
                 stop_replica_callback: Callable[[], StopReplicaCallback]) -> None:
        self.ctx = ctx
        self.partitions = partitions
        self.replicas = replicas
        self.writer = writer
        self.requests = requests
        self.stop_watching_topic = stop_watching_topic
        self.stop_replica_callback = stop_replica_callback
        self.enabled = False
        self.topics_to_be_deleted: set[str] = set()
        self.partitions_to_be_deleted: set[TopicPartition] = set()
        self.topics_ineligible: set[str] = set()
        self._signalled = False
        self._prefix = f"[Topic Deletion Manager {ctx.controller_id}], "

    def start(self, enabled: bool, queued: Iterable[str], ineligible: Iterable[str]) -> None:
        """At failover: the topics queued in /admin/delete_topics, and those that cannot be deleted yet."""
        self.enabled = enabled
        self.topics_to_be_deleted = set(queued) if enabled else set()
        self.partitions_to_be_deleted = {
            tp for topic in self.topics_to_be_deleted for tp in self.ctx.partitions_of(topic)}
        self.topics_ineligible = set(ineligible) & self.topics_to_be_deleted
        self._signalled = bool(self.topics_to_be_deleted)

    def _info(self, msg: str, *args) -> None:
        log.info(self._prefix + msg, *args)

    # ---- queries -------------------------------------------------------------------------------------------

    def is_queued(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_partition_to_be_deleted(self, tp: TopicPartition) -> bool:
        return tp in self.partitions_to_be_deleted

    def is_ineligible(self, topic: str) -> bool:
        return not self.enabled or topic in self.topics_ineligible

    # ---- signals from the controller -------------------------------------------------------------------------

    def enqueue(self, topics: Iterable[str]) -> None:
        """The children of /admin/delete_topics named these (existing) topics."""
        if not self.enabled:
            return
        topics = set(topics) - self.topics_to_be_deleted
        if not topics:
            return
        self.topics_to_be_deleted |= topics
        self.partitions_to_be_deleted |= {tp for t in topics for tp in self.ctx.partitions_of(t)}
        self._signalled = True

    def resume(self, topics: Iterable[str]) -> None:
        """Something that held these topics back is over (a broker returned, a reassignment or election ended)."""
        if not self.enabled:
            return
        topics = set(topics) & self.topics_to_be_deleted
        if topics:
            self.topics_ineligible -= topics
            self._signalled = True

    def mark_ineligible(self, topics: Iterable[str]) -> None:
        if not self.enabled:
            return
        halted = set(topics) & self.topics_to_be_deleted
        if halted - self.topics_ineligible:
            self._info("Halted deletion of topics %s", _names(halted))
        self.topics_ineligible |= halted

    def fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        """These replicas could not be deleted (their broker died, or answered with an error)."""
        if not self.enabled:
            return
        failed = [r for r in replicas if self.is_queued(r[0])]
        if not failed:
            return
        self.replicas.handle_state_changes(failed, ReplicaState.DELETION_INELIGIBLE)
        self.mark_ineligible({r[0] for r in failed})
        self._signalled = True

    def on_stop_replica_response(self, broker_id: int, partitions: list[TopicPartition], response: Any) -> None:
        """A StopReplica (delete=true) answer: 0.8.2's deleteTopicStopReplicaCallback."""
        in_error = stop_replica_errors(partitions, response)
        self.fail_replica_deletion([(t, p, broker_id) for t, p in sorted(in_error)])
        deleted = [(t, p, broker_id) for t, p in partitions if (t, p) not in in_error and self.is_queued(t)]
        if deleted:
            self.replicas.handle_state_changes(deleted, ReplicaState.DELETION_SUCCESSFUL)
            self._signalled = True

    # ---- the work (0.8.2's DeleteTopicsThread.doWork) --------------------------------------------------------

    def run_if_signalled(self) -> None:
        rounds = 0
        while self.enabled and self._signalled and rounds < _MAX_ROUNDS:
            self._signalled = False
            rounds += 1
            self._do_work()

    def _do_work(self) -> None:
        rsm = self.replicas
        if self.topics_to_be_deleted:
            self._info("Handling deletion for topics %s", _names(self.topics_to_be_deleted))
        for topic in sorted(self.topics_to_be_deleted):
            where = progress(rsm.states.get(r) for r in rsm.replicas_of_topic(topic))
            if where is Progress.COMPLETE:
                self._complete_delete_topic(topic)
                self._info("Deletion of topic %s successfully completed", topic)
                continue
            if where is Progress.IN_PROGRESS:
                started = rsm.replicas_in_state(topic, ReplicaState.DELETION_STARTED)
                self._info("Deletion for replicas %s for partition %s of topic %s in progress",
                           _names({r[2] for r in started}), _names({f"[{t},{p}]" for t, p, _ in started}), topic)
            elif where is Progress.FAILED:
                self._mark_for_retry(topic)
            if self._eligible(topic):
                self._info("Deletion of topic %s (re)started", topic)
                self._on_topic_deletion(topic)
            elif self.is_ineligible(topic):
                self._info("Not retrying deletion of topic %s at this time since it is marked ineligible for "
                           "deletion", topic)

    def _eligible(self, topic: str) -> bool:
        rsm = self.replicas
        return (topic in self.topics_to_be_deleted
                and not rsm.any_replica_in_state(topic, ReplicaState.DELETION_STARTED)
                and not self.is_ineligible(topic))

    def _mark_for_retry(self, topic: str) -> None:
        rsm = self.replicas
        failed = rsm.replicas_in_state(topic, ReplicaState.DELETION_INELIGIBLE)
        self._info("Retrying delete topic for topic %s since replicas %s were not successfully deleted", topic,
                   _names(f"[Topic={t},Partition={p},Replica={r}]" for t, p, r in failed))
        rsm.handle_state_changes(failed, ReplicaState.OFFLINE)

    def _on_topic_deletion(self, topic: str) -> None:
        """Tell every broker the topic is going (leader -2), then delete the replicas that can be deleted."""
        ctx = self.ctx
        self._info("Topic deletion callback for %s", topic)
        partitions = ctx.partitions_of(topic)
        self.requests().add_update_metadata(ctx.live_or_shutting_down_broker_ids, {
            tp: (ctx.leadership[tp], ctx.assignments[tp]) for tp in partitions if tp in ctx.leadership})
        self._start_replica_deletion(topic)

    def _start_replica_deletion(self, topic: str) -> None:
        ctx = self.ctx
        rsm = self.replicas
        dead, retry = split_for_deletion(rsm.replicas_of_topic(topic), ctx.live_or_shutting_down_broker_ids,
                                         set(rsm.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL)))
        rsm.handle_state_changes(dead, ReplicaState.DELETION_INELIGIBLE)
        rsm.handle_state_changes(retry, ReplicaState.OFFLINE)
        rsm.handle_state_changes(retry, ReplicaState.DELETION_STARTED, self.stop_replica_callback())
        if dead:
            self.mark_ineligible({topic})

    def _complete_delete_topic(self, topic: str) -> None:
        ctx = self.ctx
        rsm = self.replicas
        psm = self.partitions
        self.stop_watching_topic(topic)
        rsm.handle_state_changes(rsm.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL),
                                 ReplicaState.NON_EXISTENT)
        partitions = ctx.partitions_of(topic)
        psm.handle_state_changes(partitions, PartitionState.OFFLINE)
        psm.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
        self.writer.delete_recursive([paths.topic_path(topic), paths.topic_config_path(topic),
                                            paths.delete_topic_path(topic)])
        self.topics_to_be_deleted.discard(topic)
        self.topics_ineligible.discard(topic)
        self.partitions_to_be_deleted -= {tp for tp in self.partitions_to_be_deleted if tp[0] == topic}
        rsm.forget_topic(topic)
        ctx.remove_topic(topic)
