"""Producer id blocks claimed from ZooKeeper (DESIGN §18): two brokers claiming at the same moment, many times,
get disjoint blocks of 1,000 covering the ids from 0 without a gap, each znode write conditional on the last."""

from __future__ import annotations

import asyncio
import logging

from zkbroker.server.bridge import LoopBridge
from zkbroker.server.producer_id_manager import BLOCK_SIZE, ProducerIdManager
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import ProducerIdBlock

CLAIMS = 15


def test_two_brokers_claiming_producer_id_blocks_at_once_never_overlap(zk_connect, zk, caplog):
    clients = [ZkClient(zk_connect, name=f"zk-{broker}") for broker in (1, 2)]
    for client in clients:
        client.start()

    async def claim_all() -> list[list[ProducerIdBlock]]:
        loop = asyncio.get_running_loop()
        managers = [ProducerIdManager(broker, client, LoopBridge(loop)) for broker, client in zip((1, 2), clients)]

        async def claims(manager: ProducerIdManager) -> list[ProducerIdBlock]:
            # each claim reads, then writes conditionally: with both brokers' claims interleaved on one loop,
            # the reads of one land between the read and the write of the other
            return [await manager._take_block() for _ in range(CLAIMS)]

        return await asyncio.gather(*(claims(m) for m in managers))

    caplog.set_level(logging.DEBUG, logger="zkbroker.server.ProducerIdManager")
    try:
        results = asyncio.run(asyncio.wait_for(claim_all(), 60))
    finally:
        for client in clients:
            client.close()
    for broker, blocks in zip((1, 2), results):
        assert all(block.broker_id == broker for block in blocks)
        assert all(block.block_end - block.block_start + 1 == BLOCK_SIZE for block in blocks)
    starts = sorted(block.block_start for blocks in results for block in blocks)
    assert starts == [i * BLOCK_SIZE for i in range(2 * CLAIMS)]  # disjoint, and no block skipped
    assert ProducerIdBlock.decode(zk.get(paths.LATEST_PRODUCER_ID_BLOCK)).block_end == 2 * CLAIMS * BLOCK_SIZE - 1
    assert any("lost the race" in record.getMessage() for record in caplog.records)  # the claims did collide
