"""SaslAuthenticate (36, KIP-152): one SASL token in, the server's answer out, with Kafka's error code and message
on failure. v1 (KIP-368) adds the session's lifetime (0: no re-authentication asked); v2 is flexible (not served)."""

from ..types import Bytes, Int16, Int64, NullableString, Schema

API_KEY = 36

REQUEST = {version: Schema(("auth_bytes", Bytes), name=f"SaslAuthenticateRequestV{version}") for version in range(2)}

RESPONSE = {
    version: Schema(("error_code", Int16), ("error_message", NullableString), ("auth_bytes", Bytes),
                    *([("session_lifetime_ms", Int64)] if version >= 1 else []),
                    name=f"SaslAuthenticateResponseV{version}")
    for version in range(2)
}
