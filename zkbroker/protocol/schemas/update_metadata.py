"""UpdateMetadata (6): controller -> every broker, the metadata cache they answer Metadata from.

v0: partition states as in LeaderAndIsr, and each live broker with a single host and port.
"""

from ..types import Array, Int16, Int32, Schema, String
from .leader_and_isr import PARTITION_STATE

API_KEY = 6

REQUEST = {
    0: Schema(
        ("controller_id", Int32),
        ("controller_epoch", Int32),
        ("partition_states", Array(PARTITION_STATE)),
        ("live_brokers", Array(("broker_id", Int32), ("host", String), ("port", Int32))),
        name="UpdateMetadataRequestV0",
    )
}

RESPONSE = {0: Schema(("error_code", Int16), name="UpdateMetadataResponseV0")}
