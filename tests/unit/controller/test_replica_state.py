"""The replica state machine's transition table and its side effects (reference §3), on the in-memory tree."""

from __future__ import annotations

import pytest

from controller.replica_state import VALID_PREVIOUS_STATES, ReplicaState
from tests.unit.controller.fakes import ControllerHarness

S = ReplicaState


def test_failover_puts_replicas_on_live_brokers_online_and_the_others_deletion_ineligible(monkeypatch):
    h = ControllerHarness(monkeypatch, brokers=(1, 2), topics={"t": {0: (1, 3)}})
    states = h.controller.replica_state_machine.states
    assert (states[("t", 0, 1)], states[("t", 0, 3)]) == (S.ONLINE, S.DELETION_INELIGIBLE)


@pytest.mark.parametrize("current, target", [
    (S.ONLINE, S.DELETION_STARTED), (S.NON_EXISTENT, S.ONLINE), (S.ONLINE, S.NEW),
    (S.OFFLINE, S.DELETION_SUCCESSFUL), (S.ONLINE, S.NON_EXISTENT), (S.DELETION_SUCCESSFUL, S.OFFLINE),
])
def test_invalid_transitions_are_refused_and_leave_the_state_alone(monkeypatch, current, target):
    assert current not in VALID_PREVIOUS_STATES[target]
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}})
    rsm = h.controller.replica_state_machine
    if current is S.NON_EXISTENT:
        rsm.states.pop(("t", 0, 2))
    else:
        rsm.states[("t", 0, 2)] = current
    h.channel.sent.clear()
    rsm.handle_state_changes([("t", 0, 2)], target)
    assert rsm.states.get(("t", 0, 2), S.NON_EXISTENT) is current
    h.controller.batch.send(h.channel)
    assert h.channel.sent == []


def test_offline_sends_stop_replica_and_takes_the_replica_out_of_the_isr(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2, 3)}})
    rsm = h.controller.replica_state_machine
    h.channel.sent.clear()
    rsm.handle_state_changes([("t", 0, 1)], S.OFFLINE)
    h.controller.batch.send(h.channel)
    assert h.stop_replica(1, delete=False) == [("t", 0)]
    assert h.zk.state("t", 0) == {"version": 1, "leader": -1, "leader_epoch": 1, "controller_epoch": 2, "isr": [2, 3]}
    assert set(h.leader_and_isr(2)) == {("t", 0)} and not h.leader_and_isr(1)


def test_deletion_path_from_offline_to_non_existent_removes_the_replica_from_the_assignment(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}})
    rsm = h.controller.replica_state_machine
    for target in (S.OFFLINE, S.DELETION_STARTED, S.DELETION_SUCCESSFUL, S.NON_EXISTENT):
        rsm.handle_state_changes([("t", 0, 2)], target)
    assert ("t", 0, 2) not in rsm.states
    assert h.controller.context.assignments[("t", 0)] == (1,)


def test_new_replica_hears_the_current_leader_and_joins_the_assignment_when_online(monkeypatch):
    h = ControllerHarness(monkeypatch, topics={"t": {0: (1, 2)}})
    rsm = h.controller.replica_state_machine
    h.channel.sent.clear()
    rsm.handle_state_changes([("t", 0, 3)], S.NEW)
    h.controller.batch.send(h.channel)
    assert h.leader_and_isr(3)[("t", 0)]["leader"] == 1
    rsm.handle_state_changes([("t", 0, 3)], S.ONLINE)
    assert h.controller.context.assignments[("t", 0)] == (1, 2, 3)
