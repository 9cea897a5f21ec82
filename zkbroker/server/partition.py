"""Partition: one topic-partition as this broker sees it (Kafka's cluster.Partition).

Holds what the controller last told us (leader, leader epoch, ISR, replicas, the `state` node's zkVersion,
the controller epoch) and, as leader, the high watermark: the offset below which every ISR member has
the messages, so consumers may read them. HW = min LEO over the ISR and never moves backwards. Followers'
LEOs arrive with their replica fetches (the replication issue); a single-replica partition's HW is its LEO.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from zkbroker.log.log import Log


@dataclass
class Partition:
    topic: str
    partition: int
    local_broker_id: int
    log: Log
    leader_id: int = -1
    leader_epoch: int = -1
    controller_epoch: int = -1
    zk_version: int = 0
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    high_watermark: int = 0
    # The log end offset of each follower, from its fetches; -1 until it has fetched since we became leader.
    remote_leos: dict[int, int] = field(default_factory=dict)
    # Fetch and produce requests waiting for this partition to grow (woken on every append and HW change).
    _waiters: list[asyncio.Future] = field(default_factory=list)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def make_leader(self, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...],
                    zk_version: int, controller_epoch: int) -> None:
        self.leader_id = self.local_broker_id
        self._set_state(leader_epoch, isr, replicas, zk_version, controller_epoch)
        self.remote_leos = {r: -1 for r in replicas if r != self.local_broker_id}
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self.maybe_increment_high_watermark()

    def make_follower(self, leader_id: int, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...],
                      zk_version: int, controller_epoch: int) -> None:
        self.leader_id = leader_id
        self._set_state(leader_epoch, isr, replicas, zk_version, controller_epoch)
        self.remote_leos = {}
        self.wake_waiters()  # fetches waiting on us as leader must now answer NOT_LEADER_FOR_PARTITION

    def _set_state(self, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...], zk_version: int,
                   controller_epoch: int) -> None:
        self.leader_epoch = leader_epoch
        self.isr = tuple(isr)
        self.replicas = tuple(replicas)
        self.zk_version = zk_version
        self.controller_epoch = controller_epoch

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the ISR (ours included); it only moves forward. True when it moved."""
        leos = [self.log_end_offset]
        leos += [self.remote_leos.get(r, -1) for r in self.isr if r != self.local_broker_id]
        new_hw = min(leos)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def appended(self) -> None:
        """After an append as leader: advance the HW if the ISR allows, and wake waiting requests."""
        self.maybe_increment_high_watermark()
        self.wake_waiters()

    def waiter(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        future = loop.create_future()
        self._waiters.append(future)
        return future

    def wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)
