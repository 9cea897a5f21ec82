"""The leader adopts an ISR it wrote only if no LeaderAndIsr overtook the write (pure Partition logic)."""

from __future__ import annotations

from zkbroker.log.log import Log
from zkbroker.server.partition import Partition


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
    assert p.caught_up_followers() == {3}  # so broker 3 can rejoin when it next fetches


def test_a_leader_that_became_follower_meanwhile_adopts_nothing(tmp_path):
    p = leader(tmp_path)
    p.make_follower(2, leader_epoch=4, isr=(2, 3), replicas=(1, 2, 3), zk_version=7, controller_epoch=1)
    assert not p.apply_isr_change((1, 2, 3), written_against=7, new_version=8)
    assert p.isr == (2, 3)
