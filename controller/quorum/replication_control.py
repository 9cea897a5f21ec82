"""ReplicationControlManager: topics and partitions (Kafka's ReplicationControlManager).

Requests answered with records: CreateTopics, DeleteTopics, CreatePartitions (the checks and replica assignment
of zkbroker/admin_checks.py, shared with ZooKeeper mode), AlterPartition from partition leaders (KIP-497: a
request made on a stale view of the partition is refused by its epochs), ElectLeaders; and the partitions' side
of each broker step: a broker fenced, shutting down or unregistered leaves every ISR (the last member stays)
and its leaderships move; a broker unfenced may lead the partitions left without a leader.

Leaders are chosen by controller/leader_selector.py, the same rules the ZooKeeper controller applies: the first
replica in assignment order that is active and in the ISR; else, if the topic allows unclean election, the first
active replica, with an ISR of itself (its log may lack committed messages; the partition is RECOVERING until
the new leader says otherwise); else no leader (-1) until an ISR member comes back.
"""

from __future__ import annotations

import base64
import logging
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from controller.leader_selector import (
    LeaderElectionNotNeededError,
    NoReplicaOnlineError,
    isr_without,
    new_partition_leader,
    offline_partition_leader,
    preferred_replica_leader,
)
from zkbroker import admin_checks as checks
from zkbroker.admin_checks import RECORDS_BOUND, ApiError
from zkbroker.metadata.partition import PartitionRegistration, partition_change
from zkbroker.metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    NO_RECOVERY_CHANGE,
    RECOVERED,
    RECOVERING,
    REMOVE_TOPIC,
    TOPIC,
    TOPIC_RESOURCE,
    MetadataRecord,
    record,
)
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.metadata_records import METADATA_TOPIC_ID

from .cluster_control import ClusterControlManager
from .configuration_control import ConfigurationControlManager, config_records
from .events import MAX_RECORDS_PER_BATCH, ControllerResult
from .timeline import SnapshotRegistry, TimelineDict

log = logging.getLogger("controller.quorum.ReplicationControlManager")

#: ElectLeaders' election types.
PREFERRED = 0
UNCLEAN = 1

#: BrokerHeartbeat's answer, as Kafka's BrokerControlState: where a broker stands after a heartbeat.
FENCED, UNFENCED, CONTROLLED_SHUTDOWN, SHUTDOWN_NOW = "fenced", "unfenced", "controlled shutdown", "shutdown now"

PartitionKey = tuple[bytes, int]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    id: bytes
    partitions: int = 0


def topic_id_text(topic_id: bytes) -> str:
    """Kafka's Uuid.toString: base64url without padding."""
    return base64.urlsafe_b64encode(topic_id).decode("ascii").rstrip("=")


class ReplicationControlManager:
    def __init__(self, registry: SnapshotRegistry, cluster: ClusterControlManager,
                 configs: ConfigurationControlManager, *, default_partitions: int = 1,
                 default_replication_factor: int = 1, unclean_election_default: bool = False,
                 rng: random.Random | None = None) -> None:
        self.cluster = cluster
        self.configs = configs
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.unclean_election_default = unclean_election_default
        self.rng = rng or random.Random()
        self.topics: TimelineDict[bytes, TopicInfo] = TimelineDict(registry)
        self.topics_by_name: TimelineDict[str, bytes] = TimelineDict(registry)
        self.partitions: TimelineDict[PartitionKey, PartitionRegistration] = TimelineDict(registry)
        # Indexes kept by replay (and undone with it), so a broker's step visits its own partitions once and a
        # controlled shutdown's "leads nothing" is one lookup (Kafka's BrokersToIsrs): broker -> the partitions it
        # is a replica of; broker -> how many it leads.
        self._registry = registry
        self._replica_of: dict[int, TimelineDict[PartitionKey, None]] = {}
        self.leaderships: TimelineDict[int, int] = TimelineDict(registry)
        # Brokers in controlled shutdown whose leaderships this active controller is moving now, in parts: one
        # operation a broker. Not timeline state: the controller clears it when it renounces (the parts left are
        # dropped with the leadership) so that the next active controller, or this one again, takes the moves up.
        self.shutdowns_moving: set[int] = set()

    # ---- questions ------------------------------------------------------------------------------------------

    def topic_exists(self, name: str) -> bool:
        return name in self.topics_by_name

    def partition(self, topic: str, partition_id: int) -> PartitionRegistration | None:
        topic_id = self.topics_by_name.get(topic)
        return None if topic_id is None else self.partitions.get((topic_id, partition_id))

    def _topic_partitions(self, topic_id: bytes) -> Iterator[tuple[PartitionKey, PartitionRegistration]]:
        for partition_id in range(self.topics[topic_id].partitions):
            key = (topic_id, partition_id)
            yield key, self.partitions[key]

    def leads_any(self, broker_id: int) -> bool:
        return self.leaderships.get(broker_id, 0) > 0

    def partitions_of(self, broker_id: int) -> list[PartitionKey]:
        """The partitions `broker_id` is a replica of (a copy: the caller may change the state meanwhile)."""
        index = self._replica_of.get(broker_id)
        return [] if index is None else list(index)

    def _scan_of(self, broker_id: int) -> Iterator[PartitionKey]:
        """The partitions `broker_id` is a replica of, visited lazily across the parts of one step (TimelineDict.
        scan): the first part of a broker's step at a million partitions costs what its own changes cost."""
        index = self._replica_of.get(broker_id)
        return iter(()) if index is None else index.scan()

    def _new_topic_id(self) -> bytes:
        while True:
            topic_id = self.rng.randbytes(16)
            # Kafka's Uuid.randomUuid skips the reserved ids and those whose text starts with "-" (a flag)
            if (topic_id not in (bytes(16), METADATA_TOPIC_ID) and topic_id not in self.topics
                    and not topic_id_text(topic_id).startswith("-")):
                return topic_id

    # ---- topics ---------------------------------------------------------------------------------------------

    def create_topics(self, topics: Any, validate_only: bool) -> ControllerResult:
        """CreateTopics: one result per topic (name, topic_id, error_code, error_message, num_partitions,
        replication_factor); a topic's TopicRecord, ConfigRecords and PartitionRecords for each that passes."""
        names = [t.name for t in topics]
        duplicates = {n for n in names if names.count(n) > 1}
        taken = list(self.topics_by_name)
        records: list[MetadataRecord] = []
        results = []
        partitions = 0
        for entry in topics:
            result = {"name": entry.name, "topic_id": bytes(16), "error_code": ErrorCode.NONE, "error_message": None,
                      "num_partitions": -1, "replication_factor": -1}
            try:
                if entry.name in duplicates:
                    raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                topic_records, topic_id, assignment = self._create_topic(entry, taken)
                if partitions + len(assignment) > checks.MAX_PARTITIONS_PER_REQUEST:
                    raise ApiError(ErrorCode.INVALID_REQUEST,
                                   f"The request's topics would take more than {checks.MAX_PARTITIONS_PER_REQUEST} "
                                   "partition records; the controller writes at most that many per request.")
                taken.append(entry.name)
                partitions += len(assignment)
                result.update(num_partitions=len(assignment), replication_factor=len(assignment[0]))
                if not validate_only:
                    records += topic_records
                    result["topic_id"] = topic_id
            except ApiError as e:
                result.update(error_code=e.code, error_message=e.message)
            results.append(result)
        return ControllerResult(records, results)

    def _create_topic(self, entry: Any, taken: list[str]) -> tuple[list[MetadataRecord], bytes, dict]:
        topic = checks.topic_to_create(entry)
        checks.check_topic_name(topic.name)
        checks.check_not_existing(topic.name, topic.name in taken, False, taken)
        registered = set(self.cluster.brokers)
        unknown = sorted({b for replicas in topic.assignments.values() for b in replicas} - registered)
        if unknown:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes broker {unknown[0]}, but no such broker is "
                           "registered.")
        assignment = checks.creation_assignment(topic, self.cluster.unfenced_brokers(), self.default_partitions,
                                                self.default_replication_factor, self.rng, RECORDS_BOUND)
        configs = checks.check_topic_configs(topic.configs, ErrorCode.INVALID_CONFIG)
        topic_id = self._new_topic_id()
        records = [record(TOPIC, name=topic.name, topic_id=topic_id)]
        records += config_records((TOPIC_RESOURCE, topic.name), {}, configs)
        records += self._new_partitions(topic_id, assignment)
        return records, topic_id, assignment

    def _new_partitions(self, topic_id: bytes, assignment: dict[int, tuple[int, ...]]) -> list[MetadataRecord]:
        """A PartitionRecord per new partition: leader the first active replica, ISR the active replicas."""
        active = self.cluster.active_brokers()
        out = []
        for partition_id, replicas in sorted(assignment.items()):
            try:
                election = new_partition_leader(tuple(replicas), active)
            except NoReplicaOnlineError:
                raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                               f"Unable to replicate the partition {len(replicas)} time(s): All brokers are "
                               "currently fenced or in controlled shutdown.") from None
            out.append(PartitionRegistration(tuple(replicas), election.isr, election.leader).to_record(
                topic_id, partition_id))
        return out

    def delete_topics(self, names: list[str], ids: list[bytes]) -> ControllerResult:
        """DeleteTopics by name and by id: a RemoveTopicRecord each; results with name, topic_id, error."""
        records, results = [], []
        wanted: list[tuple[str | None, bytes | None]] = [(n, None) for n in names] + [(None, i) for i in ids]
        removed: set[bytes] = set()
        for name, topic_id in wanted:
            found = self.topics_by_name.get(name) if name is not None else (topic_id if topic_id in self.topics
                                                                            else None)
            if found is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is not None else ErrorCode.UNKNOWN_TOPIC_ID
                results.append({"name": name, "topic_id": topic_id or bytes(16), "error_code": code,
                                "error_message": None})
                continue
            if found not in removed:
                removed.add(found)
                records.append(record(REMOVE_TOPIC, topic_id=found))
            results.append({"name": self.topics[found].name, "topic_id": found, "error_code": ErrorCode.NONE,
                            "error_message": None})
        return ControllerResult(records, results)

    def create_partitions(self, topics: Any, validate_only: bool) -> ControllerResult:
        """CreatePartitions: results (name, error_code, error_message), a PartitionRecord per new partition."""
        records: list[MetadataRecord] = []
        results = []
        for entry in topics:
            try:
                topic_id = self.topics_by_name.get(entry.name)
                if topic_id is None:
                    raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{entry.name}' does not exist.")
                existing = {key[1]: part.replicas for key, part in self._topic_partitions(topic_id)}
                given = None if entry.assignments is None else [list(a.broker_ids) for a in entry.assignments]
                added = checks.new_partitions_assignment(entry.name, existing, entry.count, given,
                                                         self.cluster.unfenced_brokers(), sorted(self.cluster.brokers),
                                                         self.rng, RECORDS_BOUND)
                new_records = self._new_partitions(topic_id, added)
                if not validate_only:
                    records += new_records
                results.append({"name": entry.name, "error_code": ErrorCode.NONE, "error_message": None})
            except ApiError as e:
                results.append({"name": entry.name, "error_code": e.code, "error_message": e.message})
        return ControllerResult(records, results)

    # ---- leadership -----------------------------------------------------------------------------------------

    def _change(self, key: PartitionKey, part: PartitionRegistration, remove: int | None,
                active: set[int]) -> MetadataRecord | None:
        """The PartitionChangeRecord that takes `remove` out of the ISR (the last member stays) and, if the leader
        can no longer lead, elects one; None if nothing changes."""
        isr = isr_without(part.isr, remove, keep_last=True) if remove is not None else part.isr
        leader, recovery = part.leader, NO_RECOVERY_CHANGE
        if part.leader == NO_LEADER or part.leader == remove or part.leader not in active or part.leader not in isr:
            unclean = self.configs.unclean_election_allowed(self.topics[key[0]].name, self.unclean_election_default)
            try:
                election = offline_partition_leader(part.replicas, isr, part.leader_epoch, active, unclean)
                leader = election.leader
                if election.unclean:
                    isr, recovery = election.isr, RECOVERING
            except NoReplicaOnlineError:
                leader = NO_LEADER
        if isr == part.isr and leader == part.leader:
            return None
        return partition_change(key[0], key[1], isr=None if isr == part.isr else isr,
                                leader=NO_LEADER_CHANGE if leader == part.leader else leader,
                                leader_recovery_state=recovery)

    def broker_leaving(self, broker_id: int, limit: int | None = None,
                       scan: Iterator[PartitionKey] | None = None) -> list[MetadataRecord]:
        """A broker fenced, entering controlled shutdown or unregistered: out of every ISR, its leaderships
        moved to the other active replicas; with `limit`, that many partitions' changes at most. `scan`, from
        `_scan_of`, lets the next part resume where this one stopped: a leaving broker is not active, so no
        other event puts it back into a partition already passed (an AlterPartition naming it is refused)."""
        active = self.cluster.active_brokers() - {broker_id}
        out = []
        for key in scan if scan is not None else self.partitions_of(broker_id):
            part = self.partitions.get(key)
            if part is not None and (broker_id in part.isr or part.leader == broker_id):
                change = self._change(key, part, broker_id, active)
                if change is not None:
                    out.append(change)
                    if limit is not None and len(out) >= limit:
                        break
        moved = sum(rec.leader != NO_LEADER_CHANGE for _, _, rec in out)
        log.info("Broker %d leaves the ISRs of %d partitions; %d change leader", broker_id, len(out), moved)
        return out

    def broker_unfenced(self, broker_id: int, limit: int | None = None,
                        scan: Iterator[PartitionKey] | None = None) -> list[MetadataRecord]:
        """A broker back: the partitions without a leader that it may lead get one (`limit`, `scan` as above:
        a partition passed cannot lose its leader to another broker's step unnoticed, that step electing among
        the active brokers, this one included, itself)."""
        active = self.cluster.active_brokers() | {broker_id}
        out = []
        for key in scan if scan is not None else self.partitions_of(broker_id):
            part = self.partitions.get(key)
            if part is not None and part.leader == NO_LEADER and broker_id in part.replicas:
                change = self._change(key, part, None, active)
                if change is not None:
                    out.append(change)
                    if limit is not None and len(out) >= limit:
                        break
        return out

    def leave_in_parts(self, broker_id: int, response: Any, first: Sequence[MetadataRecord] = (),
                       last: Callable[[], list[MetadataRecord]] = list) -> ControllerResult:
        """A broker leaving its partitions (`broker_leaving`) as a non-atomic operation: `first`, then its
        partitions' changes MAX_RECORDS_PER_BATCH at a time, each part its own turn of the queue, and `last()`'s
        records (its fencing, its unregistration) with the final part, once it is out of every ISR."""
        scan = self._scan_of(broker_id)
        return _in_parts(lambda limit: self.broker_leaving(broker_id, limit, scan), response, list(first), last)

    def unfence_in_parts(self, broker_id: int, response: Any) -> ControllerResult:
        """The broker's UnfenceBrokerRecord, then the leaderless partitions it may lead, in parts as above."""
        broker = self.cluster.brokers[broker_id]
        scan = self._scan_of(broker_id)
        return _in_parts(lambda limit: self.broker_unfenced(broker_id, limit, scan), response,
                         [self.cluster.unfence_record(broker)], list)

    def elect_leaders(self, election_type: int, topic_partitions: Any) -> ControllerResult:
        """ElectLeaders (KIP-460): per partition ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
        ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION or a PartitionChangeRecord. With no
        partitions named, every partition is tried and those needing nothing are left out of the answer."""
        every = topic_partitions is None
        if every:
            wanted = sorted((self.topics[topic_id].name, partition_id) for topic_id, partition_id in self.partitions)
        else:
            wanted = [(tp.topic, p) for tp in topic_partitions for p in tp.partitions]
        active = self.cluster.active_brokers()
        records: list[MetadataRecord] = []
        by_topic: dict[str, list[dict]] = {}
        for topic, partition_id in wanted:
            code, message = ErrorCode.NONE, None
            topic_id = self.topics_by_name.get(topic)
            part = None if topic_id is None else self.partitions.get((topic_id, partition_id))
            if part is None:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
            else:
                try:
                    records.append(self._elect(election_type, (topic_id, partition_id), part, active))
                except LeaderElectionNotNeededError as e:
                    if every:
                        continue
                    code, message = ErrorCode.ELECTION_NOT_NEEDED, str(e)
                except NoReplicaOnlineError as e:
                    code = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election_type == PREFERRED
                            else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
                    message = str(e)
            by_topic.setdefault(topic, []).append({"partition_id": partition_id, "error_code": code,
                                                   "error_message": message})
        results = [{"topic": topic, "partition_result": parts} for topic, parts in by_topic.items()]
        return ControllerResult(records, {"error_code": ErrorCode.NONE, "replica_election_results": results})

    def _elect(self, election_type: int, key: PartitionKey, part: PartitionRegistration,
               active: set[int]) -> MetadataRecord:
        if election_type == PREFERRED:
            election = preferred_replica_leader(part.replicas, part.leader, part.isr, part.leader_epoch, active)
            return partition_change(key[0], key[1], leader=election.leader)
        if election_type != UNCLEAN:
            raise NoReplicaOnlineError(f"Unknown election type {election_type}")
        if part.leader in active:
            raise LeaderElectionNotNeededError(f"Leader {part.leader} is alive")
        election = offline_partition_leader(part.replicas, part.isr, part.leader_epoch, active, True)
        if election.unclean:
            return partition_change(key[0], key[1], leader=election.leader, isr=election.isr,
                                    leader_recovery_state=RECOVERING)
        return partition_change(key[0], key[1], leader=election.leader)

    # ---- AlterPartition -------------------------------------------------------------------------------------

    def alter_partition(self, request: Any, version: int) -> ControllerResult:
        """AlterPartition from a partition leader, answered as Kafka 3.7 answers it (KIP-497, KIP-704, KIP-841,
        KIP-903): the response's topics and partitions, each with its error or its state after the change."""
        try:
            self.cluster.check_broker_epoch(request.broker_id, request.broker_epoch)
        except ApiError as e:
            return ControllerResult([], {"error_code": e.code, "topics": []})
        records: list[MetadataRecord] = []
        topics = []
        for topic in request.topics:
            if version >= 2:
                topic_id = bytes(topic.topic_id) if topic.topic_id in self.topics else None
                unknown = ErrorCode.UNKNOWN_TOPIC_ID
                head = {"topic_id": bytes(topic.topic_id)}
            else:
                topic_id = self.topics_by_name.get(topic.topic_name)
                unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                head = {"topic_name": topic.topic_name}
            parts = []
            for data in topic.partitions:
                if topic_id is None:
                    parts.append(_partition_error(data.partition_index, unknown))
                    continue
                key = (topic_id, data.partition_index)
                part = self.partitions.get(key)
                code = self._check_alter(request.broker_id, part, data, version)
                if code != ErrorCode.NONE:
                    parts.append(_partition_error(data.partition_index, code))
                    continue
                new_isr = _requested_isr(data, version)
                recovery = getattr(data, "leader_recovery_state", RECOVERED)
                change_recovery = recovery if recovery != part.leader_recovery_state else NO_RECOVERY_CHANGE
                if new_isr != part.isr or change_recovery != NO_RECOVERY_CHANGE:
                    change = partition_change(topic_id, data.partition_index,
                                              isr=None if new_isr == part.isr else new_isr,
                                              leader_recovery_state=change_recovery)
                    records.append(change)
                    part = part.merge(change[2])
                parts.append({"partition_index": data.partition_index, "error_code": ErrorCode.NONE,
                              "leader_id": part.leader, "leader_epoch": part.leader_epoch, "isr": list(part.isr),
                              "leader_recovery_state": part.leader_recovery_state,
                              "partition_epoch": part.partition_epoch})
            topics.append({**head, "partitions": parts})
        return ControllerResult(records, {"error_code": ErrorCode.NONE, "topics": topics})

    def _check_alter(self, broker_id: int, part: PartitionRegistration | None, data: Any, version: int) -> int:
        """KIP-497's checks, in Kafka's order: a request with epochs *ahead* of ours was made against a newer
        controller (NOT_CONTROLLER: the leader looks for it); behind ours, on a stale view of the partition."""
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if data.leader_epoch > part.leader_epoch or data.partition_epoch > part.partition_epoch:
            return ErrorCode.NOT_CONTROLLER
        if data.leader_epoch < part.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if part.leader != broker_id:
            return ErrorCode.NOT_LEADER_FOR_PARTITION
        if data.partition_epoch < part.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION
        new_isr = _requested_isr(data, version)
        recovery = getattr(data, "leader_recovery_state", RECOVERED)
        if recovery not in (RECOVERED, RECOVERING) or (recovery == RECOVERING and len(new_isr) > 1):
            return ErrorCode.INVALID_REQUEST
        if part.leader_recovery_state == RECOVERED and recovery == RECOVERING:
            return ErrorCode.INVALID_REQUEST
        if part.leader not in new_isr or len(set(new_isr)) != len(new_isr):
            return ErrorCode.INVALID_REQUEST
        for replica in new_isr:
            broker = self.cluster.brokers.get(replica)
            epoch_ok = version < 3 or next(b.broker_epoch for b in data.new_isr_with_epochs
                                           if b.broker_id == replica) in (-1, getattr(broker, "epoch", None))
            if (replica not in part.replicas or broker is None or broker.fenced or broker.in_controlled_shutdown
                    or not epoch_ok):
                return ErrorCode.INELIGIBLE_REPLICA if version >= 2 else ErrorCode.OPERATION_NOT_ATTEMPTED
        return ErrorCode.NONE

    # ---- heartbeats -----------------------------------------------------------------------------------------

    def process_broker_heartbeat(self, request: Any, now_ms: int, last_committed_offset: int) -> ControllerResult:
        """BrokerHeartbeat: the broker's next state (Kafka's BrokerHeartbeatManager.calculateNextBrokerState)
        and the records that take it there."""
        try:
            broker = self.cluster.check_broker_epoch(request.broker_id, request.broker_epoch)
        except ApiError as e:
            return ControllerResult([], _heartbeat_response(e.code, False, FENCED))
        self.cluster.heartbeats.touch(broker.id, now_ms, request.current_metadata_offset)
        caught_up = request.current_metadata_offset >= self.cluster.registration_offsets[broker.id]
        def answer(state: str) -> dict:
            return _heartbeat_response(ErrorCode.NONE, caught_up, state)

        if broker.fenced:
            if request.want_shut_down:
                return ControllerResult([], answer(SHUTDOWN_NOW))
            if request.want_fence or not caught_up:
                return ControllerResult([], answer(FENCED))
            log.info("Unfencing broker %d at epoch %d: caught up to offset %d", broker.id, broker.epoch,
                     request.current_metadata_offset)
            return self.unfence_in_parts(broker.id, answer(UNFENCED))
        if request.want_fence:
            log.info("Fencing broker %d at epoch %d at its request", broker.id, broker.epoch)
            return self.fence_broker(broker.id, answer(SHUTDOWN_NOW if request.want_shut_down else FENCED))
        if broker.in_controlled_shutdown:
            if self._shut_down(broker.id, last_committed_offset):
                log.info("Broker %d finished its controlled shutdown: it may stop", broker.id)
                return self.fence_broker(broker.id, answer(SHUTDOWN_NOW))
            if broker.id not in self.shutdowns_moving and self.leads_any(broker.id):
                # The controller that began the moves lost its leadership with parts left (Kafka's controller
                # moves them again at every heartbeat of a broker in controlled shutdown): without this the broker
                # waited for good, as a stand-in did after a failover at 100,000 partitions.
                log.info("Broker %d is in controlled shutdown and still leads %d partitions: moving them",
                         broker.id, self.leaderships.get(broker.id, 0))
                return self._shutdown_in_parts(broker.id, answer(CONTROLLED_SHUTDOWN))
            return ControllerResult([], answer(CONTROLLED_SHUTDOWN))
        if request.want_shut_down:
            log.info("Broker %d enters controlled shutdown: its leaderships move", broker.id)
            return self._shutdown_in_parts(broker.id, answer(CONTROLLED_SHUTDOWN),
                                           first=[self.cluster.controlled_shutdown_record(broker)])
        return ControllerResult([], answer(UNFENCED))

    def _shutdown_in_parts(self, broker_id: int, response: Any,
                           first: Sequence[MetadataRecord] = ()) -> ControllerResult:
        """A controlled shutdown's moves, marked under way until their last part is computed."""
        self.shutdowns_moving.add(broker_id)

        def done() -> list[MetadataRecord]:
            self.shutdowns_moving.discard(broker_id)
            return []
        return self.leave_in_parts(broker_id, response, first=first, last=done)

    def _shut_down(self, broker_id: int, last_committed_offset: int) -> bool:
        """A controlled shutdown is done once its record is committed and the broker leads nothing."""
        offset = self.cluster.controlled_shutdown_offsets.get(broker_id)
        return offset is not None and offset <= last_committed_offset and not self.leads_any(broker_id)

    def fence_broker(self, broker_id: int, response: Any = None) -> ControllerResult:
        """A broker whose session expired (or that asked): its partitions' changes, then its fencing."""
        return self.leave_in_parts(broker_id, response,
                                   last=lambda: [self.cluster.fence_record(self.cluster.brokers[broker_id])])

    def unregister_broker(self, broker_id: int) -> ControllerResult:
        """UnregisterBroker: {"error_code", "error_message"}."""
        broker = self.cluster.brokers.get(broker_id)
        if broker is None:
            return ControllerResult([], {"error_code": ErrorCode.BROKER_ID_NOT_REGISTERED,
                                         "error_message": f"Broker ID {broker_id} is not currently registered"})
        return self.leave_in_parts(broker_id, {"error_code": ErrorCode.NONE, "error_message": None},
                                   last=lambda: [self.cluster.unregister_record(self.cluster.brokers[broker_id])])

    # ---- replay ---------------------------------------------------------------------------------------------

    def replay_topic(self, rec: Any) -> None:
        topic_id = bytes(rec.topic_id)
        self.topics[topic_id] = TopicInfo(rec.name, topic_id)
        self.topics_by_name[rec.name] = topic_id

    def replay_partition(self, rec: Any) -> None:
        topic_id = bytes(rec.topic_id)
        topic = self.topics[topic_id]
        key = (topic_id, rec.partition_id)
        old = self.partitions.get(key)
        if old is None:
            self.topics[topic_id] = TopicInfo(topic.name, topic_id, max(topic.partitions, rec.partition_id + 1))
        self._set_partition(key, old, PartitionRegistration.from_record(rec))

    def replay_partition_change(self, rec: Any) -> None:
        key = (bytes(rec.topic_id), rec.partition_id)
        old = self.partitions[key]
        self._set_partition(key, old, old.merge(rec))

    def _set_partition(self, key: PartitionKey, old: PartitionRegistration | None,
                       new: PartitionRegistration | None) -> None:
        """Every write of a partition goes through here, the indexes with it."""
        if new is None:
            del self.partitions[key]
        else:
            self.partitions[key] = new
        old_replicas = () if old is None else old.replicas
        new_replicas = () if new is None else new.replicas
        if old_replicas != new_replicas:
            for broker in set(old_replicas) - set(new_replicas):
                del self._replica_of[broker][key]
            for broker in set(new_replicas) - set(old_replicas):
                index = self._replica_of.get(broker)
                if index is None:
                    index = self._replica_of[broker] = TimelineDict(self._registry)
                index[key] = None
        old_leader = NO_LEADER if old is None else old.leader
        new_leader = NO_LEADER if new is None else new.leader
        if old_leader != new_leader:
            if old_leader != NO_LEADER:
                self.leaderships[old_leader] -= 1
            if new_leader != NO_LEADER:
                self.leaderships[new_leader] = self.leaderships.get(new_leader, 0) + 1

    def replay_remove_topic(self, rec: Any) -> None:
        topic_id = bytes(rec.topic_id)
        topic = self.topics[topic_id]
        for partition_id in range(topic.partitions):
            key = (topic_id, partition_id)
            if key in self.partitions:
                self._set_partition(key, self.partitions[key], None)
        del self.topics[topic_id]
        del self.topics_by_name[topic.name]
        self.configs.remove_topic(topic.name)

    def snapshot_records(self) -> list[MetadataRecord]:
        out = []
        for name in sorted(self.topics_by_name):
            topic_id = self.topics_by_name[name]
            out.append(record(TOPIC, name=name, topic_id=topic_id))
            out += [part.to_record(topic_id, key[1]) for key, part in self._topic_partitions(topic_id)]
        return out


def _in_parts(changes: Callable[[int], list[MetadataRecord]], response: Any, first: list[MetadataRecord],
              last: Callable[[], list[MetadataRecord]]) -> ControllerResult:
    """One part of a non-atomic operation: `first`, then `changes(limit)` (computed on the state the parts
    before left), and `last()` once fewer than the limit remain; otherwise `more`, the next part."""
    found = changes(MAX_RECORDS_PER_BATCH - len(first))
    if len(found) < MAX_RECORDS_PER_BATCH - len(first):
        return ControllerResult([*first, *found, *last()], response)
    return ControllerResult([*first, *found], response, more=lambda: _in_parts(changes, response, [], last))


def _requested_isr(data: Any, version: int) -> tuple[int, ...]:
    if version >= 3:
        return tuple(b.broker_id for b in data.new_isr_with_epochs)
    return tuple(data.new_isr)


def _partition_error(partition_index: int, code: int) -> dict:
    return {"partition_index": partition_index, "error_code": code, "leader_id": NO_LEADER, "leader_epoch": -1,
            "isr": [], "leader_recovery_state": RECOVERED, "partition_epoch": -1}


def _heartbeat_response(code: int, caught_up: bool, state: str) -> dict:
    return {"error_code": code, "is_caught_up": caught_up, "is_fenced": state in (FENCED, SHUTDOWN_NOW),
            "should_shut_down": state == SHUTDOWN_NOW}
