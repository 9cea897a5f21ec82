"""The controller's channel to the brokers (Kafka's ControllerChannelManager and ControllerBrokerRequestBatch).

One queue and one sender thread per live broker; a request is retried every 300 ms until the broker
answers or is removed (0.8.2). The batch collects what one controller decision must tell the brokers and
sends it in 0.8.2's order: LeaderAndIsr, then UpdateMetadata, then StopReplica. Every request carries the
controller's id and epoch so brokers can ignore a replaced controller.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller.context import LeaderIsrAndZkVersion, TopicPartition
from zkbroker.client.connection import BrokerConnection
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ProtocolError
from zkbroker.zk.znodes import BrokerRegistration

log = logging.getLogger("controller.ControllerChannelManager")

RETRY_BACKOFF_S = 0.3

Callback = Callable[[Any], None]


@dataclass
class _Request:
    api_key: int
    api_version: int
    body: dict
    callback: Callback | None = None


class _RequestSendThread(threading.Thread):
    def __init__(self, controller_id: int, broker: BrokerRegistration, timeout_s: float) -> None:
        super().__init__(name=f"Controller-{controller_id}-to-broker-{broker.broker_id}-send-thread", daemon=True)
        self.controller_id = controller_id
        self.broker = broker
        self.queue: queue.Queue[_Request | None] = queue.Queue()
        self._stopped = threading.Event()
        self._connection = BrokerConnection(broker.host, broker.port, client_id=f"controller-{controller_id}",
                                            timeout_s=timeout_s)

    def stop(self) -> None:
        self._stopped.set()
        self.queue.put(None)

    def run(self) -> None:
        while not self._stopped.is_set():
            request = self.queue.get()
            if request is None:
                break
            response = self._send_until_answered(request)
            if response is not None and request.callback is not None:
                try:
                    request.callback(response)
                except Exception:
                    log.exception("Error in the callback of a request to broker %d", self.broker.broker_id)
        self._connection.close()

    def _send_until_answered(self, request: _Request) -> Any:
        while not self._stopped.is_set():
            try:
                return self._connection.send(request.api_key, request.api_version, request.body)
            except (OSError, ProtocolError) as e:
                log.debug("Controller %d failed to send %s to broker %d (%r); retrying", self.controller_id,
                          ApiKey(request.api_key).name, self.broker.broker_id, e)
                self._connection.close()
                self._stopped.wait(RETRY_BACKOFF_S)
        return None


class ControllerChannelManager:
    def __init__(self, controller_id: int, socket_timeout_ms: int = 30000) -> None:
        self.controller_id = controller_id
        self.timeout_s = socket_timeout_ms / 1000.0
        self._threads: dict[int, _RequestSendThread] = {}

    def add_broker(self, broker: BrokerRegistration) -> None:
        if broker.broker_id in self._threads:
            return
        thread = _RequestSendThread(self.controller_id, broker, self.timeout_s)
        self._threads[broker.broker_id] = thread
        thread.start()

    def remove_broker(self, broker_id: int) -> None:
        thread = self._threads.pop(broker_id, None)
        if thread is not None:
            thread.stop()

    def send(self, broker_id: int, api_key: int, api_version: int, body: dict,
             callback: Callback | None = None) -> None:
        thread = self._threads.get(broker_id)
        if thread is None:
            log.warning("Not sending %s to broker %d: it is not live", ApiKey(api_key).name, broker_id)
            return
        thread.queue.put(_Request(api_key, api_version, body, callback))

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
        entry = _partition_state(tp, state, replicas)
        for broker_id in broker_ids:
            if broker_id in self.live_brokers:
                self.leader_and_isr.setdefault(broker_id, {})[tp] = entry
        self.add_update_metadata(self.live_brokers, {tp: (state, replicas)})

    def add_update_metadata(self, broker_ids, partitions: dict[TopicPartition, tuple]) -> None:
        for broker_id in broker_ids:
            if broker_id not in self.live_brokers:
                continue
            target = self.update_metadata.setdefault(broker_id, {})
            for tp, (state, replicas) in partitions.items():
                target[tp] = _partition_state(tp, state, replicas)

    def add_stop_replica(self, broker_ids, tp: TopicPartition, delete: bool,
                         callback: StopReplicaCallback | None = None) -> None:
        """StopReplica for one partition; a callback (broker id, partitions, response) hears the answer."""
        for broker_id in broker_ids:
            if broker_id in self.live_brokers:
                self.stop_replica.setdefault((broker_id, delete), {})[tp] = None
                if callback is not None:
                    self.stop_replica_callbacks[(broker_id, delete)] = callback

    def send(self, channel: ControllerChannelManager) -> None:
        header = {"controller_id": self.controller_id, "controller_epoch": self.controller_epoch}
        for broker_id, states in self.leader_and_isr.items():
            leaders = {s["leader"] for s in states.values()}
            live_leaders = [{"broker_id": b.broker_id, "host": b.host, "port": b.port}
                            for b in self.live_brokers.values() if b.broker_id in leaders]
            channel.send(broker_id, ApiKey.LEADER_AND_ISR, 0,
                         {**header, "partition_states": list(states.values()), "live_leaders": live_leaders})
        brokers = [{"broker_id": b.broker_id, "host": b.host, "port": b.port} for b in self.live_brokers.values()]
        for broker_id, states in self.update_metadata.items():
            entries = [{**s, "leader": LEADER_DURING_DELETE} if tp in self.deleting else s for tp, s in states.items()]
            channel.send(broker_id, ApiKey.UPDATE_METADATA, 0,
                         {**header, "partition_states": entries, "live_brokers": brokers})
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
