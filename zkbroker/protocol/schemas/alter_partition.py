"""AlterPartition (56, was AlterIsr, KIP-497): a partition leader asks the controller to change the ISR, naming
the leader epoch and the partition epoch it knows; the controller refuses a request made on a stale view
(FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION) and answers each partition with its state after the change.

All versions flexible. v1 adds LeaderRecoveryState (KIP-704); v2 names topics by id instead of by name
(KIP-841); v3 gives each ISR member with its broker epoch (NewIsrWithEpochs, KIP-903) instead of NewIsr.
"""

from ..types import CompactArray, CompactString, FlexibleSchema, Int8, Int16, Int32, Int64, Uuid

API_KEY = 56


def _request(version: int) -> FlexibleSchema:
    partition = [("partition_index", Int32), ("leader_epoch", Int32)]
    if version >= 3:
        partition.append(("new_isr_with_epochs", CompactArray(("broker_id", Int32), ("broker_epoch", Int64))))
    else:
        partition.append(("new_isr", CompactArray(Int32)))
    if version >= 1:
        partition.append(("leader_recovery_state", Int8))
    partition.append(("partition_epoch", Int32))
    topic = ("topic_id", Uuid) if version >= 2 else ("topic_name", CompactString)
    return FlexibleSchema(("broker_id", Int32), ("broker_epoch", Int64),
                          ("topics", CompactArray(topic, ("partitions", CompactArray(*partition)))),
                          name=f"AlterPartitionRequestV{version}")


def _response(version: int) -> FlexibleSchema:
    partition = [("partition_index", Int32), ("error_code", Int16), ("leader_id", Int32), ("leader_epoch", Int32),
                 ("isr", CompactArray(Int32))]
    if version >= 1:
        partition.append(("leader_recovery_state", Int8))
    partition.append(("partition_epoch", Int32))
    topic = ("topic_id", Uuid) if version >= 2 else ("topic_name", CompactString)
    return FlexibleSchema(("throttle_time_ms", Int32), ("error_code", Int16),
                          ("topics", CompactArray(topic, ("partitions", CompactArray(*partition)))),
                          name=f"AlterPartitionResponseV{version}")


REQUEST = {version: _request(version) for version in range(4)}
RESPONSE = {version: _response(version) for version in range(4)}
