"""QuorumController: the KRaft controller's logic (Kafka's QuorumController), sans I/O.

The driver (a controller process) hands it requests, the metadata log's callbacks (it is the log's
RaftListener: the driver registers it) and the time, and runs ``poll(now_ms)`` from its one loop. Everything
else happens here, in one order:

* A request becomes an event on the one queue. Run on the active controller, it asks a manager, which answers
  with records and a response; the records are appended to the log as one batch, replayed at once (so the next
  event sees them), and the response waits in purgatory until the log commits the batch's last offset.
* A standby (or a controller that is not active in this epoch) refuses requests with NOT_CONTROLLER and changes
  only by replaying committed records: the same replay, so every controller holds the same state at the same
  offset, and a failover needs no load.
* Losing the leadership reverts what was replayed but not committed (timeline.py) and fails the waiting
  responses with NOT_CONTROLLER; the clients retry on the new active controller.
* Timers: on each poll the active controller fences the brokers whose session has expired, one event each.

Becoming active: told it leads an epoch, the controller first appends a NoOpRecord and waits, queueing
requests, until the log commits it: by then every record of earlier epochs has been handed to it and replayed,
so its first decision sees the whole log (Kafka's Raft client holds the leader change back until the listener
has caught up to the epoch start; this works with a driver that tells it at once as well). The first active
controller of a new cluster then writes metadata.version before anything else (the bootstrap). Every append
happens in ``poll``, never inside a callback of the log.
"""

from __future__ import annotations

import gc
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zkbroker.admin_checks import ApiError
from zkbroker.metadata.records import (
    BROKER_REGISTRATION_CHANGE,
    CONFIG,
    FEATURE_LEVEL,
    FENCE_BROKER,
    NO_LEADER_CHANGE,
    NO_OP,
    PARTITION,
    PARTITION_CHANGE,
    PRODUCER_IDS,
    REGISTER_BROKER,
    REMOVE_TOPIC,
    TOPIC,
    UNFENCE_BROKER,
    UNREGISTER_BROKER,
    MetadataRecord,
    record,
)
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.metadata_records import RECORD_NAMES
from zkbroker.raft.listener import NotLeaderError, RaftClient

from .cluster_control import ClusterControlManager
from .configuration_control import ConfigurationControlManager
from .events import (
    MAX_RECORDS_PER_BATCH,
    MAX_UNCOMMITTED_RECORDS,
    ControllerEvent,
    ControllerResult,
    EventQueue,
    Pending,
    Purgatory,
)
from .feature_control import FeatureControlManager
from .producer_id_control import ProducerIdControlManager
from .replication_control import ReplicationControlManager
from .timeline import SnapshotRegistry

log = logging.getLogger("controller.quorum.QuorumController")

#: Records replayed between two freezes of the heap (gc.freeze): the image's partitions are a million long-lived
#: objects at 100,000 partitions, and every full collection walked them all, most of a large operation's time.
FREEZE_AFTER_RECORDS = 10_000


@dataclass(frozen=True)
class QuorumControllerConfig:
    node_id: int
    cluster_id: str
    session_timeout_ms: int = 9000  # broker.session.timeout.ms
    default_partitions: int = 1  # num.partitions
    default_replication_factor: int = 1  # default.replication.factor
    unclean_leader_election_enable: bool = False  # Kafka 3.7's default


class QuorumController:
    def __init__(self, config: QuorumControllerConfig, raft: RaftClient, rng: random.Random | None = None) -> None:
        self.config = config
        self.raft = raft
        self.rng = rng or random.Random()
        self.prefix = f"[QuorumController id={config.node_id}] "
        self.queue = EventQueue()
        self.purgatory = Purgatory()
        self.now_ms = 0
        self.leader_id: int | None = None
        self.epoch = -1
        self.active_epoch: int | None = None  # the epoch this controller is active in; None: a standby
        self.claim_epoch: int | None = None  # an epoch it leads but is not active in yet (catching up)
        self._claim_offset: int | None = None  # where its NoOpRecord went; active once that is committed
        # A log may commit inside schedule_append (a quorum of one): commits told meanwhile wait until the
        # batch is replayed, so no record is replayed twice and no answer misses its commit.
        self._appending = False
        self._held_commits: list[tuple[int, int, int, list[MetadataRecord]]] = []
        self.last_committed_offset = -1
        self.last_committed_epoch = -1
        self.last_applied_offset = -1  # the last offset replayed, committed or (on the active) not yet
        self._fencing: set[int] = set()  # brokers whose session expired, fenced in parts (not twice)
        self._loading: tuple[int, int, list[MetadataRecord], int] | None = None  # a snapshot loading in parts
        self._replayed_since_freeze = 0
        # Called when a commit frees events held behind uncommitted records: the driver polls soon (its timer
        # would, later). Never polls inside the log's callback itself.
        self.wake: Callable[[], None] = lambda: None
        # The handover (KIP-500's point): from this controller's election to the first leadership change it has
        # committed, logged once per epoch it leads (bench/kraft_vs_zk.py reads the line). A monotonic clock:
        # only for the log line, no decision depends on it.
        self._elected_at: float | None = None
        self._active_after_ms: float | None = None
        self._build_managers()

    def _build_managers(self) -> None:
        c = self.config
        self.registry = SnapshotRegistry()
        self.features = FeatureControlManager(self.registry)
        self.cluster = ClusterControlManager(self.registry, self.features, c.cluster_id, c.session_timeout_ms)
        self.configs = ConfigurationControlManager(self.registry)
        self.replication = ReplicationControlManager(
            self.registry, self.cluster, self.configs, default_partitions=c.default_partitions,
            default_replication_factor=c.default_replication_factor,
            unclean_election_default=c.unclean_leader_election_enable, rng=self.rng)
        self.producer_ids = ProducerIdControlManager(self.registry, self.cluster)
        self._replayers: dict[int, Callable[[Any, int], None]] = {
            REGISTER_BROKER: self.cluster.replay_register,
            UNREGISTER_BROKER: lambda rec, offset: self.cluster.replay_unregister(rec),
            FENCE_BROKER: lambda rec, offset: self.cluster.replay_change(FENCE_BROKER, rec, offset),
            UNFENCE_BROKER: lambda rec, offset: self.cluster.replay_change(UNFENCE_BROKER, rec, offset),
            BROKER_REGISTRATION_CHANGE: lambda rec, offset: self.cluster.replay_change(
                BROKER_REGISTRATION_CHANGE, rec, offset),
            TOPIC: lambda rec, offset: self.replication.replay_topic(rec),
            PARTITION: lambda rec, offset: self.replication.replay_partition(rec),
            PARTITION_CHANGE: lambda rec, offset: self.replication.replay_partition_change(rec),
            REMOVE_TOPIC: lambda rec, offset: self.replication.replay_remove_topic(rec),
            CONFIG: lambda rec, offset: self.configs.replay(rec),
            FEATURE_LEVEL: lambda rec, offset: self.features.replay(rec),
            PRODUCER_IDS: lambda rec, offset: self.producer_ids.replay(rec),
            NO_OP: lambda rec, offset: None,
        }

    @property
    def is_active(self) -> bool:
        return self.active_epoch is not None

    # ---- requests (each returns the Pending answer) ---------------------------------------------------------

    def register_broker(self, request: Any) -> Pending:
        """BrokerRegistration (62): {"error_code", "broker_epoch"}."""
        return self._submit("registerBroker", self._register_broker, request)

    def broker_heartbeat(self, request: Any, now_ms: int | None = None) -> Pending:
        """BrokerHeartbeat (63): {"error_code", "is_caught_up", "is_fenced", "should_shut_down"}.

        Given `now_ms` (the driver's clock as the request arrives), the active controller counts the broker as
        heard from at once, not when the event runs: the queue may hold events behind a part waiting for its
        commit (MAX_UNCOMMITTED_RECORDS), or behind a large operation's parts, and on a loaded machine that wait
        had the session of a broker heartbeating every 2 s run out. Its answer still waits for its turn."""
        if now_ms is not None and self.is_active:
            self.cluster.heard_from(request.broker_id, request.broker_epoch, now_ms)
        return self._submit("processBrokerHeartbeat", lambda: self.replication.process_broker_heartbeat(
            request, self.now_ms, self.last_committed_offset))

    def unregister_broker(self, broker_id: int) -> Pending:
        return self._submit("unregisterBroker", self.replication.unregister_broker, broker_id)

    def create_topics(self, request: Any) -> Pending:
        """CreateTopics: the list of per-topic results."""
        return self._submit("createTopics", self.replication.create_topics, request.topics, request.validate_only)

    def delete_topics(self, names: list[str], ids: list[bytes] = ()) -> Pending:
        return self._submit("deleteTopics", self.replication.delete_topics, list(names), list(ids))

    def create_partitions(self, request: Any) -> Pending:
        return self._submit("createPartitions", self.replication.create_partitions, request.topics,
                            request.validate_only)

    def alter_partition(self, request: Any, version: int) -> Pending:
        return self._submit("alterPartition", self.replication.alter_partition, request, version)

    def elect_leaders(self, request: Any) -> Pending:
        return self._submit("electLeaders", self.replication.elect_leaders, getattr(request, "election_type", 0),
                            request.topic_partitions)

    def incremental_alter_configs(self, request: Any) -> Pending:
        return self._submit("incrementalAlterConfigs", self.configs.alter, request.resources,
                            request.validate_only, True, self.replication.topic_exists)

    def alter_configs(self, request: Any) -> Pending:
        return self._submit("legacyAlterConfigs", self.configs.alter, request.resources, request.validate_only,
                            False, self.replication.topic_exists)

    def allocate_producer_ids(self, request: Any) -> Pending:
        return self._submit("allocateProducerIds", self.producer_ids.generate_next_block, request.broker_id,
                            request.broker_epoch)

    def update_feature(self, name: str, level: int) -> Pending:
        return self._submit("updateFeatures", self.features.update_feature, name, level)

    def _register_broker(self, request: Any) -> ControllerResult:
        try:
            registration = self.cluster.register_broker(request, self.last_applied_offset + 1, self.now_ms)
        except ApiError as e:
            log.info("%sRefusing the registration of broker %d: %s", self.prefix, request.broker_id, e.message)
            return ControllerResult([], {"error_code": e.code, "broker_epoch": -1})
        existing = self.cluster.brokers.get(request.broker_id)
        log.info("%sRegistering broker %d at epoch %d (incarnation %s)", self.prefix, request.broker_id,
                 registration[2].broker_epoch, bytes(request.incarnation_id).hex())
        response = {"error_code": ErrorCode.NONE, "broker_epoch": registration[2].broker_epoch}
        if existing is None or existing.fenced:
            return ControllerResult([registration], response)
        # a new incarnation of a broker that was serving: its old leaderships move before it starts fenced
        return self.replication.leave_in_parts(existing.id, response, last=lambda: [registration])

    def _submit(self, name: str, run: Callable[..., ControllerResult], *args: Any) -> Pending:
        pending = Pending(name)
        self.queue.append(ControllerEvent(name, lambda: run(*args), pending))
        return pending

    # ---- the driver's loop ----------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> None:
        """Run every queued event, then the timers (session expiry). While catching up to lead, the events wait."""
        self.now_ms = now_ms
        self._freeze_image()
        if self._loading is not None:
            self._load_some()
            return
        if self.claim_epoch is not None:
            if self._claim_offset is None:
                self._append_claim()
            return
        # Only the events queued before this poll: the later parts of a large operation, queued meanwhile, wait
        # for the next poll, so the loop answers heartbeats (and the log commits) between its batches; and none
        # while a part's worth of records waits for its commit (events.MAX_UNCOMMITTED_RECORDS): the commit wakes
        # the driver.
        for _ in range(len(self.queue)):
            if self.waiting_for_commit:
                break
            self._run(self.queue.pop())
        if self.is_active and not self.waiting_for_commit:
            for broker_id in self.cluster.stale_brokers(now_ms):
                if broker_id in self._fencing:
                    continue
                log.info("%sFencing broker %d because its session has timed out.", self.prefix, broker_id)
                self._fencing.add(broker_id)
                pending = Pending("maybeFenceStaleBroker")
                pending.add_done_callback(lambda _p, b=broker_id: self._fencing.discard(b))
                self._run(ControllerEvent("maybeFenceStaleBroker", lambda b=broker_id: self.replication.fence_broker(
                    b), pending))

    @property
    def has_work(self) -> bool:
        """Events wait (the later parts of a large operation among them) and may run now: the driver polls again
        soon. Events held for a commit are not work until it comes (`wake`)."""
        return self._loading is not None or (len(self.queue) > 0 and self.claim_epoch is None
                                             and not self.waiting_for_commit)

    @property
    def waiting_for_commit(self) -> bool:
        """The active controller holds its queue: a part's worth of its records is not committed yet."""
        return self.is_active and self.last_applied_offset - self.last_committed_offset >= MAX_UNCOMMITTED_RECORDS

    def _run(self, event: ControllerEvent) -> None:
        if not self.is_active:
            event.pending.fail(ErrorCode.NOT_CONTROLLER)
            return
        try:
            result = event.run()
        except Exception:
            log.exception("%s%s failed", self.prefix, event.name)
            event.pending.fail(ErrorCode.UNKNOWN)
            return
        if result is None or not result.records:
            if self.last_applied_offset > self.last_committed_offset:  # it has seen writes not yet committed
                self.purgatory.add(self.last_applied_offset, event.pending, None if result is None else
                                   result.response)
            else:
                event.pending.complete(None if result is None else result.response)
            return
        try:
            last = self._append(self.active_epoch, result.records)
        except NotLeaderError as e:
            log.info("%s%s: %s", self.prefix, event.name, e)
            event.pending.fail(ErrorCode.NOT_CONTROLLER)
            self._renounce()
            self._release_commits()
            return
        self._replay_batch(last - len(result.records) + 1, result.records)
        if result.more is not None:
            self.queue.append(ControllerEvent(event.name, result.more, event.pending))
        else:
            self.purgatory.add(last, event.pending, result.response)
        self._release_commits()

    def _append(self, epoch: int, records: list[MetadataRecord]) -> int:
        self._appending = True
        try:
            return self.raft.schedule_append(epoch, records)
        finally:
            self._appending = False

    def _release_commits(self) -> None:
        held, self._held_commits = self._held_commits, []
        for commit in held:
            self.handle_commit(*commit)

    # ---- the log's callbacks (RaftListener) -----------------------------------------------------------------

    def handle_commit(self, base_offset: int, last_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        if self._appending or self._loading is not None:
            self._held_commits.append((base_offset, last_offset, epoch, records))
            return
        for i, item in enumerate(records):
            offset = base_offset + i
            if offset > self.last_applied_offset:  # the active controller replayed its own at append time
                self._replay(item, offset)
        self.last_committed_offset = max(self.last_committed_offset, last_offset)
        self.last_committed_epoch = epoch
        self.last_applied_offset = max(self.last_applied_offset, last_offset)
        if self.is_active:
            self.registry.commit(last_offset)
            self.purgatory.complete_up_to(last_offset)
            if self.queue and not self.waiting_for_commit:
                self.wake()  # events held for this commit may run
            if self._elected_at is not None and any(
                    api_key == PARTITION_CHANGE and rec.leader != NO_LEADER_CHANGE for api_key, _, rec in records):
                log.info("%sHandover: the first leadership change of epoch %d committed %.0f ms after this "
                         "controller was elected (active after %.0f ms; elected at monotonic %.3f)", self.prefix,
                         self.active_epoch, (time.monotonic() - self._elected_at) * 1000, self._active_after_ms or 0,
                         self._elected_at)
                self._elected_at = None
        elif self._claim_offset is not None and last_offset >= self._claim_offset:
            self._activate()

    def handle_load_snapshot(self, end_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        """The whole state from a snapshot: what was here before is dropped. A large snapshot (100,000
        partitions) is replayed MAX_RECORDS_PER_BATCH records per poll, so the loop keeps answering the quorum
        meanwhile; until it is all loaded the controller neither becomes active nor replays a commit (those are
        held) nor writes a snapshot."""
        if self.is_active:
            self._renounce()
        self._build_managers()
        self._loading = (end_offset, epoch, records, 0)
        self._load_some()

    def _load_some(self) -> None:
        end_offset, epoch, records, done = self._loading
        for item in records[done:done + MAX_RECORDS_PER_BATCH]:
            self._replay(item, end_offset - 1)
        done += MAX_RECORDS_PER_BATCH
        if done < len(records):
            self._loading = (end_offset, epoch, records, done)
            return
        self._loading = None
        self._freeze_image()
        self.last_committed_offset = self.last_applied_offset = end_offset - 1
        self.last_committed_epoch = epoch
        log.info("%sLoaded a snapshot ending at offset %d (epoch %d): %d brokers, %d topics, %d partitions",
                 self.prefix, end_offset, epoch, len(self.cluster.brokers), len(self.replication.topics),
                 len(self.replication.partitions))
        self._release_commits()

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        self.leader_id, self.epoch = leader_id, epoch
        if leader_id == self.config.node_id and epoch not in (self.active_epoch, self.claim_epoch):
            if self.is_active:
                self._renounce()
            log.info("%sLeading epoch %d: catching up before becoming active", self.prefix, epoch)
            self._elected_at, self._active_after_ms = time.monotonic(), None
            self.claim_epoch, self._claim_offset = epoch, None
        elif leader_id != self.config.node_id:
            self.claim_epoch = self._claim_offset = None
            if self.is_active:
                self._renounce()

    def _append_claim(self) -> None:
        try:
            self._claim_offset = self._append(self.claim_epoch, [record(NO_OP)])
        except NotLeaderError:
            self.claim_epoch = None
        self._release_commits()

    def _activate(self) -> None:
        epoch, self.claim_epoch, self._claim_offset = self.claim_epoch, None, None
        log.info("%sBecoming the active controller at epoch %d, committed offset %d", self.prefix, epoch,
                 self.last_committed_offset)
        self.active_epoch = epoch
        if self._elected_at is not None:
            self._active_after_ms = (time.monotonic() - self._elected_at) * 1000
        self.registry.enabled = True
        self.cluster.activate(self.now_ms)
        bootstrap = self.features.bootstrap_records()
        if bootstrap:
            log.info("%sWriting the bootstrap records of a new cluster", self.prefix)
            self.queue.push_front(ControllerEvent("bootstrap", lambda: ControllerResult(bootstrap),
                                                  Pending("bootstrap")))

    def _renounce(self) -> None:
        undone = self.registry.revert_to(self.last_committed_offset)
        log.info("%sRenouncing the leadership of epoch %s; reverting to committed offset %d (%d writes undone)",
                 self.prefix, self.active_epoch, self.last_committed_offset, undone)
        self.registry.disable()
        self.active_epoch = self.claim_epoch = self._claim_offset = None
        self.last_applied_offset = self.last_committed_offset
        self.cluster.heartbeats.clear()
        self._fencing.clear()
        self.replication.shutdowns_moving.clear()
        self.purgatory.fail_all(ErrorCode.NOT_CONTROLLER)

    # ---- replay ---------------------------------------------------------------------------------------------

    def _replay_batch(self, base_offset: int, records: list[MetadataRecord]) -> None:
        for i, item in enumerate(records):
            self._replay(item, base_offset + i)
        self.last_applied_offset = base_offset + len(records) - 1

    def _replay(self, item: MetadataRecord, offset: int) -> None:
        api_key, _version, rec = item
        self.registry.offset = offset
        replayer = self._replayers.get(api_key)
        if replayer is None:  # ACLs, SCRAM credentials, quotas, delegation tokens: not modelled here
            log.debug("%sSkipping %s at offset %d", self.prefix, RECORD_NAMES.get(api_key, api_key), offset)
            return
        replayer(rec, offset)
        self.last_applied_offset = max(self.last_applied_offset, offset)
        self._replayed_since_freeze += 1

    def _freeze_image(self) -> None:
        """Once many records have been replayed, move everything alive into the collector's permanent generation
        (gc.freeze): the image is long-lived and acyclic, so it is freed by reference counts when replaced and
        the full collections stop walking it. What a freeze catches of the process's cyclic garbage stays until
        the process ends; a freeze per 10,000 records keeps that small."""
        if self._replayed_since_freeze >= FREEZE_AFTER_RECORDS:
            self._replayed_since_freeze = 0
            gc.freeze()

    def describe(self) -> dict:
        """What the lab and the dashboard show of it (DESIGN §17): whether it is active, the committed offset,
        and each broker's registration, fencing and the metadata offset of its last heartbeat (active only)."""
        offsets = self.cluster.heartbeats.metadata_offsets
        return {"active": self.is_active, "epoch": self.active_epoch, "committed_offset": self.last_committed_offset,
                "metadata_version": self.features.metadata_version, "topics": len(self.replication.topics),
                "partitions": len(self.replication.partitions),
                "brokers": [{"id": b.id, "epoch": b.epoch, "fenced": b.fenced,
                             "in_controlled_shutdown": b.in_controlled_shutdown,
                             "metadata_offset": offsets.get(b.id),
                             "leaderships": self.replication.leaderships.get(b.id, 0)}
                            for _, b in sorted(self.cluster.brokers.items())]}

    # ---- snapshots ------------------------------------------------------------------------------------------

    def snapshot_records(self) -> list[MetadataRecord]:
        """The state as records, in an order a fresh controller can replay: features first."""
        return [*self.features.snapshot_records(), *self.cluster.snapshot_records(),
                *self.replication.snapshot_records(), *self.configs.snapshot_records(),
                *self.producer_ids.snapshot_records()]

    def write_snapshot(self) -> int | None:
        """A snapshot of the committed state, through the log; its end offset, or None when state is not all
        committed yet (the active controller between an append and its commit) or there is nothing."""
        if (self._loading is not None or self.last_committed_offset < 0
                or self.last_applied_offset != self.last_committed_offset):
            return None
        end = self.last_committed_offset + 1
        self.raft.create_snapshot(end, self.last_committed_epoch, self.snapshot_records())
        return end
