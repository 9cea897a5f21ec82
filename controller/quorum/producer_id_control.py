"""ProducerIdControlManager: hands out blocks of producer ids to brokers (KIP-730), each block a
ProducerIdsRecord holding the next id free, so a new active controller never gives the same id twice."""

from __future__ import annotations

from typing import Any

from zkbroker.admin_checks import ApiError
from zkbroker.metadata.records import PRODUCER_IDS, MetadataRecord, record
from zkbroker.protocol.errors import ErrorCode

from .cluster_control import ClusterControlManager
from .events import ControllerResult
from .timeline import SnapshotRegistry, TimelineValue

#: Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
BLOCK_SIZE = 1000


class ProducerIdControlManager:
    def __init__(self, registry: SnapshotRegistry, cluster: ClusterControlManager) -> None:
        self.cluster = cluster
        # (broker id, broker epoch, next producer id) of the last block handed out
        self.last_block: TimelineValue[tuple[int, int, int]] = TimelineValue(registry, (-1, -1, 0))

    @property
    def next_producer_id(self) -> int:
        return self.last_block.get()[2]

    def generate_next_block(self, broker_id: int, broker_epoch: int) -> ControllerResult:
        """AllocateProducerIds: ``{"error_code", "producer_id_start", "producer_id_len"}``."""
        try:
            self.cluster.check_broker_epoch(broker_id, broker_epoch)
        except ApiError as e:
            return ControllerResult([], {"error_code": e.code, "producer_id_start": -1, "producer_id_len": 0})
        start = self.next_producer_id
        if start > (1 << 63) - 1 - BLOCK_SIZE:
            return ControllerResult([], {"error_code": ErrorCode.UNKNOWN, "producer_id_start": -1,
                                         "producer_id_len": 0})
        rec = record(PRODUCER_IDS, broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=start + BLOCK_SIZE)
        return ControllerResult([rec], {"error_code": ErrorCode.NONE, "producer_id_start": start,
                                        "producer_id_len": BLOCK_SIZE})

    def replay(self, rec: Any) -> None:
        if rec.next_producer_id <= self.next_producer_id:
            raise ValueError(f"ProducerIdsRecord's next producer id {rec.next_producer_id} is not past "
                             f"{self.next_producer_id}")
        self.last_block.set((rec.broker_id, rec.broker_epoch, rec.next_producer_id))

    def snapshot_records(self) -> list[MetadataRecord]:
        broker_id, broker_epoch, next_id = self.last_block.get()
        if next_id == 0:
            return []
        return [record(PRODUCER_IDS, broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=next_id)]
