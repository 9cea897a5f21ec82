"""DeleteRecords (21, Kafka 0.11, KIP-107): move each partition's log start offset up to the offset given (-1: the
high watermark), on its leader; the answer names the low watermark, the least log start offset of the replicas.
v1 is v0 (throttled after the answer, KIP-219); v2 is v1, flexible."""

from ..types import Array, CompactArray, CompactString, FlexibleSchema, Int16, Int32, Int64, Schema, String

API_KEY = 21

#: The offset that means "the high watermark" (DeleteRecordsRequest.HIGH_WATERMARK)
HIGH_WATERMARK = -1


def _request(version: int) -> Schema:
    if version >= 2:
        return FlexibleSchema(
            ("topics", CompactArray(("name", CompactString),
                                    ("partitions", CompactArray(("partition_index", Int32), ("offset", Int64))))),
            ("timeout_ms", Int32), name=f"DeleteRecordsRequestV{version}")
    return Schema(("topics", Array(("name", String), ("partitions", Array(("partition_index", Int32),
                                                                          ("offset", Int64))))),
                  ("timeout_ms", Int32), name=f"DeleteRecordsRequestV{version}")


def _response(version: int) -> Schema:
    partition = (("partition_index", Int32), ("low_watermark", Int64), ("error_code", Int16))
    if version >= 2:
        return FlexibleSchema(("throttle_time_ms", Int32), ("topics", CompactArray(
                                  ("name", CompactString), ("partitions", CompactArray(*partition)))),
                              name=f"DeleteRecordsResponseV{version}")
    return Schema(("throttle_time_ms", Int32), ("topics", Array(("name", String), ("partitions", Array(*partition)))),
                  name=f"DeleteRecordsResponseV{version}")


REQUEST = {version: _request(version) for version in range(3)}
RESPONSE = {version: _response(version) for version in range(3)}
