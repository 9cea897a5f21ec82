"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka 2.x uses them (KIP-84, DESIGN §19).

A user's credential is stored in `/config/users/<user>` (the `{"version":1,"config":{...}}` of every config
entity, see `EntityConfig`) under the mechanism's name, as `salt=<b64>,stored_key=<b64>,server_key=<b64>,
iterations=<n>` (ScramCredentialUtils). The password itself is never stored.

`ScramServer` is the broker's side of one exchange, sans-I/O: the SaslAuthenticate tokens go in, the
answers come out. The message parsing, the proof check (hmac.compare_digest) and the nonces are the
`scramp` library's (RFC 5802/7677, kept by the pg8000 maintainers); this module adds what is Kafka's: the
credential format, the `=2C`/`=3D` escapes of user names, the minimum iteration count, and the messages a
client is told. Like Kafka, a client learns only that its credentials were invalid, never whether the user
exists; the reason is kept in `failure_reason` for the broker's log.

Credentials are derived here with hashlib rather than scramp, because Kafka hashes the password's UTF-8
bytes as they are, where scramp applies SASLprep first (the two differ for some non-ASCII passwords).
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# Kafka's ScramMechanism: the hash, and the iteration counts a credential may have.
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


class ScramError(ValueError):
    """A credential or mechanism Kafka would refuse (whose fault: whoever configured it)."""


class SaslAuthenticationError(Exception):
    """The exchange failed; `message` is what Kafka tells the client in SaslAuthenticate, `errno` its code."""

    def __init__(self, message: str, errno: int = SASL_AUTHENTICATION_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.errno = errno


def unsupported_mechanism(mechanism: str) -> SaslAuthenticationError:
    """SaslHandshake's refusal of a mechanism the listener has not enabled (code 33)."""
    return SaslAuthenticationError(f"Unsupported SASL mechanism {mechanism}", UNSUPPORTED_SASL_MECHANISM)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __str__(self) -> str:
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def parse(cls, text: str) -> ScramCredential:
        fields = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")  # base64 padding keeps its '=' in the value
            if not sep:
                raise ScramError(f"malformed SCRAM credential field {part!r}")
            fields[key.strip()] = value.strip()
        missing = {"salt", "stored_key", "server_key", "iterations"} - fields.keys()
        if missing:
            raise ScramError(f"SCRAM credential lacks {', '.join(sorted(missing))}")
        try:
            return cls(salt=base64.b64decode(fields["salt"], validate=True),
                       stored_key=base64.b64decode(fields["stored_key"], validate=True),
                       server_key=base64.b64decode(fields["server_key"], validate=True),
                       iterations=int(fields["iterations"]))
        except (binascii.Error, ValueError) as e:
            raise ScramError(f"malformed SCRAM credential: {e}") from e


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ScramError(f"unknown SCRAM mechanism {mechanism!r} (known: {', '.join(MECHANISMS)})") from None


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """What `kafka-configs --add-config 'SCRAM-SHA-256=[iterations=8192,password=p]'` stores."""
    name = _hash_name(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(f"iterations for {mechanism} must be between {MIN_ITERATIONS} and {MAX_ITERATIONS},"
                         f" got {iterations}")
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    server_key = hmac.new(salted, b"Server Key", name).digest()
    return ScramCredential(salt, hashlib.new(name, client_key).digest(), server_key, iterations)


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials stores from the client's PBKDF2 output (KIP-554): the password never
    travels, only the salted password, from which the stored and server keys are derived as Kafka does."""
    name = _hash_name(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(f"iterations for {mechanism} must be between {MIN_ITERATIONS} and {MAX_ITERATIONS},"
                         f" got {iterations}")
    client_key = hmac.new(salted_password, b"Client Key", name).digest()
    server_key = hmac.new(salted_password, b"Server Key", name).digest()
    return ScramCredential(salt, hashlib.new(name, client_key).digest(), server_key, iterations)


def scram_credentials(user_config: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials among a user's config entries (the rest are quotas)."""
    return {m: ScramCredential.parse(v) for m, v in user_config.items() if m in MECHANISMS}


def unescape_sasl_name(sasl_name: str) -> str:
    """RFC 5802's saslname: `,` and `=` travel as `=2C` and `=3D` (Kafka's ScramFormatter.username)."""
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


class ScramState(enum.Enum):
    """Kafka's ScramSaslServer states."""

    RECEIVE_CLIENT_FIRST_MESSAGE = "receive client-first"
    RECEIVE_CLIENT_FINAL_MESSAGE = "receive client-final"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramServer:
    """The broker's side of one SCRAM exchange: client-first -> server-first, client-final -> server-final.

    `credentials(username)` answers the user's credential for this mechanism, or None for an unknown user.
    `server_nonce` is for tests (RFC 7677's vector); a random one is made otherwise.
    """

    def __init__(self, mechanism: str, credentials: Callable[[str], ScramCredential | None], *,
                 server_nonce: str | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise unsupported_mechanism(mechanism)
        self.mechanism = mechanism
        self._credentials = credentials
        # Imported here, not with the module: scramp (and asn1crypto under it) is a tenth of a broker's import
        # time, and only a SCRAM login needs it.
        import scramp

        self._scram = scramp.ScramMechanism(mechanism).make_server(self._auth_info, s_nonce=server_nonce)
        self.state = ScramState.RECEIVE_CLIENT_FIRST_MESSAGE
        self.username: str | None = None
        self.failure_reason: str | None = None
        self._lookup_failure: str | None = None  # scramp wraps whatever the lookup raises

    @property
    def complete(self) -> bool:
        return self.state is ScramState.COMPLETE

    @property
    def principal(self) -> str:
        """Kafka's principal for the authenticated user."""
        if not self.complete:
            raise SaslAuthenticationError("SCRAM exchange is not complete", ILLEGAL_SASL_STATE)
        return f"User:{self.username}"

    def _auth_info(self, sasl_name: str) -> tuple[bytes, bytes, bytes, int]:
        self.username = unescape_sasl_name(sasl_name)
        credential = self._credentials(self.username)
        if credential is None:
            self._lookup_failure = f"unknown user {self.username!r}"
        elif credential.iterations < MIN_ITERATIONS:
            self._lookup_failure = (f"Iterations {credential.iterations} is less than the minimum "
                                    f"{MIN_ITERATIONS} for {self.mechanism}")
        if self._lookup_failure:
            import scramp

            raise scramp.ScramException(self._lookup_failure)
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def _fail(self, reason: str, message: str | None = None) -> SaslAuthenticationError:
        self.state = ScramState.FAILED
        self.failure_reason = reason
        return SaslAuthenticationError(message or (
            f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
            f"{self.mechanism}"))

    def evaluate_response(self, token: bytes) -> bytes:
        """One SaslAuthenticate token in, the answer out; raises SaslAuthenticationError on failure."""
        import scramp

        state = self.state
        if state in (ScramState.COMPLETE, ScramState.FAILED):
            raise SaslAuthenticationError(f"Unexpected challenge in Sasl server state {state.name}",
                                          ILLEGAL_SASL_STATE)
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("the SCRAM message is not UTF-8") from None
        try:
            if state is ScramState.RECEIVE_CLIENT_FIRST_MESSAGE:
                return self._client_first(text)
            self._scram.set_client_final(text)
            answer = self._scram.get_server_final()
        except scramp.ScramException as e:
            raise self._fail(self._lookup_failure or str(e)) from None
        self.state = ScramState.COMPLETE
        return answer.encode("utf-8")

    def _client_first(self, text: str) -> bytes:
        # Kafka accepts only gs2 flag `n` (no channel binding). An authorization id is refused (scramp's
        # rule; Kafka accepts one naming the user himself, which no Kafka client sends).
        if not text.startswith("n,"):
            import scramp

            raise scramp.ScramException("Invalid SCRAM client first message format")
        self._scram.set_client_first(text)
        self.state = ScramState.RECEIVE_CLIENT_FINAL_MESSAGE
        return self._scram.get_server_first().encode("utf-8")
