"""InitProducerId (22, Kafka 0.11, KIP-98): a producer id and epoch for an idempotent or transactional producer.

v1 is the same as v0; v2 is the first flexible version; v3 (KIP-360) adds the producer's current producer_id
and producer_epoch, so a transactional producer can bump its own epoch to recover from an abortable error; v4
is the same on the wire (it may answer PRODUCER_FENCED, which older versions get as INVALID_PRODUCER_EPOCH).
The response puts throttle_time_ms first. The broker serves v0-v1 with a null transactional_id (idempotence
without transactions); the later versions are here for the transaction coordinator to come (issue 27).
"""

from ..types import CompactNullableString, FlexibleSchema, Int16, Int32, Int64, NullableString, Schema

API_KEY = 22


def _request(version: int) -> Schema:
    if version < 2:
        return Schema(("transactional_id", NullableString), ("transaction_timeout_ms", Int32),
                      name=f"InitProducerIdRequestV{version}")
    fields = [("transactional_id", CompactNullableString), ("transaction_timeout_ms", Int32)]
    if version >= 3:
        fields += [("producer_id", Int64), ("producer_epoch", Int16)]
    return FlexibleSchema(*fields, name=f"InitProducerIdRequestV{version}")


def _response(version: int) -> Schema:
    fields = (("throttle_time_ms", Int32), ("error_code", Int16), ("producer_id", Int64), ("producer_epoch", Int16))
    schema = Schema if version < 2 else FlexibleSchema
    return schema(*fields, name=f"InitProducerIdResponseV{version}")


REQUEST = {version: _request(version) for version in range(5)}
RESPONSE = {version: _response(version) for version in range(5)}
