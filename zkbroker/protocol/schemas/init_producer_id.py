"""InitProducerId (22, Kafka 0.11, KIP-98): a producer id and epoch for an idempotent producer.

Only a null transactional_id is served (idempotence without transactions). v1 is the same as v0.
The response puts throttle_time_ms first.
"""

from ..types import Int16, Int32, Int64, NullableString, Schema

API_KEY = 22

REQUEST = {
    version: Schema(
        ("transactional_id", NullableString),
        ("transaction_timeout_ms", Int32),
        name=f"InitProducerIdRequestV{version}",
    )
    for version in (0, 1)
}

RESPONSE = {
    version: Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("producer_id", Int64),
        ("producer_epoch", Int16),
        name=f"InitProducerIdResponseV{version}",
    )
    for version in (0, 1)
}
