"""The transaction marker channel (Kafka 2.x's TransactionMarkerChannelManager, its I/O half): delivers the
end-transaction markers of decided transactions to each partition's leader with WriteTxnMarkers, and retries
until every partition has its marker.

One queue and one sender per leader broker: the markers waiting for a broker when its sender is free go out in
one request (Kafka drains its per-broker queue the same way), over the inter-broker connection the replica
fetchers use. The pure part -- which request goes where, what each answer means -- is
zkbroker/coordinator/transaction/markers.py. A partition without a leader, or whose leader answers a retriable
error or cannot be reached, is planned again against fresh metadata after `RETRY_BACKOFF_MS`; the delivery stops
when the caller says the transaction is no longer its to complete (this broker lost the coordinator's
partition) or a leader answers that a newer producer epoch or coordinator took over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from zkbroker.client.async_connection import AsyncBrokerConnection
from zkbroker.client.security import ClientSecurity
from zkbroker.coordinator.transaction import markers
from zkbroker.coordinator.transaction.markers import MarkerOutcome
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ProtocolError
from zkbroker.protocol.types import to_dict
from zkbroker.server.metadata_cache import MetadataCache
from zkbroker.topic_partition import TopicPartition

log = logging.getLogger("zkbroker.server.TransactionMarkerChannelManager")

RETRY_BACKOFF_MS = 100
REQUEST_TIMEOUT_S = 30.0
WRITE_TXN_MARKERS_VERSION = 0


@dataclass
class _Queued:
    marker: dict  # one entry of WriteTxnMarkers' "markers"
    answer: asyncio.Future = field(repr=False)


class _BrokerSender:
    """The markers waiting for one broker, sent one request at a time."""

    def __init__(self, broker_id: int, host: str, port: int, client_id: str, security: ClientSecurity | None) -> None:
        self.broker_id = broker_id
        self.connection = AsyncBrokerConnection(host, port, client_id=client_id, timeout_s=REQUEST_TIMEOUT_S,
                                                security=security)
        self.queue: list[_Queued] = []
        self.task: asyncio.Task | None = None

    async def drain(self) -> None:
        while self.queue:
            batch, self.queue = self.queue, []
            body = {"markers": [q.marker for q in batch]}
            try:
                response = to_dict(await self.connection.send(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION,
                                                              body))
            except (ConnectionError, OSError, ProtocolError) as e:
                log.info("Could not send transaction markers to broker %d: %s; retrying", self.broker_id, e)
                for q in batch:
                    if not q.answer.done():
                        q.answer.set_result(None)
                continue
            by_producer = {m["producer_id"]: m for m in response["markers"]}
            for q in batch:
                answer = by_producer.get(q.marker["producer_id"])
                if not q.answer.done():
                    q.answer.set_result(None if answer is None else {"markers": [answer]})

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        self.connection.close()


class TransactionMarkerChannel:
    def __init__(self, broker_id: int, metadata_cache: MetadataCache, security: ClientSecurity | None = None) -> None:
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.security = security  # the inter-broker listener's TLS and SASL, if any
        self._senders: dict[int, _BrokerSender] = {}

    def _leader_of(self, tp: TopicPartition) -> int | None:
        snapshot = self.metadata_cache.snapshot
        state = snapshot.partitions.get(tp.topic, {}).get(tp.partition)
        if state is None or state.leader not in snapshot.brokers:
            return None
        return state.leader

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: Iterable[TopicPartition], still_current: Callable[[], bool]) -> bool:
        """Deliver the markers of one transaction: True once every partition has its marker, False when the
        delivery stopped (`still_current` turned false, or a leader answered that a newer producer epoch or
        coordinator epoch fenced this one)."""
        remaining = set(partitions)
        what = f"{'COMMIT' if commit else 'ABORT'} markers of producer {producer_id} epoch {producer_epoch}"
        while remaining:
            if not still_current():
                log.info("Stopped sending the %s: this broker no longer coordinates the transaction", what)
                return False
            plan = markers.plan(producer_id, producer_epoch, commit, coordinator_epoch, remaining, self._leader_of)
            answers = await asyncio.gather(*(self._send(leader, body["markers"][0])
                                             for leader, body in plan.requests.items()))
            for answer in answers:
                if answer is None:
                    continue  # unreachable: planned again
                for tp, outcome in markers.outcomes(answer).items():
                    if outcome == MarkerOutcome.WRITTEN:
                        remaining.discard(tp)
                    elif outcome == MarkerOutcome.FENCED:
                        log.info("Stopped sending the %s: [%s,%d] answered that a newer producer epoch or "
                                 "coordinator took over", what, tp.topic, tp.partition)
                        return False
                    elif outcome == MarkerOutcome.FATAL:
                        # Kafka throws here: a state no retry can leave. Dropping the partition lets the
                        # transaction complete instead of holding its id (and every LSO it touches) forever.
                        log.error("Giving up the marker of [%s,%d] in the %s: its leader answered an error no "
                                  "retry can fix", tp.topic, tp.partition, what)
                        remaining.discard(tp)
            if remaining:
                await asyncio.sleep(RETRY_BACKOFF_MS / 1000.0)
        return True

    async def _send(self, broker_id: int, marker: dict) -> dict | None:
        """The answer for one producer's marker (a WriteTxnMarkers response body), or None if it went nowhere."""
        broker = self.metadata_cache.snapshot.brokers.get(broker_id)
        if broker is None:
            return None
        sender = self._senders.get(broker_id)
        if sender is None or (sender.connection.host, sender.connection.port) != (broker.host, broker.port):
            if sender is not None:
                sender.close()
            sender = self._senders[broker_id] = _BrokerSender(broker_id, broker.host, broker.port,
                                                              f"broker-{self.broker_id}-txn-markers", self.security)
        loop = asyncio.get_running_loop()
        queued = _Queued(marker, loop.create_future())
        sender.queue.append(queued)
        if sender.task is None or sender.task.done():
            sender.task = loop.create_task(sender.drain())
        return await queued.answer

    def close(self) -> None:
        for sender in self._senders.values():
            sender.close()
        self._senders.clear()

