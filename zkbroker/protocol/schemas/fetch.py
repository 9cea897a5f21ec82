"""Fetch (1): read message sets from partition leaders (consumers and follower replicas).

Request: replica_id (-1 for consumers; a broker id for followers), max_wait_ms, min_bytes, and
per partition fetch_offset and max_bytes; v3 adds a response-wide max_bytes. Responses: v1+
put throttle_time_ms *first*; per partition error_code, high_watermark and the message set.
The server encodes responses with ``zkbroker.protocol.fetch_response`` so message sets go
from the segment files with sendfile; these schemas serve clients, followers and tests.
"""

from ..types import Array, Int16, Int32, Int64, Records, Schema, String

API_KEY = 1

_REQUEST_TOPICS = Array(
    ("topic", String),
    ("partitions", Array(("partition", Int32), ("fetch_offset", Int64), ("max_bytes", Int32))),
)

REQUEST = {
    version: Schema(
        ("replica_id", Int32),
        ("max_wait_ms", Int32),
        ("min_bytes", Int32),
        ("topics", _REQUEST_TOPICS),
        name=f"FetchRequestV{version}",
    )
    for version in (0, 1, 2)
}
REQUEST[3] = Schema(
    ("replica_id", Int32),
    ("max_wait_ms", Int32),
    ("min_bytes", Int32),
    ("max_bytes", Int32),
    ("topics", _REQUEST_TOPICS),
    name="FetchRequestV3",
)

_RESPONSE_TOPICS = Array(
    ("topic", String),
    (
        "partitions",
        Array(
            ("partition", Int32),
            ("error_code", Int16),
            ("high_watermark", Int64),
            ("records", Records),
        ),
    ),
)

RESPONSE = {0: Schema(("topics", _RESPONSE_TOPICS), name="FetchResponseV0")}
for _version in (1, 2, 3):
    RESPONSE[_version] = Schema(
        ("throttle_time_ms", Int32),
        ("topics", _RESPONSE_TOPICS),
        name=f"FetchResponseV{_version}",
    )
