"""ControllerChannel: a KRaft broker's requests to the active controller (Kafka's NodeToControllerChannelManager).

The active controller is the metadata log's leader, which the broker's Raft observer knows (`leader()`); before it
knows one, the voters are tried in turn. An answer of NOT_CONTROLLER (a standby, or a new leader still catching
up to lead) or a lost connection sends the request again, to whoever leads then, until the deadline. One
request at a time per connection (the connection codec answers strictly in turn); the broker keeps one channel
for its lifecycle (registration, heartbeats) and one for what it forwards, so that a CreateTopics waiting for its
records to commit never holds a heartbeat back.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

from zkbroker.client.async_connection import AsyncBrokerConnection
from zkbroker.protocol.errors import ErrorCode, ProtocolError

log = logging.getLogger("zkbroker.server.ControllerChannel")

NOT_CONTROLLER = int(ErrorCode.NOT_CONTROLLER)


def says_not_controller(response: Any) -> bool:
    """NOT_CONTROLLER at the top of the answer, or for every topic of it (CreateTopics and DeleteTopics answer
    per topic)."""
    if getattr(response, "error_code", None) == NOT_CONTROLLER:
        return True
    for name in ("topics", "responses", "results"):
        rows = getattr(response, name, None)
        if rows:
            codes = [getattr(row, "error_code", None) for row in rows]
            if codes and all(code == NOT_CONTROLLER for code in codes):
                return True
    return False


class ControllerChannel:
    def __init__(self, voters: dict[int, tuple[str, int]], leader: Callable[[], int | None], client_id: str,
                 request_timeout_s: float = 5.0, retry_backoff_s: float = 0.1) -> None:
        self.voters = voters
        self.leader = leader
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s = retry_backoff_s
        self._connections: dict[int, AsyncBrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._rotation = itertools.cycle(sorted(voters))

    def _target(self) -> int:
        leader = self.leader()
        return leader if leader in self.voters else next(self._rotation)

    async def send(self, api_key: int, version: int, body: Any, timeout_s: float = 30.0) -> Any | None:
        """The active controller's answer; None if none came before `timeout_s` (the last NOT_CONTROLLER answer
        is not returned: the caller treats both as "no controller")."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            node = self._target()
            response = await self._send_to(node, api_key, version, body)
            if response is not None and not says_not_controller(response):
                return response
            if response is not None:  # a standby: the leader it knows may differ from ours; try the next
                next(self._rotation)
            await asyncio.sleep(self.retry_backoff_s)
        return None

    async def _send_to(self, node: int, api_key: int, version: int, body: Any) -> Any | None:
        connection = self._connections.get(node)
        if connection is None:
            host, port = self.voters[node]
            connection = self._connections[node] = AsyncBrokerConnection(host, port, self.client_id,
                                                                         self.request_timeout_s)
        lock = self._locks.setdefault(node, asyncio.Lock())
        async with lock:
            try:
                return await connection.send(api_key, version, body)
            except (ConnectionError, OSError, ProtocolError) as exc:
                log.debug("%s to controller %d failed: %s", api_key, node, exc)
                next(self._rotation)
                return None

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
