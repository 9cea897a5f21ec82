"""A follower's fetcher must not act on an answer given for a LeaderAndIsr that has been superseded while it
waited: lab torture found a fetcher blocked on a paused leader that, once that leader answered, truncated the
partition its own broker had led (and acknowledged records on) in the meantime."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from zkbroker.config import KafkaConfig
from zkbroker.log.leader_epoch import LeaderEpochCache
from zkbroker.log.log import Log
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.message_set import build_message_set
from zkbroker.server.partition import Partition
from zkbroker.server.replica_fetcher import ReplicaFetcher, SourceBroker


def follower_of_2(tmp_path) -> Partition:
    p = Partition("t", 0, 1, Log(str(tmp_path / "t-0")))
    p.epoch_cache = LeaderEpochCache(str(tmp_path / "t-0"))
    p.make_follower(2, leader_epoch=1, isr=(2, 1), replicas=(2, 1), zk_version=1, controller_epoch=1)
    p.log.append(build_message_set([(None, b"m%d" % i) for i in range(10)]))
    p.epoch_cache.assign(1, 0)
    p.needs_epoch_truncation = True
    return p


def answer(end_offset: int):
    return SimpleNamespace(topics=[SimpleNamespace(partitions=[SimpleNamespace(error_code=ErrorCode.NONE,
                                                                                end_offset=end_offset)])])


def run(tmp_path, superseded: bool) -> Partition:
    async def scenario() -> Partition:
        config = KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "zk:2181"})
        fetcher = ReplicaFetcher(config, SourceBroker(2, "127.0.0.1", 1))
        await fetcher.stop()  # its loop is not needed: the test drives one truncation itself
        p = follower_of_2(tmp_path)
        asked, reply = asyncio.Event(), asyncio.get_running_loop().create_future()

        async def send(api_key, version, body):
            asked.set()
            return await reply
        fetcher._connection.send = send
        fetcher.add(p)
        truncation = asyncio.create_task(fetcher._truncate_by_leader_epoch(p))
        await asked.wait()  # the leader does not answer yet (it is paused)
        if superseded:  # meanwhile this broker is made the leader, and takes writes
            fetcher.remove(p.topic_partition)
            p.make_leader(leader_epoch=3, isr=(1,), replicas=(2, 1), zk_version=3, controller_epoch=1)
        reply.set_result(answer(5))  # the old leader wakes up and answers for epoch 1
        await truncation
        return p
    return asyncio.run(scenario())


def test_an_answer_for_a_superseded_leader_and_isr_truncates_nothing(tmp_path):
    p = run(tmp_path, superseded=True)
    assert p.log_end_offset == 10 and p.is_leader


def test_an_answer_for_the_current_one_truncates_to_the_end_of_the_epoch(tmp_path):
    p = run(tmp_path, superseded=False)
    assert p.log_end_offset == 5 and not p.needs_epoch_truncation
