"""The replica state machine's transition table and its effects (reference §3): the decisions of
controller/replica_state.py driven directly, and its driver on a dict of `state` znodes and a real request
batch — no ZooKeeper fake."""

from __future__ import annotations

import itertools
import logging

import pytest

from controller import replica_state as decide
from controller.channel import RequestBatch
from controller.replica_state import VALID_PREVIOUS_STATES, ReplicaMove, ReplicaState
from controller.replica_state_machine import ReplicaStateMachine
from tests.unit.controller.contexts import StateStore, context, leadership
from zkbroker.protocol.api import ApiKey

S = ReplicaState
TP = ("t", 0)


class _Recorder:
    """Where RequestBatch.send puts its requests: (broker, api key, body)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int, dict]] = []

    def send(self, broker_id, api_key, api_version, body, callback=None, payload=None) -> None:
        self.sent.append((broker_id, api_key, body))


def _machine(ctx, store: StateStore | None = None, unclean: bool = False, deleting=()):
    batch = RequestBatch(1, ctx.epoch, dict(ctx.live_brokers))
    store = store or StateStore(ctx.leadership)
    rsm = ReplicaStateMachine(ctx, store.writer(ctx.epoch), lambda: batch, lambda topic: unclean,
                              lambda tp: tp in deleting)
    rsm.initialize()
    return rsm, batch, store


def _online(assigned=(1, 2), isr=None, live=(1, 2, 3)):
    """A partition online after failover: led by its first replica, every replica in the ISR."""
    return context(live=live, assignments={TP: assigned},
                   leaderships={TP: leadership(assigned[0], isr or assigned, controller_epoch=2)})


# ---- the decisions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("current, target", list(itertools.product(S, S)))
def test_every_transition_is_accepted_exactly_when_the_table_says_so(current, target):
    move = decide.move(_online(), ("t", 0, 2), current, target)
    assert move.accepted is (current in VALID_PREVIOUS_STATES[target])
    if not move.accepted:
        assert [line.text() for line in move.lines] == [
            f"Controller 1 epoch 2 initiated state change of replica 2 for partition [t,0] from {current.value} to "
            f"{target.value} failed: not a valid previous state"]


@pytest.mark.parametrize("current, target, effects", [
    (S.NON_EXISTENT, S.NEW, ReplicaMove(announce=True)),
    (S.NEW, S.ONLINE, ReplicaMove(assigned=(1, 2, 3))),
    (S.ONLINE, S.ONLINE, ReplicaMove(announce=True)),
    (S.OFFLINE, S.ONLINE, ReplicaMove(announce=True)),
    (S.DELETION_INELIGIBLE, S.ONLINE, ReplicaMove(announce=True)),
    (S.ONLINE, S.OFFLINE, ReplicaMove(stop_replica=False, leave_isr=True)),
    (S.OFFLINE, S.DELETION_STARTED, ReplicaMove(stop_replica=True)),
    (S.DELETION_STARTED, S.DELETION_SUCCESSFUL, ReplicaMove()),
    (S.DELETION_STARTED, S.DELETION_INELIGIBLE, ReplicaMove()),
    (S.DELETION_SUCCESSFUL, S.NON_EXISTENT, ReplicaMove(assigned=(1, 2))),
])
def test_each_target_state_asks_for_its_effects(current, target, effects):
    ctx = _online(assigned=(1, 2, 3)) if target is S.NON_EXISTENT else _online()
    assert decide.move(ctx, ("t", 0, 3), current, target) == effects


def test_a_new_replica_that_would_lead_is_refused_and_without_a_leader_nobody_leaves_an_isr():
    move = decide.move(_online(), ("t", 0, 1), S.NON_EXISTENT, S.NEW)
    assert not move.accepted
    assert move.lines[0].text() == ("Controller 1 epoch 2 cannot move replica 1 of [t,0] to NewReplica as it is being "
                                    "requested to become leader")
    leaderless = context(assignments={TP: (1, 2)})
    assert decide.move(leaderless, ("t", 0, 1), S.ONLINE, S.OFFLINE) == ReplicaMove(stop_replica=False)


def test_a_replica_of_an_unknown_partition_is_refused():
    move = decide.move(context(), ("t", 9, 1), S.NON_EXISTENT, S.NEW)
    assert not move.accepted and move.lines[0].text() == ("Controller 1 epoch 2 cannot change the state of replica 1 "
                                                          "of unknown partition [t,9]")


def test_leaving_the_isr_bumps_the_leader_epoch_and_drops_the_leader_it_was():
    read = leadership(1, (1, 2, 3), leader_epoch=4, controller_epoch=1, zk_version=6)
    ctx = _online()
    assert decide.remove_from_isr(ctx, TP, 1, read, False, logging.INFO).leadership == leadership(
        -1, (2, 3), leader_epoch=5, controller_epoch=2, zk_version=6)
    assert decide.remove_from_isr(ctx, TP, 3, read, False, logging.INFO).leadership.leader == 1
    assert decide.remove_from_isr(ctx, TP, 4, read, False, logging.INFO) is None
    assert decide.remove_from_isr(ctx, TP, 1, None, False, logging.INFO) is None


def test_the_last_isr_member_stays_unless_unclean_election_is_allowed():
    read = leadership(2, (2,), leader_epoch=1)
    kept = decide.remove_from_isr(_online(), TP, 2, read, False, logging.INFO)
    assert (kept.leadership.leader, kept.leadership.isr) == (-1, (2,))
    assert [line.text() for line in kept.lines] == [
        "[Controller 1]: Retaining last ISR 2 of partition [t,0] since unclean leader election is disabled"]
    emptied = decide.remove_from_isr(_online(), TP, 2, read, True, logging.INFO)
    assert (emptied.leadership.isr, emptied.lines) == ((), ())


def test_a_partition_losing_two_replicas_is_written_twice_in_order():
    waves = decide.isr_waves([(("t", 0), 1), (("t", 1), 1), (("t", 0), 2)])
    assert waves == [[(("t", 0), 1), (("t", 1), 1)], [(("t", 0), 2)]]


def test_failover_puts_replicas_on_live_brokers_online_and_the_others_deletion_ineligible():
    rsm, _, _ = _machine(context(live=(1, 2), assignments={TP: (1, 3)}))
    states = rsm.states
    assert (states[("t", 0, 1)], states[("t", 0, 3)]) == (S.ONLINE, S.DELETION_INELIGIBLE)


# ---- the driver ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("current, target", [
    (S.ONLINE, S.DELETION_STARTED), (S.NON_EXISTENT, S.ONLINE), (S.ONLINE, S.NEW),
    (S.OFFLINE, S.DELETION_SUCCESSFUL), (S.ONLINE, S.NON_EXISTENT), (S.DELETION_SUCCESSFUL, S.OFFLINE),
])
def test_invalid_transitions_are_refused_and_leave_the_state_alone(current, target):
    assert current not in VALID_PREVIOUS_STATES[target]
    rsm, batch, _ = _machine(_online())
    if current is S.NON_EXISTENT:
        rsm.states.pop(("t", 0, 2))
    else:
        rsm.states[("t", 0, 2)] = current
    rsm.handle_state_changes([("t", 0, 2)], target)
    assert rsm.states.get(("t", 0, 2), S.NON_EXISTENT) is current
    channel = _Recorder()
    batch.send(channel)
    assert channel.sent == []


def test_offline_sends_stop_replica_and_takes_the_replica_out_of_the_isr():
    rsm, batch, store = _machine(_online(assigned=(1, 2, 3)))
    rsm.handle_state_changes([("t", 0, 1)], S.OFFLINE)
    assert list(batch.stop_replica) == [(1, False)] and list(batch.stop_replica[(1, False)]) == [TP]
    assert store.state("t", 0) == {"version": 1, "leader": -1, "leader_epoch": 1, "controller_epoch": 2,
                                   "isr": [2, 3]}
    assert set(batch.leader_and_isr) == {2, 3} and set(batch.leader_and_isr[2]) == {TP}
    assert 1 not in batch.leader_and_isr


def test_offline_replicas_of_a_partition_being_deleted_leave_the_isr_silently():
    rsm, batch, store = _machine(_online(assigned=(1, 2, 3)), deleting={TP})
    rsm.handle_state_changes([("t", 0, 1)], S.OFFLINE)
    assert store.state("t", 0)["isr"] == [2, 3] and batch.leader_and_isr == {}


def test_deletion_path_from_offline_to_non_existent_removes_the_replica_from_the_assignment():
    rsm, _, _ = _machine(_online())
    for target in (S.OFFLINE, S.DELETION_STARTED, S.DELETION_SUCCESSFUL, S.NON_EXISTENT):
        rsm.handle_state_changes([("t", 0, 2)], target)
    assert ("t", 0, 2) not in rsm.states
    assert rsm.ctx.assignments[TP] == (1,)


def test_new_replica_hears_the_current_leader_and_joins_the_assignment_when_online():
    rsm, batch, _ = _machine(_online())
    rsm.handle_state_changes([("t", 0, 3)], S.NEW)
    channel = _Recorder()
    batch.send(channel)
    [(_, _, body)] = [s for s in channel.sent if s[0] == 3 and s[1] == ApiKey.LEADER_AND_ISR]
    assert body["partition_states"][0]["leader"] == 1
    rsm.handle_state_changes([("t", 0, 3)], S.ONLINE)
    assert rsm.ctx.assignments[TP] == (1, 2, 3)
