"""AddPartitionsToTxn (24, Kafka 0.11, KIP-98): a transactional producer names the partitions it is about to
write to, before its first write to each, so that its coordinator will write their markers.

v1 is the same as v0 (responses before throttling); v2 the same (it may answer PRODUCER_FENCED); v3 is the
first flexible version. Kafka 3.6's v4-v5 (KIP-890's batched form, brokers only) are not here. Schemas only:
the broker does not serve it yet (issue 27).
"""

from ..types import Array, CompactArray, CompactString, FlexibleSchema, Int16, Int32, Int64, Schema, String

API_KEY = 24


def _request(version: int) -> Schema:
    if version < 3:
        return Schema(("transactional_id", String), ("producer_id", Int64), ("producer_epoch", Int16),
                      ("topics", Array(("name", String), ("partitions", Array(Int32)))),
                      name=f"AddPartitionsToTxnRequestV{version}")
    return FlexibleSchema(("transactional_id", CompactString), ("producer_id", Int64), ("producer_epoch", Int16),
                          ("topics", CompactArray(("name", CompactString), ("partitions", CompactArray(Int32)))),
                          name=f"AddPartitionsToTxnRequestV{version}")


def _response(version: int) -> Schema:
    if version < 3:
        return Schema(("throttle_time_ms", Int32),
                      ("results", Array(("name", String),
                                        ("partitions", Array(("partition_index", Int32), ("error_code", Int16))))),
                      name=f"AddPartitionsToTxnResponseV{version}")
    return FlexibleSchema(
        ("throttle_time_ms", Int32),
        ("results", CompactArray(("name", CompactString),
                                 ("partitions", CompactArray(("partition_index", Int32), ("error_code", Int16))))),
        name=f"AddPartitionsToTxnResponseV{version}")


REQUEST = {version: _request(version) for version in range(4)}
RESPONSE = {version: _response(version) for version in range(4)}
