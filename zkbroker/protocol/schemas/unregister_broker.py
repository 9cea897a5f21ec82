"""UnregisterBroker (64): removes a broker's registration for good (KIP-631; an admin's request, forwarded to
the active controller). Version 0, flexible."""

from ..types import CompactNullableString, FlexibleSchema, Int16, Int32

API_KEY = 64

REQUEST = {0: FlexibleSchema(("broker_id", Int32), name="UnregisterBrokerRequestV0")}

RESPONSE = {
    0: FlexibleSchema(("throttle_time_ms", Int32), ("error_code", Int16), ("error_message", CompactNullableString),
                      name="UnregisterBrokerResponseV0"),
}
