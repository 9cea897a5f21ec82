"""AllocateProducerIds (67): a KRaft broker asks the active controller for a block of producer ids (KIP-730),
which the controller records as a ProducerIdsRecord. Version 0, flexible."""

from ..types import FlexibleSchema, Int16, Int32, Int64

API_KEY = 67

REQUEST = {0: FlexibleSchema(("broker_id", Int32), ("broker_epoch", Int64), name="AllocateProducerIdsRequestV0")}

RESPONSE = {
    0: FlexibleSchema(("throttle_time_ms", Int32), ("error_code", Int16), ("producer_id_start", Int64),
                      ("producer_id_len", Int32), name="AllocateProducerIdsResponseV0"),
}
