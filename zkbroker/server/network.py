"""SocketServer: the broker's asyncio network layer (Kafka's SocketServer).

Each connection is a FrameDecoder plus a loop that answers its requests strictly in order, as Kafka
guarantees per connection. Fetch responses arrive as pieces: small framing bytes, and file ranges of
segment files that go out with sendfile, never through Python memory. A frame that is too large or does
not parse closes that connection only; the broker keeps serving everyone else.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import os
from typing import TYPE_CHECKING

from zkbroker.protocol.errors import ProtocolError
from zkbroker.protocol.frame import FrameDecoder
from zkbroker.protocol.headers import parse_request_header

if TYPE_CHECKING:
    from zkbroker.server.apis import KafkaApis

log = logging.getLogger("zkbroker.server.SocketServer")

_READ_CHUNK = 256 * 1024


# Which client connection the running request came from ("host:port#n"), for log lines; each connection is
# served by its own task, so the variable is per connection.
CONNECTION: contextvars.ContextVar[str] = contextvars.ContextVar("connection", default="-")
_connection_ids = itertools.count(1)


class TruncatedDuringSend(Exception):
    """A segment shrank (truncation) while its bytes were being sent; the frame cannot be completed."""


class SocketServer:
    def __init__(self, host: str, port: int, apis: KafkaApis, max_request_bytes: int) -> None:
        self.host = host
        self.port = port
        self.apis = apis
        self.max_request_bytes = max_request_bytes
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        except OSError as e:
            raise OSError(e.errno, f"Socket server failed to bind to {self.host}:{self.port}: {e.strerror}.") from e
        log.info("Awaiting socket connections on %s:%d.", self.host, self.port)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._connections):
            writer.close()
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        CONNECTION.set(f"{peer[0]}:{peer[1]}#{next(_connection_ids)}" if peer else f"#{next(_connection_ids)}")
        self._connections.add(writer)
        decoder = FrameDecoder(self.max_request_bytes)
        try:
            while True:
                data = await reader.read(_READ_CHUNK)
                if not data:
                    return
                decoder.receive_data(data)
                while (frame := decoder.next_frame()) is not None:
                    header, body_offset = parse_request_header(frame)
                    response = await self.apis.handle(header, frame, body_offset)
                    if response is not None:
                        await self._send(writer, response)
        except ProtocolError as e:
            log.warning("Closing socket connection to %s: %s", peer, e)
        except TruncatedDuringSend as e:
            log.warning("Closing socket connection to %s: %s", peer, e)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, response: bytes | list) -> None:
        """Write a response: one frame, or pieces whose FileRange slots go out with sendfile (zero copy)."""
        if isinstance(response, (bytes, bytearray)):
            writer.write(response)
            await writer.drain()
            return
        loop = asyncio.get_running_loop()
        for piece in response:
            if isinstance(piece, (bytes, bytearray)):
                writer.write(piece)
                continue
            await writer.drain()
            try:
                # fallback=False: asyncio's fallback reads through the shared file object's position, which
                # appends and other fetches move; without native sendfile we pread at explicit offsets.
                sent = await loop.sendfile(writer.transport, piece.file, piece.position, piece.size, fallback=False)
            except asyncio.SendfileNotAvailableError:
                data = os.pread(piece.file.fileno(), piece.size, piece.position)
                writer.write(data)
                sent = len(data)
            if sent != piece.size:
                raise TruncatedDuringSend(f"sent {sent} of {piece.size} bytes of {piece.file.name}")
        await writer.drain()
