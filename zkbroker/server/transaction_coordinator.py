"""The broker's transaction coordinator (Kafka 2.x's TransactionCoordinator and TransactionStateManager, their
I/O half): drives the pure decisions of zkbroker/coordinator/transaction/ from requests, timers and
`__transaction_state`.

- A transactional id belongs to partition `Utils.abs(id.hashCode) % transaction.state.log.num.partitions` of
  `__transaction_state` (created on first use, DESIGN §18); the leader of that partition is its coordinator,
  and the partition's leader epoch is the coordinator epoch every marker carries (a newer coordinator's markers
  fence an older one's on the partitions).
- A request asks the decisions for a transition; the transition is written to `__transaction_state` (acks=-1)
  and applied once written (`complete_transition`), or dropped when the write fails (`abort_transition`). Only
  then does the client hear the answer.
- EndTxn answers once PrepareCommit or PrepareAbort is written; the markers then go to every partition of the
  transaction through the marker channel, and CompleteCommit or CompleteAbort is written when all are in.
- Leadership: after every LeaderAndIsr and StopReplica the coordinator looks at the partitions it leads. A new
  one is loaded (its log read from the start; its ids answer COORDINATOR_LOAD_IN_PROGRESS meanwhile), and the
  transactions the log leaves between prepare and complete are completed: markers sent again, then the
  completion written. One it no longer leads is unloaded; its marker deliveries stop.
- KIP-890's verification (`verify`, when transaction.partition.verification.enable): a partition leader asks
  the id's coordinator -- itself, or another broker with DescribeTransactions -- whether a partition is in the
  producer's ongoing transaction before it takes the producer's first batch of it (coordinator/transaction/
  verification.py).
- Timers: every transaction.abort.timed.out.transaction.cleanup.interval.ms, transactions open past their
  timeout are aborted (their producer fenced by an epoch bump); every
  transaction.remove.expired.transaction.cleanup.interval.ms, ids idle past transactional.id.expiration.ms are
  removed (a tombstone).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from zkbroker import admin
from zkbroker.client.async_connection import AsyncBrokerConnection
from zkbroker.client.security import inter_broker_security
from zkbroker.config import KafkaConfig
from zkbroker.coordinator.transaction import decisions, loading
from zkbroker.coordinator.transaction.log_format import encode_key, encode_value, partition_for
from zkbroker.coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata
from zkbroker.coordinator.transaction.state import TransactionState
from zkbroker.coordinator.transaction.verification import verification_error
from zkbroker.fault_points import FAULTS
from zkbroker.log.log import Log
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode, ProtocolError
from zkbroker.protocol.message_set import build_message_set, iter_messages
from zkbroker.server.metadata_cache import MetadataCache
from zkbroker.server.producer_id_manager import ProducerIdManager
from zkbroker.server.replica_manager import ReplicaManager
from zkbroker.server.topic_creation import TopicAutoCreator
from zkbroker.server.transaction_markers import REQUEST_TIMEOUT_S, RETRY_BACKOFF_MS, TransactionMarkerChannel
from zkbroker.topic_partition import TopicPartition

log = logging.getLogger("zkbroker.server.TransactionCoordinator")

TOPIC = admin.TRANSACTION_STATE_TOPIC
#: How long a write to `__transaction_state` may wait for its ISR (Kafka's request.timeout.ms default).
WRITE_TIMEOUT_MS = 30_000

# How a failed write to `__transaction_state` reads to the client (TransactionStateManager's mapping).
_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_FOR_PARTITION: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE: ErrorCode.NOT_COORDINATOR,
}


_STATES = {state.kafka_name: state for state in TransactionState}


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class TxnStatePartition:
    """A `__transaction_state` partition this broker leads: its coordinator epoch and its transactional ids."""

    partition: int
    coordinator_epoch: int
    loading: bool = True
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)


class TransactionCoordinatorDriver:
    def __init__(self, config: KafkaConfig, metadata_cache: MetadataCache, replica_manager: ReplicaManager,
                 topic_creator: TopicAutoCreator, producer_ids: ProducerIdManager) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.topic_creator = topic_creator
        self.producer_ids = producer_ids
        self.num_partitions = config["transaction.state.log.num.partitions"]
        self.max_timeout_ms = config["transaction.max.timeout.ms"]
        self.expiration_ms = config["transactional.id.expiration.ms"]
        self.partitions: dict[int, TxnStatePartition] = {}
        self.markers = TransactionMarkerChannel(self.broker_id, metadata_cache, inter_broker_security(config))
        self._verifiers: dict[int, AsyncBrokerConnection] = {}  # coordinator broker id -> connection (KIP-890)
        self._loads: dict[int, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()

    # ---- lookup ---------------------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    async def find_coordinator(self, transactional_id: str) -> dict:
        """The leader of the id's `__transaction_state` partition; the topic is created on first use."""
        unavailable = {"error_code": ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE, "node_id": -1, "host": "",
                       "port": -1}
        if not transactional_id:
            return {**unavailable, "error_code": ErrorCode.INVALID_REQUEST}
        snapshot = self.metadata_cache.snapshot
        partitions = snapshot.partitions.get(TOPIC)
        if partitions is None:
            await self.topic_creator.create_transaction_state_topic()
            return unavailable
        state = partitions.get(self.partition_for(transactional_id))
        broker = None if state is None else snapshot.brokers.get(state.leader)
        if broker is None:
            return unavailable
        return {"error_code": ErrorCode.NONE, "node_id": broker.broker_id, "host": broker.host, "port": broker.port}

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition) -> int:
        """KIP-890: may this partition's leader take the producer's first batch of its transaction at `tp`? The
        answer for the produce (see coordinator/transaction/verification.py), from the id's coordinator."""
        snapshot = self.metadata_cache.snapshot
        state = snapshot.partitions.get(TOPIC, {}).get(self.partition_for(transactional_id))
        broker = None if state is None else snapshot.brokers.get(state.leader)
        if broker is None:
            return verification_error(ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE, None, -1, -1, (), producer_id,
                                      producer_epoch, tp)
        if broker.broker_id == self.broker_id:
            error, m = self.describe(transactional_id)
            if m is None:
                return verification_error(error, None, -1, -1, (), producer_id, producer_epoch, tp)
            return verification_error(error, m.state, m.producer_id, m.producer_epoch, m.topic_partitions,
                                      producer_id, producer_epoch, tp)
        connection = self._verifiers.get(broker.broker_id)
        if connection is None or (connection.host, connection.port) != (broker.host, broker.port):
            if connection is not None:
                connection.close()
            connection = self._verifiers[broker.broker_id] = AsyncBrokerConnection(
                broker.host, broker.port, f"broker-{self.broker_id}-txn-verification", REQUEST_TIMEOUT_S,
                security=self.markers.security)  # the inter-broker listener's, as the markers'
        try:
            response = await connection.send(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                             {"transactional_ids": [transactional_id]})
        except (ConnectionError, OSError, ProtocolError) as e:
            log.info("Could not verify the transaction of %r with broker %d: %s", transactional_id,
                     broker.broker_id, e)
            return verification_error(ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE, None, -1, -1, (), producer_id,
                                      producer_epoch, tp)
        described = response.transaction_states[0]
        partitions = [TopicPartition(t.topic, p) for t in described.topics for p in t.partitions]
        return verification_error(described.error_code, _STATES.get(described.transaction_state),
                                  described.producer_id, described.producer_epoch, partitions, producer_id,
                                  producer_epoch, tp)

    def _owner(self, transactional_id: str) -> tuple[int, TxnStatePartition | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        part = self.partitions.get(self.partition_for(transactional_id))
        if part is None:
            return ErrorCode.NOT_COORDINATOR, None
        if part.loading:
            return ErrorCode.GROUP_LOAD_IN_PROGRESS, None  # COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE, part

    def _current(self, part: TxnStatePartition, transactional_id: str, metadata: TransactionMetadata) -> bool:
        """Whether `metadata` is still this broker's, at the coordinator epoch `part` was loaded with."""
        return (self.partitions.get(part.partition) is part and not part.loading
                and part.transactions.get(transactional_id) is metadata)

    # ---- writing transitions ------------------------------------------------------------------------------

    async def _write(self, part: TxnStatePartition, metadata: TransactionMetadata,
                     transit: TxnTransitMetadata) -> int:
        """Write a prepared transition and apply it (NONE), or drop it (the client's error)."""
        value = None if transit.state == TransactionState.DEAD else encode_value(transit)
        # A magic 1 message, as the group coordinator writes `__consumer_offsets`: the log cleaner compacts that
        # format (it does not read record batches yet); the key and value are Kafka's either way.
        records = build_message_set([(encode_key(metadata.transactional_id), value, _now_ms())], magic=1)
        try:
            error = await self.replica_manager.append_and_wait(TOPIC, part.partition, bytearray(records), -1,
                                                               WRITE_TIMEOUT_MS)
        except Exception:
            log.exception("[Transaction Coordinator %d]: could not append to [%s,%d]", self.broker_id, TOPIC,
                          part.partition)
            error = ErrorCode.UNKNOWN
        if not self._current(part, metadata.transactional_id, metadata):
            # the partition moved (or reloaded) meanwhile: the new coordinator reads what was written
            return ErrorCode.NOT_COORDINATOR
        if error != ErrorCode.NONE:
            metadata.abort_transition()
            log.info("[Transaction Coordinator %d]: appending %s for transactional id %s failed with %s",
                     self.broker_id, transit.state.kafka_name, metadata.transactional_id, ErrorCode(error).name)
            return _WRITE_ERRORS.get(error, ErrorCode.UNKNOWN)
        if transit.state == TransactionState.DEAD:
            part.transactions.pop(metadata.transactional_id, None)
            metadata.state, metadata.pending_state = TransactionState.DEAD, None
        else:
            metadata.complete_transition(transit)
        log.debug("[Transaction Coordinator %d]: transactional id %s is now %s (producer %d epoch %d)",
                  self.broker_id, metadata.transactional_id, metadata.state.kafka_name, metadata.producer_id,
                  metadata.producer_epoch)
        return ErrorCode.NONE

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- the client's requests ------------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> tuple[int, int, int]:
        """(error, producer id, epoch) for InitProducerId with a transactional id; `expected` is KIP-360's
        (producer id, epoch) of a producer recovering from an abortable error (v3+, None when -1/-1)."""
        error, part = self._owner(transactional_id)
        if part is None:
            return error, -1, -1
        metadata = part.transactions.get(transactional_id)
        new_id: int | None = None
        if metadata is None or metadata.producer_epoch_exhausted:
            new_id = await self.producer_ids.generate_producer_id()
            error, part = self._owner(transactional_id)  # the await may have seen the partition move
            if part is None:
                return error, -1, -1

        def generate() -> int:
            if new_id is None:
                raise RuntimeError("a producer id was needed but none was taken")
            return new_id

        metadata, decision = decisions.init_producer_id(part.transactions.get(transactional_id), transactional_id,
                                                        timeout_ms, _now_ms(), generate, expected,
                                                        self.max_timeout_ms)
        if metadata is not None:
            part.transactions.setdefault(transactional_id, metadata)
            metadata = part.transactions[transactional_id]
        if decision.error != ErrorCode.NONE:
            return decision.error, -1, -1
        if decision.fence_then_abort:
            # An Ongoing transaction of the previous producer: fence it and abort it; the client retries and
            # gets its epoch once the abort completes.
            log.info("[Transaction Coordinator %d]: fencing producer %d of transactional id %s and aborting its "
                     "open transaction", self.broker_id, metadata.producer_id, transactional_id)
            abort = decisions.end_txn(metadata, metadata.producer_id, decision.transit.producer_epoch, commit=False,
                                      now=_now_ms(), from_client=False)
            if abort.transit is not None:
                await self._prepare_end(part, metadata, abort.transit, commit=False)
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        error = await self._write(part, metadata, decision.transit)
        if error != ErrorCode.NONE:
            return error, -1, -1
        log.info("[Transaction Coordinator %d]: initialized transactional id %s with producer id %d epoch %d "
                 "on partition [%s,%d]", self.broker_id, transactional_id, metadata.producer_id,
                 metadata.producer_epoch, TOPIC, part.partition)
        return ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> int:
        """AddPartitionsToTxn, and AddOffsetsToTxn with the group's `__consumer_offsets` partition."""
        error, part = self._owner(transactional_id)
        if part is None:
            return error
        metadata = part.transactions.get(transactional_id)
        decision = decisions.add_partitions(metadata, producer_id, producer_epoch, partitions, _now_ms())
        if decision.error != ErrorCode.NONE or decision.transit is None:
            return decision.error
        return await self._write(part, metadata, decision.transit)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> int:
        error, part = self._owner(transactional_id)
        if part is None:
            return error
        metadata = part.transactions.get(transactional_id)
        decision = decisions.end_txn(metadata, producer_id, producer_epoch, commit, _now_ms())
        if decision.error != ErrorCode.NONE or decision.transit is None:
            return decision.error
        return await self._prepare_end(part, metadata, decision.transit, commit)

    async def _prepare_end(self, part: TxnStatePartition, metadata: TransactionMetadata,
                           transit: TxnTransitMetadata, commit: bool) -> int:
        """Write PrepareCommit or PrepareAbort; once written, the markers go out in the background."""
        error = await self._write(part, metadata, transit)
        if error == ErrorCode.NONE:
            self._spawn(self._complete_transaction(part, metadata, commit, None))
        return error

    async def _complete_transaction(self, part: TxnStatePartition, metadata: TransactionMetadata, commit: bool,
                                    prepared: TxnTransitMetadata | None) -> None:
        """Send the markers of a PrepareCommit or PrepareAbort transaction, then write its completion (retried
        while this broker stays its coordinator). `prepared`: the completion a load already prepared."""
        tid = metadata.transactional_id
        if prepared is None:
            FAULTS.before_txn_markers(tid, commit)
        written = await self.markers.write_markers(
            metadata.producer_id, metadata.producer_epoch, commit, part.coordinator_epoch,
            set(metadata.topic_partitions), lambda: self._current(part, tid, metadata))
        if not written:
            return
        while self._current(part, tid, metadata):
            transit = prepared
            if transit is None:
                decision = decisions.complete(metadata, _now_ms())
                if decision.transit is None:
                    log.error("[Transaction Coordinator %d]: cannot complete transactional id %s in %s: %s",
                              self.broker_id, tid, metadata.state.kafka_name, ErrorCode(decision.error).name)
                    return
                transit = decision.transit
            prepared = None
            if await self._write(part, metadata, transit) == ErrorCode.NONE:
                log.debug("[Transaction Coordinator %d]: completed the transaction of %s (%s)", self.broker_id, tid,
                          metadata.state.kafka_name)
                return
            await asyncio.sleep(RETRY_BACKOFF_MS / 1000.0)

    # ---- timers ---------------------------------------------------------------------------------------------

    async def abort_timed_out_transactions(self) -> None:
        """Every transaction.abort.timed.out.transaction.cleanup.interval.ms (KafkaServer runs it)."""
        now = _now_ms()
        for part in list(self.partitions.values()):
            if part.loading:
                continue
            for tid, producer_id, epoch in decisions.timed_out(part.transactions.values(), now):
                metadata = part.transactions[tid]
                decision = decisions.abort_timed_out(metadata, producer_id, now)
                if decision.transit is None:
                    continue
                log.info("[Transaction Coordinator %d]: aborting the transaction of %s (producer %d epoch %d): "
                         "open longer than its timeout of %d ms", self.broker_id, tid, producer_id, epoch,
                         metadata.txn_timeout_ms)
                await self._prepare_end(part, metadata, decision.transit, commit=False)

    async def remove_expired_transactional_ids(self) -> None:
        """Every transaction.remove.expired.transaction.cleanup.interval.ms: ids idle past
        transactional.id.expiration.ms leave the coordinator and get a tombstone."""
        now = _now_ms()
        for part in list(self.partitions.values()):
            if part.loading:
                continue
            for tid in decisions.expired_transactional_ids(part.transactions.values(), now, self.expiration_ms):
                metadata = part.transactions[tid]
                if await self._write(part, metadata, metadata.prepare_dead()) == ErrorCode.NONE:
                    log.info("[Transaction Coordinator %d]: removed the expired transactional id %s", self.broker_id,
                             tid)

    # ---- what the tools see ---------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        error, part = self._owner(transactional_id)
        if part is None:
            return error, None
        metadata = part.transactions.get(transactional_id)
        if metadata is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, metadata

    def list_transactions(self) -> tuple[int, list[TransactionMetadata]]:
        """Every transactional id this broker coordinates (COORDINATOR_LOAD_IN_PROGRESS while loading)."""
        error = ErrorCode.GROUP_LOAD_IN_PROGRESS if any(p.loading for p in self.partitions.values()) else 0
        return error, [m for p in self.partitions.values() if not p.loading for m in p.transactions.values()]

    # ---- leadership of `__transaction_state` ----------------------------------------------------------------

    def on_leadership_change(self) -> None:
        """Load the partitions we now lead (or lead at a new epoch), unload those we no longer lead (Kafka's
        onElection and onResignation)."""
        for pid in range(self.num_partitions):
            p = self.replica_manager.partitions.get(TopicPartition(TOPIC, pid))
            leading = p is not None and p.is_leader
            known = self.partitions.get(pid)
            if leading and (known is None or known.coordinator_epoch != p.leader_epoch):
                if known is not None:
                    self._unload(pid)
                part = self.partitions[pid] = TxnStatePartition(pid, p.leader_epoch)
                log.info("[Transaction State Manager %d]: loading transaction metadata from [%s,%d] at coordinator "
                         "epoch %d", self.broker_id, TOPIC, pid, p.leader_epoch)
                self._loads[pid] = asyncio.get_running_loop().create_task(self._load(part, p.log))
            elif not leading and known is not None:
                self._unload(pid)
                log.info("[Transaction State Manager %d]: unloaded the transaction metadata of [%s,%d]",
                         self.broker_id, TOPIC, pid)

    def _unload(self, pid: int) -> None:
        task = self._loads.pop(pid, None)
        if task is not None:
            task.cancel()
        self.partitions.pop(pid, None)

    async def _load(self, part: TxnStatePartition, log_: Log) -> None:
        started = time.monotonic()
        records: list[tuple[bytes, bytes | None]] = []
        end = log_.log_end_offset
        offset = log_.log_start_offset
        chunk = self.config["transaction.state.log.load.buffer.size"]
        while offset < end:
            try:
                data = log_.read(offset, chunk, end).read_bytes()
            except Exception:  # the log changed under us (deleted, truncated): serve what was read
                log.exception("[Transaction State Manager %d]: could not read [%s,%d] at offset %d", self.broker_id,
                              TOPIC, part.partition, offset)
                break
            before = offset
            for message in iter_messages(data, verify_crc=False):
                if message.offset >= end:
                    break
                if message.offset >= offset:
                    if message.key is not None:
                        records.append((message.key, message.value))
                    offset = message.offset + 1
            if offset == before:
                if not data:
                    break
                chunk *= 2  # a record larger than the buffer
            await asyncio.sleep(0)
        if self._loads.get(part.partition) is not asyncio.current_task():
            return
        del self._loads[part.partition]
        loaded = loading.load_partition(records, _now_ms())
        part.transactions = loaded.transactions
        part.loading = False
        log.info("[Transaction State Manager %d]: finished loading [%s,%d]: %d transactional ids, %d transactions "
                 "to complete, in %.0f ms", self.broker_id, TOPIC, part.partition, len(loaded.transactions),
                 len(loaded.pending), (time.monotonic() - started) * 1000)
        for pending in loaded.pending:
            metadata = part.transactions[pending.transactional_id]
            self._spawn(self._complete_transaction(part, metadata, pending.commit, pending.transit))

    def shutdown(self) -> None:
        for task in [*self._loads.values(), *self._tasks]:
            task.cancel()
        self.markers.close()
        for connection in self._verifiers.values():
            connection.close()
