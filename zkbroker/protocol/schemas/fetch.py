"""Fetch (1): read message sets from partition leaders (consumers and follower replicas).

Request: replica_id (-1 for consumers; a broker id for followers), max_wait_ms, min_bytes, and
per partition fetch_offset and max_bytes; v3 adds a response-wide max_bytes; v4 (Kafka 0.11) adds
isolation_level and may receive record batches (magic 2); v5 adds each partition's log_start_offset
(followers'); v7 adds incremental fetch sessions (KIP-227: session_id, session_epoch, forgotten topics;
a broker may always answer session 0, "no session", and does here); v9 adds each partition's
current_leader_epoch (KIP-320); v10 may receive zstd. Responses: v1+ put throttle_time_ms *first*; per
partition error_code, high_watermark and the message set; v4 adds last_stable_offset and
aborted_transactions; v5 log_start_offset; v7 a top-level error_code and session_id. The server encodes
responses with ``zkbroker.protocol.fetch_response`` so message sets go from the segment files with
sendfile; these schemas serve clients, followers and tests.
"""

from ..types import Array, Int8, Int16, Int32, Int64, NullableArray, Records, Schema, String

API_KEY = 1


def _request(version: int) -> Schema:
    partition = [("partition", Int32)]
    if version >= 9:
        partition.append(("current_leader_epoch", Int32))
    partition.append(("fetch_offset", Int64))
    if version >= 5:
        partition.append(("log_start_offset", Int64))
    partition.append(("max_bytes", Int32))
    fields = [("replica_id", Int32), ("max_wait_ms", Int32), ("min_bytes", Int32)]
    if version >= 3:
        fields.append(("max_bytes", Int32))
    if version >= 4:
        fields.append(("isolation_level", Int8))
    if version >= 7:
        fields += [("session_id", Int32), ("session_epoch", Int32)]
    fields.append(("topics", Array(("topic", String), ("partitions", Array(*partition)))))
    if version >= 7:
        fields.append(("forgotten_topics", Array(("topic", String), ("partitions", Array(Int32)))))
    return Schema(*fields, name=f"FetchRequestV{version}")


def _response(version: int) -> Schema:
    partition = [("partition", Int32), ("error_code", Int16), ("high_watermark", Int64)]
    if version >= 4:
        partition.append(("last_stable_offset", Int64))
    if version >= 5:
        partition.append(("log_start_offset", Int64))
    if version >= 4:
        partition.append(("aborted_transactions", NullableArray(("producer_id", Int64), ("first_offset", Int64))))
    partition.append(("records", Records))
    fields = []
    if version >= 1:
        fields.append(("throttle_time_ms", Int32))
    if version >= 7:
        fields += [("error_code", Int16), ("session_id", Int32)]
    fields.append(("topics", Array(("topic", String), ("partitions", Array(*partition)))))
    return Schema(*fields, name=f"FetchResponseV{version}")


REQUEST = {version: _request(version) for version in range(11)}
RESPONSE = {version: _response(version) for version in range(11)}
