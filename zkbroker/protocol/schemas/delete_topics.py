"""DeleteTopics (20, Kafka 0.10.1, KIP-4): mark topics for deletion; answered by the controller once they are
gone from its metadata or the timeout passes.

v1 puts throttle_time_ms first in the response; v2 and v3 are the same (v3: a broker with
delete.topic.enable=false answers TOPIC_DELETION_DISABLED instead of INVALID_REQUEST). v4 is flexible; v5 adds
error_message (and may be throttled, KIP-599); v6 names topics by id (KIP-516), which zkbroker does not keep.
"""

from ..types import (
    Array,
    CompactArray,
    CompactNullableString,
    CompactString,
    FlexibleSchema,
    Int16,
    Int32,
    Schema,
    String,
)

API_KEY = 20


def _request(version: int) -> Schema:
    if version >= 4:
        return FlexibleSchema(("topic_names", CompactArray(CompactString)), ("timeout_ms", Int32),
                              name=f"DeleteTopicsRequestV{version}")
    return Schema(("topic_names", Array(String)), ("timeout_ms", Int32), name=f"DeleteTopicsRequestV{version}")


def _response(version: int) -> Schema:
    if version >= 4:
        result = [("name", CompactString), ("error_code", Int16)]
        if version >= 5:
            result.append(("error_message", CompactNullableString))
        return FlexibleSchema(("throttle_time_ms", Int32), ("responses", CompactArray(*result)),
                              name=f"DeleteTopicsResponseV{version}")
    return Schema(*([("throttle_time_ms", Int32)] if version >= 1 else []),
                  ("responses", Array(("name", String), ("error_code", Int16))),
                  name=f"DeleteTopicsResponseV{version}")


REQUEST = {version: _request(version) for version in range(6)}
RESPONSE = {version: _response(version) for version in range(6)}
