"""Reassignment's decisions (controller/reassignment.py), driven directly: which requests are refused, what
step 7 does with the leader, and the leader epoch bump."""

from __future__ import annotations

import pytest

from controller.reassignment import LeaderMove, bump_leader_epoch, epoch_bump_newer_epoch_line, leader_move, refusal
from tests.unit.controller.contexts import context, leadership

TP = ("t", 0)


@pytest.mark.parametrize("rar, reason", [
    ((1, 2), "Partition [t,0] to be reassigned is already assigned to replicas 1,2. Ignoring request for partition "
             "reassignment"),
    ((), "The new replicas [] for partition [t,0] are empty or repeat a broker"),
    ((3, 3), "The new replicas [3,3] for partition [t,0] are empty or repeat a broker"),
    ((2, 4), "Only 2 replicas out of the new set of replicas 2,4 for partition [t,0] to be reassigned are alive. "
             "Failing partition reassignment"),
    ((2, 3), None),
])
def test_a_reassignment_is_refused_with_kafkas_reason(rar, reason):
    assert refusal(context(live=(1, 2, 3), assignments={TP: (1, 2)}), TP, rar) == reason


def test_a_partition_that_does_not_exist_cannot_be_reassigned():
    assert refusal(context(), ("t", 9), (1,)) == "Attempt to reassign partition [t,9] that doesn't exist"


def test_step_7_elects_unless_the_leader_is_in_the_new_replicas_and_alive():
    ctx = context(live=(1, 2, 3), assignments={TP: (1, 2, 3)}, leaderships={TP: leadership(1, (1, 2, 3))})
    move, line = leader_move(ctx, TP, (2, 3))
    assert move is LeaderMove.ELECT and line.text() == (
        "[Controller 1]: Leader 1 for partition [t,0] being reassigned, is not in the new list of replicas 2,3. "
        "Re-electing leader")
    move, line = leader_move(ctx, TP, (1, 3))
    assert move is LeaderMove.BUMP_EPOCH and line.text().endswith("is already in the new list of replicas 1,3 and is "
                                                                  "alive")
    ctx.live_brokers.pop(1)
    move, line = leader_move(ctx, TP, (1, 3))
    assert move is LeaderMove.ELECT and line.text().endswith("but is dead")


def test_the_epoch_bump_keeps_leader_and_isr_on_the_version_read():
    ctx = context()
    read = leadership(2, (2, 3), leader_epoch=7, controller_epoch=1, zk_version=9)
    assert bump_leader_epoch(ctx, read).leadership == leadership(2, (2, 3), leader_epoch=8, controller_epoch=2,
                                                                 zk_version=9)
    assert bump_leader_epoch(ctx, None) is None
    assert epoch_bump_newer_epoch_line(ctx, TP, leadership(2, (2,), controller_epoch=3)).text() == (
        "[Controller 1]: Aborting leader epoch update of partition [t,0]: its state was written by a newer controller "
        "epoch 3")
