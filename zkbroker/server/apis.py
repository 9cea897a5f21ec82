"""KafkaApis: one handler per request type (Kafka's KafkaApis).

A handler takes the decoded request and returns the complete response frame, or None when the protocol
says no response is sent. ApiVersions advertises only what this broker answers: the table in DESIGN §3,
restricted to the handlers that exist.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from zkbroker.config import KafkaConfig
from zkbroker.protocol.api import (
    ApiKey,
    advertised_versions,
    api_versions_response,
    api_versions_unsupported_response,
    decode_request,
    encode_response,
)
from zkbroker.protocol.errors import ErrorCode, RemoteProtocolError
from zkbroker.protocol.headers import RequestHeader
from zkbroker.server.metadata_cache import MetadataCache

Handler = Callable[[RequestHeader, Any], Awaitable[bytes | None]]


class KafkaApis:
    def __init__(self, config: KafkaConfig, metadata_cache: MetadataCache) -> None:
        self.config = config
        self.metadata_cache = metadata_cache
        self._handlers: dict[int, Handler] = {
            ApiKey.METADATA: self.handle_metadata,
        }
        leader_epoch = config["replication.truncation"] == "leader-epoch"
        self.versions = {key: span for key, span in advertised_versions(leader_epoch).items()
                         if key in self._handlers or key == ApiKey.API_VERSIONS}

    async def handle(self, header: RequestHeader, frame: bytearray, body_offset: int) -> bytes | None:
        if header.api_key == ApiKey.API_VERSIONS:
            low, high = self.versions[ApiKey.API_VERSIONS]
            if not low <= header.api_version <= high:
                return api_versions_unsupported_response(header, self.versions)
            return api_versions_response(header, self.versions)
        span = self.versions.get(header.api_key)
        if span is None or not span[0] <= header.api_version <= span[1]:
            raise RemoteProtocolError(f"unsupported request: api_key {header.api_key} version "
                                      f"{header.api_version} from client {header.client_id!r}",
                                      error_code=ErrorCode.UNSUPPORTED_VERSION)
        request = decode_request(header, frame, body_offset)
        return await self._handlers[header.api_key](header, request)

    async def handle_metadata(self, header: RequestHeader, request: Any) -> bytes:
        snapshot = self.metadata_cache.snapshot
        brokers = [{"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": None}
                   for b in sorted(snapshot.brokers.values(), key=lambda b: b.broker_id)]
        # Partitions arrive with the controller's UpdateMetadata (wire-protocol issue); until then every
        # named topic is unknown and "all topics" is none.
        topics = [{"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "topic": name, "is_internal": False,
                   "partitions": []} for name in (request.topics or ())]
        body = {"brokers": brokers, "topics": topics, "controller_id": snapshot.controller_id}
        return encode_response(header, body)
