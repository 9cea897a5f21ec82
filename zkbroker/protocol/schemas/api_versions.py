"""ApiVersions (18): which API versions the broker speaks (KIP-35, Kafka 0.10; not in 0.8.2).

Modern clients open every connection with it, so we must answer it although 0.8.2 never did.
The body of v0-v2 requests is empty. v1 adds throttle_time_ms, last.

v3 (KIP-511, Kafka 2.4) is the first flexible version: the request names the client software
(checked by ``valid_client_software``, Kafka's rule), and the response carries three tagged
fields (KIP-584, Kafka 2.7): the features the broker supports (tag 0), the epoch of the
cluster's finalized features (tag 1, -1 when unknown) and those features (tag 2). Its response
header stays v0 (headers.py), so a client can read the answer whatever version it asked.
"""

import re

from ..types import Array, CompactArray, CompactString, FlexibleSchema, Int16, Int32, Int64, Schema, TaggedField

API_KEY = 18

_API_KEYS = Array(("api_key", Int16), ("min_version", Int16), ("max_version", Int16))

#: Kafka's pattern for ClientSoftwareName and ClientSoftwareVersion (ApiVersionsRequest.isValid): letters,
#: digits, '-' and '.', starting and ending with a letter or digit. A request that breaks it is answered
#: INVALID_REQUEST (42).
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def valid_client_software(name: str, version: str) -> bool:
    """Whether a v3+ request's client software name and version pass Kafka's check."""
    return _SOFTWARE.fullmatch(name) is not None and _SOFTWARE.fullmatch(version) is not None


REQUEST = {
    0: Schema(name="ApiVersionsRequestV0"),
    1: Schema(name="ApiVersionsRequestV1"),
    2: Schema(name="ApiVersionsRequestV2"),
    3: FlexibleSchema(
        ("client_software_name", CompactString),
        ("client_software_version", CompactString),
        name="ApiVersionsRequestV3",
    ),
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
    3: FlexibleSchema(
        ("error_code", Int16),
        ("api_keys", CompactArray(("api_key", Int16), ("min_version", Int16), ("max_version", Int16))),
        ("throttle_time_ms", Int32),
        tagged=(
            TaggedField(0, "supported_features", CompactArray(
                ("name", CompactString), ("min_version", Int16), ("max_version", Int16)), []),
            TaggedField(1, "finalized_features_epoch", Int64, -1),
            TaggedField(2, "finalized_features", CompactArray(
                ("name", CompactString), ("max_version_level", Int16), ("min_version_level", Int16)), []),
        ),
        name="ApiVersionsResponseV3",
    ),
}
