"""The one loop of ZooKeeper's and KRaft's torture (torture.torture_loop) and what it sums per mode, with runs
played by stand-ins; and the KRaft observer's leadership, read from the newest image a serving broker applied."""

from __future__ import annotations

import os

from zkbroker.lab import kraft_lab
from zkbroker.lab.checker import Report, Window
from zkbroker.lab.cluster import BrokerEntry, ClusterFile
from zkbroker.lab.kraft_observer import KRaftObserver
from zkbroker.lab.runner import RunResult
from zkbroker.lab.scenario import Step
from zkbroker.lab.torture import Fault, torture_loop


def _kraft_run(label: str, violations: list[dict], leaderless: list[float]) -> tuple[RunResult, tuple[Fault, ...]]:
    steps = [(Step("kill", {}), 1000.0, 5000.0), (Step("partition", {}), 6000.0, 9000.0)]
    report = Report(acknowledged=40, windows=[Window("t", 0, 1500.0, 3500.0, 30)], run_end=10000.0)
    run = RunResult(label, "kraft", "ok", verdict="lost" if violations else "ok", report=report, step_times=steps,
                    quorum={"violations": violations, "leaderless_ms": leaderless,
                            "leaderless_ms_max": max(leaderless), "committed": 500})
    return run, (Fault("kill", "kill broker 1", 0, 0), Fault("controller", "cut off controller 3001", 1, 1))


def test_the_loop_sums_a_kraft_lab_s_data_and_quorum_figures_per_fault_kind():
    told: list[str] = []
    result = torture_loop(2, 7, ("kill", "controller"), ["kraft"], lambda i: (f"run{i}", f"faults of {i}"),
                          lambda i: [_kraft_run(f"run{i}", [], [0.0, 900.0 + i])], told.append)
    j = result.as_json()["modes"][0]
    assert (result.runs, j["runs"], j["faults"], j["acknowledged"], j["metadata_committed"]) == (2, 2, 4, 80, 1000)
    assert j["unavailable_ms_by_fault"] == {"kill": {"faults": 2, "median": 2000, "max": 2000},
                                            "controller": {"faults": 2, "median": 0, "max": 0}}
    assert j["leaderless_ms_by_fault"]["controller"] == {"faults": 2, "median": 900, "max": 901}
    assert j["leaderless_ms_max"] == 901 and j["raft_violations"] == [] and result.expected
    assert told[0] == "[torture] run 1/2: faults of 0" and "0 Raft violations" in told[1]


def test_a_raft_violation_breaks_the_kraft_promise_and_is_told_with_its_run():
    broken = {"invariant": "one-leader-per-epoch", "detail": "epoch 4 has leaders 3001, 3002"}
    told: list[str] = []
    result = torture_loop(1, 0, ("controller",), ["kraft"], lambda i: ("r", "x"),
                          lambda i: [_kraft_run("r", [broken], [0.0, 0.0])], told.append)
    assert not result.expected
    assert result.as_json()["modes"][0]["raft_violations"] == [{**broken, "run": "r"}]
    assert any("one-leader-per-epoch: epoch 4" in line for line in told)


def test_no_run_starts_after_the_deadline_and_the_result_counts_the_runs_done():
    played: list[int] = []

    def play(i):
        played.append(i)
        return [_kraft_run(str(i), [], [0.0, 0.0])]
    result = torture_loop(5, 0, ("kill",), ["kraft"], lambda i: (str(i), ""), play, lambda line: None, until=0.0)
    assert played == [] and result.runs == 0


class _Lab:
    """A KRaft lab of brokers whose control sockets answer `state` from a table (None: no answer), and no
    controllers (so no active controller's view: registered() reads the freshest image)."""

    def __init__(self, states: dict[int, dict | None]) -> None:
        self.states = states

    def load(self) -> ClusterFile:
        return ClusterFile("", None, mode="kraft",
                           brokers=[BrokerEntry(b, "127.0.0.1", 9000 + b, os.getpid(), "/x", control=str(b))
                                    for b in self.states])


def _state(offset: int, fenced: bool, leader: int, isr: list[int]) -> dict:
    return {"metadata_offset": offset, "lifecycle": {"fenced": fenced, "broker_epoch": 5},
            "metadata": {"partitions": [{"topic": "t", "partition": 0, "leader": leader, "leader_epoch": offset,
                                         "isr": isr, "replicas": [1, 2, 3]}], "live_brokers": [1, 2]}}


def test_the_kraft_observer_reads_leadership_from_the_newest_image_of_a_serving_broker(monkeypatch):
    lab = _Lab({1: _state(40, False, 1, [1, 2, 3]), 2: _state(55, False, 2, [2, 3]),
                3: _state(90, True, 3, [3]), 4: None})  # 3 is fenced: its image is not trusted; 4 does not answer
    monkeypatch.setattr(kraft_lab, "broker_state", lambda control, timeout_s=1.0: lab.states[int(control)])
    observer = KRaftObserver(lab)
    leadership = observer.leadership("t", 0)
    assert (leadership.leader, leadership.leader_epoch, leadership.isr) == (2, 55, (2, 3))
    assert observer.assignment("t") == {0: (1, 2, 3)} and observer.assignment("u") is None
    assert observer.registered() == {1, 2}
    lab.states = {1: _state(3, False, -1, [])}
    assert KRaftObserver(lab).leadership("t", 0).leader is None
    lab.states = {1: _state(30, True, 1, [1])}  # only a fenced broker answers: its image is better than none
    assert KRaftObserver(lab).leadership("t", 0).leader == 1


def test_zookeeper_torture_plays_each_planned_scenario_in_both_modes_through_the_loop(monkeypatch):
    from zkbroker.lab import torture
    from zkbroker.lab.runner import ScenarioResult

    played: list[tuple[str, str]] = []

    def fake_run_scenario(scenario, mode, seed, **kwargs):
        played.append((scenario.name, mode))
        return ScenarioResult(scenario.name, seed, [RunResult(scenario.name, m, "ok", report=Report(acknowledged=3))
                                                    for m in ("0.8", "fixed")])
    monkeypatch.setattr(torture, "run_scenario", fake_run_scenario)
    result = torture.run_torture(2, 4, ("kill",), "both", narrate=lambda line: None)
    assert played == [("torture-4-0", "both"), ("torture-4-1", "both")]
    assert {m: (t.runs, t.faults, t.acknowledged) for m, t in result.totals.items()} == {
        "0.8": (2, 6, 6), "fixed": (2, 6, 6)}
    assert result.expected and "metadata_committed" not in result.as_json()["modes"][0]
