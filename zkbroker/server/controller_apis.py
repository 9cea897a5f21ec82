"""ControllerApis: what a KRaft controller's listener answers (Kafka's ControllerApis, the quorum's part):
ApiVersions, the quorum's RPCs handed to the Raft manager (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch with
the Raft fields, FetchSnapshot, DescribeQuorum), and DescribeCluster, which names the cluster and the
controllers (KIP-919: what `metadata-quorum` asks first). Requests go through the one connection codec (the
SocketServer and protocol.api); the bodies map to Raft messages in raft/wire.py. The quorum controller's
requests (broker registration and heartbeats, AlterPartition, CreateTopics, ...) go to its driver
(controller/quorum/driver.py), which answers them once their records commit.
"""

from __future__ import annotations

import logging
from typing import Any

from controller.quorum.driver import QUORUM_CONTROLLER_VERSIONS, QuorumControllerDriver
from zkbroker.protocol.api import ApiKey, decode_request, encode_response
from zkbroker.protocol.errors import ErrorCode, RemoteProtocolError
from zkbroker.protocol.headers import RequestHeader
from zkbroker.protocol.schemas import describe_cluster
from zkbroker.raft import messages as m
from zkbroker.raft import wire
from zkbroker.raft.raft_manager import RaftManager
from zkbroker.server.apis import answer_api_versions

log = logging.getLogger("zkbroker.server.ControllerApis")

#: What a controller advertises: the quorum's APIs at Kafka 3.7's versions (Fetch only from v12, the first with
#: the Raft fields), ApiVersions and DescribeCluster.
CONTROLLER_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.FETCH: (12, 16),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.VOTE: (0, 0),
    ApiKey.BEGIN_QUORUM_EPOCH: (0, 0),
    ApiKey.END_QUORUM_EPOCH: (0, 0),
    ApiKey.DESCRIBE_QUORUM: (0, 1),
    ApiKey.FETCH_SNAPSHOT: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
}



def _source(message: m.Request) -> int:
    """The node a quorum request speaks for: the candidate, the leader, or the fetching replica."""
    if isinstance(message, m.VoteRequest):
        return message.candidate_id
    if isinstance(message, (m.BeginQuorumEpochRequest, m.EndQuorumEpochRequest)):
        return message.leader_id
    if isinstance(message, (m.FetchRequest, m.FetchSnapshotRequest)):
        return message.replica_id
    return -1


class ControllerApis:
    def __init__(self, node_id: int, cluster_id: str, voters: dict[int, tuple[str, int]], raft: RaftManager,
                 quorum: QuorumControllerDriver | None = None) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.voters = voters
        self.raft = raft
        self.quorum = quorum
        versions = {**CONTROLLER_VERSIONS, **(QUORUM_CONTROLLER_VERSIONS if quorum is not None else {})}
        for api_key, version in raft.versions.items():  # the later fixes' versions, when switched on
            low, high = versions[api_key]
            versions[api_key] = (low, max(high, version))
        self.versions = dict(sorted(versions.items()))

    async def handle(self, header: RequestHeader, frame: bytearray, body_offset: int) -> Any:
        if header.api_key == ApiKey.API_VERSIONS:
            return answer_api_versions(header, frame, body_offset, self.versions)
        span = self.versions.get(header.api_key)
        if span is None or not span[0] <= header.api_version <= span[1]:
            raise RemoteProtocolError(f"unsupported request on the controller listener: api_key {header.api_key} "
                                      f"version {header.api_version} from client {header.client_id!r}",
                                      error_code=ErrorCode.UNSUPPORTED_VERSION)
        body = decode_request(header, frame, body_offset)
        if header.api_key == ApiKey.DESCRIBE_CLUSTER:
            return encode_response(header, self._describe_cluster(header.api_version))
        if self.quorum is not None and header.api_key in QUORUM_CONTROLLER_VERSIONS:
            return encode_response(header, await self.quorum.handle(header.api_key, header.api_version, body))
        message = wire.from_body(header.api_key, header.api_version, True, body)
        response = await self.raft.handle(_source(message), message)
        return encode_response(header, wire.to_body(response, header.api_version))

    def _describe_cluster(self, version: int) -> dict:
        leader, _ = self.raft.leader_and_epoch()
        body = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "cluster_id": self.cluster_id,
                "controller_id": -1 if leader is None else leader,
                "brokers": [{"broker_id": node, "host": host, "port": port, "rack": None}
                            for node, (host, port) in sorted(self.voters.items())],
                "cluster_authorized_operations": describe_cluster.AUTHORIZED_OPERATIONS_OMITTED}
        if version >= 1:
            body["endpoint_type"] = describe_cluster.ENDPOINT_CONTROLLERS
        return body
