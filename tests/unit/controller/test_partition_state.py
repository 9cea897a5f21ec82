"""The partition state machine's decisions (controller/partition_state.py), driven directly: no ZooKeeper,
no broker, no fake of either — a context, the states, the `state` read in, decisions and log lines out."""

from __future__ import annotations

import itertools
import logging

import pytest

from controller import partition_state as decide
from controller.channel import RequestBatch
from controller.partition_state import VALID_PREVIOUS_STATES, PartitionState, Selector
from controller.partition_state_machine import PartitionStateMachine
from tests.unit.controller.contexts import StateStore, context, leadership

P = PartitionState
TP = ("t", 0)


@pytest.mark.parametrize("current, target", list(itertools.product(P, P)))
def test_every_transition_is_allowed_exactly_when_the_table_says_so(current, target):
    valid, refused = decide.valid_moves(context(), {TP: current}, [TP], target)
    if current in VALID_PREVIOUS_STATES[target]:
        assert (valid, refused) == ([(TP, current)], [])
    else:
        assert valid == []
        assert [line.text() for line in refused] == [
            f"Controller 1 epoch 2 initiated state change for partition [t,0] from {current.value} to "
            f"{target.value} failed: not a valid previous state"]
        assert refused[0].level == logging.ERROR


def test_an_unknown_partition_is_non_existent_and_moves_are_sorted():
    valid, _ = decide.valid_moves(context(), {("t", 1): P.NON_EXISTENT}, [("t", 1), ("t", 0)], P.NEW)
    assert valid == [(("t", 0), P.NON_EXISTENT), (("t", 1), P.NON_EXISTENT)]


def test_initial_state_at_failover_new_without_state_online_with_a_live_leader_else_offline():
    ctx = context(live=(1, 2), assignments={("t", 0): (1,), ("t", 1): (2,), ("t", 2): (3,)},
                  leaderships={("t", 1): leadership(2, (2,)), ("t", 2): leadership(3, (3,))})
    assert [decide.initial_state(ctx.leadership.get(("t", p)), ctx.live_broker_ids) for p in range(3)] == [
        P.NEW, P.ONLINE, P.OFFLINE]


def test_new_to_online_leads_with_the_first_live_replica_at_epoch_zero_to_be_created_at_version_zero():
    ctx = context(live=(1, 2), assignments={TP: (3, 2, 1)})
    decision = decide.new_leader(ctx, TP)
    assert decision.leadership == leadership(2, (2, 1), leader_epoch=0, controller_epoch=2, zk_version=0)
    assert decision.election.recipients == (2, 1) and decision.lines == ()


def test_new_to_online_without_a_live_replica_fails_with_kafkas_line():
    decision = decide.new_leader(context(live=(1,), assignments={TP: (3, 4)}), TP)
    assert decision.leadership is None
    assert [line.text() for line in decision.lines] == [
        "Controller 1 epoch 2 initiated state change for partition [t,0] from NewPartition to OnlinePartition "
        "failed: No replica is alive; assigned replicas are 3,4, live brokers are 1"]


def test_offline_to_online_elects_from_the_live_isr_on_the_version_read():
    ctx = context(live=(2, 3), assignments={TP: (1, 2, 3)})
    read = leadership(1, (1, 3, 2), leader_epoch=4, controller_epoch=1, zk_version=7)
    decision = decide.elect_leader(ctx, Selector.OFFLINE, TP, P.OFFLINE, read, False, logging.INFO)
    assert decision.leadership == leadership(2, (3, 2), leader_epoch=5, controller_epoch=2, zk_version=7)
    assert decision.election.recipients == (2, 3) and not decision.election.unclean


def test_offline_election_without_live_isr_stays_offline_unless_unclean_is_allowed():
    ctx = context(live=(2, 3), assignments={TP: (1, 2, 3)})
    read = leadership(1, (1,), leader_epoch=4)
    refused = decide.elect_leader(ctx, Selector.OFFLINE, TP, P.OFFLINE, read, False, logging.INFO)
    assert refused.leadership is None and not refused.not_needed
    assert refused.lines[0].text() == (
        "Controller 1 epoch 2 initiated state change for partition [t,0] from OfflinePartition to OnlinePartition "
        "failed: No broker in ISR is alive; ISR is 1 and unclean leader election is disabled")
    unclean = decide.elect_leader(ctx, Selector.OFFLINE, TP, P.OFFLINE, read, True, logging.INFO)
    assert unclean.leadership.leader == 2 and unclean.leadership.isr == (2,) and unclean.election.unclean
    line = decide.unclean_line(ctx, TP, unclean.election)
    assert (line.logger, line.level, line.text()) == (
        "controller.KafkaController", logging.WARNING, "[Controller 1]: No broker in ISR is alive for [t,0]. Elect "
        "leader 2 from live brokers 2,3. There's potential data loss.")


def test_a_missing_state_znode_fails_the_election():
    decision = decide.elect_leader(context(assignments={TP: (1, 2)}), Selector.OFFLINE, TP, P.ONLINE, None, False,
                                   logging.INFO)
    assert decision.leadership is None
    assert decision.lines[0].text().endswith("from OnlinePartition to OnlinePartition failed: its state znode is "
                                             "missing or unreadable")


def test_reassigned_selector_elects_from_the_reassigned_replicas():
    ctx = context(live=(1, 4, 5), assignments={TP: (1, 4, 5)})
    ctx.partitions_being_reassigned[TP] = (4, 5)
    decision = decide.elect_leader(ctx, Selector.REASSIGNED, TP, P.ONLINE, leadership(1, (1, 5, 4), 3), False,
                                   logging.INFO)
    assert (decision.leadership.leader, decision.leadership.isr, decision.election.recipients) == (4, (1, 5, 4),
                                                                                                   (4, 5))


def test_preferred_replica_selector_moves_the_leader_or_says_none_is_needed():
    ctx = context(assignments={TP: (2, 1)})
    moved = decide.elect_leader(ctx, Selector.PREFERRED_REPLICA, TP, P.ONLINE, leadership(1, (1, 2), 5), False,
                                logging.INFO)
    assert (moved.leadership.leader, moved.leadership.leader_epoch) == (2, 6)
    kept = decide.elect_leader(ctx, Selector.PREFERRED_REPLICA, TP, P.ONLINE, leadership(2, (1, 2), 5), False,
                               logging.DEBUG)
    assert kept.not_needed and kept.leadership is None
    assert (kept.lines[0].level, kept.lines[0].text()) == (
        logging.DEBUG, "Controller 1 epoch 2 left partition [t,0] as it is: Preferred replica 2 is already the current "
        "leader")
    assert [line.text() for line in decide.not_needed_lines(ctx, 1, logging.DEBUG)] == [
        "Controller 1 epoch 2 left 1 partitions as they are: their preferred replica leads already"]
    assert decide.not_needed_lines(ctx, 1, logging.INFO) == []


def test_controlled_shutdown_selector_leaves_the_shutting_down_broker_out():
    ctx = context(assignments={TP: (1, 2, 3)}, shutting_down={1})
    decision = decide.elect_leader(ctx, Selector.CONTROLLED_SHUTDOWN, TP, P.ONLINE, leadership(1, (1, 3, 2)), False,
                                   logging.INFO)
    assert (decision.leadership.leader, decision.leadership.isr, decision.election.recipients) == (3, (3, 2),
                                                                                                   (1, 2, 3))


def test_newer_epoch_and_existing_state_lines_read_as_before():
    ctx = context()
    assert decide.newer_epoch_line(ctx, TP, leadership(1, (1,), controller_epoch=3)).text() == (
        "Controller 1 epoch 2 aborted leader election for partition [t,0]: its state was written by a newer "
        "controller epoch 3")
    assert decide.state_exists_line(ctx, TP).text() == (
        "Controller 1 epoch 2 encountered error while changing partition [t,0]'s state from New to Online since "
        "LeaderAndIsr path already exists")


def test_marking_logs_each_partition_and_summarises_beyond_the_info_limit():
    moved = [(("t", p), P.ONLINE) for p in range(2)]
    lines = decide.marked_lines(context(), moved, P.OFFLINE, logging.INFO)
    assert [line.text() for line in lines] == [
        f"Controller 1 epoch 2 changed partition [t,{p}] state from OnlinePartition to OfflinePartition"
        for p in range(2)]
    lines = decide.marked_lines(context(), moved, P.OFFLINE, logging.DEBUG)
    assert [line.level for line in lines] == [logging.DEBUG, logging.DEBUG, logging.INFO]
    assert lines[-1].text() == "Controller 1 epoch 2 changed the state of 2 partitions to OfflinePartition"


def test_online_lines_name_each_new_leader_and_summarise_many():
    ctx = context(live=(1, 2), assignments={("t", p): (1 + p % 2, 2 - p % 2) for p in range(101)})
    elected = {tp: decide.new_leader(ctx, tp).election for tp in ctx.assignments}
    moved = [(tp, P.NEW) for tp in sorted(ctx.assignments)]
    few = decide.online_lines(ctx, moved[:1], {moved[0][0]: elected[moved[0][0]]})
    assert [line.text() for line in few] == [
        "Controller 1 epoch 2 changed partition [t,0] from NewPartition to OnlinePartition with leader 1"]
    many = decide.online_lines(ctx, moved, elected)
    assert {line.level for line in many[:-1]} == {logging.DEBUG}
    assert many[-1].text() == ("Controller 1 epoch 2 changed 101 partitions to OnlinePartition; new leaders: broker 1: "
                               "51, broker 2: 50")


# ---- the driver, on a dict of `state` znodes ----------------------------------------------------------------


def test_the_driver_elects_through_the_leadership_writer_and_queues_leader_and_isr():
    ctx = context(live=(2, 3), assignments={("t", 0): (1, 2, 3), ("t", 1): (1, 3)},
                  leaderships={("t", 0): leadership(1, (1, 2, 3)), ("t", 1): leadership(1, (1,))})
    store = StateStore(ctx.leadership)
    batch = RequestBatch(1, ctx.epoch, dict(ctx.live_brokers))
    psm = PartitionStateMachine(ctx, None, None, store.writer(), lambda: batch, lambda topic: False)
    psm.initialize()
    assert psm.states == {("t", 0): P.OFFLINE, ("t", 1): P.OFFLINE}
    psm.trigger_online_partition_state_change(lambda topic: False)
    assert psm.states == {("t", 0): P.ONLINE, ("t", 1): P.OFFLINE}  # [t,1]: no live ISR, unclean disabled
    assert store.state("t", 0) == {"version": 1, "leader": 2, "leader_epoch": 1, "controller_epoch": 2, "isr": [2, 3]}
    assert ctx.leadership[("t", 0)].zk_version == 1
    assert set(batch.leader_and_isr) == {2, 3} and set(batch.leader_and_isr[2]) == {("t", 0)}
