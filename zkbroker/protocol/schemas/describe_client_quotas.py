"""DescribeClientQuotas (48, Kafka 2.6, KIP-546): the quotas of the entities matching some components. A component
is an entity type (`user`, `client-id`), a match type (0 exact name, 1 the default, 2 any specified name) and
a name (null: the default); `strict` asks for entities with no other component. v1 is flexible (not served)."""

from ..types import Array, Boolean, Float64, Int8, Int16, Int32, NullableArray, NullableString, Schema, String

API_KEY = 48

REQUEST = {0: Schema(("components", Array(("entity_type", String), ("match_type", Int8), ("match", NullableString))),
                     ("strict", Boolean), name="DescribeClientQuotasRequestV0")}

RESPONSE = {0: Schema(("throttle_time_ms", Int32), ("error_code", Int16), ("error_message", NullableString),
                      ("entries", NullableArray(("entity", Array(("entity_type", String),
                                                                 ("entity_name", NullableString))),
                                                ("values", Array(("key", String), ("value", Float64))))),
                      name="DescribeClientQuotasResponseV0")}
