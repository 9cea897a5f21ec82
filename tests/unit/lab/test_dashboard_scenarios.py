"""The Scenarios view's control without running one: the catalogue, the questions a student is asked, the
stepper's Play / Step / predict rules, and commands refused with the reason."""

from __future__ import annotations

import threading

import pytest

from zkbroker.lab.dashboard import scenarios
from zkbroker.lab.dashboard.scenarios import DashboardStepper, ScenarioCommandError, ScenarioControl, question
from zkbroker.lab.runner import Cancelled
from zkbroker.lab.scenario import Step

EXPECT = Step("expect", {"condition": "isr_excludes", "broker": 3, "topic": "t", "partition": 0}, line=30)
KILL = Step("kill", {"broker": 1}, "Broker 1 crashes", line=12)


def test_the_catalogue_has_list_json_fields():
    listed = scenarios.catalogue_json()
    assert listed and {"name", "source", "summary", "modes"} <= set(listed[0])


def test_only_an_expect_step_asks_a_question():
    assert question(EXPECT) == "Will this hold: broker 3 is out of t-0's ISR?"
    assert question(KILL) is None


def waits(stepper: DashboardStepper, index: int, step: Step, timeout_s: float = 0.5) -> bool:
    """Whether stepper.wait blocks (True) for timeout_s."""
    done = threading.Event()
    cancelled = threading.Event()

    def go() -> None:
        try:
            stepper.wait("s 0.8", index, step, cancelled)
        except Cancelled:
            pass
        done.set()
    threading.Thread(target=go, daemon=True).start()
    blocked = not done.wait(timeout_s)
    cancelled.set()
    done.wait(5)
    return blocked


def test_stepping_waits_for_step_and_playing_does_not(monkeypatch):
    monkeypatch.setattr(scenarios, "PLAY_PACE_S", 0.0)
    assert waits(DashboardStepper(playing=False, predictions={}, ask=True), 0, KILL)
    assert not waits(DashboardStepper(playing=True, predictions={}, ask=True), 0, KILL)


def test_playing_stops_for_a_prediction_unless_it_is_made_or_not_asked(monkeypatch):
    monkeypatch.setattr(scenarios, "PLAY_PACE_S", 0.0)
    assert waits(DashboardStepper(playing=True, predictions={}, ask=True), 3, EXPECT)
    assert not waits(DashboardStepper(playing=True, predictions={3: True}, ask=True), 3, EXPECT)
    assert not waits(DashboardStepper(playing=True, predictions={}, ask=False), 3, EXPECT)


def test_step_is_released_by_step():
    stepper = DashboardStepper(playing=False, predictions={}, ask=True)
    threading.Timer(0.2, stepper.release).start()
    stepper.wait("s 0.8", 0, KILL, threading.Event())
    assert stepper.waiting is None


@pytest.mark.parametrize("body,status,words", [
    ("step", 400, "JSON object"), ({"action": "explode"}, 400, "Unknown action"),
    ({"action": "step"}, 409, "No scenario is running"),
    ({"action": "start", "name": "no-such-scenario"}, 400, "No scenario 'no-such-scenario'"),
    ({"action": "start", "name": "unclean-election", "mode": "1.0"}, 400, "has no mode '1.0'"),
    ({"action": "start", "name": "unclean-election", "predict": "fine"}, 400, "predict names a verdict"),
    ({"action": "start", "name": "unclean-election", "speed": 2}, 400, "unknown: speed")])
def test_commands_refused_with_the_reason(tmp_path, body, status, words):
    control = ScenarioControl(tmp_path, lambda directory: None)
    with pytest.raises(ScenarioCommandError, match=words) as refused:
        control.command(body)
    assert refused.value.status == status
    assert control.status() == {"state": "idle"}
