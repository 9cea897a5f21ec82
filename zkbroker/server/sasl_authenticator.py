"""SaslServerAuthenticator: a SASL listener's connection before it has authenticated (Kafka's class of that name,
KIP-43 and KIP-152).

Until the exchange completes only ApiVersions, SaslHandshake and SaslAuthenticate are served; any other request
closes the connection unanswered (Kafka's IllegalSaslStateException). SaslHandshake v1 names the mechanism and the
tokens then come in SaslAuthenticate requests; after a v0 handshake they come as bare size-prefixed frames, as
Kafka 0.10.0's clients send them. A failed exchange is answered (SaslAuthenticate's code 58 and message; nothing
for bare tokens) after `connection.failed.authentication.delay.ms`, and the connection is then closed: the
socket server does both on `AuthenticationFailed`.

The frames arrive whole from the socket server, which reads them with `sasl.server.max.receive.size` as the
limit until the exchange is complete: an oversized token is refused from its size prefix, never read.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from zkbroker.protocol.api import ApiKey, decode_request, encode_response
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.headers import RequestHeader, parse_request_header
from zkbroker.security.plain import authenticate_plain
from zkbroker.security.scram import SaslAuthenticationError, ScramCredential, ScramServer, unescape_sasl_name

log = logging.getLogger("zkbroker.server.SaslServerAuthenticator")

ScramLookup = Callable[[str, str], Awaitable[ScramCredential | None]]  # (mechanism, user) -> credential


class AuthenticationFailed(Exception):
    """The exchange failed: send `response` (if any) after the failed-authentication delay, then close."""

    def __init__(self, reason: str, response: bytes | None) -> None:
        super().__init__(reason)
        self.response = response


class IllegalSaslState(Exception):
    """A request the SASL state does not allow (Kafka closes the connection without an answer)."""


class SaslServerAuthenticator:
    def __init__(self, mechanisms: Sequence[str], plain_users: Mapping[str, str], scram_lookup: ScramLookup,
                 api_versions: Callable[[RequestHeader, bytearray, int], bytes]) -> None:
        self.mechanisms = list(mechanisms)
        self.plain_users = plain_users
        self.scram_lookup = scram_lookup
        self.api_versions = api_versions
        self.mechanism: str | None = None
        self.legacy = False  # after SaslHandshake v0: tokens come as bare frames
        self.principal: str | None = None
        self._scram: ScramServer | None = None

    @property
    def complete(self) -> bool:
        return self.principal is not None

    async def receive(self, frame: bytearray) -> bytes | None:
        """One frame from the unauthenticated client; the answer to send (a complete frame)."""
        if self.legacy:
            try:
                answer = await self._evaluate(bytes(frame))
            except SaslAuthenticationError as e:
                raise AuthenticationFailed(e.message, None) from None
            return struct.pack(">i", len(answer)) + answer
        header, body_offset = parse_request_header(frame)
        if header.api_key == ApiKey.API_VERSIONS and self.mechanism is None:
            return self.api_versions(header, frame, body_offset)
        if header.api_key == ApiKey.SASL_HANDSHAKE and self.mechanism is None:
            return self._handshake(header, decode_request(header, frame, body_offset))
        if header.api_key == ApiKey.SASL_AUTHENTICATE and self.mechanism is not None:
            return await self._authenticate(header, decode_request(header, frame, body_offset))
        raise IllegalSaslState(f"Unexpected Kafka request of type {_api_name(header.api_key)} during SASL "
                               "handshake.")

    def _handshake(self, header: RequestHeader, request: Any) -> bytes:
        if not 0 <= header.api_version <= 1:
            raise IllegalSaslState(f"SaslHandshake version {header.api_version} is not supported")
        mechanism = request.mechanism
        if mechanism not in self.mechanisms:
            response = encode_response(header, {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                                "mechanisms": self.mechanisms})
            raise AuthenticationFailed(f"Unsupported SASL mechanism {mechanism}", response)
        self.mechanism = mechanism
        self.legacy = header.api_version == 0
        return encode_response(header, {"error_code": ErrorCode.NONE, "mechanisms": self.mechanisms})

    async def _authenticate(self, header: RequestHeader, request: Any) -> bytes:
        if not 0 <= header.api_version <= 1:
            raise IllegalSaslState(f"SaslAuthenticate version {header.api_version} is not supported")
        try:
            answer = await self._evaluate(request.auth_bytes)
        except SaslAuthenticationError as e:
            response = encode_response(header, {"error_code": e.errno, "error_message": e.message,
                                                "auth_bytes": b"", "session_lifetime_ms": 0})
            raise AuthenticationFailed(e.message, response) from None
        return encode_response(header, {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": answer,
                                        "session_lifetime_ms": 0})

    async def _evaluate(self, token: bytes) -> bytes:
        if self.mechanism == "PLAIN":
            self.principal = authenticate_plain(token, self.plain_users)
            return b""
        if self._scram is None:
            username = _scram_username(token)
            credential = await self.scram_lookup(self.mechanism, username) if username else None
            self._scram = ScramServer(self.mechanism, lambda name: credential if name == username else None)
        try:
            answer = self._scram.evaluate_response(token)
        except SaslAuthenticationError:
            log.info("Failed %s authentication of user %r: %s", self.mechanism, self._scram.username,
                     self._scram.failure_reason)
            raise
        if self._scram.complete:
            self.principal = self._scram.principal
        return answer


def _scram_username(token: bytes) -> str | None:
    """The user a SCRAM client-first message names (`n,,n=alice,r=...`), to fetch the credential first."""
    try:
        fields = token.decode("utf-8").split(",")
    except UnicodeDecodeError:
        return None
    for field in fields[2:3]:
        if field.startswith("n="):
            return unescape_sasl_name(field[2:])
    return None


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)

