"""DeleteTopics (20, Kafka 0.10.1, KIP-4): mark topics for deletion; answered by the controller once they are
gone from its metadata or the timeout passes.

v1 puts throttle_time_ms first in the response; v2 and v3 are the same (v3: a broker with
delete.topic.enable=false answers TOPIC_DELETION_DISABLED instead of INVALID_REQUEST). v4 on are flexible.
"""

from ..types import Array, Int16, Int32, Schema, String

API_KEY = 20

REQUEST = {version: Schema(("topic_names", Array(String)), ("timeout_ms", Int32), name=f"DeleteTopicsRequestV{version}")
           for version in range(4)}

RESPONSE = {
    version: Schema(*([("throttle_time_ms", Int32)] if version >= 1 else []),
                    ("responses", Array(("name", String), ("error_code", Int16))),
                    name=f"DeleteTopicsResponseV{version}")
    for version in range(4)
}
