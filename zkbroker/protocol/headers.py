"""Request and response headers (the bytes between the frame size and the body), and which versions are flexible.

Request headers: v1 -- api_key int16, api_version int16, correlation_id int32, client_id nullable string
(int16 length, never compact, so the header can be read before the version is understood); v2 -- v1 plus a tag
buffer, for flexible versions (KIP-482); v0 -- ControlledShutdown v0 (0.8.x) only, with no client_id.

Response headers: v0 -- correlation_id int32; v1 -- v0 plus a tag buffer, for flexible versions. ApiVersions
answers with v0 at every version: a client that does not yet know which versions the broker speaks must be able
to read the correlation id and error of whatever comes back (ApiVersionsResponse.json: "Tagged fields are only
supported in the body but not in the header").

``FIRST_FLEXIBLE_VERSION`` is the one home of "from which version is an API flexible": Kafka's facts for every
API (message JSON "flexibleVersions", 3.9), including those we do not serve, since a request we refuse with
UNSUPPORTED_VERSION still needs its header read to the end. The registry (``api``) refuses at import a schema
whose flexibility disagrees with it, so giving an API a flexible version is writing its ``FlexibleSchema``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import LocalProtocolError, RemoteProtocolError
from .types import NullableString, skip_tagged_fields

__all__ = [
    "FIRST_FLEXIBLE_VERSION",
    "RequestHeader",
    "encode_request_header",
    "encode_response_header",
    "is_flexible",
    "parse_request_header",
    "parse_response_header",
    "request_header_version",
    "response_header_version",
]

_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_INT32 = struct.Struct(">i")

CONTROLLED_SHUTDOWN = 7
API_VERSIONS = 18

#: The first flexible version of each API, from Kafka's message JSON ("flexibleVersions": "N+"); the APIs
#: missing here (SaslHandshake 17, OffsetDelete 47) have no flexible version.
FIRST_FLEXIBLE_VERSION: dict[int, int] = {
    0: 9,  # Produce
    1: 12,  # Fetch
    2: 6,  # ListOffsets
    3: 9,  # Metadata
    4: 4,  # LeaderAndIsr
    5: 2,  # StopReplica
    6: 6,  # UpdateMetadata
    7: 3,  # ControlledShutdown
    8: 8,  # OffsetCommit
    9: 6,  # OffsetFetch
    10: 3,  # FindCoordinator
    11: 6,  # JoinGroup
    12: 4,  # Heartbeat
    13: 4,  # LeaveGroup
    14: 4,  # SyncGroup
    15: 5,  # DescribeGroups
    16: 3,  # ListGroups
    18: 3,  # ApiVersions
    19: 5,  # CreateTopics
    20: 4,  # DeleteTopics
    21: 2,  # DeleteRecords
    22: 2,  # InitProducerId
    23: 4,  # OffsetsForLeaderEpoch
    24: 3,  # AddPartitionsToTxn
    25: 3,  # AddOffsetsToTxn
    26: 3,  # EndTxn
    27: 1,  # WriteTxnMarkers
    28: 3,  # TxnOffsetCommit
    29: 2,  # DescribeAcls
    30: 2,  # CreateAcls
    31: 2,  # DeleteAcls
    32: 4,  # DescribeConfigs
    33: 2,  # AlterConfigs
    34: 2,  # AlterReplicaLogDirs
    35: 2,  # DescribeLogDirs
    36: 2,  # SaslAuthenticate
    37: 2,  # CreatePartitions
    38: 2,  # CreateDelegationToken
    39: 2,  # RenewDelegationToken
    40: 2,  # ExpireDelegationToken
    41: 2,  # DescribeDelegationToken
    42: 2,  # DeleteGroups
    43: 2,  # ElectLeaders
    44: 1,  # IncrementalAlterConfigs
    45: 0,  # AlterPartitionReassignments
    46: 0,  # ListPartitionReassignments
    48: 1,  # DescribeClientQuotas
    49: 1,  # AlterClientQuotas
    50: 0,  # DescribeUserScramCredentials
    51: 0,  # AlterUserScramCredentials
    52: 0,  # Vote
    53: 1,  # BeginQuorumEpoch
    54: 1,  # EndQuorumEpoch
    55: 0,  # DescribeQuorum
    56: 0,  # AlterPartition
    57: 0,  # UpdateFeatures
    58: 0,  # Envelope
    59: 0,  # FetchSnapshot
    60: 0,  # DescribeCluster
    61: 0,  # DescribeProducers
    62: 0,  # BrokerRegistration
    63: 0,  # BrokerHeartbeat
    64: 0,  # UnregisterBroker
    65: 0,  # DescribeTransactions
    66: 0,  # ListTransactions
    67: 0,  # AllocateProducerIds
    68: 0,  # ConsumerGroupHeartbeat
    69: 0,  # ConsumerGroupDescribe
    70: 0,  # ControllerRegistration
    71: 0,  # GetTelemetrySubscriptions
    72: 0,  # PushTelemetry
    73: 0,  # AssignReplicasToDirs
    74: 0,  # ListClientMetricsResources
    75: 0,  # DescribeTopicPartitions
    76: 0,  # ShareGroupHeartbeat
    77: 0,  # ShareGroupDescribe
    78: 0,  # ShareFetch
    79: 0,  # ShareAcknowledge
    80: 0,  # AddRaftVoter
    81: 0,  # RemoveRaftVoter
    82: 0,  # UpdateRaftVoter
    83: 0,  # InitializeShareGroupState
    84: 0,  # ReadShareGroupState
    85: 0,  # WriteShareGroupState
    86: 0,  # DeleteShareGroupState
    87: 0,  # ReadShareGroupStateSummary
}


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether this version of the API uses compact types and tag buffers (KIP-482)."""
    first = FIRST_FLEXIBLE_VERSION.get(api_key)
    return first is not None and api_version >= first


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The header of one request, as the broker reads it."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def request_header_version(api_key: int, api_version: int) -> int:
    """0 (ControlledShutdown v0: no client_id), 1 (standard) or 2 (flexible: tagged fields)."""
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    first = FIRST_FLEXIBLE_VERSION.get(api_key)  # is_flexible, inline: every request's header asks
    return 2 if first is not None and api_version >= first else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """0 (correlation id) or 1 (flexible: plus a tag buffer); ApiVersions is 0 at every version."""
    return 1 if api_key != API_VERSIONS and is_flexible(api_key, api_version) else 0


def parse_request_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Read a request header from a frame payload; returns it and the offset of the body."""
    try:
        api_key, api_version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    except struct.error:
        raise RemoteProtocolError(f"request header truncated ({len(frame)} bytes)") from None
    header_version = request_header_version(api_key, api_version)
    if header_version == 0:
        return RequestHeader(api_key, api_version, correlation_id, None), 8
    client_id, offset = NullableString.decode(frame, 8)
    if header_version == 2:
        # Request header v2 declares no tags (RequestHeader.json); any sent are checked and skipped.
        offset = skip_tagged_fields(frame, offset, "request header")
    return RequestHeader(api_key, api_version, correlation_id, client_id), offset


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """The header a client writes (v0 for ControlledShutdown v0, v2 with no tags if flexible)."""
    try:
        fixed = _KEY_VERSION_CORRELATION.pack(api_key, api_version, correlation_id)
    except struct.error as exc:
        raise LocalProtocolError(f"request header: {exc}") from None
    header_version = request_header_version(api_key, api_version)
    if header_version == 0:
        return fixed
    tags = b"\x00" if header_version == 2 else b""
    return fixed + NullableString.encode(client_id) + tags


def encode_response_header(correlation_id: int, header_version: int = 0) -> bytes:
    """Response header v0, or v1 (an empty tag buffer after the correlation id)."""
    return _INT32.pack(correlation_id) + (b"\x00" if header_version == 1 else b"")


def parse_response_header(frame: bytes | bytearray | memoryview, header_version: int = 0) -> tuple[int, int]:
    """Read response header v0 or v1; returns (correlation_id, offset of the body). v1's tags are skipped."""
    try:
        correlation_id = _INT32.unpack_from(frame, 0)[0]
    except struct.error:
        raise RemoteProtocolError("response header truncated") from None
    if header_version == 1:
        return correlation_id, skip_tagged_fields(frame, 4, "response header")
    return correlation_id, 4
