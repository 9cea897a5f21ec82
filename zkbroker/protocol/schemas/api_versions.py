"""ApiVersions (18): which API versions the broker speaks (KIP-35, Kafka 0.10; not in 0.8.2).

Modern clients open every connection with it, so we must answer it although 0.8.2 never did.
The body of v0-v2 requests is empty. v1 adds throttle_time_ms, last.
"""

from ..types import Array, Int16, Int32, Schema

API_KEY = 18

_API_KEYS = Array(("api_key", Int16), ("min_version", Int16), ("max_version", Int16))

REQUEST = {
    0: Schema(name="ApiVersionsRequestV0"),
    1: Schema(name="ApiVersionsRequestV1"),
    2: Schema(name="ApiVersionsRequestV2"),
}

RESPONSE = {
    0: Schema(("error_code", Int16), ("api_keys", _API_KEYS), name="ApiVersionsResponseV0"),
    1: Schema(
        ("error_code", Int16),
        ("api_keys", _API_KEYS),
        ("throttle_time_ms", Int32),
        name="ApiVersionsResponseV1",
    ),
    2: Schema(
        ("error_code", Int16),
        ("api_keys", _API_KEYS),
        ("throttle_time_ms", Int32),
        name="ApiVersionsResponseV2",
    ),
}
