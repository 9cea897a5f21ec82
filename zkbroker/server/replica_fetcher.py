"""Follower fetchers (Kafka's ReplicaFetcherManager / ReplicaFetcherThread), as asyncio tasks.

One fetcher per source broker carries every partition this broker follows from it. It sends Fetch with
`replica_id` = our broker id (so the leader does not cap it at the high watermark, and learns our log end
offset from the fetch offset), appends what comes back as it is (offsets already assigned by the leader),
and keeps the follower's HW = min(own LEO, leader's HW).

OFFSET_OUT_OF_RANGE as 0.8.2 handles it: if the leader's log end is below ours (an unclean election made a
shorter log the leader), truncate to the leader's log end — data is lost, and we say so loudly; otherwise
our fetch offset fell below the leader's log start (retention), so start over at the leader's start — or,
with replica.out.of.range.reset=keep-log (KAFKA-2143), keep the log when the leader's start is not above
our end (zkbroker/server/offset_out_of_range.py decides).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from zkbroker.client.async_connection import AsyncBrokerConnection
from zkbroker.client.security import AuthenticationError, ClientSecurity, inter_broker_security
from zkbroker.config import KafkaConfig
from zkbroker.fault_points import FAULTS
from zkbroker.log.log import EARLIEST_TIME, LATEST_TIME
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode, ProtocolError
from zkbroker.server import offset_out_of_range
from zkbroker.server.partition import Partition
from zkbroker.topic_partition import TopicPartition

log = logging.getLogger("zkbroker.server.ReplicaFetcherThread")

ERROR_BACKOFF_S = 1.0
#: Fetch v5 (Kafka 1.0): the first that carries each side's log start offset, which is how a follower learns
#: that DeleteRecords moved its leader's (KIP-107) and how the leader learns the follower followed. The records
#: come as the leader's log holds them at any version: a follower's fetch is never converted.
FETCH_VERSION = 5
NO_RESPONSE_LIMIT = 0x7FFFFFFF  # replica.fetch.max.bytes caps each partition, as v0 did; nothing caps the sum
HELD_POLL_S = 0.05  # how often held fetchers look whether the lab released them (fault point hold_fetchers)


@dataclass(frozen=True)
class SourceBroker:
    broker_id: int
    host: str
    port: int


class ReplicaFetcher:
    def __init__(self, config: KafkaConfig, source: SourceBroker, security: ClientSecurity | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.source = source
        self.name = f"ReplicaFetcherThread-0-{source.broker_id}"
        self.partitions: dict[TopicPartition, Partition] = {}
        self._max_bytes = config["replica.fetch.max.bytes"]
        self._max_wait_ms = config["replica.fetch.wait.max.ms"]
        self._min_bytes = config["replica.fetch.min.bytes"]
        self._out_of_range_reset = config["replica.out.of.range.reset"]
        self._wake = asyncio.Event()
        self._stopped = False
        self._connection = AsyncBrokerConnection(source.host, source.port, client_id=self.name,
                                                 timeout_s=config["replica.socket.timeout.ms"] / 1000.0,
                                                 security=security)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def add(self, partition: Partition) -> None:
        self.partitions[partition.topic_partition] = partition
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def stop(self) -> None:
        # The flag as well as the cancel: Python 3.11's wait_for can swallow a cancellation that arrives
        # together with a connection error, and the loop would then go on forever.
        self._stopped = True
        self._wake.set()
        self._task.cancel()
        await asyncio.wait({self._task}, timeout=5)
        self._connection.close()

    async def _run(self) -> None:
        while not self._stopped:
            if not self.partitions:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                await self._fetch_once()
            except AuthenticationError as e:
                # A broker whose credentials the leader refuses cannot replicate: say so plainly, every time
                # (once per second), since the partition stays out of the ISR until the config is fixed.
                log.error("[%s], Authentication with broker %d at %s:%d failed, cannot fetch: %s", self.name,
                          self.source.broker_id, self.source.host, self.source.port, e)
                self._connection.close()
                await asyncio.sleep(ERROR_BACKOFF_S)
            except (OSError, ProtocolError) as e:
                log.warning("[%s], Error in fetch from broker %d: %s", self.name, self.source.broker_id, e)
                self._connection.close()
                await asyncio.sleep(ERROR_BACKOFF_S)
            except Exception:  # noqa: BLE001 - as 0.8.2's AbstractFetcherThread: say it, back off, fetch again
                # A bug or a refused append must not end the fetcher silently (its partitions would stop
                # replicating with nothing in the log): 0.8.2 logged "Error in fetch" and went on.
                log.exception("[%s], Error in fetch from broker %d", self.name, self.source.broker_id)
                self._connection.close()
                await asyncio.sleep(ERROR_BACKOFF_S)

    async def _fetch_once(self) -> None:
        for partition in [p for p in self.partitions.values() if p.needs_epoch_truncation]:
            if self._still_ours(partition, partition.leader_epoch):  # not removed while an earlier one waited
                await self._truncate_by_leader_epoch(partition)
        if FAULTS.fetchers_held:  # the lab's fault point: a follower that has "not fetched yet"
            await asyncio.sleep(HELD_POLL_S)
            return
        # Every fetch names every partition we follow from this broker (as 0.8.2's did), so this loop and the
        # one over the answer run for thousands of partitions twice a second even when idle: keep them lean.
        max_bytes = self._max_bytes
        wanted: dict[TopicPartition, tuple[Partition, int, int]] = {}
        by_topic: dict[str, list] = {}
        for tp, partition in self.partitions.items():
            offset = partition.log.log_end_offset
            wanted[tp] = (partition, offset, partition.leader_epoch)
            rows = by_topic.get(tp[0])
            if rows is None:
                rows = by_topic[tp[0]] = []
            rows.append({"partition": tp[1], "fetch_offset": offset, "log_start_offset": partition.log.log_start_offset,
                         "max_bytes": max_bytes})
        request = {"replica_id": self.broker_id, "max_wait_ms": self._max_wait_ms, "min_bytes": self._min_bytes,
                   "max_bytes": NO_RESPONSE_LIMIT, "isolation_level": 0,
                   "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}
        response = await self._connection.send(ApiKey.FETCH, FETCH_VERSION, request)
        backoff = False
        current = self.partitions
        for topic_entry in response.topics:
            topic = topic_entry.topic
            for entry in topic_entry.partitions:
                tp = (topic, entry.partition)
                partition, offset, leader_epoch = wanted.get(tp, (None, -1, -1))
                if partition is None or current.get(tp) is not partition or partition.log.log_end_offset != offset \
                        or partition.leader_epoch != leader_epoch:
                    continue  # removed or changed while we waited: this answer is stale
                if entry.error_code == ErrorCode.NONE:
                    self._append(partition, entry)
                elif entry.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self._handle_offset_out_of_range(partition)
                else:
                    log.warning("[%s], Error for partition [%s,%d] to broker %d: error code %d", self.name, *tp,
                                self.source.broker_id, entry.error_code)
                    backoff = True
        if backoff:
            await asyncio.sleep(ERROR_BACKOFF_S)

    def _append(self, partition: Partition, entry) -> None:
        records = entry.records
        if records is not None and len(records):
            partition.append_as_follower(records)
        high_watermark = min(partition.log.log_end_offset, entry.high_watermark)
        if high_watermark > partition.high_watermark:
            partition.high_watermark = high_watermark
            partition.log.on_high_watermark(high_watermark)
        # DeleteRecords on the leader: the follower drops the same records (capped at its own log end)
        partition.log.maybe_increment_log_start_offset(entry.log_start_offset)

    def _still_ours(self, partition: Partition, leader_epoch: int) -> bool:
        """After an await: whether this fetcher still follows the partition under the same LeaderAndIsr. A
        partition removed meanwhile (its broker became its leader, or follows another broker now) or told of a
        new leader epoch must not be truncated on an answer given for the old one: that would cut records a
        new leader has acknowledged (found by lab torture: a fetcher blocked on a paused broker truncated the
        partition its broker had led since)."""
        return self.partitions.get(partition.topic_partition) is partition and partition.leader_epoch == leader_epoch

    async def _handle_offset_out_of_range(self, partition: Partition) -> None:
        leader_epoch = partition.leader_epoch
        if FAULTS.out_of_range_held:  # the lab's fault point: widen the gap before we ask the leader (KAFKA-2143)
            await self._hold_after_out_of_range(partition)
            if not self._still_ours(partition, leader_epoch):
                return
        leader_end = await self._leader_offset(partition, LATEST_TIME)
        if not self._still_ours(partition, leader_epoch):
            return
        ours = partition.log_end_offset
        leader_start = None
        if offset_out_of_range.needs_leader_start(ours, leader_end):
            leader_start = await self._leader_offset(partition, EARLIEST_TIME)
            if not self._still_ours(partition, leader_epoch):
                return
        decision = offset_out_of_range.decide(ours, leader_end, leader_start, self._out_of_range_reset)
        tp = (partition.topic, partition.partition)
        leader = self.source.broker_id
        if decision.action == "truncate_to":
            log.warning("[%s], Replica %d for partition [%s,%d] reset its fetch offset from %d to current leader "
                        "%d's latest offset %d: the messages in between are lost (unclean leader election)",
                        self.name, self.broker_id, *tp, ours, leader, leader_end)
            partition.truncate_to(leader_end, f"OFFSET_OUT_OF_RANGE: truncation to leader {leader}'s "
                                              f"log end (an unclean leader election)")
        elif decision.action == "start_at":
            log.warning("[%s], Replica %d for partition [%s,%d] reset its fetch offset from %d to current leader "
                        "%d's start offset %d", self.name, self.broker_id, *tp, ours, leader, leader_start)
            partition.truncate_fully_and_start_at(
                leader_start, f"OFFSET_OUT_OF_RANGE: the whole log dropped, to start again at leader "
                              f"{leader}'s log start")
        else:  # keep-log (KAFKA-2143): nothing to truncate, the next fetch asks from our own end again
            log.warning("[%s], Replica %d for partition [%s,%d] keeps its log and fetches on from its end %d: current "
                        "leader %d's log now spans offsets %d to %d (replica.out.of.range.reset=keep-log)",
                        self.name, self.broker_id, *tp, ours, leader, leader_start, leader_end)

    async def _hold_after_out_of_range(self, partition: Partition) -> None:
        """Fault point hold_offset_out_of_range: wait here, between the OFFSET_OUT_OF_RANGE answer and the
        ListOffsets requests, until the lab releases us (or for the point's `ms`), so that writes can reach the
        leader in between as, in production, one sometimes does."""
        ms = FAULTS.out_of_range_ms
        offset = partition.log_end_offset
        log.warning("[%s], Fetch offset %d for partition [%s,%d] is out of range at leader %d; held %s before "
                    "asking it for its offsets (lab fault point hold_offset_out_of_range)", self.name, offset,
                    partition.topic, partition.partition, self.source.broker_id,
                    "until released" if ms is None else f"{ms} ms")
        FAULTS.out_of_range_fired(partition.topic, partition.partition, offset, self.source.broker_id)
        deadline = None if ms is None else asyncio.get_running_loop().time() + ms / 1000.0
        while FAULTS.out_of_range_held and not self._stopped \
                and (deadline is None or asyncio.get_running_loop().time() < deadline):
            await asyncio.sleep(HELD_POLL_S)

    async def _truncate_by_leader_epoch(self, partition: Partition) -> None:
        """KIP-101: ask the leader where our latest epoch ends there, and truncate to that (never further than
        our own log end); with no usable answer fall back to the high watermark, as KIP-101 does."""
        epoch = partition.epoch_cache.latest_epoch
        leader_epoch = partition.leader_epoch
        end_offset = -1
        if epoch >= 0:
            response = await self._connection.send(ApiKey.OFFSETS_FOR_LEADER_EPOCH, 0, {"topics": [
                {"topic": partition.topic, "partitions": [{"partition": partition.partition, "leader_epoch": epoch}]}]})
            if not self._still_ours(partition, leader_epoch):
                return  # the answer is for a transition that has been superseded
            entry = response.topics[0].partitions[0]
            if entry.error_code == ErrorCode.NONE:
                end_offset = entry.end_offset
        if end_offset < 0:
            target, why = partition.high_watermark, "its high watermark (no leader epoch answer)"
            reason = "high-watermark truncation on becoming a follower (no leader epoch answer)"
        else:
            target, why = min(end_offset, partition.log_end_offset), f"the end of leader epoch {epoch} at the leader"
            reason = f"leader-epoch truncation to the end of leader epoch {epoch} at the leader"
        if target < partition.log_end_offset:
            log.info("[%s], Truncating [%s,%d] from %d to offset %d, %s", self.name, partition.topic,
                     partition.partition, partition.log_end_offset, target, why)
            partition.truncate_to(target, reason)
        partition.needs_epoch_truncation = False

    async def _leader_offset(self, partition: Partition, timestamp: int) -> int:
        response = await self._connection.send(ApiKey.LIST_OFFSETS, 0, {
            "replica_id": self.broker_id,
            "topics": [{"topic": partition.topic, "partitions": [
                {"partition": partition.partition, "timestamp": timestamp, "max_num_offsets": 1}]}]})
        entry = response.topics[0].partitions[0]
        if entry.error_code != ErrorCode.NONE or not entry.offsets:
            raise ConnectionError(f"leader answered ListOffsets with error {entry.error_code}")
        return entry.offsets[0]


class ReplicaFetcherManager:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.security = inter_broker_security(config)  # the inter-broker listener's TLS and SASL, if any
        self.fetchers: dict[SourceBroker, ReplicaFetcher] = {}

    def add_partition(self, partition: Partition, source: SourceBroker) -> None:
        self.remove_partition(partition.topic_partition)
        fetcher = self.fetchers.get(source)
        if fetcher is None:
            fetcher = ReplicaFetcher(self.config, source, self.security)
            self.fetchers[source] = fetcher
        fetcher.add(partition)

    def remove_partition(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)

    async def shutdown(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        for fetcher in fetchers:
            await fetcher.stop()
