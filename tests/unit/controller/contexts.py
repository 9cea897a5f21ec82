"""Controller contexts and `state` znodes built in memory, for driving the decisions of controller/ directly."""

from __future__ import annotations

import json

from controller.context import ControllerContext, LeaderIsrAndZkVersion
from controller.leadership_writer import LeadershipWriter, decode_leadership, encode_leadership
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk import paths
from zkbroker.zk.znodes import BrokerRegistration


def leadership(leader: int, isr: tuple[int, ...], leader_epoch: int = 0, controller_epoch: int = 2,
               zk_version: int = 0) -> LeaderIsrAndZkVersion:
    return LeaderIsrAndZkVersion(leader, leader_epoch, tuple(isr), controller_epoch, zk_version)


def context(live: tuple[int, ...] = (1, 2, 3), assignments: dict[TopicPartition, tuple[int, ...]] | None = None,
            leaderships: dict[TopicPartition, LeaderIsrAndZkVersion] | None = None,
            shutting_down: frozenset[int] = frozenset(), epoch: int = 2) -> ControllerContext:
    """Controller 1 at `epoch`, with brokers `live` registered."""
    ctx = ControllerContext(controller_id=1, epoch=epoch, epoch_zk_version=1)
    ctx.live_brokers = {b: BrokerRegistration(b, "127.0.0.1", 9000 + b) for b in live}
    ctx.shutting_down_broker_ids = set(shutting_down)
    ctx.assignments = dict(assignments or {})
    ctx.all_topics = {t for t, _ in ctx.assignments}
    ctx.leadership = dict(leaderships or {})
    return ctx


class StateStore:
    """The `state` znodes as a dict (path -> (data, zkVersion)), in the two shapes LeadershipWriter takes:
    `read` and `set_many`. `before_write` runs before each batch of writes (a leader changing the ISR meanwhile)."""

    def __init__(self, states: dict[TopicPartition, LeaderIsrAndZkVersion] | None = None) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.batches: list[list[str]] = []
        self.before_write = None
        for tp, state in (states or {}).items():
            self.put(tp, state)

    def put(self, tp: TopicPartition, state: LeaderIsrAndZkVersion) -> None:
        self.nodes[paths.partition_state_path(*tp)] = (encode_leadership(state), state.zk_version)

    def state(self, topic: str, partition: int) -> dict:
        return json.loads(self.nodes[paths.partition_state_path(topic, partition)][0])

    def read(self, partitions: list[TopicPartition]) -> dict[TopicPartition, LeaderIsrAndZkVersion | None]:
        out = {}
        for tp in partitions:
            path = paths.partition_state_path(*tp)
            out[tp] = decode_leadership(*self.nodes[path], path) if path in self.nodes else None
        return out

    def set_many(self, items) -> list[int | None]:
        if self.before_write is not None:
            self.before_write()
        self.batches.append([path for path, _, _ in items])
        out = []
        for path, data, version in items:
            if path not in self.nodes or self.nodes[path][1] != version:
                out.append(None)
                continue
            self.nodes[path] = (data, version + 1)
            out.append(version + 1)
        return out

    def writer(self, epoch: int = 2) -> LeadershipWriter:
        return LeadershipWriter(self.read, self.set_many, epoch)
