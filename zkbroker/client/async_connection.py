"""AsyncBrokerConnection: one connection to a broker for asyncio code (the replica fetchers, the transaction
markers' channel).

Requests go out and answers come back strictly in turn; requests, framing and the correlation-id check are
the sans-I/O ClientCodec's, this module only moves bytes. With a ClientSecurity (an inter-broker listener on
SSL or SASL) the connection runs TLS and then ClientSecurity's SASL exchange before its first request.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from zkbroker.client.security import AuthenticationError, ClientSecurity
from zkbroker.protocol.client_codec import ClientCodec

_READ_BYTES = 1 << 20  # at most this much of what the stream holds per read


class AsyncBrokerConnection:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security  # None: PLAINTEXT
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._codec: ClientCodec | None = None

    async def send(self, api_key: int, api_version: int, body: Any) -> Any:
        if self._writer is None:
            await self._connect()
        return await self._roundtrip(api_key, api_version, body)

    async def _connect(self) -> None:
        """Connect, then TLS and SASL if secured; AuthenticationError (a ConnectionError) if refused."""
        security = self.security
        tls = security.ssl_context() if security is not None and security.protocol.uses_tls else None
        try:
            self._reader, self._writer = await asyncio.wait_for(asyncio.open_connection(
                self.host, self.port, ssl=tls, server_hostname=self.host if tls else None), self.timeout_s)
        except ssl.SSLError as e:
            raise AuthenticationError(f"TLS handshake with broker {self.host}:{self.port} failed: {e}") from None
        self._codec = ClientCodec(self.client_id)
        if security is not None and security.protocol.uses_sasl:
            steps = security.sasl_exchange()
            request = next(steps)
            try:
                while True:
                    request = steps.send(await self._roundtrip(*request))
            except StopIteration:
                pass
            except BaseException:
                self.close()
                raise

    async def _roundtrip(self, api_key: int, api_version: int, body: Any) -> Any:
        reader, writer, codec = self._reader, self._writer, self._codec
        out = codec.send(api_key, api_version, body)
        try:
            async with asyncio.timeout(self.timeout_s):
                writer.write(out)
                await writer.drain()
                while (response := codec.next_response()) is None:
                    data = await reader.read(_READ_BYTES)
                    if not data:
                        raise ConnectionError("closed")
                    codec.receive_data(data)
        except (OSError, TimeoutError):
            self.close()
            raise ConnectionError(f"lost the connection to broker {self.host}:{self.port}") from None
        except BaseException:  # cancelled too: an answer left unread would pass for the next request's
            self.close()
            raise
        return response.body

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = self._codec = None
