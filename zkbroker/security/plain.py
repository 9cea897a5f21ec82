"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer checks it, with the users of a JAAS-style
`sasl.jaas.config` (`PlainLoginModule required user_alice="secret";`): one token, `authzid NUL user NUL
password`; the authorization id, if any, must be the user himself."""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping

from .scram import SaslAuthenticationError

_OPTION = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


def plain_users(jaas_config: str) -> dict[str, str]:
    """The `user_<name>="<password>"` options of a JAAS login module line (Kafka's PlainServerCallbackHandler)."""
    return {key[len("user_"):]: value for key, value in _OPTION.findall(jaas_config) if key.startswith("user_")}


def authenticate_plain(token: bytes, users: Mapping[str, str]) -> str:
    """The principal `User:<name>` for a valid token; SaslAuthenticationError (code 58) otherwise."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
    try:
        authzid, username, password = (part.decode("utf-8") for part in parts)
    except UnicodeDecodeError:
        raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
    if not username or not password:
        raise SaslAuthenticationError("Authentication failed: username or password not specified")
    expected = users.get(username)
    # compare_digest even for an unknown user, so the time taken does not tell whether the user exists
    ok = hmac.compare_digest(password.encode(), (expected if expected is not None else "\0" + password).encode())
    if not ok or expected is None:
        raise SaslAuthenticationError("Authentication failed: Invalid username or password")
    if authzid and authzid != username:
        raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                      "different from username")
    return f"User:{username}"
