"""OffsetDelete (47, Kafka 2.4, KIP-496): delete a group's committed offsets of topics its consumers no longer
subscribe to. One version, not flexible."""

from ..types import Array, Int16, Int32, Schema, String

API_KEY = 47

REQUEST = {0: Schema(("group_id", String),
                     ("topics", Array(("name", String), ("partitions", Array(("partition_index", Int32))))),
                     name="OffsetDeleteRequestV0")}

RESPONSE = {0: Schema(("error_code", Int16), ("throttle_time_ms", Int32),
                      ("topics", Array(("name", String),
                                       ("partitions", Array(("partition_index", Int32), ("error_code", Int16))))),
                      name="OffsetDeleteResponseV0")}
