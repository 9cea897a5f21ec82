"""A short KRaft torture run (`lab torture --kraft`'s KRaftRun, DESIGN §17) on real processes: a lab of one
controller and two KRaft brokers, a topic of two partitions on both, a producer per partition writing with
acks=all under min.insync.replicas=2, and one broker SIGKILLed and started again. The run waits for both ISRs to
be full again, reads every replica and every voter's metadata log, and judges it: no acknowledged record lost,
none divergent, no Raft invariant broken, the fault's span and the quorum's figures recorded. (The 50-run
torture of three controllers and three brokers is bench/torture.py --kraft's.)"""

from __future__ import annotations

import threading

import pytest

from zkbroker.lab.kraft_torture import KRaftFault, KRaftPlan, KRaftRun

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_a_kraft_torture_run_with_a_broker_killed_keeps_every_acknowledged_record_and_the_raft_invariants(tmp_path):
    plan = KRaftPlan("kraft-torture-smoke", (KRaftFault("kill", "kill", "1", 500, 300),), network=False,
                     rows=((1, 2), (2, 1)), controllers=1, brokers=2)

    run, faults = KRaftRun(plan, 0, tmp_path / "lab", threading.Event()).play()

    assert run.failures == [] and run.stuck == [], (run.failures, run.stuck)
    assert run.verdict == "ok" and run.mode == "kraft"
    assert run.report.acknowledged > 0 and run.report.losses == [] and run.report.divergences == []
    assert [(f.kind, f.what) for f in faults] == [("kill", "kill broker 1 for 0.5 s")]
    assert len(run.step_times) == 1 and run.step_times[0][1] < run.step_times[0][2]
    assert run.quorum["violations"] == [] and run.quorum["committed"] > 0
    assert len(run.quorum["leaderless_ms"]) == 1
    assert not (tmp_path / "lab" / "cluster.json").exists() or not any(
        (tmp_path / "lab").glob("*/control.sock"))  # the lab is down
