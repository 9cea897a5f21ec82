"""ListTransactions (66, Kafka 3.0, KIP-664): the transactional ids a coordinator holds, filtered by state
(Kafka's names) and producer id; unknown state filters come back named. v0, flexible (Kafka 3.8's v1 duration
filter and 4.0's v2 id pattern are not here)."""

from ..types import CompactArray, CompactString, FlexibleSchema, Int16, Int32, Int64

API_KEY = 66

REQUEST = {0: FlexibleSchema(("state_filters", CompactArray(CompactString)),
                             ("producer_id_filters", CompactArray(Int64)), name="ListTransactionsRequestV0")}
RESPONSE = {0: FlexibleSchema(
    ("throttle_time_ms", Int32), ("error_code", Int16), ("unknown_state_filters", CompactArray(CompactString)),
    ("transaction_states", CompactArray(("transactional_id", CompactString), ("producer_id", Int64),
                                        ("transaction_state", CompactString))),
    name="ListTransactionsResponseV0")}
