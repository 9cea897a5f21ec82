"""One failure on two designs: a run's timeline aligned at its fault, and the moments after it (pure)."""

from __future__ import annotations

import pytest

from zkbroker.lab.dashboard.compare import CompareControl, comparable, comparable_json
from zkbroker.lab.dashboard.scenarios import ScenarioCommandError
from zkbroker.lab.scenario import find_scenario
from zkbroker.lab.side_by_side import aligned, fault_of


def event(ts, source, kind, **fields):
    return {"ts": ts, "source": source, "kind": kind, **fields}


ZOOKEEPER_RUN = [
    event(1000, "lab", "process_started", node="broker:1", pid=10),
    event(4000, "controller:1", "controller_elected", broker=1, epoch=1),
    event(5000, "lab", "process_killed", node="broker:1", pid=10, signal="SIGKILL"),
    event(5001, "broker:2", "hw_moved", topic="t", partition=0, to=3),
    event(11100, "controller:2", "controller_elected", broker=2, epoch=2),
    event(11200, "controller:2", "broker_failed", broker=1, epoch=2),
    event(11300, "controller:2", "leader_changed", topic="t", partition=0, leader=2, leader_epoch=1, isr=[2],
          previous_leader=1),
    event(12000, "lab", "process_stopped", node="broker:2", pid=11, signal="SIGTERM"),
    event(12100, "controller:2", "controller_resigned", broker=2, epoch=2),
]

KRAFT_RUN = [
    event(900, "controller:3001", "raft_state", node=3001, state="leader", epoch=1, leader=3001),
    event(950, "controller:3001", "broker_fenced", broker=1, epoch=3, registered=True, incarnation_id="x"),
    event(1000, "lab", "process_killed", node="controller:3001", pid=20, signal="SIGKILL"),
    event(2900, "controller:3002", "raft_state", node=3002, state="candidate", epoch=2, voted_for=3002),
    event(2910, "controller:3003", "vote", **{"from": 3003, "to": 3002, "epoch": 2, "granted": True}),
    event(2911, "controller:3003", "raft_state", node=3003, state="voted", epoch=2, voted_for=3002),
    event(2930, "controller:3002", "raft_state", node=3002, state="leader", epoch=2, leader=3002),
    event(2931, "controller:2", "raft_state", node=2, state="follower", epoch=2, leader=3002),
]


def test_times_count_from_the_first_fault_the_lab_applied():
    view = aligned(ZOOKEEPER_RUN)
    assert view["fault"]["ts"] == 5000 and view["fault"]["what"] == "broker:1 killed"
    assert [(e["at"], e["kind"]) for e in view["events"]] == [
        (-1000, "controller_elected"), (0, "process_killed"), (6100, "controller_elected"), (6200, "broker_failed"),
        (6300, "leader_changed")]  # the HW sample left out; the start more than 2 s before; the teardown after


def test_the_milestones_are_the_first_of_each_after_the_fault_in_either_design():
    assert aligned(ZOOKEEPER_RUN)["milestones"] == [
        {"label": "broker declared failed", "at": 6200}, {"label": "new controller", "at": 6100},
        {"label": "leadership moved", "at": 6300}]
    kraft = aligned(KRAFT_RUN)
    assert kraft["milestones"] == [{"label": "new controller", "at": 1930}]  # a registration is no failure
    assert [e["kind"] for e in kraft["events"]] == ["raft_state", "broker_fenced", "process_killed", "raft_state",
                                                    "vote", "raft_state"]  # no voted or follower states


def test_until_cuts_the_run_at_its_last_step_and_no_fault_means_no_milestones():
    assert [m["label"] for m in aligned(ZOOKEEPER_RUN, until=11150)["milestones"]] == ["new controller"]
    before = aligned(ZOOKEEPER_RUN[:2])
    assert before["fault"] is None and before["milestones"] == [] and [e["at"] for e in before["events"]] == [0, 3000]
    assert fault_of([event(1, "lab", "fault_applied", fault="hold_fetchers", node="broker:1", at_start=True)]) is None


def test_only_scenarios_with_a_zookeeper_and_a_kraft_mode_are_offered():
    assert comparable(find_scenario("controller-failover")) == ("0.8", "kraft")
    assert comparable(find_scenario("kafka-6082-zombie-controller")) == ("fixed", "kraft")  # the first of each
    assert comparable(find_scenario("kip-101-divergence")) is None
    assert comparable(find_scenario("raft-pre-vote-disruption")) is None
    offered = {c["name"]: c for c in comparable_json()}
    assert offered["kafka-1211"]["zookeeper_modes"] == ["0.8", "fixed"] and offered["kafka-1211"]["kraft_modes"] == [
        "kraft"]


@pytest.mark.parametrize(("body", "words"), [
    ({"action": "dance"}, "start or stop"),
    ({"action": "start", "name": "kip-101-divergence"}, "does not run on both designs"),
    ({"action": "start", "name": "controller-failover", "modes": ["kraft", "0.8"]}, "a ZooKeeper one, then a KRaft"),
    ({"action": "start", "name": "controller-failover", "seed": 3}, "unknown: seed"),
    ({"action": "stop"}, "No side-by-side run"),
])
def test_a_bad_command_is_refused_in_one_sentence_and_starts_nothing(tmp_path, body, words):
    control = CompareControl(tmp_path)
    with pytest.raises(ScenarioCommandError, match=words):
        control.command(body)
    assert control.status() == {"state": "idle"} and not (tmp_path / "side-by-side").exists()


def test_a_kraft_leader_change_and_an_acl_denial_are_told_in_words():
    from zkbroker.lab.narration import describe

    assert describe(event(1, "controller:3001", "leader_changed", topic="t", partition=0, leader=2, leader_epoch=3,
                          isr=[2], partition_epoch=5, previous_leader=1)) == \
        "Partition [t,0]: leader 2 (was 1), leader epoch 3, ISR 2, partition epoch 5"
    assert describe(event(1, "broker:1", "acl_denied", principal="User:bob", operation="Write", resource_type="Topic",
                          resource="t", host="127.0.0.1", listener="SASL_SSL")) == \
        ("Principal = User:bob is Denied Operation = Write from host = 127.0.0.1 on resource = Topic:t"
         " (listener SASL_SSL)")
