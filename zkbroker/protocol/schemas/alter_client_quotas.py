"""AlterClientQuotas (49, Kafka 2.6, KIP-546): set or remove quota keys of entities (`user`, `client-id`, a null
name for the default), one result per entry. v1 is flexible (not served)."""

from ..types import Array, Boolean, Float64, Int16, Int32, NullableString, Schema, String

API_KEY = 49

_ENTITY = Array(("entity_type", String), ("entity_name", NullableString))

REQUEST = {0: Schema(("entries", Array(("entity", _ENTITY),
                                       ("ops", Array(("key", String), ("value", Float64), ("remove", Boolean))))),
                     ("validate_only", Boolean), name="AlterClientQuotasRequestV0")}

RESPONSE = {0: Schema(("throttle_time_ms", Int32),
                      ("entries", Array(("error_code", Int16), ("error_message", NullableString), ("entity", _ENTITY))),
                      name="AlterClientQuotasResponseV0")}
