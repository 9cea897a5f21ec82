"""The dashboard's side-by-side view (issue 26): one catalogue scenario run on a ZooKeeper lab and a KRaft lab
together, and both timelines aligned at the fault (zkbroker/lab/side_by_side.py).

The two runs go on two threads of the dashboard's process, straight through (no stepping), each on a lab of its
own in DIR/side-by-side/NAME-MODE; the runner tears each lab down at its end, and its timeline stays for the view.
POST /api/compare takes {"action": "start", "name": ..., "modes": ["0.8", "kraft"]} (default: the scenario's
first ZooKeeper mode and first KRaft mode) and {"action": "stop"}; GET /api/compare says where both runs are,
with each one's aligned timeline and milestones.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from zkbroker import timeline
from zkbroker.lab.dashboard.scenarios import ScenarioCommandError
from zkbroker.lab.runner import Cancelled, ScenarioRun
from zkbroker.lab.scenario import KRAFT_MODES, MODES, Scenario, ScenarioError, catalogue, find_scenario
from zkbroker.lab.side_by_side import aligned

COMPARE_DIR = "side-by-side"
NARRATION_KEPT = 100


def comparable(scenario: Scenario) -> tuple[str, str] | None:
    """The scenario's first ZooKeeper mode and first KRaft mode, if it has both."""
    zookeeper = [m for m in MODES if m in scenario.modes and m not in KRAFT_MODES]
    kraft = [m for m in MODES if m in scenario.modes and m in KRAFT_MODES]
    return (zookeeper[0], kraft[0]) if zookeeper and kraft else None


def comparable_json() -> list[dict]:
    """The catalogue's scenarios that run on both designs, with the modes each side may take."""
    return [{"name": s.name, "source": s.source, "summary": s.summary,
             "zookeeper_modes": [m for m in MODES if m in s.modes and m not in KRAFT_MODES],
             "kraft_modes": [m for m in MODES if m in s.modes and m in KRAFT_MODES],
             "why": {m: spec.why for m, spec in s.modes.items()}}
            for s in catalogue() if comparable(s) is not None]


@dataclass
class Side:
    mode: str
    directory: Path
    run: ScenarioRun
    narration: list[dict] = field(default_factory=list)
    thread: threading.Thread | None = None
    error: str | None = None
    finished: bool = False


@dataclass
class Comparison:
    scenario: Scenario
    sides: list[Side]
    cancelled: threading.Event


class CompareControl:
    """At most one comparison at a time per dashboard."""

    def __init__(self, lab_dir: Path) -> None:
        self.lab_dir = Path(lab_dir)
        self.comparison: Comparison | None = None
        self._lock = threading.Lock()

    def command(self, body: object) -> dict:
        if not isinstance(body, dict) or body.get("action") not in ("start", "stop"):
            raise ScenarioCommandError("The body must be a JSON object with an action: start or stop", 400)
        with self._lock:
            if body["action"] == "start":
                self._start(body)
            elif self.comparison is None or self._finished():
                raise ScenarioCommandError("No side-by-side run is going on to stop")
            else:
                self.comparison.cancelled.set()
        return self.status()

    def _finished(self) -> bool:
        return self.comparison is not None and all(s.finished for s in self.comparison.sides)

    def _start(self, body: dict) -> None:
        if self.comparison is not None and not self._finished():
            raise ScenarioCommandError(f"{self.comparison.scenario.name} is still running side by side; stop it "
                                       "first")
        unknown = sorted(set(body) - {"action", "name", "modes"})
        if unknown:
            raise ScenarioCommandError(f"start takes name and modes; unknown: {', '.join(unknown)}", 400)
        try:
            scenario = find_scenario(str(body.get("name")))
        except ScenarioError as e:
            raise ScenarioCommandError(str(e), 400) from None
        default = comparable(scenario)
        if default is None:
            raise ScenarioCommandError(f"Scenario {scenario.name} does not run on both designs (its modes: "
                                       f"{', '.join(scenario.modes)})", 400)
        modes = body.get("modes", list(default))
        if not (isinstance(modes, list) and len(modes) == 2 and modes[0] in scenario.modes
                and modes[0] not in KRAFT_MODES and modes[1] in scenario.modes and modes[1] in KRAFT_MODES):
            raise ScenarioCommandError("modes names two of the scenario's modes: a ZooKeeper one, then a KRaft one "
                                       f"(it has {', '.join(scenario.modes)})", 400)
        cancelled = threading.Event()
        sides = []
        for mode in modes:
            directory = self.lab_dir / COMPARE_DIR / f"{scenario.name}-{mode}"
            directory.mkdir(parents=True, exist_ok=True)
            timeline.path_in(directory).unlink(missing_ok=True)  # a former run's story is not this one's
            narration: list[dict] = []

            def narrate(line: str, narration=narration) -> None:
                narration.append({"ts": round(time.time() * 1000, 1), "text": line})
                del narration[:-NARRATION_KEPT]

            run = ScenarioRun(scenario, mode, 0, directory, narrate, None, cancelled)
            side = Side(mode, directory, run, narration)
            side.thread = threading.Thread(target=self._run, args=(side,), daemon=True, name=f"side-by-side-{mode}")
            sides.append(side)
        self.comparison = Comparison(scenario, sides, cancelled)
        for side in sides:
            side.thread.start()

    @staticmethod
    def _run(side: Side) -> None:
        try:
            side.run.run()
        except Cancelled:
            side.error = "stopped"
        except Exception as e:  # shown on the page; the dashboard and the other side go on
            side.error = f"{type(e).__name__}: {e}"
        finally:
            side.finished = True

    def stop(self) -> None:
        """Cancel the runs (the dashboard is going away); each runner tears its lab down."""
        if self.comparison is not None and not self._finished():
            self.comparison.cancelled.set()
            for side in self.comparison.sides:
                side.thread.join(60)

    def status(self) -> dict:
        c = self.comparison
        if c is None:
            return {"state": "idle"}
        return {"state": "finished" if self._finished() else "running", "scenario": c.scenario.name,
                "source": c.scenario.source, "summary": c.scenario.summary,
                "sides": [self._side(c.scenario, side) for side in c.sides]}

    @staticmethod
    def _side(scenario: Scenario, side: Side) -> dict:
        result = side.run.result
        steps_end = result.step_times[-1][2] if side.finished and result.step_times else None
        return {"mode": side.mode, "design": "kraft" if side.mode in KRAFT_MODES else "zookeeper",
                "why": scenario.modes[side.mode].why, "lab": str(side.directory),
                "state": "finished" if side.finished else "running", "error": side.error,
                "verdict": result.verdict if side.finished and side.error is None else None,
                "expected": result.expected if side.finished and side.error is None else None,
                "failures": list(result.failures),
                "expect": result.expect, "narration": side.narration[-20:],
                **aligned(timeline.read(timeline.path_in(side.directory)), until=steps_end)}
