"""ProducerIdManager: producer ids for InitProducerId, without collisions across brokers (Kafka 0.11, KIP-98).

Each broker takes a block of 1000 ids at a time from `/latest_producer_id_block`: it reads the last block any
broker took and writes the next one conditionally on the znode's version, retrying when another broker wrote
first; ids are then handed out from the block until it is used up. A restarted broker takes a new block, so an
id is never handed out twice. Runs on the broker's loop; ZooKeeper is reached through the bridge.
"""

from __future__ import annotations

import asyncio
import logging

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from zkbroker.protocol.api import ApiKey
from zkbroker.server.bridge import LoopBridge
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import ProducerIdBlock

log = logging.getLogger("zkbroker.server.ProducerIdManager")

BLOCK_SIZE = 1000


_LONG_MAX = (1 << 63) - 1


class ProducerIdsExhaustedError(RuntimeError):
    """The next block would pass Long.MAX_VALUE: no producer id is left (Kafka treats it as fatal too)."""


def next_block(broker_id: int, latest: ProducerIdBlock | None) -> ProducerIdBlock:
    """The block after `latest` (the first block when no broker took one yet)."""
    if latest is not None and latest.block_end > _LONG_MAX - BLOCK_SIZE:
        raise ProducerIdsExhaustedError(f"every producer id is taken: the last block ends at {latest.block_end}")
    start = 0 if latest is None else latest.block_end + 1
    return ProducerIdBlock(broker_id, start, start + BLOCK_SIZE - 1)


class ProducerIdManager:
    def __init__(self, broker_id: int, zk: ZkClient, bridge: LoopBridge) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.bridge = bridge
        self._block: ProducerIdBlock | None = None
        self._next = 0
        self._lock = asyncio.Lock()

    async def generate_producer_id(self) -> int:
        async with self._lock:
            if self._block is None or self._next > self._block.block_end:
                self._block = await self._take_block()
                self._next = self._block.block_start
            producer_id = self._next
            self._next += 1
            return producer_id

    async def _take_block(self) -> ProducerIdBlock:
        kazoo = self.zk.kazoo
        path = paths.LATEST_PRODUCER_ID_BLOCK
        while True:
            try:
                data, stat = await self.bridge.wait_for(kazoo.get_async(path))
                block = next_block(self.broker_id, ProducerIdBlock.decode(data) if data else None)
                write = kazoo.set_async(path, block.encode(), stat.version)
            except NoNodeError:
                block = next_block(self.broker_id, None)
                write = kazoo.create_async(path, block.encode())
            try:
                await self.bridge.wait_for(write)
            except (BadVersionError, NodeExistsError):
                # another broker took a block meanwhile: take the one after it
                log.debug("Broker %d lost the race for producer id block %d-%d; reading the latest block again",
                          self.broker_id, block.block_start, block.block_end)
                continue
            log.info("Broker %d acquired producer id block %d-%d", self.broker_id, block.block_start,
                     block.block_end)
            return block


class ControllerProducerIdManager(ProducerIdManager):
    """KRaft mode: blocks come from the quorum controller (AllocateProducerIds, 67; ProducerIdsRecord), named
    by this broker's id and epoch."""

    def __init__(self, broker_id: int, channel, broker_epoch, retry_backoff_s: float = 0.5) -> None:
        super().__init__(broker_id, None, None)
        self.channel = channel
        self.broker_epoch = broker_epoch  # () -> the epoch of our registration
        self.retry_backoff_s = retry_backoff_s

    async def _take_block(self) -> ProducerIdBlock:
        while True:
            response = await self.channel.send(ApiKey.ALLOCATE_PRODUCER_IDS, 0,
                                               {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch()})
            if response is not None and response.error_code == 0:
                start = response.producer_id_start
                log.info("Broker %d acquired producer id block %d-%d from the controller", self.broker_id, start,
                         start + response.producer_id_len - 1)
                return ProducerIdBlock(self.broker_id, start, start + response.producer_id_len - 1)
            log.info("Broker %d could not get a producer id block from the controller (%s); trying again",
                     self.broker_id, "no answer" if response is None else f"error {response.error_code}")
            await asyncio.sleep(self.retry_backoff_s)
