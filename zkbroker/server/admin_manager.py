"""The Admin API on a ZooKeeper-mode broker (Kafka 2.x's AdminManager): CreateTopics, DeleteTopics,
CreatePartitions, ElectLeaders, DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Each request is checked as Kafka checks it (zkbroker/admin_checks.py), then answered by writing exactly the
znodes the 0.8.2 tools write for the same change (zkbroker/admin.py, one home) and letting the controller act
on its watches (DESIGN §16). Topic changes are the controller's business: another broker answers NOT_CONTROLLER
and the client asks the controller named in Metadata. A create, a deletion or new partitions are answered
once the controller has told this broker the outcome (Kafka's DelayedCreatePartitions and DelayedDeleteTopics:
leaders elected, topic gone from the metadata), or at the request's timeout with REQUEST_TIMED_OUT.

ZooKeeper is read and written off the event loop (the default executor), one request's topics in one call.
In a lab each request is recorded in the timeline (`admin_request`: the API, the resource, the outcome and the
znodes written), so the znode and the controller's reaction can be read beside it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NodeExistsError

from zkbroker import admin, timeline
from zkbroker import admin_checks as checks
from zkbroker.admin_checks import ApiError
from zkbroker.config import DYNAMIC_BROKER_CONFIGS, SERVER_CONFIGS, TOPIC_CONFIGS, ConfigError, KafkaConfig
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.schemas import describe_configs as dc
from zkbroker.protocol.schemas import elect_leaders as elect
from zkbroker.server.dynamic_config import DynamicBrokerConfig, broker_synonyms
from zkbroker.server.metadata_cache import MetadataCache
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import (
    LeaderIsrState,
    TopicAssignment,
    ZnodeFormatError,
    decode_reassignment,
    encode_preferred_election,
)

if TYPE_CHECKING:
    from controller.controller import KafkaController

log = logging.getLogger("zkbroker.server.AdminManager")

Result = tuple[int, str | None]  # (error code, error message)

_SOURCES = {"dynamic_broker": dc.SOURCE_DYNAMIC_BROKER_CONFIG,
            "dynamic_default": dc.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
            "static": dc.SOURCE_STATIC_BROKER_CONFIG}
_NOT_CONTROLLER: Result = (ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")


class AdminManager:
    def __init__(self, dynamic: DynamicBrokerConfig, metadata_cache: MetadataCache, zk: ZkClient | None,
                 is_controller: Callable[[], bool], controller: KafkaController | None = None, *,
                 topic_overrides: Callable[[str], dict[str, str] | None] | None = None) -> None:
        self.dynamic = dynamic
        # KRaft mode: a topic's overrides from the metadata image (None: no such topic); only DescribeConfigs is
        # answered here then, the rest goes to the quorum controller (server/kraft_apis.py)
        self.topic_overrides = topic_overrides
        # This broker's ZooKeeper controller, for what has no znode (unclean elections, API reassignments): asked
        # through its event queue, it answers on its event thread.
        self.controller = controller
        self.broker_id = dynamic.static.broker_id
        self.metadata_cache = metadata_cache
        self.zk = zk
        self.is_controller = is_controller
        self.prefix = f"[Admin Manager on Broker {self.broker_id}]: "
        self.timeline_source = f"broker:{self.broker_id}" if timeline.enabled() else None

    @property
    def config(self) -> KafkaConfig:
        return self.dynamic.current

    async def _off_loop(self, fn: Callable, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    # ---- CreateTopics ---------------------------------------------------------------------------------------

    async def create_topics(self, request: Any, client_id: str | None) -> dict[str, dict]:
        """Each topic's result: error_code, error_message and (CreateTopics v5+, KIP-525) the partition count,
        replication factor and configs it has or would have."""
        details: dict[str, dict] = {}  # what each topic is created with (this request's own: no sharing)
        results = await self._create_topic_results(request, client_id, details)
        unknown = {"num_partitions": -1, "replication_factor": -1, "configs": []}
        return {name: {"error_code": code, "error_message": message,
                       **(details.get(name, unknown) if code == ErrorCode.NONE else unknown)}
                for name, (code, message) in results.items()}

    async def _create_topic_results(self, request: Any, client_id: str | None,
                                    details: dict[str, dict]) -> dict[str, Result]:
        names = [t.name for t in request.topics]
        validate_only = getattr(request, "validate_only", False)
        if not self.is_controller():
            return dict.fromkeys(names, _NOT_CONTROLLER)
        results: dict[str, Result] = {}
        duplicates = sorted({n for n in names if names.count(n) > 1})
        for name in duplicates:
            results[name] = (ErrorCode.INVALID_REQUEST,
                             f"Create topics request from client `{client_id}` contains multiple entries for the "
                             f"following topics: {','.join(duplicates)}")
        todo = [t for t in request.topics if t.name not in results]
        created = await self._off_loop(self._create_topics, todo, validate_only, results, details)
        if created and not validate_only:
            await self._wait_for_leaders(created, request.timeout_ms, results)
        return {name: results[name] for name in dict.fromkeys(names)}

    def _create_topics(self, topics: list, validate_only: bool, results: dict[str, Result],
                       details: dict[str, dict]) -> dict[str, int]:
        """Check and write each topic (off the loop); returns the created ones' partition counts."""
        live = sorted(self.metadata_cache.snapshot.brokers)
        all_topics: list[str] | None = None
        created = {}
        for entry in topics:
            written: list[str] = []
            try:
                checks.check_topic_name(entry.name)
                topic = checks.topic_to_create(entry)
                if all_topics is None and ("." in topic.name or "_" in topic.name):
                    all_topics = admin.all_topics(self.zk)
                checks.check_not_existing(topic.name, self._exists(paths.topic_path(topic.name)),
                                          self._exists(paths.delete_topic_path(topic.name)), all_topics or [])
                assignment = checks.creation_assignment(topic, live, self.config["num.partitions"],
                                                        self.config["default.replication.factor"])
                configs = {k: v for k, v in topic.configs.items() if v is not None}
                details[topic.name] = {
                    "num_partitions": len(assignment), "replication_factor": len(assignment[min(assignment)]),
                    "configs": [{"name": e["name"], "value": e["value"], "read_only": e["read_only"],
                                 "config_source": e["config_source"], "is_sensitive": e["is_sensitive"]}
                                for e in self._topic_config_entries(configs, False, False)]}
                if not validate_only:
                    admin.write_topic(self.zk, topic.name, assignment, configs)
                    written = [paths.topic_config_path(topic.name), paths.topic_path(topic.name)]
                    created[topic.name] = len(assignment)
                    log.info("%sCreated topic %s with assignment %s and configs %s", self.prefix, topic.name,
                             _assignment_text(assignment), configs)
                results[entry.name] = (ErrorCode.NONE, None)
            except ApiError as e:
                log.info("%sRefused to create topic %s: %s", self.prefix, entry.name, e)
                results[entry.name] = (e.code, e.message)
            except admin.TopicExistsError as e:  # another request created it between our check and our write
                results[entry.name] = (ErrorCode.TOPIC_ALREADY_EXISTS, str(e))
            except (admin.AdminError, ConfigError) as e:
                results[entry.name] = (ErrorCode.INVALID_REQUEST, str(e))
            self._record("CreateTopics", "topic", entry.name, results[entry.name], written, validate_only=validate_only)
        return created

    async def _wait_for_leaders(self, topics: dict[str, int], timeout_ms: int, results: dict[str, Result]) -> None:
        """DelayedCreatePartitions: done once every partition of each topic has a leader in our metadata."""
        def missing() -> list[str]:
            partitions = self.metadata_cache.snapshot.partitions
            return [t for t, count in topics.items()
                    if sum(1 for p in partitions.get(t, {}).values() if p.leader >= 0) < count]
        for topic in await self._wait(missing, timeout_ms):
            results[topic] = (ErrorCode.REQUEST_TIMED_OUT, None)

    async def _wait(self, pending: Callable[[], list[str]], timeout_ms: int) -> list[str]:
        """Wait until `pending()` is empty, re-asking whenever the controller updates our metadata; returns
        what is still pending at the timeout (all of it when timeout_ms <= 0, as Kafka answers)."""
        if timeout_ms <= 0:
            return pending()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000.0
        while pending() and (remaining := deadline - loop.time()) > 0:
            waiter = self.metadata_cache.waiter(loop)
            try:
                await asyncio.wait_for(asyncio.shield(waiter), remaining)
            except asyncio.TimeoutError:
                pass
            finally:
                waiter.cancel()
        return pending()

    def _exists(self, path: str) -> bool:
        return self.zk.kazoo.exists(path) is not None

    # ---- DeleteTopics ---------------------------------------------------------------------------------------

    async def delete_topics(self, request: Any, version: int) -> dict[str, Result]:
        names = list(request.topic_names)
        if not self.is_controller():
            return dict.fromkeys(names, _NOT_CONTROLLER)
        if not self.config["delete.topic.enable"]:
            code = ErrorCode.INVALID_REQUEST if version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
            return dict.fromkeys(names, (code, "Topic deletion is disabled (delete.topic.enable=false)."))
        results: dict[str, Result] = {}
        for name in {n for n in names if names.count(n) > 1}:
            results[name] = (ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
        known = self.metadata_cache.snapshot.partitions
        todo = []
        for name in dict.fromkeys(names):
            if name in results:
                continue
            if name not in known:
                results[name] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                self._record("DeleteTopics", "topic", name, results[name], [])
            else:
                todo.append(name)
        marked = await self._off_loop(self._mark_for_deletion, todo, results)
        if marked:
            def still_there() -> list[str]:
                partitions = self.metadata_cache.snapshot.partitions
                return [t for t in marked if t in partitions]
            for topic in await self._wait(still_there, request.timeout_ms):
                results[topic] = (ErrorCode.REQUEST_TIMED_OUT, None)
        return {name: results[name] for name in dict.fromkeys(names)}

    def _mark_for_deletion(self, topics: list[str], results: dict[str, Result]) -> list[str]:
        marked = []
        for topic in topics:
            try:
                if admin.mark_topic_for_deletion(self.zk, topic):
                    log.info("%sTopic %s marked for deletion", self.prefix, topic)
                results[topic] = (ErrorCode.NONE, None)  # marked before: still wait for it, as Kafka does
                marked.append(topic)
            except Exception as e:  # ZooKeeper unavailable
                log.warning("%sCould not mark topic %s for deletion: %r", self.prefix, topic, e)
                results[topic] = (ErrorCode.UNKNOWN, str(e))
            self._record("DeleteTopics", "topic", topic, results[topic], [paths.delete_topic_path(topic)])
        return marked

    # ---- CreatePartitions -----------------------------------------------------------------------------------

    async def create_partitions(self, request: Any) -> dict[str, Result]:
        names = [t.name for t in request.topics]
        if not self.is_controller():
            return dict.fromkeys(names, _NOT_CONTROLLER)
        results: dict[str, Result] = {}
        for name in {n for n in names if names.count(n) > 1}:
            results[name] = (ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
        todo = [t for t in request.topics if t.name not in results]
        added = await self._off_loop(self._create_partitions, todo, request.validate_only, results)
        if added and not request.validate_only:
            await self._wait_for_leaders(added, request.timeout_ms, results)
        return {name: results[name] for name in dict.fromkeys(names)}

    def _create_partitions(self, topics: list, validate_only: bool, results: dict[str, Result]) -> dict[str, int]:
        live = sorted(self.metadata_cache.snapshot.brokers)
        registered = admin.live_broker_ids(self.zk)
        done = {}
        for entry in topics:
            written: list[str] = []
            try:
                data, stat = self.zk.get(paths.topic_path(entry.name))
                if stat is None:
                    raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{entry.name}' does not exist.")
                if self._exists(paths.delete_topic_path(entry.name)):
                    raise ApiError(ErrorCode.INVALID_TOPIC, "The topic is queued for deletion.")
                try:
                    znode = TopicAssignment.decode(data, paths.topic_path(entry.name))
                except ZnodeFormatError as e:
                    raise ApiError(ErrorCode.UNKNOWN, str(e)) from None
                existing = znode.partitions
                if znode.adding or znode.removing or self._being_reassigned(entry.name):
                    raise ApiError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                                   f"A partition reassignment is in progress for the topic '{entry.name}'.")
                given = None if entry.assignments is None else [list(a.broker_ids) for a in entry.assignments]
                added = checks.new_partitions_assignment(entry.name, existing, entry.count, given, live, registered)
                if not validate_only:
                    admin.write_added_partitions(self.zk, entry.name, existing, added, stat.version)
                    written = [paths.topic_path(entry.name)]
                    done[entry.name] = entry.count
                    log.info("%sAdded partitions %s to topic %s", self.prefix, _assignment_text(added), entry.name)
                results[entry.name] = (ErrorCode.NONE, None)
            except ApiError as e:
                log.info("%sRefused to add partitions to topic %s: %s", self.prefix, entry.name, e)
                results[entry.name] = (e.code, e.message)
            except admin.AdminError as e:  # the znode changed between our read and our write
                results[entry.name] = (ErrorCode.INVALID_REQUEST, str(e))
            self._record("CreatePartitions", "topic", entry.name, results[entry.name], written,
                         validate_only=validate_only)
        return done

    def _being_reassigned(self, topic: str) -> bool:
        data, _ = self.zk.get(paths.REASSIGN_PARTITIONS)
        if not data:
            return False
        try:
            return any(move.topic == topic for move in decode_reassignment(data))
        except ZnodeFormatError:
            return False

    # ---- ElectLeaders ---------------------------------------------------------------------------------------

    async def elect_leaders(self, request: Any) -> tuple[int, dict[tuple[str, int], Result]]:
        """Preferred replica election through `/admin/preferred_replica_election`, the znode 0.8.2's
        preferred-replica-election tool writes; answered once each partition is led by its preferred replica
        (or at the timeout). An unclean election (KIP-460) has no znode: it goes to this broker's controller as
        an event, as Kafka 2.4's ZooKeeper controller takes it; a partition with a live leader answers
        ELECTION_NOT_NEEDED, one with no live replica ELIGIBLE_LEADERS_NOT_AVAILABLE."""
        snapshot = self.metadata_cache.snapshot
        if request.topic_partitions is None:
            wanted = [(t, p) for t, parts in sorted(snapshot.partitions.items()) for p in sorted(parts)]
        else:
            wanted = list(dict.fromkeys((e.topic, p) for e in request.topic_partitions for p in e.partitions))
        if not self.is_controller():
            return ErrorCode.NOT_CONTROLLER, dict.fromkeys(wanted, _NOT_CONTROLLER)
        unclean = getattr(request, "election_type", elect.PREFERRED) == elect.UNCLEAN
        results: dict[tuple[str, int], Result] = {}
        to_elect = []
        for topic, partition in wanted:
            state = snapshot.partitions.get(topic, {}).get(partition)
            if state is None:
                results[(topic, partition)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                               "The partition does not exist.")
            else:
                to_elect.append((topic, partition))
        if to_elect and unclean:
            results.update(await self._elect_unclean(to_elect, request.timeout_ms))
            return ErrorCode.NONE, {tp: results[tp] for tp in wanted}
        if to_elect and not unclean:
            # the ISR as ZooKeeper holds it: 0.8.2's leaders change it there without telling the brokers' metadata
            states = await self._off_loop(self._partition_states, to_elect)
            for tp in list(to_elect):
                preferred = snapshot.partitions[tp[0]][tp[1]].replicas[0]
                state = states.get(tp)
                if state is not None and state.leader == preferred:
                    results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "Leader is already the preferred replica.")
                elif state is None or preferred not in snapshot.brokers or preferred not in state.isr:
                    results[tp] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                   f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy "
                                   "PreferredReplicaPartitionLeaderElectionStrategy")
                else:
                    continue
                to_elect.remove(tp)
        if to_elect:
            written = await self._write_preferred_election(to_elect, request.timeout_ms)
            for tp in to_elect:
                self._record("ElectLeaders", "partition", f"{tp[0]}-{tp[1]}", (ErrorCode.NONE, None),
                             [paths.PREFERRED_REPLICA_ELECTION] if written else [])

            def not_preferred() -> list[tuple[str, int]]:
                partitions = self.metadata_cache.snapshot.partitions
                return [(t, p) for t, p in to_elect
                        if (s := partitions.get(t, {}).get(p)) is None or s.leader != s.replicas[0]]
            late = set(await self._wait(not_preferred, request.timeout_ms)) if written else set(to_elect)
            for tp in to_elect:
                results[tp] = (ErrorCode.REQUEST_TIMED_OUT, None) if tp in late else (ErrorCode.NONE, None)
        return ErrorCode.NONE, {tp: results[tp] for tp in wanted}

    async def _elect_unclean(self, partitions: list[tuple[str, int]], timeout_ms: int) -> dict[tuple[str, int], Result]:
        """The controller's verdict for each partition, then (those it elected) the wait until our metadata
        names their new leader; REQUEST_TIMED_OUT for what is not done by the timeout."""
        timed_out: Result = (ErrorCode.REQUEST_TIMED_OUT, None)
        if self.controller is None:
            return dict.fromkeys(partitions, _NOT_CONTROLLER)
        codes = await self._ask_controller(self.controller.elect_unclean, partitions, timeout_ms)
        if codes is None:
            return dict.fromkeys(partitions, timed_out)
        messages = {ErrorCode.ELECTION_NOT_NEEDED: "The partition has a leader.",
                    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "No replica of the partition is alive.",
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "The partition does not exist."}
        results: dict[tuple[str, int], Result] = {tp: (codes.get(tp, ErrorCode.UNKNOWN),
                                                       messages.get(codes.get(tp))) for tp in partitions}
        elected = [tp for tp in partitions if codes.get(tp) == ErrorCode.NONE]
        for tp in partitions:
            log.info("%sUnclean leader election for partition %s-%d: %s", self.prefix, *tp,
                     ErrorCode(results[tp][0]).name)
            self._record("ElectLeaders", "partition", f"{tp[0]}-{tp[1]}", results[tp], [], election="unclean")

        def leaderless() -> list[tuple[str, int]]:
            snapshot = self.metadata_cache.snapshot
            return [(t, p) for t, p in elected
                    if (s := snapshot.partitions.get(t, {}).get(p)) is None or s.leader not in snapshot.brokers]
        for tp in await self._wait(leaderless, timeout_ms) if elected else ():
            results[tp] = timed_out
        return results

    async def _ask_controller(self, method: Callable[[Any, Callable], None], argument: Any, timeout_ms: int) -> Any:
        """Put an event on the controller's queue and wait for its reply; None at the timeout."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future = loop.create_future()

        def reply(value: Any) -> None:  # on the controller's event thread
            loop.call_soon_threadsafe(lambda: answer.done() or answer.set_result(value))
        method(argument, reply)
        try:
            return await asyncio.wait_for(answer, max(timeout_ms, 1) / 1000.0)
        except asyncio.TimeoutError:
            return None

    # ---- AlterPartitionReassignments, ListPartitionReassignments (KIP-455) ------------------------------------

    async def alter_partition_reassignments(self, request: Any) -> tuple[Result, dict[tuple[str, int], Result]]:
        """The controller starts (or cancels) each move and answers at once; the moves complete later, as
        ListPartitionReassignments and the topic's version 2 znode show."""
        moves = {(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
                 for t in request.topics for p in t.partitions}
        if not self.is_controller() or self.controller is None:
            return _NOT_CONTROLLER, dict.fromkeys(moves, _NOT_CONTROLLER)
        results = await self._ask_controller(self.controller.alter_reassignments, moves, request.timeout_ms)
        if results is None:
            return (ErrorCode.REQUEST_TIMED_OUT, None), dict.fromkeys(moves, (ErrorCode.REQUEST_TIMED_OUT, None))
        for (topic, partition), result in results.items():
            replicas = moves[(topic, partition)]
            log.info("%s%s of partition %s-%d%s: %s", self.prefix, "Cancellation of the reassignment"
                     if replicas is None else "Reassignment", topic, partition,
                     "" if replicas is None else f" to {list(replicas)}", ErrorCode(result[0]).name)
            self._record("AlterPartitionReassignments", "partition", f"{topic}-{partition}", result,
                         [paths.topic_path(topic)] if result[0] == ErrorCode.NONE else [],
                         replicas=None if replicas is None else list(replicas))
        return (ErrorCode.NONE, None), results

    async def list_partition_reassignments(self, request: Any) -> tuple[Result, dict]:
        wanted = None if request.topics is None else [(t.name, p) for t in request.topics
                                                      for p in t.partition_indexes]
        if not self.is_controller() or self.controller is None:
            return _NOT_CONTROLLER, {}
        listed = await self._ask_controller(self.controller.list_reassignments, wanted, request.timeout_ms)
        if listed is None:
            return (ErrorCode.REQUEST_TIMED_OUT, None), {}
        return (ErrorCode.NONE, None), listed

    def _partition_states(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], LeaderIsrState]:
        out = {}
        znodes = self.zk.get_many([paths.partition_state_path(t, p) for t, p in partitions])
        for tp, (data, _) in zip(partitions, znodes, strict=True):
            try:
                out[tp] = LeaderIsrState.decode(data)
            except ZnodeFormatError:
                pass
        return out

    async def _write_preferred_election(self, partitions: list[tuple[str, int]], timeout_ms: int) -> bool:
        """Create `/admin/preferred_replica_election`; while another election holds it, try again until the
        timeout (0.8.2's tool gave up at once). False if it never could."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        data = encode_preferred_election(partitions)
        while True:
            try:
                await self._off_loop(lambda: self.zk.kazoo.create(paths.PREFERRED_REPLICA_ELECTION, data,
                                                                  makepath=True))
                log.info("%sPreferred replica election requested for %s", self.prefix,
                         ",".join(f"[{t},{p}]" for t, p in partitions))
                return True
            except NodeExistsError:
                if loop.time() >= deadline:
                    return False
                await asyncio.sleep(0.05)

    # ---- DescribeConfigs ------------------------------------------------------------------------------------

    async def describe_configs(self, request: Any, version: int) -> list[dict]:
        return await self._off_loop(self._describe_configs, request, version)

    def _describe_configs(self, request: Any, version: int) -> list[dict]:
        synonyms = getattr(request, "include_synonyms", False)
        documentation = getattr(request, "include_documentation", False)
        out = []
        for resource in request.resources:
            row = {"resource_type": resource.resource_type, "resource_name": resource.resource_name,
                   "error_code": ErrorCode.NONE, "error_message": None, "configs": []}
            try:
                if resource.resource_type == dc.RESOURCE_TOPIC:
                    entries = self._topic_entries(resource.resource_name, synonyms, documentation)
                elif resource.resource_type == dc.RESOURCE_BROKER:
                    broker = checks.broker_resource_id(resource.resource_name, self.broker_id)
                    entries = self._broker_entries(broker is not None, synonyms, documentation)
                else:
                    raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource.resource_type}")
                wanted = resource.configuration_keys
                row["configs"] = [e for e in entries if wanted is None or e["name"] in wanted]
                for entry in row["configs"]:
                    entry["is_default"] = entry["config_source"] == dc.SOURCE_DEFAULT_CONFIG  # v0's flag
            except ApiError as e:
                row["error_code"], row["error_message"] = e.code, e.message
            out.append(row)
        return out

    def _topic_entries(self, topic: str, include_synonyms: bool, include_documentation: bool) -> list[dict]:
        checks.check_topic_name(topic)
        if self.topic_overrides is not None:
            overrides = self.topic_overrides(topic)
            if overrides is None:
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} does not exist.")
            return self._topic_config_entries(overrides, include_synonyms, include_documentation)
        if not self._exists(paths.topic_path(topic)):
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} does not exist.")
        return self._topic_config_entries(admin.fetch_entity_config(self.zk, "topics", topic), include_synonyms,
                                          include_documentation)

    def _topic_config_entries(self, overrides: dict[str, str], include_synonyms: bool,
                              include_documentation: bool) -> list[dict]:
        """Every topic config with its value and source: the topic's override, else the broker's (Kafka's
        createTopicConfigEntry)."""
        entries = []
        for name, key in TOPIC_CONFIGS.items():
            synonyms = []
            value = None
            if name in overrides:
                try:
                    value = checks.format_value(key.coerce(overrides[name]), key.type)
                    synonyms.append({"name": name, "value": value, "source": dc.SOURCE_TOPIC_CONFIG})
                except ConfigError:
                    pass  # an override that fails its check is not in force (log_config.topic_log_config)
            broker_rows = self._broker_synonyms(key.fallback, per_broker=True)
            synonyms += broker_rows
            if value is None:
                value = checks.format_value(self.config[key.fallback], SERVER_CONFIGS[key.fallback].type)
            entries.append(self._entry(name, value, key.type, key.doc, synonyms, False, include_synonyms,
                                       include_documentation))
        return entries

    def _broker_entries(self, per_broker: bool, include_synonyms: bool, include_documentation: bool) -> list[dict]:
        """Every broker key (this broker's resource), or only the dynamic cluster defaults ("" resource)."""
        entries = []
        defaults = self.dynamic.default_configs
        for name, key in SERVER_CONFIGS.items():
            if not per_broker and name not in defaults:
                continue
            synonyms = self._broker_synonyms(name, per_broker)
            if per_broker:
                value = checks.format_value(self.config[name], key.type)
            else:
                value = defaults[name]
            entries.append(self._entry(name, value, key.type, key.doc, synonyms, name not in DYNAMIC_BROKER_CONFIGS,
                                       include_synonyms, include_documentation))
        return entries

    def _broker_synonyms(self, name: str, per_broker: bool) -> list[dict]:
        """Kafka's configSynonyms: for each source, strongest first, each synonym of `name` set there."""
        names = broker_synonyms(name)
        sources = [("dynamic_broker", self.dynamic.broker_configs), ("dynamic_default", self.dynamic.default_configs),
                   ("static", self.dynamic.static.originals)]
        rows = [{"name": n, "value": props[n], "source": _SOURCES[source]}
                for source, props in sources if per_broker or source == "dynamic_default" for n in names if n in props]
        if per_broker:
            rows += [{"name": n, "value": checks.format_value(SERVER_CONFIGS[n].default, SERVER_CONFIGS[n].type),
                      "source": dc.SOURCE_DEFAULT_CONFIG} for n in names if SERVER_CONFIGS[n].default is not None]
        return rows

    @staticmethod
    def _entry(name: str, value: str | None, ctype: Any, doc: str, synonyms: list[dict], read_only: bool,
               include_synonyms: bool, include_documentation: bool) -> dict:
        return {"name": name, "value": value, "read_only": read_only,
                "config_source": synonyms[0]["source"] if synonyms else dc.SOURCE_DEFAULT_CONFIG,
                "is_sensitive": False, "synonyms": synonyms if include_synonyms else [],
                "config_type": checks.config_type_id(ctype), "documentation": doc if include_documentation else None}

    # ---- AlterConfigs, IncrementalAlterConfigs --------------------------------------------------------------

    async def alter_configs(self, request: Any, incremental: bool) -> list[dict]:
        return await self._off_loop(self._alter_configs, request, incremental)

    def _alter_configs(self, request: Any, incremental: bool) -> list[dict]:
        api = "IncrementalAlterConfigs" if incremental else "AlterConfigs"
        out = []
        for resource in request.resources:
            rtype, rname = resource.resource_type, resource.resource_name
            written: list[str] = []
            try:
                if rtype == dc.RESOURCE_TOPIC:
                    written = self._alter_topic(rname, resource.configs, incremental, request.validate_only)
                elif rtype == dc.RESOURCE_BROKER:
                    written = self._alter_broker(rname, resource.configs, incremental, request.validate_only)
                else:
                    raise ApiError(ErrorCode.INVALID_REQUEST, "AlterConfigs is only supported for topics and brokers, "
                                                              f"but resource type is {rtype}")
                result: Result = (ErrorCode.NONE, None)
            except ApiError as e:
                log.info("%s%s refused for resource %d '%s': %s", self.prefix, api, rtype, rname, e)
                result = (e.code, e.message)
            except Exception as e:  # ZooKeeper unavailable
                log.warning("%s%s failed for resource %d '%s': %r", self.prefix, api, rtype, rname, e)
                result = (ErrorCode.UNKNOWN, str(e))
            self._record(api, "topic" if rtype == dc.RESOURCE_TOPIC else "broker", rname, result, written,
                         validate_only=request.validate_only)
            out.append({"error_code": result[0], "error_message": result[1], "resource_type": rtype,
                        "resource_name": rname})
        return out

    def _alter_topic(self, topic: str, configs: list, incremental: bool, validate_only: bool) -> list[str]:
        checks.check_topic_name(topic)
        if not self._exists(paths.topic_path(topic)):
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        if incremental:
            props = checks.apply_incremental(admin.fetch_entity_config(self.zk, "topics", topic), configs,
                                             TOPIC_CONFIGS)
        else:
            checks.check_no_nulls([(c.name, c.value) for c in configs])
            props = {c.name: c.value for c in configs}
        try:
            props = checks.check_topic_configs(props, ErrorCode.INVALID_REQUEST)
        except ApiError as e:
            if e.code == ErrorCode.INVALID_REQUEST:
                raise ApiError(e.code, f"Invalid config value for resource topic '{topic}': {e.message}") from None
            raise
        if validate_only:
            return []
        log.info("%sUpdating topic %s with new configuration : %s", self.prefix, topic, props)
        admin.change_entity_config(self.zk, "topics", topic, props)
        return [paths.topic_config_path(topic), paths.CONFIG_CHANGES]

    def _alter_broker(self, name: str, configs: list, incremental: bool, validate_only: bool) -> list[str]:
        broker = checks.broker_resource_id(name, self.broker_id)
        entity = paths.DEFAULT_ENTITY if broker is None else str(broker)
        if incremental:
            props = checks.apply_incremental(admin.fetch_entity_config(self.zk, "brokers", entity), configs,
                                             SERVER_CONFIGS)
        else:
            checks.check_no_nulls([(c.name, c.value) for c in configs])
            props = {c.name: c.value for c in configs}
        try:
            self.dynamic.validate(props, per_broker=broker is not None)
        except ConfigError as e:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"Invalid config value for resource broker '{name}': {e}") from None
        if validate_only:
            return []
        log.info("%sUpdating %s with new configuration : %s", self.prefix,
                 "brokers" if broker is None else f"broker {broker}", props)
        admin.change_entity_config(self.zk, "brokers", entity, props)
        return [paths.broker_config_path(entity), paths.CONFIG_CHANGES]

    # ---- the lab's timeline ---------------------------------------------------------------------------------

    def record_delete_records(self, results: dict[tuple[str, int], tuple[int, int]]) -> None:
        """DeleteRecords writes no znode (the leader moves its log start offset): the timeline names the low
        watermark each partition reached."""
        for (topic, partition), (low, error) in results.items():
            self._record("DeleteRecords", "partition", f"{topic}-{partition}", (error, None), [], low_watermark=low)

    def _record(self, api: str, resource_type: str, name: str, result: Result, znodes: list[str],
                **fields: Any) -> None:
        if self.timeline_source is None:
            return
        timeline.emit(self.timeline_source, "admin_request", api=api, resource_type=resource_type, resource=name,
                      error=ErrorCode(result[0]).name,
                      message=result[1], znodes=znodes, **fields)


def _assignment_text(assignment: dict[int, tuple[int, ...]]) -> str:
    return ",".join(f"{p}:{':'.join(map(str, r))}" for p, r in sorted(assignment.items()))
