"""KafkaApis: one handler per request type (Kafka's KafkaApis).

A handler takes the decoded request and returns the response: a complete frame (bytes), a list of pieces
(bytes and FileRange slots, for Fetch's zero-copy path), or None when the protocol sends no response
(Produce with acks=0). ApiVersions advertises exactly the handlers that exist, within DESIGN §3's table.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from zkbroker import admin, timeline
from zkbroker.config import KafkaConfig
from zkbroker.coordinator.transaction.state import TransactionState
from zkbroker.fault_points import FAULTS, DroppedByFaultPoint
from zkbroker.protocol.api import (
    ApiKey,
    advertised_versions,
    api_versions_response,
    api_versions_unsupported_response,
    decode_request,
)
from zkbroker.protocol.api import encode_response as encode_frame
from zkbroker.protocol.errors import BrokerResponseError, ErrorCode, RemoteProtocolError
from zkbroker.protocol.fetch_response import encode_fetch_response
from zkbroker.protocol.headers import RequestHeader
from zkbroker.protocol.schemas import api_versions, describe_cluster, describe_configs, find_coordinator
from zkbroker.security.acl import AclAuthorizer
from zkbroker.server import authorization as acl
from zkbroker.server import client_quotas, record_versions, user_scram_credentials
from zkbroker.server.acl_manager import AclManager
from zkbroker.server.authorization import RequestAuthorizer
from zkbroker.server.bridge import LoopBridge
from zkbroker.server.metadata_cache import MetadataCache, listed_controller_id
from zkbroker.server.network import CONNECTION, SESSION, mute_after_response
from zkbroker.server.producer_id_manager import ProducerIdManager
from zkbroker.server.replica_manager import ReplicaManager
from zkbroker.server.request_time import RequestTime
from zkbroker.server.topic_creation import TopicAutoCreator
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import decode_offset, encode_offset

if TYPE_CHECKING:
    from controller.controller import KafkaController
    from zkbroker.server.admin_manager import AdminManager
    from zkbroker.server.client_quotas import ClientQuotas
    from zkbroker.server.group_coordinator import GroupCoordinatorDriver
    from zkbroker.server.transaction_coordinator import TransactionCoordinatorDriver

log = logging.getLogger("zkbroker.server.KafkaApis")

Handler = Callable[[RequestHeader, Any], Awaitable[Any]]

# Requests a request-time quota never holds (Kafka's clusterAction APIs; follower fetches too, below).
QUOTA_EXEMPT = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                          ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS})


class RequestQuota:
    """The running request under a request-time quota (KIP-124): its loop time is recorded once, when its
    response is made (as KafkaApis's sendResponseMaybeThrottle records it) or when its handler ends, and a
    throttle mutes the connection after the response (KIP-219)."""

    __slots__ = ("time", "_record", "_throttle_ms")

    def __init__(self, record: Callable[[float], int]) -> None:
        self.time = RequestTime()
        self._record = record
        self._throttle_ms: int | None = None

    def throttle_ms(self) -> int:
        if self._throttle_ms is None:
            self._throttle_ms = self._record(self.time.seconds())
            if self._throttle_ms:
                mute_after_response(self._throttle_ms)
        return self._throttle_ms


REQUEST_QUOTA: contextvars.ContextVar[RequestQuota | None] = contextvars.ContextVar("request_quota", default=None)


def request_throttle_ms() -> int:
    """The running request's request-time throttle (0 without a request quota)."""
    quota = REQUEST_QUOTA.get()
    return 0 if quota is None else quota.throttle_ms()


def encode_response(header: RequestHeader, body: Any) -> bytes:
    """A response frame whose throttle_time_ms, if it has one, is the larger of the handler's (a byte-rate
    quota's) and the request-time quota's, as Kafka answers the larger of the two."""
    if isinstance(body, dict) and "throttle_time_ms" in body and REQUEST_QUOTA.get() is not None:
        body["throttle_time_ms"] = max(body["throttle_time_ms"], request_throttle_ms())
    return encode_frame(header, body)

#: How long WriteTxnMarkers waits for the ISR to have a marker (Kafka's request.timeout.ms default).
MARKER_TIMEOUT_MS = 30_000


def answer_api_versions(header: RequestHeader, frame: bytearray, body_offset: int,
                        versions: dict[int, tuple[int, int]]) -> bytes:
    """ApiVersions, answered before its body is read: a version above ours gets the v0-format UNSUPPORTED_VERSION
    answer (clients retry with one we list). From v3 the client names its software (KIP-511): logged for the
    connection, and a name or version Kafka's rule refuses is answered INVALID_REQUEST. Every listener answers it
    so (a broker's and a controller's), each with its own table."""
    low, high = versions[ApiKey.API_VERSIONS]
    if not low <= header.api_version <= high:
        return api_versions_unsupported_response(header, versions)
    if header.api_version >= 3:
        request = decode_request(header, frame, body_offset)
        name, version = request.client_software_name, request.client_software_version
        if not api_versions.valid_client_software(name, version):
            log.info("Invalid ApiVersions request from client %r on connection %s: client software name %r "
                     "or version %r is not letters, digits, '-' and '.'", header.client_id, CONNECTION.get(),
                     name, version)
            return api_versions_response(header, versions, error_code=ErrorCode.INVALID_REQUEST)
        log.info("Connection %s: client software %s %s (client id %r, ApiVersions v%d)", CONNECTION.get(),
                 name, version, header.client_id, header.api_version)
    return api_versions_response(header, versions)


class KafkaApis:
    def __init__(self, config: KafkaConfig, metadata_cache: MetadataCache, replica_manager: ReplicaManager,
                 zk: ZkClient, bridge: LoopBridge, topic_creator: TopicAutoCreator,
                 controller: KafkaController | None = None,
                 group_coordinator: GroupCoordinatorDriver | None = None,
                 admin_manager: AdminManager | None = None,
                 transaction_coordinator: TransactionCoordinatorDriver | None = None,
                 producer_ids: ProducerIdManager | None = None, authorizer: AclAuthorizer | None = None,
                 quotas: ClientQuotas | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.zk = zk
        self.bridge = bridge
        self.topic_creator = topic_creator
        self.controller = controller
        self.group_coordinator = group_coordinator
        self.admin_manager = admin_manager
        self.transaction_coordinator = transaction_coordinator
        self._handlers: dict[int, Handler] = {
            ApiKey.PRODUCE: self.handle_produce,
            ApiKey.FETCH: self.handle_fetch,
            ApiKey.LIST_OFFSETS: self.handle_list_offsets,
            ApiKey.METADATA: self.handle_metadata,
            ApiKey.LEADER_AND_ISR: self.handle_leader_and_isr,
            ApiKey.STOP_REPLICA: self.handle_stop_replica,
            ApiKey.UPDATE_METADATA: self.handle_update_metadata,
            ApiKey.OFFSET_COMMIT: self.handle_offset_commit,
            ApiKey.OFFSET_FETCH: self.handle_offset_fetch,
            ApiKey.FIND_COORDINATOR: self.handle_find_coordinator,
            ApiKey.CONTROLLED_SHUTDOWN: self.handle_controlled_shutdown,
            ApiKey.OFFSETS_FOR_LEADER_EPOCH: self.handle_offsets_for_leader_epoch,
            ApiKey.INIT_PRODUCER_ID: self.handle_init_producer_id,
            ApiKey.SASL_HANDSHAKE: self.handle_sasl_after_authentication,
            ApiKey.SASL_AUTHENTICATE: self.handle_sasl_after_authentication,
            ApiKey.DESCRIBE_ACLS: self.handle_describe_acls,
            ApiKey.CREATE_ACLS: self.handle_create_acls,
            ApiKey.DELETE_ACLS: self.handle_delete_acls,
            ApiKey.DESCRIBE_CLIENT_QUOTAS: self.handle_describe_client_quotas,
            ApiKey.ALTER_CLIENT_QUOTAS: self.handle_alter_client_quotas,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self.handle_describe_user_scram_credentials,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.handle_alter_user_scram_credentials,
        }
        if group_coordinator is not None:
            self._handlers.update({
                ApiKey.JOIN_GROUP: self.handle_join_group,
                ApiKey.SYNC_GROUP: self.handle_sync_group,
                ApiKey.HEARTBEAT: self.handle_heartbeat,
                ApiKey.LEAVE_GROUP: self.handle_leave_group,
                ApiKey.DESCRIBE_GROUPS: self.handle_describe_groups,
                ApiKey.LIST_GROUPS: self.handle_list_groups,
                ApiKey.DELETE_GROUPS: self.handle_delete_groups,
                ApiKey.OFFSET_DELETE: self.handle_offset_delete,
            })
        if admin_manager is not None:
            self._handlers.update({
                ApiKey.CREATE_TOPICS: self.handle_create_topics,
                ApiKey.DELETE_TOPICS: self.handle_delete_topics,
                ApiKey.CREATE_PARTITIONS: self.handle_create_partitions,
                ApiKey.DESCRIBE_CONFIGS: self.handle_describe_configs,
                ApiKey.ALTER_CONFIGS: self.handle_alter_configs,
                ApiKey.INCREMENTAL_ALTER_CONFIGS: self.handle_incremental_alter_configs,
                ApiKey.DESCRIBE_CLUSTER: self.handle_describe_cluster,
                ApiKey.ELECT_LEADERS: self.handle_elect_leaders,
                ApiKey.DESCRIBE_LOG_DIRS: self.handle_describe_log_dirs,
                ApiKey.DELETE_RECORDS: self.handle_delete_records,
                ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.handle_alter_partition_reassignments,
                ApiKey.LIST_PARTITION_REASSIGNMENTS: self.handle_list_partition_reassignments,
            })
        if transaction_coordinator is not None and group_coordinator is not None:
            self._handlers.update({
                ApiKey.ADD_PARTITIONS_TO_TXN: self.handle_add_partitions_to_txn,
                ApiKey.ADD_OFFSETS_TO_TXN: self.handle_add_offsets_to_txn,
                ApiKey.END_TXN: self.handle_end_txn,
                ApiKey.WRITE_TXN_MARKERS: self.handle_write_txn_markers,
                ApiKey.TXN_OFFSET_COMMIT: self.handle_txn_offset_commit,
                ApiKey.DESCRIBE_PRODUCERS: self.handle_describe_producers,
                ApiKey.DESCRIBE_TRANSACTIONS: self.handle_describe_transactions,
                ApiKey.LIST_TRANSACTIONS: self.handle_list_transactions,
            })
        self.producer_ids = producer_ids or ProducerIdManager(config.broker_id, zk, bridge)
        self.versions = {key: span for key, span in advertised_versions().items()
                         if key in self._handlers or key == ApiKey.API_VERSIONS}
        self.timeline_source = f"broker:{self.broker_id}" if timeline.enabled() else None  # None outside a lab
        self.auth = RequestAuthorizer(authorizer, self.timeline_source)  # allows everything without an authorizer
        self._verify_transactions = config["transaction.partition.verification.enable"]
        self.acl_manager = AclManager(zk, authorizer)
        self.quotas = quotas

    async def handle(self, header: RequestHeader, frame: bytearray, body_offset: int) -> Any:
        if header.api_key == ApiKey.API_VERSIONS:
            return self.handle_api_versions(header, frame, body_offset)
        span = self.versions.get(header.api_key)
        if span is None or not span[0] <= header.api_version <= span[1]:
            raise RemoteProtocolError(f"unsupported request: api_key {header.api_key} version "
                                      f"{header.api_version} from client {header.client_id!r}",
                                      error_code=ErrorCode.UNSUPPORTED_VERSION)
        request = decode_request(header, frame, body_offset)
        handler = self._handlers[header.api_key](header, request)
        if self.quotas is None or not self.quotas.request.active or header.api_key in QUOTA_EXEMPT or (
                header.api_key == ApiKey.FETCH and request.replica_id >= 0):
            return await handler
        session = SESSION.get()
        quota = RequestQuota(functools.partial(self.quotas.record_request_time, session.principal, header.client_id))
        token = REQUEST_QUOTA.set(quota)
        try:
            return await quota.time.timed(handler)
        finally:
            quota.throttle_ms()  # recorded now if its response had no throttle_time_ms (or there was none)
            REQUEST_QUOTA.reset(token)

    # ---- ApiVersions --------------------------------------------------------------------------------------

    def handle_api_versions(self, header: RequestHeader, frame: bytearray, body_offset: int) -> bytes:
        return answer_api_versions(header, frame, body_offset, self.versions)

    async def handle_sasl_after_authentication(self, header: RequestHeader, request: Any) -> bytes:
        """SaslHandshake or SaslAuthenticate on a connection that is not authenticating (a listener without
        SASL, or once authenticated): ILLEGAL_SASL_STATE, as KafkaApis answers."""
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            return encode_response(header, {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []})
        return encode_response(header, {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "auth_bytes": b"",
                                        "error_message": "Unexpected SaslAuthenticate request: the connection is "
                                                         "not authenticating", "session_lifetime_ms": 0})

    # ---- ACLs (KIP-140; server/acl_manager.py) -------------------------------------------------------------------

    async def handle_describe_acls(self, header: RequestHeader, request: Any) -> bytes:
        if not self.auth.cluster(acl.DESCRIBE):
            return encode_response(header, {"throttle_time_ms": 0, "error_code": acl.CLUSTER_AUTHORIZATION_FAILED,
                                            "error_message": None, "resources": []})
        return encode_response(header, {"throttle_time_ms": 0,
                                        **self.acl_manager.describe(request, header.api_version)})

    async def handle_create_acls(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        if not self.auth.cluster(acl.ALTER):
            results = [{"error_code": acl.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
                       for _ in request.creations]
        else:
            results = await self.acl_manager.create(request, header.api_version)
        return encode_response(header, {"throttle_time_ms": 0, "results": results})

    async def handle_delete_acls(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        if not self.auth.cluster(acl.ALTER):
            results = [{"error_code": acl.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "matching_acls": []}
                       for _ in request.filters]
        else:
            results = await self.acl_manager.delete(request, header.api_version)
        return encode_response(header, {"throttle_time_ms": 0, "filter_results": results})

    # ---- client quotas (KIP-546; server/client_quotas.py) -----------------------------------------------------

    async def handle_describe_client_quotas(self, header: RequestHeader, request: Any) -> bytes:
        if not self.auth.cluster(acl.DESCRIBE_CONFIGS):
            body = {"error_code": acl.CLUSTER_AUTHORIZATION_FAILED, "error_message": None, "entries": None}
        else:
            try:
                entries = await asyncio.get_running_loop().run_in_executor(
                    None, client_quotas.describe_client_quotas, self.zk, request)
                body = {"error_code": ErrorCode.NONE, "error_message": None, "entries": entries}
            except client_quotas.QuotaRequestError as e:
                body = {"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(e), "entries": None}
        return encode_response(header, {"throttle_time_ms": 0, **body})

    async def handle_alter_client_quotas(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        if not self.auth.cluster(acl.ALTER_CONFIGS):
            entries = [{"error_code": acl.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                        "entity": list(e.entity)} for e in request.entries]
        else:
            entries = await asyncio.get_running_loop().run_in_executor(
                None, client_quotas.alter_client_quotas, self.zk, request)
        return encode_response(header, {"throttle_time_ms": 0, "entries": entries})

    async def handle_describe_user_scram_credentials(self, header: RequestHeader, request: Any) -> bytes:
        if not self.auth.cluster(acl.DESCRIBE):
            return encode_response(header, {"throttle_time_ms": 0, "error_code": acl.CLUSTER_AUTHORIZATION_FAILED,
                                            "error_message": None, "results": []})
        results = await asyncio.get_running_loop().run_in_executor(None, user_scram_credentials.describe, self.zk,
                                                                   request)
        return encode_response(header, {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                                        "results": results})

    async def handle_alter_user_scram_credentials(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        if not self.auth.cluster(acl.ALTER):
            users = dict.fromkeys([r.name for r in request.deletions] + [r.name for r in request.upsertions])
            results = [{"user": u, "error_code": acl.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
                       for u in users]
        else:
            results = await asyncio.get_running_loop().run_in_executor(None, user_scram_credentials.alter, self.zk,
                                                                       request)
        return encode_response(header, {"throttle_time_ms": 0, "results": results})

    # ---- Produce ------------------------------------------------------------------------------------------

    async def handle_produce(self, header: RequestHeader, request: Any) -> bytes | None:
        transactional_id = getattr(request, "transactional_id", None)
        if transactional_id is not None and FAULTS.produce_holds_left:  # the lab's delayed request (KAFKA-12671)
            await FAULTS.hold_transactional_produce(transactional_id, [
                f"{t.topic}-{e.partition}" for t in request.topics for e in t.partitions])
        acks = request.acks
        debug = log.isEnabledFor(logging.DEBUG)
        results = []
        waits = []
        appended = [] if self.timeline_source is not None else None  # in a lab: produce_appended/_acked events
        denied = self.auth.denied_topics(acl.WRITE, (t.topic for t in request.topics))
        refused_all = self._producer_authorization_error(request)
        for topic_entry in request.topics:
            partitions = []
            if refused_all is not None:
                results.append({"topic": topic_entry.topic, "partitions": [
                    {"partition": e.partition, "error_code": refused_all, "base_offset": -1,
                     "log_append_time": -1, "log_start_offset": -1} for e in topic_entry.partitions]})
                continue
            if topic_entry.topic in denied:
                results.append({"topic": topic_entry.topic, "partitions": [
                    {"partition": e.partition, "error_code": acl.TOPIC_AUTHORIZATION_FAILED, "base_offset": -1,
                     "log_append_time": -1, "log_start_offset": -1} for e in topic_entry.partitions]})
                continue
            for entry in topic_entry.partitions:
                refused = record_versions.produce_error(header.api_version, entry.records,
                                                        getattr(request, "transactional_id", None))
                if refused is not None:
                    log.warning("Rejected a message set for [%s,%d] in Produce v%d from client %s: %s",
                                topic_entry.topic, entry.partition, header.api_version, header.client_id, refused[1])
                    partitions.append({"partition": entry.partition, "error_code": refused[0], "base_offset": -1,
                                       "log_append_time": -1, "log_start_offset": -1})
                    continue
                unverified = await self._verify_transaction(request, topic_entry.topic, entry)
                if unverified is not None:
                    partitions.append({"partition": entry.partition, "error_code": unverified, "base_offset": -1,
                                       "log_append_time": -1, "log_start_offset": -1})
                    continue
                result = self.replica_manager.append_to_leader(topic_entry.topic, entry.partition, entry.records,
                                                               acks)
                if debug and result.info is not None:
                    # Which request wrote which offsets: tells a client's resend from a broker's duplicate.
                    log.debug("Produce from client %s on connection %s (correlation id %d): [%s,%d] appended at "
                              "offsets %d-%d", header.client_id, CONNECTION.get(), header.correlation_id,
                              topic_entry.topic, entry.partition, result.info.first_offset, result.info.last_offset)
                partitions.append({"partition": entry.partition, "error_code": result.error_code,
                                   "base_offset": result.base_offset,
                                   **record_versions.produce_times(result.partition, result.info)})
                if acks == -1 and result.error_code == ErrorCode.NONE and result.info is not None:
                    waits.append((partitions[-1], result.partition, result.info.last_offset + 1))
                if appended is not None and result.info is not None:
                    appended.append((topic_entry.topic, entry.partition, partitions[-1], result.info))
                    if result.info.count:  # written now (an idempotent producer's retry of a batch we have is not)
                        # Which request wrote which offsets: the checker tells a client's resend from a duplicate
                        # the brokers made by it.
                        timeline.emit(self.timeline_source, "produce_appended", topic=topic_entry.topic,
                                      partition=entry.partition, offset=result.info.first_offset,
                                      last_offset=result.info.last_offset, client=header.client_id,
                                      connection=CONNECTION.get(), correlation_id=header.correlation_id)
            results.append({"topic": topic_entry.topic, "partitions": partitions})
        throttle_ms = 0
        if self.quotas is not None:
            size = sum(len(e.records) for t in request.topics for e in t.partitions if e.records is not None)
            throttle_ms = await self._throttle(self.quotas.record_produce(SESSION.get().principal, header.client_id,
                                                                          size), header.api_version >= 6 or acks == 0)
        if acks == 0:
            # No response at all, even on error (0.8.2 closed the connection only in later versions).
            return None
        if waits:
            await self._wait_for_isr(waits, request.timeout_ms)
        if appended:
            for topic, partition, row, info in appended:
                if row["error_code"] == ErrorCode.NONE:
                    timeline.emit(self.timeline_source, "produce_acked", topic=topic, partition=partition,
                                  offset=info.first_offset, last_offset=info.last_offset, acks=acks)
        return encode_response(header, {"topics": results, "throttle_time_ms": throttle_ms})

    @staticmethod
    async def _throttle(throttle_ms: int, mute_after: bool) -> int:
        """A quota's throttle (KIP-219): answered at once with throttle_time_ms, then the connection muted for that
        long; to a request version from before KIP-219 (Produce < 6, Fetch < 8) the answer itself is delayed."""
        if throttle_ms <= 0:
            return 0
        if mute_after:
            mute_after_response(throttle_ms)
        else:
            await asyncio.sleep(throttle_ms / 1000.0)
        return throttle_ms

    async def _wait_for_isr(self, waits: list, timeout_ms: int) -> None:
        """acks=-1 (0.8.2's DelayedProduce): each partition answers once its leader says enough replicas have
        the records (`Partition.check_enough_replicas_reach_offset`); those still waiting at the timeout answer
        REQUEST_TIMED_OUT."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        pending = list(waits)
        while True:
            waiting = []
            for row, partition, required_offset in pending:
                answer = partition.check_enough_replicas_reach_offset(required_offset)
                if answer is None:
                    waiting.append((row, partition, required_offset))
                else:
                    row["error_code"] = answer
            pending = waiting
            if not pending:
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                for row, _, _ in pending:
                    row["error_code"] = ErrorCode.REQUEST_TIMED_OUT
                return
            waiters = [p.waiter(loop) for _, p, _ in pending]
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            for future in waiters:
                future.cancel()

    # ---- Fetch --------------------------------------------------------------------------------------------

    async def handle_fetch(self, header: RequestHeader, request: Any) -> list:
        """Long-poll: answer once min_bytes are available, an error occurs, or max_wait_ms passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(request.max_wait_ms, 0) / 1000.0
        response_budget = getattr(request, "max_bytes", None)
        if request.replica_id >= 0:  # a follower: ClusterAction, else every partition is refused
            denied = set() if self.auth.cluster(acl.CLUSTER_ACTION) else {t.topic for t in request.topics}
        else:
            denied = self.auth.denied_topics(acl.READ, (t.topic for t in request.topics))
        if request.replica_id >= 0 and not denied:
            for topic_entry in request.topics:
                for entry in topic_entry.partitions:
                    self.replica_manager.record_follower_fetch(topic_entry.topic, entry.partition,
                                                               request.replica_id, entry.fetch_offset,
                                                               getattr(entry, "log_start_offset", -1))
        while True:
            topics, total, errors, touched = self._read_all(request, response_budget, header.api_version, denied)
            remaining = deadline - loop.time()
            if total >= request.min_bytes or errors or remaining <= 0 or not touched:
                throttle_ms = 0
                if self.quotas is not None and request.replica_id < 0:
                    throttle_ms = await self._throttle(self.quotas.record_fetch(
                        SESSION.get().principal, header.client_id, total), header.api_version >= 8)
                return encode_fetch_response(header.correlation_id, header.api_version, topics,
                                             isolation_level=getattr(request, "isolation_level", 0),
                                             throttle_time_ms=max(throttle_ms, request_throttle_ms()))
            waiters = [p.waiter(loop) for p in touched]
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            for future in waiters:
                future.cancel()

    def _read_all(self, request: Any, response_budget: int | None, version: int,
                  denied: set[str] = frozenset()) -> tuple[list, int, bool, list]:
        topics = []
        total = 0
        errors = False
        touched = []
        read_committed = request.replica_id < 0 and getattr(request, "isolation_level", 0) == 1
        for topic_entry in request.topics:
            partitions = []
            if topic_entry.topic in denied:
                topics.append((topic_entry.topic, [(e.partition, acl.TOPIC_AUTHORIZATION_FAILED, -1, None, -1, -1, None)
                                                   for e in topic_entry.partitions]))
                errors = True
                continue
            for entry in topic_entry.partitions:
                max_bytes = entry.max_bytes
                if response_budget is not None:
                    # Fetch v3: the response limit; the first partition still gets data so a big message
                    # cannot block a consumer forever.
                    max_bytes = min(max_bytes, response_budget - total) if total else max_bytes
                result = self.replica_manager.read(topic_entry.topic, entry.partition, entry.fetch_offset,
                                                   max(max_bytes, 0), request.replica_id, read_committed)
                records = result.records if result.records is not None and result.records.size else None
                p = result.partition
                aborted = None
                if read_committed and records is not None:
                    aborted = p.aborted_transactions(entry.fetch_offset, records)
                error = record_versions.leader_epoch_error(p, getattr(entry, "current_leader_epoch", -1))
                if error == ErrorCode.NONE and records is not None and request.replica_id < 0:
                    # a client whose version cannot carry what the log holds: records converted, or refused
                    error, records = record_versions.records_for_fetch(p.log, records, version, entry.fetch_offset,
                                                                       max(max_bytes, 0))
                if error != ErrorCode.NONE:
                    result.error_code, records = error, None
                partitions.append((entry.partition, result.error_code, result.high_watermark, records,
                                   p.last_stable_offset if p is not None else -1,
                                   p.log.log_start_offset if p is not None else -1, aborted))
                if records is not None:
                    total += len(records)
                if result.error_code != ErrorCode.NONE:
                    errors = True
                elif result.partition is not None:
                    touched.append(result.partition)
            topics.append((topic_entry.topic, partitions))
        return topics, total, errors, touched

    # ---- ListOffsets ---------------------------------------------------------------------------------------

    async def handle_list_offsets(self, header: RequestHeader, request: Any) -> bytes:
        topics = []
        denied = self.auth.denied_topics(acl.DESCRIBE, (t.topic for t in request.topics))
        for topic_entry in request.topics:
            partitions = []
            for entry in topic_entry.partitions:
                if topic_entry.topic in denied:
                    partitions.append({"partition": entry.partition, "error_code": acl.TOPIC_AUTHORIZATION_FAILED,
                                       "offsets": [], "timestamp": -1, "offset": -1, "leader_epoch": -1})
                elif header.api_version == 0:
                    error, offset = self._offset_for(topic_entry.topic, entry.partition, entry.timestamp,
                                                     request.replica_id)
                    partitions.append({"partition": entry.partition, "error_code": error,
                                       "offsets": [] if offset is None else [offset]})
                else:
                    error, p = self.replica_manager.leader_partition(topic_entry.topic, entry.partition)
                    if p is not None:
                        error = record_versions.leader_epoch_error(p, getattr(entry, "current_leader_epoch", -1))
                    timestamp, offset, epoch = -1, -1, -1
                    if error == ErrorCode.NONE:
                        timestamp, offset, epoch = record_versions.offset_by_time(
                            p, entry.timestamp, request.replica_id >= 0, getattr(request, "isolation_level", 0) == 1)
                    partitions.append({"partition": entry.partition, "error_code": error, "timestamp": timestamp,
                                       "offset": offset, "leader_epoch": epoch})
            topics.append({"topic": topic_entry.topic, "partitions": partitions})
        return encode_response(header, {"topics": topics, "throttle_time_ms": 0})

    def _offset_for(self, topic: str, partition: int, timestamp: int, replica_id: int) -> tuple[int, int | None]:
        error, p = self.replica_manager.leader_partition(topic, partition)
        if p is None:
            return error, None
        return ErrorCode.NONE, p.offset_for_timestamp(timestamp, from_follower=replica_id >= 0)

    # ---- Metadata -----------------------------------------------------------------------------------------

    async def handle_metadata(self, header: RequestHeader, request: Any) -> bytes:
        snapshot = self.metadata_cache.snapshot
        brokers = [{"node_id": broker_id, "host": host, "port": port, "rack": None}
                   for broker_id, host, port in _endpoints(snapshot)]
        all_topics = request.topics is None or (header.api_version == 0 and not request.topics)
        names = sorted(snapshot.partitions) if all_topics else list(request.topics)
        denied = self.auth.denied_topics(acl.DESCRIBE, names)
        if all_topics:  # an all-topics answer leaves out what the principal may not describe
            names = [name for name in names if name not in denied]
        topics = []
        for name in names:
            partitions = snapshot.partitions.get(name)
            if name in denied:
                topics.append({"error_code": acl.TOPIC_AUTHORIZATION_FAILED, "topic": name, "is_internal": False,
                               "partitions": []})
                continue
            if partitions is None:
                # Metadata v4+: a client may ask not to create the topics it names (allow_auto_topic_creation)
                create = getattr(request, "allow_auto_topic_creation", True)
                if create and not (self.auth.cluster(acl.CREATE) or self.auth.topic(acl.CREATE, name)):
                    error = acl.TOPIC_AUTHORIZATION_FAILED  # may not create it: Kafka 2.x's answer
                else:
                    error = await self._unknown_topic(name) if create else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                topics.append({"error_code": error, "topic": name, "is_internal": False, "partitions": []})
                continue
            rows = []
            for partition_id, state in sorted(partitions.items()):
                live_replicas = [r for r in state.replicas if r in snapshot.brokers]
                live_isr = [r for r in state.isr if r in snapshot.brokers]
                if state.leader not in snapshot.brokers:
                    error = ErrorCode.LEADER_NOT_AVAILABLE
                elif len(live_replicas) < len(state.replicas) or len(live_isr) < len(state.isr):
                    error = ErrorCode.REPLICA_NOT_AVAILABLE  # 0.8.2 reports dead replicas this way
                else:
                    error = ErrorCode.NONE
                rows.append({"error_code": error, "partition": partition_id,
                             "leader": state.leader if state.leader in snapshot.brokers else -1,
                             "leader_epoch": state.leader_epoch, "replicas": live_replicas, "isr": live_isr,
                             "offline_replicas": []})
            topics.append({"error_code": ErrorCode.NONE, "topic": name, "is_internal": name == admin.OFFSETS_TOPIC,
                           "partitions": rows})
        # cluster_id (v2+): /cluster/id, which Kafka 0.10.1 brought (a 0.8.2 cluster has none)
        controller_id = listed_controller_id(snapshot.controller_id, (b["node_id"] for b in brokers))
        body = {"brokers": brokers, "topics": topics, "controller_id": controller_id,
                "cluster_id": self.metadata_cache.cluster_id,
                "throttle_time_ms": 0}
        return encode_response(header, body)

    async def _unknown_topic(self, topic: str) -> int:
        """0.8.2: with auto.create.topics.enable the topic is created and LEADER_NOT_AVAILABLE answered."""
        if not self.config["auto.create.topics.enable"]:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return await self.topic_creator.create(topic)

    # ---- broker -> controller ------------------------------------------------------------------------------

    async def handle_controlled_shutdown(self, header: RequestHeader, request: Any) -> bytes:
        """ControlledShutdown: the controller moves the broker's leaderships away, then we answer with the
        partitions it still leads. A broker that is not the controller answers UNKNOWN (0.8.2's
        ControllerMovedException); the asking broker then retries, reading /controller again."""
        if not self.auth.cluster(acl.CLUSTER_ACTION):
            return encode_response(header, {"error_code": acl.CLUSTER_AUTHORIZATION_FAILED, "partitions_remaining": []})
        if self.controller is None or not self.controller.is_active():
            error, remaining = ErrorCode.UNKNOWN, []
        else:
            future = asyncio.get_running_loop().create_future()

            def reply(error_code: int, partitions: list) -> None:  # the controller's event thread
                self.bridge.call_soon(_resolve, future, (error_code, partitions))

            self.controller.shutdown_broker(request.broker_id, reply)
            error, remaining = await future
        return encode_response(header, {"error_code": error, "partitions_remaining": [
            {"topic": topic, "partition": partition} for topic, partition in remaining]})

    # ---- controller -> broker ------------------------------------------------------------------------------

    async def handle_leader_and_isr(self, header: RequestHeader, request: Any) -> bytes:
        if not self.auth.cluster(acl.CLUSTER_ACTION):
            return encode_response(header, {"error_code": acl.CLUSTER_AUTHORIZATION_FAILED, "partitions": []})
        await _lab_fault_point("leader_and_isr", request)
        error, partitions = await self.replica_manager.become_leader_or_follower(request)
        self._coordinators_see_leadership()
        return encode_response(header, {"error_code": error, "partitions": partitions})

    async def handle_stop_replica(self, header: RequestHeader, request: Any) -> bytes:
        if not self.auth.cluster(acl.CLUSTER_ACTION):
            return encode_response(header, {"error_code": acl.CLUSTER_AUTHORIZATION_FAILED, "partitions": []})
        error, partitions = self.replica_manager.stop_replicas(request)
        self._coordinators_see_leadership()
        return encode_response(header, {"error_code": error, "partitions": partitions})

    def _coordinators_see_leadership(self) -> None:
        if self.group_coordinator is not None:
            self.group_coordinator.on_leadership_change()
        if self.transaction_coordinator is not None:
            self.transaction_coordinator.on_leadership_change()

    async def handle_update_metadata(self, header: RequestHeader, request: Any) -> bytes:
        if not self.auth.cluster(acl.CLUSTER_ACTION):
            return encode_response(header, {"error_code": acl.CLUSTER_AUTHORIZATION_FAILED})
        await _lab_fault_point("update_metadata", request)
        if request.controller_epoch < self.replica_manager.controller_epoch:
            log.warning("Broker %d ignoring UpdateMetadata from controller %d since its controller epoch %d is "
                        "old", self.broker_id, request.controller_id, request.controller_epoch)
            return encode_response(header, {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH})
        self.replica_manager.controller_epoch = request.controller_epoch
        self.metadata_cache.update_partitions(request.partition_states)
        return encode_response(header, {"error_code": ErrorCode.NONE})

    async def handle_offsets_for_leader_epoch(self, header: RequestHeader, request: Any) -> bytes:
        """KIP-101 for followers, KIP-320 for consumers (v2 carries their current leader epoch): where an epoch
        ends in the leader's log, in both truncation modes (see record_versions.epoch_end)."""
        topics = []
        denied = self.auth.denied_topics(acl.DESCRIBE, (t.topic for t in request.topics))
        for topic_entry in request.topics:
            rows = []
            for entry in topic_entry.partitions:
                error, p = self.replica_manager.leader_partition(topic_entry.topic, entry.partition)
                if topic_entry.topic in denied:
                    error, p = acl.TOPIC_AUTHORIZATION_FAILED, None
                epoch, end_offset = -1, -1
                if p is not None:
                    error = record_versions.leader_epoch_error(p, getattr(entry, "current_leader_epoch", -1))
                    if error == ErrorCode.NONE:
                        epoch, end_offset = record_versions.epoch_end(p, entry.leader_epoch)
                rows.append({"error_code": error, "partition": entry.partition, "leader_epoch": epoch,
                             "end_offset": end_offset})
            topics.append({"topic": topic_entry.topic, "partitions": rows})
        return encode_response(header, {"topics": topics, "throttle_time_ms": 0})

    async def _verify_transaction(self, request: Any, topic: str, entry: Any) -> int | None:
        """KIP-890 (transaction.partition.verification.enable): the produce's error if the coordinator does not
        count this partition in the producer's ongoing transaction, for the producer's first batch of it here;
        None to append (coordinator/transaction/verification.py). The append follows without an await, so a
        marker of the producer appended meanwhile is seen through the verification token."""
        transactional_id = getattr(request, "transactional_id", None)
        if not self._verify_transactions or transactional_id is None or self.transaction_coordinator is None:
            return None
        producer = record_versions.transactional_producer(entry.records)
        if producer is None:
            return None
        _, p = self.replica_manager.leader_partition(topic, entry.partition)
        if p is None:
            return None  # the append answers why
        producer_id, producer_epoch = producer
        state = p.log.producer_state

        def in_transaction() -> bool:
            current = state.producers.get(producer_id)
            return current is not None and current.epoch == producer_epoch and current.current_txn_first_offset >= 0

        if in_transaction():
            return None
        token = state.verifying.setdefault(producer_id, object())
        error = await self.transaction_coordinator.verify(transactional_id, producer_id, producer_epoch,
                                                          TopicPartition(topic, entry.partition))
        if error == ErrorCode.NONE and not in_transaction() and state.verifying.get(producer_id) is not token:
            error = ErrorCode.INVALID_TXN_STATE  # the transaction ended while we asked
        if error != ErrorCode.NONE:
            log.info("Refused producer %d's transactional batch for [%s,%d] (transactional id %r): its coordinator "
                     "does not count the partition in an ongoing transaction of epoch %d (%s)", producer_id,
                     topic, entry.partition, transactional_id, producer_epoch, ErrorCode(error).name)
            return error
        return None

    def _producer_authorization_error(self, request: Any) -> int | None:
        """Kafka 2.x's check of a whole Produce request by its producer: transactional batches need Write on the
        request's TransactionalId (53), an idempotent producer's IdempotentWrite on the cluster (31)."""
        if not self.auth.enabled:
            return None
        transactional = idempotent = False
        for topic_entry in request.topics:
            for entry in topic_entry.partitions:
                kinds = record_versions.producer_kinds(entry.records)
                transactional, idempotent = transactional or kinds[0], idempotent or kinds[1]
        transactional_id = getattr(request, "transactional_id", None)
        if transactional:
            if transactional_id is None or not self.auth.transactional_id(acl.WRITE, transactional_id):
                return acl.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif idempotent and not self.auth.cluster(acl.IDEMPOTENT_WRITE):
            return acl.CLUSTER_AUTHORIZATION_FAILED
        return None

    async def handle_init_producer_id(self, header: RequestHeader, request: Any) -> bytes:
        """InitProducerId (KIP-98): a null transactional id is an idempotent producer's -- a new producer id,
        epoch 0; a transactional id goes to its transaction coordinator, which bumps the epoch (fencing the id's
        previous producer) and, from v3, lets a producer naming its current id and epoch recover (KIP-360)."""
        if request.transactional_id is None and not self.auth.cluster(acl.IDEMPOTENT_WRITE):
            return encode_response(header, {"throttle_time_ms": 0, "error_code": acl.CLUSTER_AUTHORIZATION_FAILED,
                                            "producer_id": -1, "producer_epoch": -1})
        if request.transactional_id is not None and not self.auth.transactional_id(acl.WRITE,
                                                                                  request.transactional_id):
            return encode_response(header, {"throttle_time_ms": 0,
                                            "error_code": acl.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                            "producer_id": -1, "producer_epoch": -1})
        producer_id, epoch = -1, -1
        if request.transactional_id is not None and self.transaction_coordinator is not None:
            expected = None
            if getattr(request, "producer_id", -1) >= 0:
                expected = (request.producer_id, request.producer_epoch)
            error, producer_id, epoch = await self.transaction_coordinator.init_producer_id(
                request.transactional_id, request.transaction_timeout_ms, expected)
            error = _fenced_error(error, header.api_version >= 4)
        elif request.transactional_id is not None:
            log.warning("Refused InitProducerId for transactional id %r from client %s: no transactions here",
                        request.transactional_id, header.client_id)
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            try:
                error, producer_id, epoch = ErrorCode.NONE, await self.producer_ids.generate_producer_id(), 0
            except Exception as e:  # ZooKeeper unavailable: the client retries
                log.warning("Could not allocate a producer id: %r", e)
                error = ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE
        return encode_response(header, {"throttle_time_ms": 0, "error_code": error, "producer_id": producer_id,
                                        "producer_epoch": epoch})

    # ---- transactions (KIP-98; DESIGN §18): the coordinator's APIs and the leaders' markers --------------------

    async def handle_add_partitions_to_txn(self, header: RequestHeader, request: Any) -> bytes:
        """Without Write on the TransactionalId every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
        Partitions of topics without Write (internal ones never have it) answer TOPIC_AUTHORIZATION_FAILED, of
        unknown topics UNKNOWN_TOPIC_OR_PARTITION, and the others then OPERATION_NOT_ATTEMPTED, nothing added
        (Kafka's checks before the coordinator); otherwise every partition gets the coordinator's answer."""
        snapshot = self.metadata_cache.snapshot
        wanted = [(t.name, p) for t in request.topics for p in t.partitions]
        if not self.auth.transactional_id(acl.WRITE, request.transactional_id):
            errors = {tp: acl.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted}
        else:
            denied: set[str] = set()
            if self.auth.enabled:
                denied = self.auth.denied_topics(acl.WRITE, {t for t, _ in wanted})
                denied |= {t for t, _ in wanted if t in admin.INTERNAL_TOPICS}
            unknown = {tp for tp in wanted if tp[0] not in denied and tp[1] not in snapshot.partitions.get(tp[0], {})}
            if unknown or denied:
                errors = {tp: acl.TOPIC_AUTHORIZATION_FAILED if tp[0] in denied else
                          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                          for tp in wanted}
            else:
                error = await self.transaction_coordinator.add_partitions(
                    request.transactional_id, request.producer_id, request.producer_epoch,
                    [TopicPartition(topic, partition) for topic, partition in wanted])
                error = _fenced_error(error, header.api_version >= 2)
                errors = {tp: error for tp in wanted}
        results: dict[str, list] = {}
        for (topic, partition), error in errors.items():
            results.setdefault(topic, []).append({"partition_index": partition, "error_code": error})
        return encode_response(header, {"throttle_time_ms": 0, "results": [
            {"name": topic, "partitions": rows} for topic, rows in results.items()]})

    async def handle_add_offsets_to_txn(self, header: RequestHeader, request: Any) -> bytes:
        """The group's `__consumer_offsets` partition joins the transaction (its TxnOffsetCommit follows); the
        producer needs Write on its TransactionalId and Read on the group."""
        refused = None
        if not self.auth.transactional_id(acl.WRITE, request.transactional_id):
            refused = acl.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not self.auth.group(acl.READ, request.group_id):
            refused = acl.GROUP_AUTHORIZATION_FAILED
        if refused is not None:
            return encode_response(header, {"throttle_time_ms": 0, "error_code": refused})
        offsets_partition = TopicPartition(admin.OFFSETS_TOPIC,
                                           self.group_coordinator.machine.partition_for(request.group_id))
        error = await self.transaction_coordinator.add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch, [offsets_partition])
        return encode_response(header, {"throttle_time_ms": 0,
                                        "error_code": _fenced_error(error, header.api_version >= 2)})

    async def handle_end_txn(self, header: RequestHeader, request: Any) -> bytes:
        if not self.auth.transactional_id(acl.WRITE, request.transactional_id):
            return encode_response(header, {"throttle_time_ms": 0,
                                            "error_code": acl.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
        error = await self.transaction_coordinator.end_txn(request.transactional_id, request.producer_id,
                                                           request.producer_epoch, request.committed)
        return encode_response(header, {"throttle_time_ms": 0,
                                        "error_code": _fenced_error(error, header.api_version >= 2)})

    async def handle_write_txn_markers(self, header: RequestHeader, request: Any) -> bytes:
        """A coordinator's markers, appended by each partition's leader (`Partition.append_txn_marker`) and
        answered once the ISR has them (acks=-1). A marker in one of our `__consumer_offsets` partitions also
        settles the transaction's pending offsets there (the group coordinator's handleTxnCompletion)."""
        now = _now_ms()
        answers = []
        if not self.auth.cluster(acl.CLUSTER_ACTION):  # the coordinators' inter-broker request
            refused = acl.CLUSTER_AUTHORIZATION_FAILED
            return encode_response(header, {"markers": [
                {"producer_id": m.producer_id, "topics": [
                    {"name": t.name, "partitions": [{"partition_index": p, "error_code": refused}
                                                    for p in t.partition_indexes]} for t in m.topics]}
                for m in request.markers]})
        for marker in request.markers:
            rows: dict[str, list] = {}
            waits = []
            for topic_entry in marker.topics:
                for partition in topic_entry.partition_indexes:
                    row = {"partition_index": partition, "error_code": ErrorCode.NONE}
                    rows.setdefault(topic_entry.name, []).append(row)
                    error, p = self.replica_manager.leader_partition(topic_entry.name, partition)
                    if p is None:
                        row["error_code"] = error
                        continue
                    try:
                        info = p.append_txn_marker(marker.producer_id, marker.producer_epoch,
                                                   marker.transaction_result, marker.coordinator_epoch, now)
                    except RemoteProtocolError as e:
                        log.info("Refused the transaction marker of producer %d for [%s,%d]: %s", marker.producer_id,
                                 topic_entry.name, partition, e)
                        row["error_code"] = e.error_code
                        continue
                    except BrokerResponseError as e:
                        row["error_code"] = e.errno
                        continue
                    waits.append((row, p, info.last_offset + 1))
            if waits:
                await self._wait_for_isr(waits, MARKER_TIMEOUT_MS)
            for row, p, _ in waits:
                if row["error_code"] == ErrorCode.NONE and p.topic == admin.OFFSETS_TOPIC \
                        and self.group_coordinator is not None:
                    self.group_coordinator.complete_txn(p.partition, marker.producer_id, marker.transaction_result)
            answers.append({"producer_id": marker.producer_id, "topics": [
                {"name": topic, "partitions": partitions} for topic, partitions in rows.items()]})
        return encode_response(header, {"markers": answers})

    async def handle_txn_offset_commit(self, header: RequestHeader, request: Any) -> bytes:
        """Write on the TransactionalId, then Read on the group (each refusal answered for every partition), then
        Read on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions, the others committed), as Kafka 2.x."""
        refused = None
        if not self.auth.transactional_id(acl.WRITE, request.transactional_id):
            refused = acl.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not self.auth.group(acl.READ, request.group_id):
            refused = acl.GROUP_AUTHORIZATION_FAILED
        denied = set() if refused is not None else self.auth.denied_topics(acl.READ, (t.name for t in request.topics))
        rows = [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": refused
                                                 if refused is not None else acl.TOPIC_AUTHORIZATION_FAILED}
                                                for p in t.partitions]}
                for t in request.topics if refused is not None or t.name in denied]
        allowed = [] if refused is not None else [t for t in request.topics if t.name not in denied]
        body: dict = {"topics": []}
        if allowed:
            snapshot = self.metadata_cache.snapshot
            unknown = {t.name for t in allowed if t.name not in snapshot.partitions}
            body = await self.group_coordinator.commit_txn_offsets(request._replace(topics=allowed), unknown)
        return encode_response(header, {"throttle_time_ms": 0, "topics": [*body["topics"], *rows]})

    # ---- the transactions' tools (KIP-664) -------------------------------------------------------------------

    async def handle_describe_producers(self, header: RequestHeader, request: Any) -> bytes:
        """The active producers of partitions this broker holds (leader or follower, as Kafka 3.0 answers), from
        their logs' producer state."""
        topics = []
        denied = self.auth.denied_topics(acl.READ, (t.name for t in request.topics))
        for topic_entry in request.topics:
            rows = []
            for partition in topic_entry.partition_indexes:
                p = self.replica_manager.partitions.get((topic_entry.name, partition))
                error = ErrorCode.NONE if p is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if topic_entry.name in denied:
                    p, error = None, acl.TOPIC_AUTHORIZATION_FAILED
                producers = []
                if p is not None:
                    producers = [{"producer_id": e.producer_id, "producer_epoch": e.epoch,
                                  "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                                  "coordinator_epoch": e.coordinator_epoch,
                                  "current_txn_start_offset": e.current_txn_first_offset}
                                 for e in sorted(p.log.producer_state.producers.values(),
                                                 key=lambda e: e.producer_id)]
                rows.append({"partition_index": partition, "error_code": error, "error_message": None,
                             "active_producers": producers})
            topics.append({"name": topic_entry.name, "partitions": rows})
        return encode_response(header, {"throttle_time_ms": 0, "topics": topics})

    async def handle_describe_transactions(self, header: RequestHeader, request: Any) -> bytes:
        states = []
        for transactional_id in request.transactional_ids:
            if self.auth.transactional_id(acl.DESCRIBE, transactional_id):
                error, m = self.transaction_coordinator.describe(transactional_id)
            else:
                error, m = acl.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
            topics: dict[str, list[int]] = {}
            for tp in sorted(m.topic_partitions) if m is not None else ():
                topics.setdefault(tp.topic, []).append(tp.partition)
            states.append({"error_code": error, "transactional_id": transactional_id,
                           "transaction_state": m.state.kafka_name if m is not None else "",
                           "transaction_timeout_ms": m.txn_timeout_ms if m is not None else 0,
                           "transaction_start_time_ms": m.txn_start_timestamp if m is not None else -1,
                           "producer_id": m.producer_id if m is not None else -1,
                           "producer_epoch": m.producer_epoch if m is not None else -1,
                           "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]})
        return encode_response(header, {"throttle_time_ms": 0, "transaction_states": states})

    async def handle_list_transactions(self, header: RequestHeader, request: Any) -> bytes:
        """The transactional ids this broker coordinates, by state name and producer id (empty filters: all), of
        those the principal may Describe."""
        known = {s.kafka_name for s in TransactionState}
        states = set(request.state_filters)
        producers = set(request.producer_id_filters)
        error, found = self.transaction_coordinator.list_transactions()
        rows = [{"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                 "transaction_state": m.state.kafka_name}
                for m in sorted(found, key=lambda m: m.transactional_id)
                if (not states or m.state.kafka_name in states) and (not producers or m.producer_id in producers)
                and self.auth.transactional_id(acl.DESCRIBE, m.transactional_id)]
        return encode_response(header, {"throttle_time_ms": 0, "error_code": error,
                                        "unknown_state_filters": sorted(states - known), "transaction_states": rows})

    # ---- consumer offsets: v0 in ZooKeeper (0.8.2's offsets.storage=zookeeper), v1+ in __consumer_offsets ----

    async def handle_offset_commit(self, header: RequestHeader, request: Any) -> bytes:
        snapshot = self.metadata_cache.snapshot
        if not self.auth.group(acl.READ, request.group_id):
            return encode_response(header, {"throttle_time_ms": 0, **_refused_commit(
                request.topics, acl.GROUP_AUTHORIZATION_FAILED)})
        original = request
        denied = self.auth.denied_topics(acl.READ, (t.topic for t in request.topics))
        if denied:
            request = request._replace(topics=[t for t in request.topics if t.topic not in denied])
        if header.api_version >= 1 and self.group_coordinator is not None:
            unknown = {t.topic for t in request.topics if t.topic not in snapshot.partitions}
            body = await self.group_coordinator.commit_offsets(request, unknown)
            return encode_response(header, {"throttle_time_ms": 0, **_with_denied_topics(body, denied, original)})
        max_metadata = self.config["offset.metadata.max.bytes"]
        topics = []
        for topic_entry in request.topics:
            rows = []
            for entry in topic_entry.partitions:
                if topic_entry.topic not in snapshot.partitions:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif entry.metadata is not None and len(entry.metadata) > max_metadata:
                    error = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    error = await self._write_offset(request.group_id, topic_entry.topic, entry.partition,
                                                     entry.offset)
                rows.append({"partition": entry.partition, "error_code": error})
            topics.append({"topic": topic_entry.topic, "partitions": rows})
        return encode_response(header, {"throttle_time_ms": 0, **_with_denied_topics({"topics": topics}, denied,
                                                                                     original)})

    async def _write_offset(self, group: str, topic: str, partition: int, offset: int) -> int:
        """An unconditional write of the next offset to consume, as 0.8.2's updatePersistentPath."""
        path = paths.consumer_offset_path(group, topic, partition)
        data = encode_offset(offset)
        kazoo = self.zk.kazoo
        try:
            try:
                await self.bridge.wait_for(kazoo.set_async(path, data))
            except NoNodeError:
                try:
                    await self.bridge.wait_for(kazoo.create_async(path, data, makepath=True))
                except NodeExistsError:
                    await self.bridge.wait_for(kazoo.set_async(path, data))
        except Exception as e:  # ZooKeeper unavailable: the client retries
            log.warning("Could not commit offset for group %s [%s,%d]: %r", group, topic, partition, e)
            return ErrorCode.UNKNOWN
        return ErrorCode.NONE

    async def handle_offset_fetch(self, header: RequestHeader, request: Any) -> bytes:
        """v0 reads ZooKeeper, v1+ the coordinator. From v2 topics may be null (every offset the group has) and a
        group-level error comes once, at the top, with no partitions; v0 and v1 repeat it in every partition."""
        if not self.auth.group(acl.DESCRIBE, request.group_id):
            topics = [{"topic": t.topic, "partitions": [
                {"partition": p, "offset": -1, "committed_leader_epoch": -1, "metadata": "",
                 "error_code": acl.GROUP_AUTHORIZATION_FAILED} for p in t.partitions]}
                for t in request.topics or ()] if header.api_version < 2 else []
            return encode_response(header, {"throttle_time_ms": 0, "topics": topics,
                                            "error_code": acl.GROUP_AUTHORIZATION_FAILED})
        if header.api_version >= 1 and self.group_coordinator is not None:
            error, topics = self.group_coordinator.fetch_offsets(request, per_partition_errors=header.api_version < 2,
                                                                 require_stable=getattr(request, "require_stable",
                                                                                        False))
            denied = self.auth.denied_topics(acl.DESCRIBE, (t["topic"] for t in topics))
            if request.topics is None:  # every offset the group has: those of topics it may not see are left out
                topics = [t for t in topics if t["topic"] not in denied]
            for t in topics:
                if t["topic"] in denied:
                    for row in t["partitions"]:
                        row.update(offset=-1, committed_leader_epoch=-1, metadata="",
                                   error_code=acl.TOPIC_AUTHORIZATION_FAILED)
            return encode_response(header, {"throttle_time_ms": 0, "topics": topics, "error_code": error})
        topics = []
        # v0 cannot ask for "every offset" (null topics, v2+); only a broker without a coordinator gets here with it
        for topic_entry in request.topics or ():
            rows = []
            for partition in topic_entry.partitions:
                path = paths.consumer_offset_path(request.group_id, topic_entry.topic, partition)
                offset, error = -1, ErrorCode.NONE
                try:
                    data, _ = await self.bridge.wait_for(self.zk.kazoo.get_async(path))
                    offset = decode_offset(data)
                except NoNodeError:
                    pass  # nothing committed: -1 lets the client apply auto.offset.reset
                except Exception as e:
                    log.warning("Could not read offset of group %s [%s,%d]: %r", request.group_id,
                                topic_entry.topic, partition, e)
                    error = ErrorCode.UNKNOWN
                rows.append({"partition": partition, "offset": offset, "committed_leader_epoch": -1, "metadata": "",
                             "error_code": error})
            topics.append({"topic": topic_entry.topic, "partitions": rows})
        return encode_response(header, {"throttle_time_ms": 0, "topics": topics, "error_code": ErrorCode.NONE})

    async def handle_find_coordinator(self, header: RequestHeader, request: Any) -> bytes:
        """The leader of the group's `__consumer_offsets` partition (DESIGN §12). Without a group coordinator
        (offsets only in ZooKeeper), any live broker can serve a group; every broker picks the same one.
        v1+ may ask for a transaction coordinator instead (key type 1): the leader of the transactional id's
        `__transaction_state` partition (DESIGN §18)."""
        if header.api_version == 0:
            group_id, key_type = request.group_id, find_coordinator.COORDINATOR_TYPE_GROUP
        else:
            group_id, key_type = request.coordinator_key, request.coordinator_type
        if key_type == find_coordinator.COORDINATOR_TYPE_GROUP and not self.auth.group(acl.DESCRIBE, group_id):
            return encode_response(header, {"throttle_time_ms": 0, "error_code": acl.GROUP_AUTHORIZATION_FAILED,
                                            "error_message": None, "node_id": -1, "host": "", "port": -1})
        if key_type == find_coordinator.COORDINATOR_TYPE_TRANSACTION and not self.auth.transactional_id(
                acl.DESCRIBE, group_id):
            return encode_response(header, {"throttle_time_ms": 0,
                                            "error_code": acl.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                            "error_message": None, "node_id": -1, "host": "", "port": -1})
        if key_type == find_coordinator.COORDINATOR_TYPE_TRANSACTION and self.transaction_coordinator is not None:
            body = await self.transaction_coordinator.find_coordinator(group_id)
            return encode_response(header, {"throttle_time_ms": 0, "error_message": None, **body})
        if key_type != find_coordinator.COORDINATOR_TYPE_GROUP:
            known = key_type == find_coordinator.COORDINATOR_TYPE_TRANSACTION
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if known else ErrorCode.INVALID_REQUEST
            message = ("this broker has no transaction coordinator" if known
                       else f"unknown coordinator type {key_type}")
            return encode_response(header, {"throttle_time_ms": 0, "error_code": error, "error_message": message,
                                            "node_id": -1, "host": "", "port": -1})
        if self.group_coordinator is not None:
            body = await self.group_coordinator.find_coordinator(group_id)
        else:
            brokers = sorted(self.metadata_cache.snapshot.brokers.values(), key=lambda b: b.broker_id)
            if not brokers:
                body = {"error_code": ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE, "node_id": -1, "host": "",
                        "port": -1}
            else:
                chosen = brokers[zlib.crc32(group_id.encode()) % len(brokers)]
                host, port = chosen.endpoint(SESSION.get().listener_name) or ("", -1)
                body = {"error_code": ErrorCode.NONE, "node_id": chosen.broker_id, "host": host, "port": port}
        return encode_response(header, {"throttle_time_ms": 0, "error_message": None, **body})

    # ---- group membership (the group coordinator, DESIGN §12) ----------------------------------------------

    # Every response from v1 (JoinGroup v2) on starts with throttle_time_ms; we never throttle, so it is 0.

    async def handle_join_group(self, header: RequestHeader, request: Any) -> bytes:
        if not self.auth.group(acl.READ, request.group_id):
            return encode_response(header, {"throttle_time_ms": 0, "error_code": acl.GROUP_AUTHORIZATION_FAILED,
                                            "generation_id": -1, "group_protocol": "", "leader_id": "",
                                            "member_id": request.member_id, "members": []})
        body = await self.group_coordinator.join_group(header, request)
        return encode_response(header, {"throttle_time_ms": 0, **body})

    async def handle_sync_group(self, header: RequestHeader, request: Any) -> bytes:
        if not self.auth.group(acl.READ, request.group_id):
            return encode_response(header, {"throttle_time_ms": 0, "error_code": acl.GROUP_AUTHORIZATION_FAILED,
                                            "member_assignment": b""})
        body = await self.group_coordinator.sync_group(header, request)
        return encode_response(header, {"throttle_time_ms": 0, **body})

    async def handle_heartbeat(self, header: RequestHeader, request: Any) -> bytes:
        if not self.auth.group(acl.READ, request.group_id):
            return encode_response(header, {"throttle_time_ms": 0, "error_code": acl.GROUP_AUTHORIZATION_FAILED})
        return encode_response(header, {"throttle_time_ms": 0, **self.group_coordinator.heartbeat(request)})

    async def handle_leave_group(self, header: RequestHeader, request: Any) -> bytes:
        if not self.auth.group(acl.READ, request.group_id):
            return encode_response(header, {"throttle_time_ms": 0, "error_code": acl.GROUP_AUTHORIZATION_FAILED})
        return encode_response(header, {"throttle_time_ms": 0, **self.group_coordinator.leave_group(request)})

    async def handle_describe_groups(self, header: RequestHeader, request: Any) -> bytes:
        denied = {g for g in request.group_ids if not self.auth.group(acl.DESCRIBE, g)}
        body = self.group_coordinator.describe_groups(request._replace(
            group_ids=[g for g in request.group_ids if g not in denied]))
        body["groups"] = [*body["groups"], *(
            {"error_code": acl.GROUP_AUTHORIZATION_FAILED, "group_id": g, "state": "", "protocol_type": "",
             "protocol": "", "members": []} for g in request.group_ids if g in denied)]
        return encode_response(header, {"throttle_time_ms": 0, **body})

    async def handle_list_groups(self, header: RequestHeader, request: Any) -> bytes:
        if not self.auth.cluster(acl.DESCRIBE):  # Kafka 2.x: Describe on the cluster lists every group
            return encode_response(header, {"throttle_time_ms": 0, "error_code": acl.CLUSTER_AUTHORIZATION_FAILED,
                                            "groups": []})
        return encode_response(header, {"throttle_time_ms": 0, **self.group_coordinator.list_groups()})

    async def handle_delete_groups(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        denied = {g for g in request.groups_names if not self.auth.group(acl.DELETE, g)}
        body = self.group_coordinator.delete_groups(request._replace(
            groups_names=[g for g in request.groups_names if g not in denied]))
        body["results"] = [*body["results"], *({"group_id": g, "error_code": acl.GROUP_AUTHORIZATION_FAILED}
                                               for g in sorted(denied))]
        return encode_response(header, {"throttle_time_ms": 0, **body})

    async def handle_offset_delete(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        if not self.auth.group(acl.DELETE, request.group_id):
            return encode_response(header, {"throttle_time_ms": 0, "error_code": acl.GROUP_AUTHORIZATION_FAILED,
                                            "topics": []})
        return encode_response(header, {"throttle_time_ms": 0, **self.group_coordinator.delete_offsets(request)})

    # ---- the Admin API (DESIGN §16; server/admin_manager.py does the work) ----------------------------------

    async def handle_create_topics(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        denied = set() if self.auth.cluster(acl.CREATE) else self.auth.denied_topics(
            acl.CREATE, (t.name for t in request.topics))
        results = await self.admin_manager.create_topics(
            request._replace(topics=[t for t in request.topics if t.name not in denied]), header.client_id)
        results.update({name: {"error_code": acl.TOPIC_AUTHORIZATION_FAILED, "error_message": "Authorization failed.",
                               "num_partitions": -1, "replication_factor": -1, "configs": []} for name in denied})
        return encode_response(header, {"throttle_time_ms": 0, "topics": [
            {"name": name, **result} for name, result in results.items()]})

    async def handle_delete_topics(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        denied = self.auth.denied_topics(acl.DELETE, request.topic_names)
        results = await self.admin_manager.delete_topics(
            request._replace(topic_names=[t for t in request.topic_names if t not in denied]), header.api_version)
        results.update(dict.fromkeys(denied, (acl.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")))
        return encode_response(header, {"throttle_time_ms": 0, "responses": [
            {"name": name, "error_code": code, "error_message": message} for name, (code, message) in results.items()]})

    async def handle_create_partitions(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        denied = self.auth.denied_topics(acl.ALTER, (t.name for t in request.topics))
        results = await self.admin_manager.create_partitions(
            request._replace(topics=[t for t in request.topics if t.name not in denied]))
        results.update(dict.fromkeys(denied, (acl.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")))
        return encode_response(header, {"throttle_time_ms": 0, "results": [
            {"name": name, "error_code": code, "error_message": message} for name, (code, message) in results.items()]})

    async def handle_describe_configs(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        allowed, refused = self._config_resources(request, acl.DESCRIBE_CONFIGS)
        results = await self.admin_manager.describe_configs(request._replace(resources=allowed), header.api_version)
        results += [{**row, "configs": []} for row in refused]
        return encode_response(header, {"throttle_time_ms": 0, "results": results})

    async def handle_alter_configs(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        allowed, refused = self._config_resources(request, acl.ALTER_CONFIGS)
        results = await self.admin_manager.alter_configs(request._replace(resources=allowed), incremental=False)
        results += refused
        return encode_response(header, {"throttle_time_ms": 0, "responses": results})

    async def handle_incremental_alter_configs(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        allowed, refused = self._config_resources(request, acl.ALTER_CONFIGS)
        results = await self.admin_manager.alter_configs(request._replace(resources=allowed), incremental=True)
        results += refused
        return encode_response(header, {"throttle_time_ms": 0, "responses": results})


    def _config_resources(self, request: Any, operation: Any) -> tuple[list, list[dict]]:
        """The resources of a (Describe|Alter|IncrementalAlter)Configs request this principal may act on, and a
        refusal row for each other one (a topic: 29, a broker: 31 on the cluster)."""
        allowed, refused = [], []
        for resource in request.resources:
            if resource.resource_type == describe_configs.RESOURCE_TOPIC:
                ok, code = self.auth.topic(operation, resource.resource_name), acl.TOPIC_AUTHORIZATION_FAILED
            else:
                ok, code = self.auth.cluster(operation), acl.CLUSTER_AUTHORIZATION_FAILED
            if ok:
                allowed.append(resource)
            else:
                refused.append({"resource_type": resource.resource_type, "resource_name": resource.resource_name,
                                "error_code": code, "error_message": "Authorization failed."})
        return allowed, refused

    async def handle_elect_leaders(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        if not self.auth.cluster(acl.ALTER):
            return encode_response(header, {"throttle_time_ms": 0, "error_code": acl.CLUSTER_AUTHORIZATION_FAILED,
                                            "replica_election_results": []})
        error, results = await self.admin_manager.elect_leaders(request)
        by_topic: dict[str, list] = {}
        for (topic, partition), (code, message) in results.items():
            by_topic.setdefault(topic, []).append({"partition_id": partition, "error_code": code,
                                                   "error_message": message})
        return encode_response(header, {"throttle_time_ms": 0, "error_code": error, "replica_election_results": [
            {"topic": topic, "partition_result": rows} for topic, rows in by_topic.items()]})

    async def handle_delete_records(self, header: RequestHeader, request: Any) -> bytes:
        """At each partition's leader (the client sends each partition to its leader): ReplicaManager moves the
        log start offset and waits for the in-sync followers to follow."""
        _log_admin_request(header)
        offsets = {(t.name, p.partition_index): p.offset for t in request.topics for p in t.partitions}
        results = await self.replica_manager.delete_records(offsets, request.timeout_ms)
        if self.admin_manager is not None:
            self.admin_manager.record_delete_records(results)
        by_topic: dict[str, list] = {}
        for (topic, partition), (low, error) in results.items():
            by_topic.setdefault(topic, []).append({"partition_index": partition, "low_watermark": low,
                                                   "error_code": error})
        return encode_response(header, {"throttle_time_ms": 0, "topics": [
            {"name": topic, "partitions": rows} for topic, rows in by_topic.items()]})

    async def handle_alter_partition_reassignments(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        (error, message), results = await self.admin_manager.alter_partition_reassignments(request)
        by_topic: dict[str, list] = {}
        for (topic, partition), (code, text) in results.items():
            by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": code,
                                                   "error_message": text})
        return encode_response(header, {"throttle_time_ms": 0, "error_code": error, "error_message": message,
                                        "responses": [{"name": t, "partitions": rows} for t, rows in by_topic.items()]})

    async def handle_list_partition_reassignments(self, header: RequestHeader, request: Any) -> bytes:
        _log_admin_request(header)
        (error, message), listed = await self.admin_manager.list_partition_reassignments(request)
        by_topic: dict[str, list] = {}
        for (topic, partition), (replicas, adding, removing) in listed.items():
            by_topic.setdefault(topic, []).append({"partition_index": partition, "replicas": list(replicas),
                                                   "adding_replicas": list(adding),
                                                   "removing_replicas": list(removing)})
        return encode_response(header, {"throttle_time_ms": 0, "error_code": error, "error_message": message,
                                        "topics": [{"name": t, "partitions": rows} for t, rows in by_topic.items()]})

    async def handle_describe_log_dirs(self, header: RequestHeader, request: Any) -> bytes:
        """This broker's log directories and the size of each partition's log in them (Kafka's
        ReplicaManager.describeLogDirs); the offset lag is the HW's lead over the log end, 0 as a rule."""
        _log_admin_request(header)
        if not self.auth.cluster(acl.DESCRIBE):  # Kafka 2.x answers an empty list
            return encode_response(header, {"throttle_time_ms": 0, "results": []})
        wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
        results = []
        for log_dir, logs in sorted(self.replica_manager.log_manager.logs_by_dir().items()):
            topics: dict[str, list] = {}
            for (topic, partition), log_ in sorted(logs.items()):
                if wanted is not None and (topic, partition) not in wanted:
                    continue
                p = self.replica_manager.partitions.get((topic, partition))
                lag = max(p.high_watermark - log_.log_end_offset, 0) if p is not None else 0
                topics.setdefault(topic, []).append({"partition_index": partition, "partition_size": log_.size,
                                                     "offset_lag": lag, "is_future_key": False})
            results.append({"error_code": ErrorCode.NONE, "log_dir": log_dir, "topics": [
                {"name": name, "partitions": rows} for name, rows in topics.items()]})
        return encode_response(header, {"throttle_time_ms": 0, "results": results})

    async def handle_describe_cluster(self, header: RequestHeader, request: Any) -> bytes:
        """Any broker answers, from its metadata as Metadata does."""
        _log_admin_request(header)
        snapshot = self.metadata_cache.snapshot
        endpoint = getattr(request, "endpoint_type", describe_cluster.ENDPOINT_BROKERS)
        if endpoint != describe_cluster.ENDPOINT_BROKERS:
            known = endpoint == describe_cluster.ENDPOINT_CONTROLLERS
            return encode_response(header, {
                "throttle_time_ms": 0, "endpoint_type": endpoint, "cluster_id": "", "controller_id": -1, "brokers": [],
                "error_code": ErrorCode.MISMATCHED_ENDPOINT_TYPE if known else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                "error_message": ("A broker has no controller endpoints: in ZooKeeper mode the controller is a broker"
                                  if known else f"Unknown endpoint type {endpoint}"),
                "cluster_authorized_operations": describe_cluster.AUTHORIZED_OPERATIONS_OMITTED})
        brokers = [{"broker_id": broker_id, "host": host, "port": port, "rack": None}
                   for broker_id, host, port in _endpoints(snapshot)]
        operations = (describe_cluster.ALL_CLUSTER_OPERATIONS if request.include_cluster_authorized_operations
                      else describe_cluster.AUTHORIZED_OPERATIONS_OMITTED)
        return encode_response(header, {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                                        "endpoint_type": endpoint, "cluster_id": self.metadata_cache.cluster_id or "",
                                        "controller_id": listed_controller_id(
                                            snapshot.controller_id, (b["broker_id"] for b in brokers)),
                                        "brokers": brokers,
                                        "cluster_authorized_operations": operations})


def _fenced_error(error: int, knows_producer_fenced: bool) -> int:
    """PRODUCER_FENCED (KIP-588) to the versions that know it; INVALID_PRODUCER_EPOCH to those before."""
    if error == ErrorCode.PRODUCER_FENCED and not knows_producer_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _now_ms() -> int:
    return int(time.time() * 1000)


def _with_denied_topics(body: dict, denied: set[str], request: Any) -> dict:
    """An OffsetCommit answer with TOPIC_AUTHORIZATION_FAILED for each partition of the topics it left out."""
    if not denied:
        return body
    refused = _refused_commit([t for t in request.topics if t.topic in denied], acl.TOPIC_AUTHORIZATION_FAILED)
    return {**body, "topics": [*body["topics"], *refused["topics"]]}


def _refused_commit(topics: list, error: int) -> dict:
    return {"topics": [{"topic": t.topic, "partitions": [{"partition": e.partition, "error_code": error}
                                                        for e in t.partitions]} for t in topics]}


def _endpoints(snapshot: Any) -> list[tuple[int, str, int]]:
    """The live brokers as the running request's listener reaches them (Kafka's MetadataCache.getAliveBrokers
    for the listener): a broker without that listener is left out, as Kafka leaves it out."""
    listener = SESSION.get().listener_name
    rows = []
    for broker in sorted(snapshot.brokers.values(), key=lambda b: b.broker_id):
        endpoint = broker.endpoint(listener)
        if endpoint is not None:
            rows.append((broker.broker_id, *endpoint))
    return rows


def _log_admin_request(header: RequestHeader) -> None:
    """Admin requests are rare and change the cluster: each is logged with the version the client chose."""
    log.info("%s v%d request from client %s", ApiKey(header.api_key).name, header.api_version, header.client_id)


async def _lab_fault_point(kind: str, request: Any) -> None:
    """The lab's drop and delay points for controller requests (zkbroker/fault_points.py): a dropped request
    closes its connection unanswered; a delayed one waits here first. Outside a lab: one dict test."""
    fault = FAULTS.take_request_fault(kind)
    if fault is None:
        return
    if fault.ms is None:
        log.info("Lab fault point: dropping %s from controller %d epoch %d (%d more to drop)", kind,
                 request.controller_id, request.controller_epoch, fault.remaining)
        raise DroppedByFaultPoint(f"{kind} dropped by the lab's fault point")
    log.info("Lab fault point: delaying %s from controller %d epoch %d by %d ms", kind, request.controller_id,
             request.controller_epoch, fault.ms)
    await asyncio.sleep(fault.ms / 1000.0)


def _resolve(future: asyncio.Future, value: Any) -> None:
    if not future.done():
        future.set_result(value)
