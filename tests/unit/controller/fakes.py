"""An in-memory ZooKeeper tree, a fenced writer on it and a recording channel, so the real KafkaController (the
thin driver of the controller's decisions) can be driven event by event without ZooKeeper or brokers:
`ControllerHarness` runs the real failover, then tests call `process(event)` and read the znodes and the
requests sent. The decisions themselves are tested without any of this (test_partition_state.py,
test_replica_state.py, test_leadership_writer.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace

from kazoo.exceptions import NodeExistsError

import controller.controller as controller_module
from controller.controller import KafkaController
from zkbroker.config import KafkaConfig
from zkbroker.protocol.api import ApiKey
from zkbroker.zk import paths
from zkbroker.zk.znodes import BrokerRegistration, EntityConfig, LeaderIsrState, TopicAssignment


@dataclass
class Stat:
    version: int
    ephemeralOwner: int = 0
    czxid: int = 0  # the transaction that created the node


class FakeZk:
    """The ZkClient calls the controller makes, on a dict of path -> (data, version)."""

    session_timeout_ms = 6000

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.created: dict[str, int] = {}  # path -> its czxid
        self.session_id = 1
        self.data_watches: dict[str, list] = {}
        self.child_watches: dict[str, list] = {}

    # ---- what the controller calls ----
    def session_in_doubt(self) -> bool:
        return False

    def get(self, path: str):
        if path not in self.nodes:
            return None, None
        data, version = self.nodes[path]
        return data, Stat(version, czxid=self.created.get(path, 0))

    def get_many(self, paths_: list[str]):
        return [self.get(path) for path in paths_]

    def get_children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix):].split("/")[0] for p in self.nodes if p.startswith(prefix)})

    def subscribe_data_changes(self, path: str, listener):
        self.data_watches.setdefault(path, []).append(listener)
        return self.get(path)

    def subscribe_data_changes_many(self, paths_: list[str], listener):
        return [self.subscribe_data_changes(path, listener) for path in paths_]

    def subscribe_child_changes(self, path: str, listener):
        self.child_watches.setdefault(path, []).append(listener)
        return self.get_children(path) if path in self.nodes else None

    def unsubscribe(self, path: str, listener=None) -> None:
        for watches in (self.data_watches, self.child_watches):
            if path in watches:
                watches[path] = [w for w in watches[path] if listener is not None and w != listener]

    # ---- for tests ----
    def put(self, path: str, data: bytes) -> None:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            self.nodes.setdefault("/" + "/".join(parts[:i]), (b"", 0))
        version = self.nodes[path][1] + 1 if path in self.nodes else 0
        if path not in self.nodes:
            self.created[path] = len(self.created) + 1
        self.nodes[path] = (data, version)

    def json(self, path: str):
        data = self.nodes.get(path, (None, 0))[0]
        return json.loads(data) if data else None

    def state(self, topic: str, partition: int) -> dict | None:
        return self.json(paths.partition_state_path(topic, partition))


class FakeWriter:
    """FencedWriter's interface on the fake tree (the fence itself is tested against real ZooKeeper)."""

    def __init__(self, zk: FakeZk) -> None:
        self.zk = zk
        self.writes = 0

    def set(self, path: str, data: bytes, expected_version: int) -> int | None:
        if path not in self.zk.nodes:
            return None
        version = self.zk.nodes[path][1]
        if expected_version not in (-1, version):
            return None
        self.zk.nodes[path] = (data, version + 1)
        return version + 1

    def create_many(self, items) -> list:
        out = []
        for path, data, parents in items:
            if any(p in self.zk.nodes for p in (*parents, path)):
                out.append(NodeExistsError())
                continue
            for parent in parents:
                self.zk.nodes[parent] = (b"", 0)
            self.zk.nodes[path] = (data, 0)
            out.append(None)
        return out

    def set_many(self, items) -> list:
        return [self.set(path, data, version) for path, data, version in items]

    def upsert(self, path: str, data: bytes) -> None:
        self.zk.put(path, data)

    def delete(self, path: str) -> None:
        self.zk.nodes.pop(path, None)

    def delete_recursive(self, roots) -> None:
        for root in roots:
            for p in [p for p in self.zk.nodes if p == root or p.startswith(root + "/")]:
                del self.zk.nodes[p]


@dataclass
class Sent:
    broker_id: int
    api_key: int
    body: dict
    callback: object = None


class FakeChannel:
    """ControllerChannelManager that records what it is asked to send."""

    def __init__(self, *args) -> None:
        self.sent: list[Sent] = []

    def add_broker(self, broker) -> None:
        """Requests are recorded whoever they go to."""

    def remove_broker(self, broker_id: int) -> None:
        """Requests are recorded whoever they go to."""

    def send(self, broker_id, api_key, api_version, body, callback=None, payload=None) -> None:
        self.sent.append(Sent(broker_id, api_key, body, callback))

    def shutdown(self) -> None:
        """Nothing runs."""


class ControllerHarness:
    """A real KafkaController (broker 1) on a FakeZk, made controller by its real failover."""

    def __init__(self, monkeypatch, brokers=(1, 2, 3), topics: dict[str, dict[int, tuple[int, ...]]] | None = None,
                 states: dict[tuple[str, int], tuple[int, tuple[int, ...]]] | None = None, **config: str) -> None:
        self.zk = FakeZk()
        for path in paths.COMMON_PATHS:
            self.zk.put(path, b"")
        self.zk.put(paths.CONTROLLER_EPOCH, b"1")
        for b in brokers:
            self.register(b)
        for topic, assignment in (topics or {}).items():
            self.zk.put(paths.topic_config_path(topic), EntityConfig({}).encode())
            self.zk.put(paths.topic_path(topic), TopicAssignment(assignment).encode())
        for (topic, partition), (leader, isr) in (states or {}).items():
            self.put_state(topic, partition, leader, isr, leader_epoch=0, controller_epoch=1)
        props = {"broker.id": "1", "zookeeper.connect": "fake:2181", "auto.leader.rebalance.enable": "false"}
        props.update({k.replace("_", "."): v for k, v in config.items()})
        monkeypatch.setattr(controller_module, "FencedWriter", lambda zk, version, batched=True: FakeWriter(zk))
        monkeypatch.setattr(controller_module, "ControllerChannelManager", FakeChannel)
        self.controller = KafkaController(self.zk, KafkaConfig.from_props(props))
        self.controller.elector.increment_epoch = lambda: (2, 1)
        self.controller._on_controller_failover()

    @property
    def channel(self) -> FakeChannel:
        return self.controller.channel

    def register(self, broker_id: int) -> None:
        self.zk.put(paths.broker_path(broker_id), BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id).encode())

    def unregister(self, broker_id: int) -> None:
        del self.zk.nodes[paths.broker_path(broker_id)]
        del self.zk.created[paths.broker_path(broker_id)]

    def put_state(self, topic, partition, leader, isr, leader_epoch=0, controller_epoch=2) -> None:
        self.zk.put(paths.partition_state_path(topic, partition),
                    LeaderIsrState(leader, leader_epoch, controller_epoch, tuple(isr)).encode())

    def process(self, event) -> None:
        self.channel.sent.clear()
        self.controller._process(event)

    def requests(self, api_key: int, broker_id: int | None = None) -> list[Sent]:
        return [s for s in self.channel.sent
                if s.api_key == api_key and (broker_id is None or s.broker_id == broker_id)]

    def leader_and_isr(self, broker_id: int) -> dict[tuple[str, int], dict]:
        return {(s["topic"], s["partition"]): s for r in self.requests(ApiKey.LEADER_AND_ISR, broker_id)
                for s in r.body["partition_states"]}

    def update_metadata(self, broker_id: int) -> dict[tuple[str, int], dict]:
        return {(s["topic"], s["partition"]): s for r in self.requests(ApiKey.UPDATE_METADATA, broker_id)
                for s in r.body["partition_states"]}

    def stop_replica(self, broker_id: int, delete: bool) -> list[tuple[str, int]]:
        return [(p["topic"], p["partition"]) for r in self.requests(ApiKey.STOP_REPLICA, broker_id)
                if r.body["delete_partitions"] == delete for p in r.body["partitions"]]

    def answer_stop_replicas(self, error_code: int = 0) -> None:
        """Every broker answers the StopReplica (delete) requests sent last, through the real callback."""
        for r in [r for r in self.requests(ApiKey.STOP_REPLICA) if r.callback is not None]:
            partitions = [SimpleNamespace(topic=p["topic"], partition=p["partition"], error_code=error_code)
                          for p in r.body["partitions"]]
            r.callback(SimpleNamespace(error_code=0, partitions=partitions))
        while not self.controller._queue.empty():
            self.process(self.controller._queue.get_nowait())
