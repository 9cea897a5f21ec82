"""The dashboard's Scenarios view: a catalogue scenario run in one mode by the lab's own runner
(zkbroker/lab/runner.py), with Play, Step and Pause as in RaftScope and The Secret Lives of Data.

The run goes on a thread of the dashboard's process, on a lab of its own in DIR/scenarios/NAME-MODE, which is
kept running at the end so its timeline can be replayed; the dashboard then shows that lab. Before each step
the runner asks the stepper here, which lets it go at once while playing (a moment apart, so each step can be
seen), and otherwise waits for Step. A student may predict the outcome first: the verdict of the whole run
(revealed when the checker has read every replica), and whether each `expect` step will hold (revealed once
it ran); while playing, the run stops before an `expect` step that has no prediction yet.

POST /api/scenario takes {"action": "start", "name": ..., "mode": "0.8"|"fixed", "play": false,
"predict": VERDICT}, {"action": "step"}, {"action": "play"}, {"action": "pause"}, {"action": "stop"} and
{"action": "predict", "step": INDEX, "answer": true|false}; GET /api/scenario says where the run is.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from zkbroker.lab.cluster import LabCluster, LabError
from zkbroker.lab.runner import Cancelled, ScenarioRun, describe_condition, describe_step
from zkbroker.lab.scenario import MODES, VERDICTS, Scenario, ScenarioError, Step, catalogue, find_scenario

PLAY_PACE_S = 1.5  # between two steps while playing
SCENARIOS_DIR = "scenarios"


class ScenarioCommandError(ValueError):
    """A scenario command that cannot be carried out now; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


def catalogue_json() -> list[dict]:
    """`lab scenario list --json`'s array (DESIGN §10), with each scenario's steps in words."""
    return [{"name": s.name, "source": s.source, "summary": s.summary, "modes": list(s.modes),
             "why": {m: spec.why for m, spec in s.modes.items()}, "steps": len(s.steps)} for s in catalogue()]


def question(step: Step) -> str | None:
    """What a student is asked to predict before a step: only an `expect` step has a yes-or-no outcome."""
    if step.action != "expect":
        return None
    return f"Will this hold: {describe_condition(step.fields['condition'], step.fields)}?"


class DashboardStepper:
    """The runner's Stepper: goes at once while playing, else waits for `release()`; either way it waits
    for a prediction before an `expect` step when predictions are asked for."""

    def __init__(self, playing: bool, predictions: dict[int, bool], ask: bool, on_wait=None) -> None:
        self.on_wait = on_wait  # told before each step (the run's lab is up by then)
        self.playing = playing
        self.predictions = predictions
        self.ask = ask
        self.waiting: int | None = None  # the index of the step waiting to go
        self._go = threading.Event()

    def release(self) -> None:
        self._go.set()

    def wait(self, label: str, index: int, step: Step, cancelled: threading.Event) -> None:
        self.waiting = index
        if self.on_wait is not None:
            self.on_wait()
        try:
            if self.playing and index > 0 and cancelled.wait(PLAY_PACE_S):
                raise Cancelled()
            while True:
                needs_prediction = self.ask and question(step) is not None and index not in self.predictions
                if self.playing and not needs_prediction:
                    return
                if self._go.wait(0.1):
                    self._go.clear()
                    if not needs_prediction or index in self.predictions:
                        return
                if cancelled.is_set():
                    raise Cancelled()
        finally:
            self.waiting = None


@dataclass
class Session:
    scenario: Scenario
    mode: str
    directory: Path
    stepper: DashboardStepper
    run: ScenarioRun
    thread: threading.Thread
    cancelled: threading.Event
    predicted_verdict: str | None
    narration: list[dict] = field(default_factory=list)
    error: str | None = None
    finished: bool = False


class ScenarioControl:
    """At most one scenario run at a time per dashboard; `on_lab` is told the directory of its lab."""

    def __init__(self, lab_dir: Path, on_lab) -> None:
        self.lab_dir = Path(lab_dir)
        self.on_lab = on_lab
        self.session: Session | None = None
        self._lock = threading.Lock()

    def command(self, body: object) -> dict:
        if not isinstance(body, dict) or not isinstance(body.get("action"), str):
            raise ScenarioCommandError("The body must be a JSON object with an action (start, step, play, pause, "
                                       "stop, predict)", 400)
        action = body["action"]
        with self._lock:
            if action == "start":
                self._start(body)
            elif action in ("step", "play", "pause", "stop", "predict"):
                s = self.session
                if s is None or s.finished:
                    raise ScenarioCommandError(f"No scenario is running to {action}; start one first")
                if action == "step":
                    s.stepper.release()
                elif action == "play":
                    s.stepper.playing = True
                    s.stepper.release()
                elif action == "pause":
                    s.stepper.playing = False
                elif action == "stop":
                    s.cancelled.set()
                else:
                    self._predict(s, body)
            else:
                raise ScenarioCommandError(f"Unknown action {action!r}; allowed: start, step, play, pause, stop, "
                                           "predict", 400)
        return self.status()

    def _start(self, body: dict) -> None:
        if self.session is not None and not self.session.finished:
            raise ScenarioCommandError(f"Scenario {self.session.scenario.name} is still running; stop it first")
        unknown = sorted(set(body) - {"action", "name", "mode", "play", "predict", "ask"})
        if unknown:
            raise ScenarioCommandError(f"start takes name, mode, play, predict and ask; unknown: {', '.join(unknown)}",
                                       400)
        try:
            scenario = find_scenario(str(body.get("name")))
        except ScenarioError as e:
            raise ScenarioCommandError(str(e), 400) from None
        mode = body.get("mode", "0.8")
        if mode not in scenario.modes:
            raise ScenarioCommandError(f"Scenario {scenario.name} has no mode {mode!r}; it has "
                                       f"{', '.join(m for m in MODES if m in scenario.modes)}", 400)
        predicted = body.get("predict")
        if predicted is not None and predicted not in VERDICTS:
            raise ScenarioCommandError(f"predict names a verdict: {', '.join(VERDICTS)}", 400)
        directory = self.lab_dir / SCENARIOS_DIR / f"{scenario.name}-{mode}"
        previous = LabCluster(directory)
        if previous.cluster_file.exists():  # the lab a former run kept: the lab's own `down`
            try:
                previous.down()
            except LabError as e:
                raise ScenarioCommandError(f"The lab of the last run in {directory} does not stop: {e}") from None
        directory.mkdir(parents=True, exist_ok=True)
        stepper = DashboardStepper(bool(body.get("play")), {}, bool(body.get("ask", True)),
                                   on_wait=lambda: self.on_lab(directory))
        cancelled = threading.Event()
        narration: list[dict] = []

        def narrate(line: str) -> None:
            narration.append({"ts": round(time.time() * 1000, 1), "text": line})

        run = ScenarioRun(scenario, mode, 0, directory, narrate, stepper, cancelled, keep=True)
        thread = threading.Thread(target=self._run, name=f"scenario-{scenario.name}", daemon=True)
        self.session = Session(scenario, mode, directory, stepper, run, thread, cancelled, predicted, narration)
        thread.start()

    def _run(self) -> None:
        s = self.session
        try:
            s.run.run()
        except Cancelled:
            s.error = "stopped"
        except Exception as e:  # shown on the page; the dashboard goes on
            s.error = f"{type(e).__name__}: {e}"
        finally:
            s.finished = True

    @staticmethod
    def _predict(s: Session, body: dict) -> None:
        index, answer = body.get("step"), body.get("answer")
        steps = _steps(s)
        if not isinstance(index, int) or not 0 <= index < len(steps) or question(steps[index]) is None:
            raise ScenarioCommandError("predict needs step, the index of an expect step", 400)
        if not isinstance(answer, bool):
            raise ScenarioCommandError("predict needs answer: true (it will hold) or false", 400)
        s.stepper.predictions[index] = answer
        s.stepper.release()

    def stop(self) -> None:
        """Cancel a run in progress (the dashboard is going away); the runner tears its lab down."""
        if self.session is not None and not self.session.finished:
            self.session.cancelled.set()
            self.session.thread.join(60)

    def status(self) -> dict:
        s = self.session
        if s is None:
            return {"state": "idle"}
        steps = _steps(s)
        failures = list(s.run.result.failures)
        done = len(steps) if s.finished else (s.stepper.waiting if s.stepper.waiting is not None else None)
        rows = []
        for i, step in enumerate(steps):
            row = {"index": i, "action": step.action, "text": describe_step(step), "narrate": step.narrate,
                   "question": question(step), "prediction": s.stepper.predictions.get(i)}
            if row["question"] is not None and done is not None and i < done:
                row["held"] = not any(f.startswith(f"line {step.line}:") for f in failures)
            rows.append(row)
        result = s.run.result
        state = ("finished" if s.finished else "waiting" if s.stepper.waiting is not None else "running")
        return {"state": state, "scenario": s.scenario.name, "source": s.scenario.source,
                "summary": s.scenario.summary, "mode": s.mode, "why": s.scenario.modes[s.mode].why,
                "lab": str(s.directory), "playing": s.stepper.playing, "current": s.stepper.waiting,
                "steps": rows, "narration": s.narration[-200:], "predicted_verdict": s.predicted_verdict,
                "error": s.error,
                "result": ({**result.as_json(), "expect": result.expect, "failures": failures}
                           if s.finished and s.error is None else None)}


def _steps(s: Session) -> list[Step]:
    return [step for step in s.scenario.steps if step.runs_in(s.mode)]
