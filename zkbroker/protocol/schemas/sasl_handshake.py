"""SaslHandshake (17): the client names the SASL mechanism it wants (KIP-43). v0's tokens then travel as bare
size-prefixed frames (Kafka 0.10.0); v1 (Kafka 1.0, KIP-152) wraps them in SaslAuthenticate requests."""

from ..types import Array, Int16, Schema, String

API_KEY = 17

REQUEST = {version: Schema(("mechanism", String), name=f"SaslHandshakeRequestV{version}") for version in range(2)}

RESPONSE = {
    version: Schema(("error_code", Int16), ("mechanisms", Array(String)), name=f"SaslHandshakeResponseV{version}")
    for version in range(2)
}
