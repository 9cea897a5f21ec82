"""The API registry: which (api_key, version) pairs we speak, and the codec entry points.

Server side::

    header, body_offset = parse_request_header(frame)
    request = decode_request(header, frame, body_offset)     # a struct, see schemas/
    out = encode_response(header, {...})                      # size + response header + body

Client side, under ``client_codec.ClientCodec`` (which every client connection drives: our
producer, consumers, controller channel and follower fetchers)::

    out = encode_request(ApiKey.METADATA, 1, correlation_id, "zkbroker", {"topics": None})
    correlation_id, response = decode_response(ApiKey.METADATA, 1, frame)

Decoding wraps the frame in a ``memoryview``, so message sets (``Records`` fields) come out as
zero-copy views of the frame -- writable when the frame is a ``bytearray``, as FrameDecoder
returns.

Flexible versions (KIP-482) need nothing here but their schemas: the header versions follow from
``headers.FIRST_FLEXIBLE_VERSION``, and registering a schema whose flexibility disagrees with that
table fails at import (a flexible version is a ``FlexibleSchema`` built of compact types, the
others never are).
"""

from __future__ import annotations

import enum
import struct
from typing import Any

from .errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from .headers import RequestHeader, encode_request_header, is_flexible, parse_response_header, response_header_version
from .schemas import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    allocate_producer_ids,
    alter_client_quotas,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    api_versions,
    begin_quorum_epoch,
    broker_heartbeat,
    broker_registration,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_quorum_epoch,
    end_txn,
    fetch,
    fetch_snapshot,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offsets_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    stop_replica,
    sync_group,
    txn_offset_commit,
    unregister_broker,
    update_metadata,
    vote,
    write_txn_markers,
)
from .types import Schema

__all__ = [
    "REQUEST_SCHEMAS",
    "RESPONSE_SCHEMAS",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "advertised_versions",
    "api_versions_response",
    "api_versions_unsupported_response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "expects_response",
    "request_schema",
    "response_schema",
]


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    INIT_PRODUCER_ID = 22
    OFFSETS_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    # The metadata quorum's (KIP-595, KIP-630): controller-listener APIs, never advertised in ZooKeeper mode.
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    FETCH_SNAPSHOT = 59
    # The quorum controller's (KIP-497, KIP-631, KIP-730): controller-listener APIs, never advertised in ZooKeeper
    # mode.
    ALTER_PARTITION = 56
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    ALLOCATE_PRODUCER_IDS = 67
    # The Admin API (DESIGN §16)
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    # Transactions' tools (KIP-664, DESIGN §18)
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


#: What ApiVersions advertises: Kafka 2.1's non-flexible maxima for the APIs implemented completely -- record
#: batches (Produce 3+, Fetch 4+, KIP-98), the idempotent producer's InitProducerId, zstd (Produce 7, Fetch 10),
#: leader epochs for clients (Metadata 7, Fetch 9, ListOffsets 4, OffsetsForLeaderEpoch 2; KIP-320) -- and the
#: versions of 0.8.2's APIs this broker implements (the README has the table). Clients that see Metadata >= 4
#: take the broker for 0.11 or later and write record batches; older versions keep working for older clients.
#: The group coordinator's APIs (DESIGN §12) are at Kafka 2.1's maxima too, so the broker is one Kafka release
#: to every client (Kafka 4.0's clients refuse versions older than 2.1's baseline, KIP-896): FindCoordinator 0-2,
#: JoinGroup 0-3 (v1+ carry max.poll.interval.ms as the rebalance timeout, KIP-62), Heartbeat, LeaveGroup,
#: SyncGroup, DescribeGroups and ListGroups 0-2, OffsetCommit 0-6 and OffsetFetch 0-5 (v0 of both in ZooKeeper).
#: ApiVersions goes to 3 (KIP-511's flexible version, Kafka 2.4), which today's clients send first: answered as a
#: ZooKeeper-mode Kafka 2.x broker answers it (``api_versions_response``).
#:
#: ControlledShutdown advertises 0-1. Our brokers send version 1 (the standard request header),
#: but a real 0.8.2 broker sends version 0 with its non-standard header
#: (no client_id), and we parse both, so min 0 is the truth. No client ever asks for key 7, so
#: advertising it costs nothing.
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 7),
    ApiKey.FETCH: (0, 10),
    ApiKey.LIST_OFFSETS: (0, 4),
    ApiKey.METADATA: (0, 7),
    ApiKey.LEADER_AND_ISR: (0, 0),
    ApiKey.STOP_REPLICA: (0, 0),
    ApiKey.UPDATE_METADATA: (0, 0),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 1),
    ApiKey.OFFSET_COMMIT: (0, 6),
    ApiKey.OFFSET_FETCH: (0, 7),
    ApiKey.FIND_COORDINATOR: (0, 2),
    ApiKey.JOIN_GROUP: (0, 3),
    ApiKey.HEARTBEAT: (0, 2),
    ApiKey.LEAVE_GROUP: (0, 2),
    ApiKey.SYNC_GROUP: (0, 2),
    ApiKey.DESCRIBE_GROUPS: (0, 2),
    ApiKey.LIST_GROUPS: (0, 2),
    ApiKey.API_VERSIONS: (0, 3),
    # Transactions (DESIGN §18, docs/transactions.md): Kafka 2.8's versions, InitProducerId with KIP-360's
    # epoch bump (v3) and PRODUCER_FENCED (v4), OffsetFetch with require_stable (v7, KIP-447).
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 0),
    ApiKey.OFFSETS_FOR_LEADER_EPOCH: (0, 2),
    # The Admin API (DESIGN §16, docs/admin-api.md): Kafka 2.8's versions, less those that carry topic ids
    # (KIP-516: CreateTopics 7, DeleteTopics 6), which ZooKeeper-mode zkbroker does not keep.
    ApiKey.CREATE_TOPICS: (0, 6),
    ApiKey.DELETE_TOPICS: (0, 5),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    # Security (DESIGN §19): advertised by listeners that speak SASL (KafkaApis keeps them out of the others')
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 1),
    ApiKey.DESCRIBE_ACLS: (0, 1),
    ApiKey.CREATE_ACLS: (0, 1),
    ApiKey.DELETE_ACLS: (0, 1),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 0),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 0),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),  # v1 (Kafka 3.7) for kafka-python 3.0, see schemas/describe_cluster.py
}


def advertised_versions() -> dict[int, tuple[int, int]]:
    """The ApiVersions table, ordered by api_key. OffsetsForLeaderEpoch is answered in both truncation modes
    (clients that see Metadata 7 ask it, KIP-320), so the table no longer depends on the configuration."""
    return dict(sorted(SUPPORTED_VERSIONS.items()))


#: One module per API in schemas/, each with API_KEY, REQUEST and RESPONSE ({version: Schema}).
_MODULES = (
    produce,
    fetch,
    list_offsets,
    metadata,
    leader_and_isr,
    stop_replica,
    update_metadata,
    controlled_shutdown,
    offset_commit,
    offset_fetch,
    find_coordinator,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    describe_groups,
    elect_leaders,
    list_groups,
    api_versions,
    offsets_for_leader_epoch,
    init_producer_id,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    write_txn_markers,
    txn_offset_commit,
    describe_producers,
    describe_transactions,
    list_transactions,
    vote,
    begin_quorum_epoch,
    end_quorum_epoch,
    describe_quorum,
    fetch_snapshot,
    # the quorum controller's (KIP-497, KIP-631, KIP-730): answered on the controller listener
    alter_partition,
    broker_registration,
    broker_heartbeat,
    unregister_broker,
    allocate_producer_ids,
    # the Admin API
    create_topics,
    delete_topics,
    delete_records,
    describe_configs,
    alter_configs,
    create_partitions,
    incremental_alter_configs,
    describe_cluster,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    delete_groups,
    describe_log_dirs,
    offset_delete,
    # security
    sasl_handshake,
    sasl_authenticate,
    describe_acls,
    create_acls,
    delete_acls,
    describe_client_quotas,
    alter_client_quotas,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
)

#: Every schema we have, by (api_key, api_version). Having a schema is not being advertised.
REQUEST_SCHEMAS: dict[tuple[int, int], Schema] = {
    (module.API_KEY, version): schema
    for module in _MODULES
    for version, schema in module.REQUEST.items()
}
RESPONSE_SCHEMAS: dict[tuple[int, int], Schema] = {
    (module.API_KEY, version): schema
    for module in _MODULES
    for version, schema in module.RESPONSE.items()
}


def _check_flexibility(registry: dict[tuple[int, int], Schema], kind: str) -> None:
    for (key, version), schema in registry.items():
        if schema.flexible != is_flexible(key, version):
            want = "a FlexibleSchema" if is_flexible(key, version) else "a Schema (not flexible)"
            raise TypeError(f"{kind} schema of api_key {key} version {version} must be {want}: "
                            f"headers.FIRST_FLEXIBLE_VERSION has Kafka's first flexible version of each API")


_check_flexibility(REQUEST_SCHEMAS, "request")
_check_flexibility(RESPONSE_SCHEMAS, "response")

#: (api_key, version) pairs answered with response header v1 (flexible, ApiVersions excepted).
_RESPONSE_HEADER_V1 = frozenset(pair for pair in RESPONSE_SCHEMAS if response_header_version(*pair) == 1)

_SIZE_AND_CORRELATION = struct.Struct(">ii")


def request_schema(api_key: int, api_version: int) -> Schema:
    """The request schema, or RemoteProtocolError (error_code 35) for a pair we do not speak."""
    try:
        return REQUEST_SCHEMAS[(api_key, api_version)]
    except KeyError:
        raise RemoteProtocolError(
            f"unsupported request: api_key {api_key} version {api_version}",
            error_code=ErrorCode.UNSUPPORTED_VERSION,
        ) from None


def response_schema(api_key: int, api_version: int) -> Schema:
    try:
        return RESPONSE_SCHEMAS[(api_key, api_version)]
    except KeyError:
        raise LocalProtocolError(
            f"no response schema for api_key {api_key} version {api_version}",
            error_code=ErrorCode.UNSUPPORTED_VERSION,
        ) from None


def _view(frame: bytes | bytearray | memoryview) -> memoryview:
    return frame if isinstance(frame, memoryview) else memoryview(frame)


def decode_request(
    header: RequestHeader, frame: bytes | bytearray | memoryview, body_offset: int
) -> Any:
    """Decode the body of a request frame (as split by ``parse_request_header``).

    Bytes after the body are ignored, as 0.8.2's readers did.
    """
    schema = request_schema(header.api_key, header.api_version)
    body, _ = schema.decode(_view(frame), body_offset)
    return body


def encode_response(header: RequestHeader, body: Any) -> bytes:
    """A complete response frame: int32 size, response header (v0, or v1 for a flexible version), then the
    body."""
    payload = response_schema(header.api_key, header.api_version).encode(body)
    if (header.api_key, header.api_version) in _RESPONSE_HEADER_V1:
        payload = b"\x00" + payload  # header v1: the correlation id's empty tag buffer
    return _SIZE_AND_CORRELATION.pack(len(payload) + 4, header.correlation_id) + payload


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """A complete request frame: int32 size, request header, then the body."""
    try:
        schema = REQUEST_SCHEMAS[(api_key, api_version)]
    except KeyError:
        raise LocalProtocolError(
            f"no request schema for api_key {api_key} version {api_version}"
        ) from None
    payload = encode_request_header(api_key, api_version, correlation_id, client_id)
    payload += schema.encode(body)
    return struct.pack(">i", len(payload)) + payload


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, Any]:
    """Decode a response frame payload; returns (correlation_id, body struct)."""
    try:
        schema = RESPONSE_SCHEMAS[(api_key, api_version)]
    except KeyError:
        raise LocalProtocolError(
            f"no response schema for api_key {api_key} version {api_version}"
        ) from None
    correlation_id, offset = parse_response_header(frame, response_header_version(api_key, api_version))
    body, _ = schema.decode(_view(frame), offset)
    return correlation_id, body


def expects_response(api_key: int, request: Any) -> bool:
    """False only for Produce with acks=0: the broker then sends no response at all. ``request``
    is a decoded struct or the dict a client encodes."""
    if api_key != ApiKey.PRODUCE:
        return True
    acks = request["acks"] if isinstance(request, dict) else request.acks
    return acks != 0


def _api_keys(versions: dict[int, tuple[int, int]]) -> list[tuple[int, int, int]]:
    return [(key, low, high) for key, (low, high) in sorted(versions.items())]


def api_versions_response(
    header: RequestHeader,
    versions: dict[int, tuple[int, int]] | None = None,
    throttle_time_ms: int = 0,
    error_code: int = ErrorCode.NONE,
) -> bytes:
    """The ApiVersions answer for a supported request version (0-3): the table, or with an error (INVALID_REQUEST
    for a v3 request whose client software fails Kafka's check) no table, as Kafka answers.

    v3's tagged fields keep their defaults, so none is written: a ZooKeeper-mode Kafka 2.x broker supports no
    feature (BrokerFeatures.createDefault is empty through 2.8) and, without a ``/feature`` znode (0.8.2's
    layout has none, and only inter.broker.protocol.version 2.7+ creates it), knows no finalized features, whose
    epoch is then -1.
    """
    api_keys = _api_keys(versions or advertised_versions()) if error_code == ErrorCode.NONE else []
    body: dict[str, Any] = {"error_code": error_code, "api_keys": api_keys}
    if header.api_version >= 1:
        body["throttle_time_ms"] = throttle_time_ms
    return encode_response(header, body)


def api_versions_unsupported_response(
    header: RequestHeader, versions: dict[int, tuple[int, int]] | None = None
) -> bytes:
    """The answer to an ApiVersions request at a version we do not speak (v3+ from clients).

    Always the v0 body under response header v0: error 35 (UNSUPPORTED_VERSION) and the full
    table, from which the client picks a version and retries. Any other answer breaks clients
    (wire-protocol.md gotcha 2: librdkafka aborts the process on a v0 body with error 0).
    """
    payload = api_versions.RESPONSE[0].encode(
        {
            "error_code": ErrorCode.UNSUPPORTED_VERSION,
            "api_keys": _api_keys(versions or advertised_versions()),
        }
    )
    return _SIZE_AND_CORRELATION.pack(len(payload) + 4, header.correlation_id) + payload
