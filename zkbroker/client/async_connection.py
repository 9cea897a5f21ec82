"""AsyncBrokerConnection: one connection to a broker for asyncio code (the replica fetchers).

Requests go out and answers come back strictly in turn; the codec is the sans-I/O one.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from zkbroker.protocol.api import decode_response, encode_request
from zkbroker.protocol.errors import RemoteProtocolError

_SIZE = struct.Struct(">i")


class AsyncBrokerConnection:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float = 30.0) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0

    async def send(self, api_key: int, api_version: int, body: Any) -> Any:
        if self._writer is None:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.timeout_s)
        self._correlation_id += 1
        correlation_id = self._correlation_id
        try:
            self._writer.write(encode_request(api_key, api_version, correlation_id, self.client_id, body))
            await self._writer.drain()
            (size,) = _SIZE.unpack(await asyncio.wait_for(self._reader.readexactly(4), self.timeout_s))
            frame = await asyncio.wait_for(self._reader.readexactly(size), self.timeout_s)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            self.close()
            raise ConnectionError(f"lost the connection to broker {self.host}:{self.port}") from None
        got, response = decode_response(api_key, api_version, frame)
        if got != correlation_id:
            self.close()
            raise RemoteProtocolError(f"correlation id {got} does not match the request's {correlation_id}")
        return response

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
