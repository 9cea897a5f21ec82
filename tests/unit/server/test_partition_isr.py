"""The leader's ISR bookkeeping: it adopts an ISR it wrote only if no LeaderAndIsr overtook the write, and only the
follower that fetched may rejoin."""

from __future__ import annotations

import asyncio

from zkbroker.log.log import Log
from zkbroker.protocol.message_set import build_message_set
from zkbroker.server.bridge import LoopBridge
from zkbroker.server.partition import Partition
from zkbroker.server.replica_manager import ReplicaManager
from zkbroker.topic_partition import TopicPartition


def leader(tmp_path) -> Partition:
    p = Partition("t", 0, 1, Log(str(tmp_path / "t-0")))
    p.make_leader(leader_epoch=3, isr=(1, 2), replicas=(1, 2, 3), zk_version=7, controller_epoch=1)
    return p


def test_an_isr_write_that_nothing_overtook_is_adopted(tmp_path):
    p = leader(tmp_path)
    assert p.apply_isr_change((1, 2, 3), written_against=7, new_version=8)
    assert p.isr == (1, 2, 3) and p.zk_version == 8


def test_a_leader_and_isr_that_arrived_during_the_write_wins(tmp_path):
    # Broker 3 rejoins (our write: version 7 -> 8), the controller removes it again on top of that (8 -> 9) and
    # its LeaderAndIsr reaches us before our own write's answer: the controller's state is the newer one.
    p = leader(tmp_path)
    p.make_leader(leader_epoch=4, isr=(1, 2), replicas=(1, 2, 3), zk_version=9, controller_epoch=1)
    assert not p.apply_isr_change((1, 2, 3), written_against=7, new_version=8)
    assert p.isr == (1, 2) and p.zk_version == 9
    p.remote_leos[3] = 0
    assert p.may_rejoin_isr(3)  # so broker 3 can rejoin when it next fetches


def test_a_leader_that_became_follower_meanwhile_adopts_nothing(tmp_path):
    p = leader(tmp_path)
    p.make_follower(2, leader_epoch=4, isr=(2, 3), replicas=(1, 2, 3), zk_version=7, controller_epoch=1)
    assert not p.apply_isr_change((1, 2, 3), written_against=7, new_version=8)
    assert p.isr == (2, 3)


def test_only_the_fetching_follower_may_rejoin_the_isr(tmp_path):
    """0.8.2's maybeExpandIsr(replicaId): broker 3 caught up once and then went silent (stuck, or dead); a
    fetch of broker 2's must not bring it back into the ISR on the strength of its old log end offset."""
    p = leader(tmp_path)  # ISR 1,2 of replicas 1,2,3; the HW is 0
    p.remote_leos[3] = 0
    written: list[tuple[int, ...]] = []

    class Recording(ReplicaManager):
        async def _update_isr(self, partition: Partition, new_isr: tuple[int, ...]) -> bool:
            written.append(new_isr)
            return partition.apply_isr_change(new_isr, partition.zk_version, partition.zk_version + 1)

    async def fetches() -> None:
        rm = Recording.__new__(Recording)  # only the ISR bookkeeping: no log manager, no ZooKeeper
        rm.partitions = {TopicPartition("t", 0): p}
        rm.bridge = LoopBridge(asyncio.get_running_loop())
        rm.record_follower_fetch("t", 0, 2, 0)
        await asyncio.sleep(0.01)
        assert written == [] and p.isr == (1, 2)
        rm.record_follower_fetch("t", 0, 3, 0)
        await asyncio.sleep(0.01)
        assert written == [(1, 2, 3)] and p.isr == (1, 2, 3)

    asyncio.run(fetches())
    assert not p.may_rejoin_isr(1) and not p.may_rejoin_isr(4)  # not a follower; not a replica


def test_a_fetch_past_the_leaders_log_end_records_an_unknown_log_end_that_neither_rejoins_nor_acknowledges(tmp_path):
    """After an unclean election the old leader fetches from its own end, past ours (OFFSET_OUT_OF_RANGE): as in
    0.8.2 its log end is unknown, so it does not rejoin the ISR and an acks=-1 write does not count on it."""
    p = leader(tmp_path)  # ISR 1,2 of replicas 1,2,3
    p.log.append(build_message_set([(None, b"m%d" % i) for i in range(5)]))
    p.record_follower_fetch(3, 8)
    assert p.remote_leos[3] == -1 and not p.may_rejoin_isr(3)
    p.record_follower_fetch(2, 8)
    assert p.remote_leos[2] == -1 and p.high_watermark == 0
    p.record_follower_fetch(2, 5)
    p.record_follower_fetch(3, 5)
    assert p.high_watermark == 5 and p.may_rejoin_isr(3)
