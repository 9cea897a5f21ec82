"""The controller's channel to the brokers (Kafka's ControllerChannelManager and ControllerBrokerRequestBatch).

One queue and one sender thread per live broker; a request is retried every 300 ms until the broker
answers or is removed (0.8.2), and requests are pipelined (beyond 0.8.2, which had one in flight). The batch
collects what one controller decision must tell the brokers and
sends it in 0.8.2's order: LeaderAndIsr, then UpdateMetadata, then StopReplica. Every request carries the
controller's id and epoch so brokers can ignore a replaced controller.
"""

from __future__ import annotations

import collections
import functools
import logging
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller.context import LeaderIsrAndZkVersion
from zkbroker import timeline
from zkbroker.client.connection import receive_response
from zkbroker.client.security import AuthenticationError, ClientSecurity
from zkbroker.protocol.api import ApiKey, request_schema
from zkbroker.protocol.client_codec import ClientCodec
from zkbroker.protocol.errors import ProtocolError
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk.znodes import BrokerRegistration

log = logging.getLogger("controller.ControllerChannelManager")

RETRY_BACKOFF_S = 0.3
# A broker told more partition states than this at once goes to the lab's timeline as one summary event.
TIMELINE_STATES_PER_REQUEST = 64

Callback = Callable[[Any], None]


class Payload:
    """A request body, encoded once however many brokers it goes to (UpdateMetadata: the same partition states
    for every broker; ~30 ms of encoding per 10,000 states)."""

    def __init__(self, api_key: int, api_version: int, body: dict) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.body = body
        self._encoded: bytes | None = None
        self._lock = threading.Lock()

    def encoded(self) -> bytes:
        with self._lock:
            if self._encoded is None:
                self._encoded = request_schema(self.api_key, self.api_version).encode(self.body)
            return self._encoded


@dataclass
class _Request:
    payload: Payload
    callback: Callback | None = None
    written_on: socket.socket | None = None


class _RequestSendThread(threading.Thread):
    """One broker's requests, in order. They are pipelined: each is written as soon as it is queued, without
    waiting for the answers to the ones before (the broker answers one connection's requests in order), and
    the answers are read in turn. On a broken connection every unanswered request is written again, in order,
    on a new one, every 300 ms until the broker answers or is removed. 0.8.2 had one request in flight per
    broker: a batch's UpdateMetadata then waited for its LeaderAndIsr's answer to come back first."""

    def __init__(self, controller_id: int, broker: BrokerRegistration, timeout_s: float,
                 security: ClientSecurity | None = None) -> None:
        super().__init__(name=f"Controller-{controller_id}-to-broker-{broker.broker_id}-send-thread", daemon=True)
        self.controller_id = controller_id
        self.broker = broker
        self.queue: queue.Queue[_Request | None] = queue.Queue()
        self.timeout_s = timeout_s
        self.security = security  # the inter-broker listener's TLS and SASL; None: PLAINTEXT
        self._refused = False  # the broker refused our credentials (logged once until a connection succeeds)
        self._client_id = f"controller-{controller_id}"
        self._stopped = threading.Event()
        self._sock: socket.socket | None = None
        self._codec: ClientCodec | None = None  # the current connection's

    def stop(self) -> None:
        self._stopped.set()
        self.queue.put(None)
        sock = self._sock
        if sock is not None:  # wake a thread blocked on it
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def run(self) -> None:
        pending: collections.deque[_Request] = collections.deque()  # written or to be written, not answered
        try:
            while not self._stopped.is_set():
                if not pending and not self._take(pending, block=True):
                    return
                try:
                    self._exchange(pending)
                except (OSError, ProtocolError) as e:
                    if self._stopped.is_set():
                        return
                    if isinstance(e, (AuthenticationError, ssl.SSLError)) and not self._refused:
                        self._refused = True
                        log.error("[Controller %d]: Authentication with broker %d at %s:%d failed; its %s waits "
                                  "until it succeeds: %s", self.controller_id, self.broker.broker_id,
                                  self.broker.host, self.broker.port, ApiKey(pending[0].payload.api_key).name, e)
                    log.debug("Controller %d failed to send %s to broker %d (%r); retrying", self.controller_id,
                              ApiKey(pending[0].payload.api_key).name, self.broker.broker_id, e)
                    self._close()
                    self._stopped.wait(RETRY_BACKOFF_S)
        finally:
            self._close()

    def _take(self, pending: collections.deque[_Request], block: bool) -> bool:
        """Move what is queued to `pending` (waiting for one request if `block`); False once told to stop."""
        while True:
            try:
                request = self.queue.get(block=block)
            except queue.Empty:
                return True
            if request is None:
                return False
            pending.append(request)
            block = False

    def _exchange(self, pending: collections.deque[_Request]) -> None:
        """Write what is not written on the current connection yet, then read the answers in order."""
        sock = self._connect()
        codec = self._codec
        while pending:
            if not self._take(pending, block=False):
                self._stopped.set()
                return
            for request in pending:
                if request.written_on is not sock:
                    self._write(sock, codec, request)
            response = receive_response(sock, codec, str(self.broker.broker_id))
            request = pending.popleft()  # answers come in the order written, which is pending's order
            if request.callback is not None:
                try:
                    request.callback(response.body)
                except Exception:
                    log.exception("Error in the callback of a request to broker %d", self.broker.broker_id)

    def _write(self, sock: socket.socket, codec: ClientCodec, request: _Request) -> None:
        payload = request.payload
        body = payload.encoded()
        sock.sendall(codec.send_encoded(payload.api_key, payload.api_version, body))
        sock.sendall(body)
        request.written_on = sock

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self.broker.host, self.broker.port), timeout=self.timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            codec = ClientCodec(self._client_id)
            if self.security is not None:
                try:
                    sock = self.security.secure(sock, self.broker.host, functools.partial(_exchange, codec=codec))
                except BaseException:
                    sock.close()
                    raise
                if self._refused:
                    log.info("[Controller %d]: Authenticated with broker %d", self.controller_id,
                             self.broker.broker_id)
                    self._refused = False
            self._sock = sock
            self._codec = codec
            if self._stopped.is_set():
                self._close()
                raise ConnectionError("the send thread is stopping")
        return self._sock

    def _close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


def _exchange(sock: socket.socket, api_key: int, api_version: int, body: Any, codec: ClientCodec) -> Any:
    """One request and its answer while a connection authenticates (before any queued request is written)."""
    sock.sendall(codec.send(api_key, api_version, body))
    return receive_response(sock, codec, "broker").body


class ControllerChannelManager:
    def __init__(self, controller_id: int, socket_timeout_ms: int = 30000,
                 security: ClientSecurity | None = None) -> None:
        self.controller_id = controller_id
        self.timeout_s = socket_timeout_ms / 1000.0
        self.security = security
        self._threads: dict[int, _RequestSendThread] = {}

    def add_broker(self, broker: BrokerRegistration) -> None:
        if broker.broker_id in self._threads:
            return
        thread = _RequestSendThread(self.controller_id, broker, self.timeout_s, self.security)
        self._threads[broker.broker_id] = thread
        thread.start()

    def remove_broker(self, broker_id: int) -> None:
        thread = self._threads.pop(broker_id, None)
        if thread is not None:
            thread.stop()

    def send(self, broker_id: int, api_key: int, api_version: int, body: dict, callback: Callback | None = None,
             payload: Payload | None = None) -> None:
        """Queue a request to the broker; `payload` (the same body, shared with other brokers) saves encoding it
        again."""
        thread = self._threads.get(broker_id)
        if thread is None:
            log.warning("Not sending %s to broker %d: it is not live", ApiKey(api_key).name, broker_id)
            return
        thread.queue.put(_Request(payload or Payload(api_key, api_version, body), callback))

    def shutdown(self) -> None:
        for broker_id in list(self._threads):
            self.remove_broker(broker_id)


def _partition_state(tp: TopicPartition, state: LeaderIsrAndZkVersion, replicas: tuple[int, ...]) -> dict:
    return {"topic": tp[0], "partition": tp[1], "controller_epoch": state.controller_epoch, "leader": state.leader,
            "leader_epoch": state.leader_epoch, "isr": list(state.isr), "zk_version": state.zk_version,
            "replicas": list(replicas)}


# UpdateMetadata's leader for a partition whose topic is being deleted (0.8.2's LeaderAndIsr.LeaderDuringDelete):
# brokers drop it from their metadata.
LEADER_DURING_DELETE = -2

StopReplicaCallback = Callable[[int, list[TopicPartition], Any], None]


@dataclass
class RequestBatch:
    """What one controller decision tells the brokers (ControllerBrokerRequestBatch).

    `live_brokers` are all registered brokers (shutting-down ones too): requests go only to them. Partitions
    in `deleting` go out in UpdateMetadata with leader -2, as 0.8.2 does for topics being deleted.
    """

    controller_id: int
    controller_epoch: int
    live_brokers: dict[int, BrokerRegistration]
    deleting: set[TopicPartition] = field(default_factory=set)
    leader_and_isr: dict[int, dict[TopicPartition, dict]] = field(default_factory=dict)
    update_metadata: dict[int, dict[TopicPartition, dict]] = field(default_factory=dict)
    stop_replica: dict[tuple[int, bool], dict[TopicPartition, None]] = field(default_factory=dict)
    stop_replica_callbacks: dict[tuple[int, bool], StopReplicaCallback] = field(default_factory=dict)

    def add_leader_and_isr(self, broker_ids, tp: TopicPartition, state: LeaderIsrAndZkVersion,
                           replicas: tuple[int, ...]) -> None:
        """LeaderAndIsr to the given brokers; every live broker also gets UpdateMetadata for the partition.
        A later entry for the same broker and partition replaces an earlier one (it carries a newer epoch)."""
        entry = _partition_state(tp, state, replicas)  # one dict, shared by every request that carries it
        for broker_id in broker_ids:
            if broker_id in self.live_brokers:
                self.leader_and_isr.setdefault(broker_id, {})[tp] = entry
        for broker_id in self.live_brokers:
            self.update_metadata.setdefault(broker_id, {})[tp] = entry

    def add_update_metadata(self, broker_ids, partitions: dict[TopicPartition, tuple]) -> None:
        targets = [self.update_metadata.setdefault(b, {}) for b in broker_ids if b in self.live_brokers]
        for tp, (state, replicas) in partitions.items():
            entry = _partition_state(tp, state, replicas)
            for target in targets:
                target[tp] = entry

    def add_stop_replica(self, broker_ids, tp: TopicPartition, delete: bool,
                         callback: StopReplicaCallback | None = None) -> None:
        """StopReplica for one partition; a callback (broker id, partitions, response) hears the answer."""
        for broker_id in broker_ids:
            if broker_id in self.live_brokers:
                self.stop_replica.setdefault((broker_id, delete), {})[tp] = None
                if callback is not None:
                    self.stop_replica_callbacks[(broker_id, delete)] = callback

    def send(self, channel: ControllerChannelManager, timing: EventTiming | None = None) -> None:
        """Queue the requests to the brokers' sender threads; with `timing`, log when each kind has been
        acknowledged by every broker it went to."""
        header = {"controller_id": self.controller_id, "controller_epoch": self.controller_epoch}
        if self.leader_and_isr and timeline.enabled():
            self._report_leader_and_isr()
        # Brokers told the very same partition states (every replica of the partitions changed, every broker's
        # metadata) get the very same request: it is encoded once for all of them.
        leader_and_isr = _Acks(timing, "LeaderAndIsr", self.leader_and_isr)
        shared: list[tuple[dict, Payload]] = []
        for broker_id, states in self.leader_and_isr.items():
            payload = next((p for other, p in shared if _same_states(states, other)), None)
            if payload is None:
                leaders = {s["leader"] for s in states.values()}
                live_leaders = [{"broker_id": b.broker_id, "host": b.host, "port": b.port}
                                for b in self.live_brokers.values() if b.broker_id in leaders]
                payload = Payload(ApiKey.LEADER_AND_ISR, 0, {**header, "partition_states": list(states.values()),
                                                             "live_leaders": live_leaders})
                shared.append((states, payload))
            channel.send(broker_id, ApiKey.LEADER_AND_ISR, 0, payload.body, leader_and_isr.callback(broker_id),
                         payload=payload)
        brokers = [{"broker_id": b.broker_id, "host": b.host, "port": b.port} for b in self.live_brokers.values()]
        update_metadata = _Acks(timing, "UpdateMetadata", self.update_metadata)
        shared = []
        for broker_id, states in self.update_metadata.items():
            payload = next((p for other, p in shared if _same_states(states, other)), None)
            if payload is None:
                entries = [{**s, "leader": LEADER_DURING_DELETE} if tp in self.deleting else s
                           for tp, s in states.items()]
                payload = Payload(ApiKey.UPDATE_METADATA, 0,
                                  {**header, "partition_states": entries, "live_brokers": brokers})
                shared.append((states, payload))
            channel.send(broker_id, ApiKey.UPDATE_METADATA, 0, payload.body, update_metadata.callback(broker_id),
                         payload=payload)
        for (broker_id, delete), partitions in self.stop_replica.items():
            partitions = list(partitions)
            callback = self.stop_replica_callbacks.get((broker_id, delete))
            channel.send(broker_id, ApiKey.STOP_REPLICA, 0,
                         {**header, "delete_partitions": delete,
                          "partitions": [{"topic": t, "partition": p} for t, p in partitions]},
                         None if callback is None else functools.partial(callback, broker_id, partitions))
        self.leader_and_isr.clear()
        self.update_metadata.clear()
        self.stop_replica.clear()
        self.stop_replica_callbacks.clear()


    def _report_leader_and_isr(self) -> None:
        """The lab's timeline: each LeaderAndIsr partition state sent, per broker (one summary event for a
        broker told more than TIMELINE_STATES_PER_REQUEST)."""
        source = f"controller:{self.controller_id}"
        common = {"controller": self.controller_id, "controller_epoch": self.controller_epoch}
        for broker_id, states in sorted(self.leader_and_isr.items()):
            if len(states) > TIMELINE_STATES_PER_REQUEST:
                timeline.emit(source, "leader_and_isr_sent", broker=broker_id, **common, count=len(states),
                              leading=sum(1 for s in states.values() if s["leader"] == broker_id))
                continue
            for s in states.values():
                timeline.emit(source, "leader_and_isr_sent", topic=s["topic"], partition=s["partition"],
                              broker=broker_id, leader=s["leader"], leader_epoch=s["leader_epoch"], isr=s["isr"],
                              zk_version=s["zk_version"], **common)


def _same_states(a: dict[TopicPartition, dict], b: dict[TopicPartition, dict]) -> bool:
    """The same partitions with the very same entries (the batch shares one entry between brokers)."""
    return len(a) == len(b) and all(b.get(tp) is entry for tp, entry in a.items())


@dataclass(frozen=True)
class EventTiming:
    """When a controller event (or the failover) began, for the INFO lines that say how long its parts took:
    `[Controller 1]: BrokerChange: LeaderAndIsr (6666 partition states) acknowledged by brokers 2,3 812 ms after
    the event began`. bench/failover.py reads them."""

    label: str
    started: float
    log: logging.LoggerAdapter | logging.Logger
    cpu_started: float = field(default_factory=time.thread_time)  # CPU time of the thread that made it

    def elapsed_ms(self) -> float:
        return (time.monotonic() - self.started) * 1000.0

    def cpu_ms(self) -> float:
        """CPU time the event's thread has used since (call it on that thread)."""
        return (time.thread_time() - self.cpu_started) * 1000.0


class _Acks:
    """Counts the answers to one batch's requests of one kind; logs once the last one is in (sender threads)."""

    def __init__(self, timing: EventTiming | None, kind: str, per_broker: dict[int, dict]) -> None:
        self.timing = timing
        self.kind = kind
        self.brokers = sorted(per_broker)
        self.states = sum(len(states) for states in per_broker.values())
        self._pending = set(self.brokers)
        self._lock = threading.Lock()

    def callback(self, broker_id: int) -> Callback | None:
        return None if self.timing is None else functools.partial(self._answered, broker_id)

    def _answered(self, broker_id: int, response: Any) -> None:
        with self._lock:
            self._pending.discard(broker_id)
            if self._pending:
                return
        self.timing.log.info("%s: %s (%d partition states) acknowledged by brokers %s %.0f ms after the event began",
                             self.timing.label, self.kind, self.states, ",".join(map(str, self.brokers)),
                             self.timing.elapsed_ms())
