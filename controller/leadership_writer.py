"""The one leadership writer: every change of a partition's `state` znode (leader, leader epoch, ISR) goes
through `LeadershipWriter.update`.

The loop, stated once: read the `state` znodes together -> stop for a partition whose state a newer
controller epoch wrote (this controller went through a soft failure and must not overrule its successor) ->
decide (a pure function of the state read) -> write each decision conditionally on the zkVersion it was
decided on, in fenced batches (zk_writes.py) -> a partition whose write met another version (its leader
changed the ISR meanwhile) is read and decided again, up to WRITE_ATTEMPTS times.

The reads and writes come in as two functions, so the loop runs the same on ZooKeeper and on a dict.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from controller.context import LeaderIsrAndZkVersion
from controller.log_lines import LogLine, emit
from zkbroker import timeline
from zkbroker.fault_points import FAULTS
from zkbroker.topic_partition import TopicPartition
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import LeaderIsrState, ZnodeFormatError

WRITE_ATTEMPTS = 3

#: Each partition's `state` as read (None: missing or unreadable).
ReadLeaderships = Callable[[list[TopicPartition]], dict[TopicPartition, LeaderIsrAndZkVersion | None]]
#: Conditional writes (path, data, expected zkVersion) -> the new zkVersion of each, None on a mismatch.
SetMany = Callable[[Sequence[tuple[str, bytes, int]]], list[int | None]]


class Decision(Protocol):
    """What a decision about one partition must say: the leadership to write (None: write nothing; its
    zk_version is the version it was decided on) and the lines to log at once."""

    @property
    def leadership(self) -> LeaderIsrAndZkVersion | None: ...

    @property
    def lines(self) -> tuple[LogLine, ...]: ...


K = TypeVar("K", bound=Hashable)
D = TypeVar("D", bound=Decision)


@dataclass
class Written(Generic[K, D]):
    """What `update` did: per key, the decision written and the leadership as written (its new zkVersion);
    the keys whose state a newer controller epoch wrote; the keys still in conflict after the attempts."""

    written: dict[K, tuple[D, LeaderIsrAndZkVersion]]
    newer_epoch: dict[K, LeaderIsrAndZkVersion]
    conflicted: list[K]


class LeadershipWriter:
    def __init__(self, read: ReadLeaderships, set_many: SetMany, controller_epoch: int,
                 timeline_source: str = "controller") -> None:
        self.read = read
        self.set_many = set_many
        self.controller_epoch = controller_epoch
        self.timeline_source = timeline_source  # who the lab's timeline says wrote ("controller:1")

    def update(self, keys: Iterable[K], partition_of: Callable[[K], TopicPartition],
               decide: Callable[[K, LeaderIsrAndZkVersion | None], D | None],
               newer_epoch_line: Callable[[K, LeaderIsrAndZkVersion], LogLine]) -> Written[K, D]:
        """Read, decide, write, and again for the conflicts (at most one key per partition)."""
        out: Written[K, D] = Written({}, {}, [])
        remaining = list(keys)
        report = timeline.enabled()
        for _ in range(WRITE_ATTEMPTS):
            if not remaining:
                break
            read = self.read([partition_of(key) for key in remaining])
            decided: list[tuple[K, D]] = []
            for key in remaining:
                current = read[partition_of(key)]
                if current is not None and current.controller_epoch > self.controller_epoch:
                    out.newer_epoch[key] = current
                    emit((newer_epoch_line(key, current),))
                    continue
                decision = decide(key, current)
                if decision is None:
                    continue
                if decision.lines:
                    emit(decision.lines)
                if decision.leadership is not None:
                    decided.append((key, decision))
            if decided:
                FAULTS.at_zookeeper_write("state_write", "before")
            versions = self.set_many([
                (paths.partition_state_path(*partition_of(key)), encode_leadership(d.leadership),
                 d.leadership.zk_version) for key, d in decided])
            if decided:
                FAULTS.at_zookeeper_write("state_write", "after")
            remaining = []
            for (key, decision), version in zip(decided, versions):
                if version is None:
                    remaining.append(key)
                else:
                    s = decision.leadership
                    written = LeaderIsrAndZkVersion(s.leader, s.leader_epoch, s.isr, s.controller_epoch, version)
                    out.written[key] = (decision, written)
                    if report:
                        report_leadership(self.timeline_source, partition_of(key), read[partition_of(key)], written)
        out.conflicted = remaining
        return out


def report_leadership(source: str, tp: TopicPartition, before: LeaderIsrAndZkVersion | None,
                      after: LeaderIsrAndZkVersion) -> None:
    """The lab's timeline: a `leader_changed` event for a new leader (or a first one), else `isr_changed`."""
    fields = {"topic": tp[0], "partition": tp[1], "leader": after.leader, "leader_epoch": after.leader_epoch,
              "isr": list(after.isr), "zk_version": after.zk_version, "controller_epoch": after.controller_epoch}
    if before is None or before.leader != after.leader:
        timeline.emit(source, "leader_changed", **fields, previous_leader=before.leader if before else None)
    elif before.isr != after.isr:
        timeline.emit(source, "isr_changed", **fields, **{"from": list(before.isr)})


def encode_leadership(state: LeaderIsrAndZkVersion) -> bytes:
    return LeaderIsrState(state.leader, state.leader_epoch, state.controller_epoch, state.isr).encode()


def decode_leadership(data: bytes, zk_version: int, what: str) -> LeaderIsrAndZkVersion | None:
    try:
        s = LeaderIsrState.decode(data, what)
    except ZnodeFormatError as e:
        logging.getLogger("controller.KafkaController").error("Ignoring unreadable %s: %s", what, e)
        return None
    return LeaderIsrAndZkVersion(s.leader, s.leader_epoch, s.isr, s.controller_epoch, zk_version)


def read_leaderships(zk: ZkClient, partitions: list[TopicPartition]) -> dict[TopicPartition,
                                                                            LeaderIsrAndZkVersion | None]:
    """Each partition's `state` znode and its zkVersion (None if missing or unreadable), read together."""
    state_paths = [paths.partition_state_path(*tp) for tp in partitions]
    out = {}
    for tp, path, (data, stat) in zip(partitions, state_paths, zk.get_many(state_paths)):
        out[tp] = None if stat is None else decode_leadership(data, stat.version, path)
    return out
