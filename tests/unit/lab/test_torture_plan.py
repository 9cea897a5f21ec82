"""lab torture's schedules: the same seed and run give the same scenario, each fault is healed within the plan and
followed by waits for full ISRs, and the modes differ only in the safe configuration."""

from __future__ import annotations

import pytest

from zkbroker.lab.torture import FAULT_KINDS, FAULTS_PER_RUN, SAFE, plan, run_torture

RECOVERY = {"kill": "start", "pause": "resume", "partition": "heal", "zookeeper": "start"}


def test_a_seed_and_a_run_number_make_one_schedule():
    assert plan(7, 3) == plan(7, 3)
    assert plan(7, 3).scenario.summary != plan(7, 4).scenario.summary or plan(8, 3) != plan(7, 3)


@pytest.mark.parametrize("seed", range(20))
def test_every_fault_is_healed_and_awaited_before_the_next(seed):
    p = plan(seed, 0)
    steps = p.scenario.steps
    assert len(p.faults) == FAULTS_PER_RUN
    for fault in p.faults:
        assert fault.kind in FAULT_KINDS
        own = steps[fault.first_step:fault.last_step + 1]
        assert own[0].action in ("kill", "pause", "partition")
        assert RECOVERY[fault.kind] in [s.action for s in own]
        assert [s.action for s in own[-3:]] == ["wait"] * 3  # every partition back to a full ISR
    producers = [s for s in steps if s.action == "produce"]
    assert len(producers) == 3 and all(s.fields["background"] and s.fields["until_end"] for s in producers)
    assert all(s.fields["acks"] if "acks" in s.fields else True for s in producers)


def test_the_faults_asked_for_shape_the_lab_and_the_modes_differ_by_the_safe_configuration():
    only_kills = plan(1, 0, ("kill",))
    assert {f.kind for f in only_kills.faults} == {"kill"}
    assert (only_kills.scenario.zookeepers, only_kills.scenario.network) == (1, False)
    everything = plan(1, 0)
    assert (everything.scenario.zookeepers, everything.scenario.network) == (3, True)
    assert everything.scenario.modes["0.8"].config == {}
    assert everything.scenario.modes["fixed"].config == SAFE


def test_an_unknown_fault_kind_is_refused_with_the_allowed_ones():
    with pytest.raises(ValueError, match="unknown fault kind 'flood'; allowed: kill, pause, partition, zookeeper"):
        run_torture(1, 0, ("kill", "flood"))
