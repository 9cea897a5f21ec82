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


# ---- when a follower is out of sync: 0.8.2's time-or-messages rule and KIP-16's caught-up-time rule ------------

LAG_MS, LAG_MESSAGES = 10000, 20


def appended(p: Partition, count: int) -> None:
    """`count` messages appended as leader (acks=1: no ISR wait)."""
    p.append_messages_to_leader(bytearray(build_message_set([(None, b"v%d" % i) for i in range(count)])), 1)


def follower_at_the_end(tmp_path, now: float) -> Partition:
    """Leader 1 of ISR 1,2 whose follower 2 has fetched everything (10 messages) at `now`."""
    p = leader(tmp_path)
    appended(p, 10)
    p.record_follower_fetch(2, 10, now=now)
    return p


def test_0_8_2_drops_a_healthy_follower_more_than_lag_max_messages_behind_after_a_burst(tmp_path):
    p = follower_at_the_end(tmp_path, now=100.0)
    appended(p, LAG_MESSAGES)  # exactly the limit behind: still in sync
    assert p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, now=100.5) == {}
    appended(p, 1)  # a burst of more than replica.lag.max.messages, checked before the follower fetches again
    out = p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, now=100.5)
    assert list(out) == [2] and out[2].startswith("slow: 21 messages behind")
    p.record_follower_fetch(2, 31, now=100.6)  # it caught up a moment later: in sync again
    assert p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, now=100.7) == {}


def test_0_8_2_drops_a_follower_that_has_not_fetched_for_lag_time_even_at_the_log_end(tmp_path):
    p = follower_at_the_end(tmp_path, now=100.0)
    assert p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, now=110.0) == {}
    out = p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, now=110.1)
    assert list(out) == [2] and out[2].startswith("stuck: no fetch for 10.1 s")


def test_kip_16_keeps_a_follower_a_burst_leaves_behind_while_it_caught_up_within_lag_time(tmp_path):
    p = follower_at_the_end(tmp_path, now=100.0)
    appended(p, 1000)  # far more than replica.lag.max.messages: the message count plays no part
    assert p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, caught_up_time=True, now=105.0) == {}
    assert p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, caught_up_time=True, now=110.0) == {}
    out = p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, caught_up_time=True, now=110.5)
    assert list(out) == [2] and out[2].startswith("not caught up to the log end for 10.5 s")


def test_kip_16_drops_a_follower_that_fetches_all_the_time_but_never_catches_up(tmp_path):
    """Fetching is not enough: a follower that keeps asking from far behind the end falls out once its last
    catching up is older than replica.lag.time.max.ms, however often it fetches."""
    p = follower_at_the_end(tmp_path, now=100.0)
    appended(p, 200)
    for second in range(1, 12):
        appended(p, 100)
        p.record_follower_fetch(2, p.log_end_offset - 150, now=100.0 + second)  # short of the end of any fetch
    assert p.remote_caught_up_times[2] == 100.0
    assert p.out_of_sync_replicas(LAG_MS, 4000, now=111.0) == {}  # 0.8.2's default: fetching, 150 behind, in sync
    out = p.out_of_sync_replicas(LAG_MS, 4000, caught_up_time=True, now=111.0)
    assert list(out) == [2] and out[2].startswith("not caught up to the log end for 11.0 s")


def test_kip_16_counts_a_follower_that_reached_the_end_of_its_previous_fetch_as_caught_up_then(tmp_path):
    """Under steady writes a healthy follower is never at the very end when it asks; reaching the end the leader
    had at its previous fetch shows it was caught up as of that fetch."""
    p = follower_at_the_end(tmp_path, now=100.0)
    offset = 10
    for second in range(1, 16):
        appended(p, 5)  # written between two fetches: each fetch asks from the end of the fetch before
        p.record_follower_fetch(2, offset, now=100.0 + second)
        offset += 5
    assert p.remote_caught_up_times[2] == 114.0
    assert p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, caught_up_time=True, now=115.0) == {}
    assert p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, caught_up_time=True, now=124.0) == {}
    assert list(p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, caught_up_time=True, now=124.5)) == [2]


def test_a_new_leader_gives_every_follower_a_full_lag_time_under_both_rules(tmp_path):
    p = leader(tmp_path)
    started = p.remote_caught_up_times[2]
    assert p.remote_fetch_times[2] == started and p.remote_fetch_leader_leos == {}
    for caught_up_time in (False, True):
        assert p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, caught_up_time, now=started + 9.9) == {}
        assert list(p.out_of_sync_replicas(LAG_MS, LAG_MESSAGES, caught_up_time, now=started + 10.1)) == [2]


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
