"""The scenario runner's pure parts: verdict gravity, the JSON shape of a run, the modes a scenario runs in,
step descriptions, and the stepping interface a dashboard drives."""

from __future__ import annotations

import threading

import pytest

from zkbroker.lab.checker import Attempt, PartitionState, check
from zkbroker.lab.cluster import LabError
from zkbroker.lab.runner import Cancelled, QueueStepper, RunResult, describe_step, gravest, isr_changes, modes_to_run
from zkbroker.lab.scenario import Step, find_scenario


def test_the_gravest_verdict_wins():
    assert gravest("ok", "slow", "stuck") == "stuck"
    assert gravest("unavailable", "lost", "divergent") == "lost"
    assert gravest("ok") == "ok"


def test_a_run_is_design_10s_object_and_matches_only_with_its_verdict_and_every_expectation():
    attempts = [Attempt("t", 0, b"m0", 1.0, acked_at=2.0, offset=0), Attempt("t", 0, b"m1", 3.0, acked_at=4.0,
                                                                            offset=1)]
    report = check(attempts, [PartitionState("t", 0, 1, 1, {1: {0: b"m0"}})])
    run = RunResult("kafka-1211", "0.8", "lost", verdict=report.verdict(), report=report)
    assert list(run.as_json()) == ["mode", "verdict", "expected", "acknowledged", "lost", "duplicated", "divergent",
                                   "unavailable_ms_max", "losses"]
    assert run.as_json()["verdict"] == "lost" and run.expected
    run.failures.append("line 40: expected broker 1's log of t-0 holds 1 records")
    assert not run.expected


def test_both_is_every_mode_a_scenario_has_and_a_missing_mode_says_why():
    assert modes_to_run(find_scenario("kafka-1211"), "both") == ["0.8", "fixed"]
    assert modes_to_run(find_scenario("kafka-2729-stuck-isr"), "both") == ["0.8"]
    with pytest.raises(LabError, match="has no fixed mode: The fix is not known for certain"):
        modes_to_run(find_scenario("kafka-2729-stuck-isr"), "fixed")


def test_steps_are_described_in_words():
    assert describe_step(Step("kill", {"broker": 2})) == "kill broker 2"
    assert describe_step(Step("produce", {"topic": "t", "count": 2})) == "produce 2 records to t-0 (acks=all)"
    assert describe_step(Step("wait", {"condition": "isr_excludes", "broker": 1, "topic": "t"})) == \
        "wait until broker 1 is out of t-0's ISR"
    assert describe_step(Step("expect", {"condition": "no_leader", "topic": "t", "negate": True})) == \
        "expect not (t-0 has no live leader)"
    assert describe_step(Step("consumer", {"name": "c2", "group": "g", "topic": "t", "coordinator": True})) == \
        "start coordinator-group member c2 of group g on topic t"
    assert describe_step(Step("wait", {"condition": "rebalancing", "group": "g"})) == \
        "wait until group g's coordinator is rebalancing it"


def test_a_queue_stepper_lets_a_step_go_per_release_and_gives_way_to_cancellation():
    stepper, cancelled = QueueStepper(), threading.Event()
    step = Step("sleep", {"ms": 1})
    went = threading.Event()

    def run() -> None:
        stepper.wait("s 0.8", 0, step, cancelled)
        went.set()
    thread = threading.Thread(target=run)
    thread.start()
    assert not went.wait(0.3) and stepper.waiting == ("s 0.8", 0, step)
    stepper.release()
    assert went.wait(5)
    thread.join(5)
    cancelled.set()
    with pytest.raises(Cancelled):
        stepper.wait("s 0.8", 1, step, cancelled)


def test_an_enter_stepper_goes_on_at_each_line_and_without_stepping_once_its_input_ends(tmp_path):
    import io
    import os

    from zkbroker.lab.runner import EnterStepper

    read, write = os.pipe()
    os.write(write, b"\n")
    os.close(write)
    prompts = io.StringIO()
    with os.fdopen(read) as stdin:
        stepper = EnterStepper(stdin, prompts)
        step = Step("kill", {"broker": 2})
        stepper.wait("s 0.8", 0, step, threading.Event())  # the line
        stepper.wait("s 0.8", 1, step, threading.Event())  # the end of input: no more stepping
        stepper.wait("s 0.8", 2, step, threading.Event())
    assert prompts.getvalue().count("press Enter") == 2
    assert "[s 0.8] press Enter for step 1 (kill broker 2)" in prompts.getvalue()


def test_isr_shrinks_and_expansions_are_counted_from_the_leaders_isr_writes_of_that_partition():
    def changed(topic: str, partition: int, old: list[int], new: list[int]) -> dict:
        return {"ts": 1.0, "source": "broker:2", "kind": "isr_changed", "topic": topic, "partition": partition,
                "broker": 2, "from": old, "isr": new}
    events = [changed("t", 0, [2, 1], [2]), changed("t", 0, [2], [2, 1]),  # a flap
              changed("t", 0, [2, 1], [2]), changed("t", 0, [2], [2, 1]),  # and another
              changed("t", 1, [2, 1], [2]), changed("u", 0, [2, 1], [2]),  # other partitions
              {"ts": 2.0, "source": "controller:1", "kind": "leader_changed", "topic": "t", "partition": 0,
               "leader": 2, "isr": [2]}]  # the controller's removal is not the leader's ISR write
    assert isr_changes(events, "t", 0) == (2, 2)
    assert isr_changes(events, "t", 1) == (1, 0)
    assert isr_changes([], "t", 0) == (0, 0)
    assert describe_step(Step("expect", {"condition": "isr_shrinks", "topic": "t", "size": 3})) == \
        "expect t-0's leaders shrank its ISR 3 times"
    assert describe_step(Step("wait", {"condition": "isr_expansions", "topic": "t", "size": 0})) == \
        "wait until t-0's leaders expanded its ISR 0 times"
