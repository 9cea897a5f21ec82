"""KRaftApis: what a KRaft broker's listener answers (Kafka 3.7's KafkaApis on a broker in KRaft mode).

The same handlers as ZooKeeper mode (KafkaApis) for Produce, Fetch, ListOffsets, Metadata, groups, offsets,
transactions and idempotence, reading the MetadataCache that the metadata image fills (metadata_publisher.py);
the differences are all in what is advertised:

* the controller's requests to brokers (LeaderAndIsr, UpdateMetadata, StopReplica) and ControlledShutdown are
  ZooKeeper mode's and are not advertised: leadership comes from the metadata log, a controlled shutdown goes
  through heartbeats (DESIGN §17);
* the admin requests the quorum controller answers (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
  IncrementalAlterConfigs, ElectLeaders) are forwarded to the active controller (KIP-590) at the client's
  version, within the versions both sides speak, and its answer is the client's; DescribeQuorum too (what
  `metadata-quorum --bootstrap-server BROKER` asks);
* DescribeConfigs is answered here, topics' overrides from the metadata image, brokers' from this broker;
* what ZooKeeper mode keeps in ZooKeeper (ACLs, client quotas, SCRAM credentials, offsets of OffsetCommit and
  OffsetFetch v0) and partition reassignments are not advertised: the quorum controller does not keep them yet.
"""

from __future__ import annotations

import logging
from typing import Any

from controller.quorum.driver import QUORUM_CONTROLLER_VERSIONS
from zkbroker.protocol.api import ApiKey, advertised_versions, encode_response
from zkbroker.protocol.errors import ErrorCode, RemoteProtocolError
from zkbroker.protocol.headers import RequestHeader
from zkbroker.server.apis import KafkaApis, _log_admin_request
from zkbroker.server.controller_apis import CONTROLLER_VERSIONS
from zkbroker.server.controller_channel import ControllerChannel

log = logging.getLogger("zkbroker.server.KafkaApis")

#: Not advertised by a KRaft broker (see the module's comment).
NOT_IN_KRAFT = frozenset({
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.DESCRIBE_CLIENT_QUOTAS,
    ApiKey.ALTER_CLIENT_QUOTAS, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS,
})
FORWARDED = frozenset({
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.ALTER_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ELECT_LEADERS,
})
#: v0 of these keeps offsets in ZooKeeper (0.8.2's offsets.storage=zookeeper)
FROM_V1 = frozenset({ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH})


def kraft_versions(handled: set[int]) -> dict[int, tuple[int, int]]:
    """The ApiVersions table of a KRaft broker that has handlers for `handled`."""
    versions = {}
    for key, (low, high) in advertised_versions().items():
        if key != ApiKey.API_VERSIONS and (key not in handled or key in NOT_IN_KRAFT):
            continue
        if key in FORWARDED:
            c_low, c_high = QUORUM_CONTROLLER_VERSIONS[key]
            low, high = max(low, c_low), min(high, c_high)
        if key in FROM_V1:
            low = max(low, 1)
        if low <= high:
            versions[key] = (low, high)
    # DescribeQuorum (55): forwarded to the active controller, as Kafka 3.7's brokers do (metadata-quorum)
    versions[ApiKey.DESCRIBE_QUORUM] = CONTROLLER_VERSIONS[ApiKey.DESCRIBE_QUORUM]
    return dict(sorted(versions.items()))


class KRaftApis(KafkaApis):
    def __init__(self, config: Any, metadata_cache: Any, replica_manager: Any, bridge: Any, topic_creator: Any,
                 channel: ControllerChannel, group_coordinator: Any, transaction_coordinator: Any,
                 producer_ids: Any, admin_manager: Any) -> None:
        super().__init__(config, metadata_cache, replica_manager, None, bridge, topic_creator, None,
                         group_coordinator, admin_manager, transaction_coordinator, producer_ids)
        self.channel = channel
        for key in NOT_IN_KRAFT:
            self._handlers.pop(key, None)
        for key in (*FORWARDED, ApiKey.DESCRIBE_QUORUM):
            self._handlers[key] = self.handle_forwarded
        self.versions = kraft_versions(set(self._handlers))

    async def handle_forwarded(self, header: RequestHeader, request: Any) -> bytes:
        """KIP-590: the active controller answers; we pass its answer on (same version, same body)."""
        _log_admin_request(header)
        timeout_s = max(30.0, getattr(request, "timeout_ms", 0) / 1000 + 5)
        response = await self.channel.send(header.api_key, header.api_version, request, timeout_s)
        if response is None:
            raise RemoteProtocolError(f"no active controller answered the forwarded {ApiKey(header.api_key).name} "
                                      f"within {timeout_s:.0f} s", error_code=ErrorCode.REQUEST_TIMED_OUT)
        return encode_response(header, response)
