"""`zkbroker lab torture --mode kraft` (`--kraft`): seeded random faults on a KRaft lab's controllers while the
quorum's leader keeps appending metadata records, judged by the quorum checker's Raft invariants (DESIGN §17,
quorum_checker.py).

Each run starts its own `lab up --kraft` (three controllers; in the lab network when partitions are drawn),
with short quorum timeouts so that elections come quickly. A load thread appends a few NoOpRecords to the
leader every 50 ms (through the leader's lab control socket, as `lab state` finds it). Faults of the kind
`controller` come one after another, each healed before the next: SIGKILL a controller (the leader or another)
and start it again, SIGSTOP one past its fetch timeout and SIGCONT it, or partition one from the other two and
heal. After the last, the run waits until the controllers agree on a leader and every one has caught up to its
high watermark, stops the lab, reads every voter's metadata log and checks: one leader per epoch, committed
records identical on every voter, no committed record lost. It also measures the longest time without a
quorum leader that began while a fault was in force (from the timeline's `raft_state` events).

It starts its lab without brokers (--brokers 0), so the data verdicts of ZooKeeper mode's torture have no
counterpart here yet: a KRaft torture is the quorum's torture.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from zkbroker import timeline
from zkbroker.control_protocol import ControlError
from zkbroker.lab import kraft_lab
from zkbroker.lab.cluster import LabCluster, LabError
from zkbroker.lab.control_client import ControlClient
from zkbroker.lab.processes import process_state, wait_until
from zkbroker.lab.quorum_checker import check_quorum, read_voter_log

FAULT_KINDS = ("controller",)
ACTIONS = ("kill", "pause", "partition")
FAULTS_PER_RUN = 3
CONTROLLERS = 3
APPEND_EVERY_S = 0.05
APPEND_COUNT = 5
#: Short timeouts, so that a run's elections come within a second or two (a loaded machine still keeps up).
QUORUM_CONFIG = {"controller.quorum.election.timeout.ms": "500", "controller.quorum.fetch.timeout.ms": "1000",
                 "controller.quorum.election.backoff.max.ms": "500", "controller.quorum.request.timeout.ms": "1000"}
SETTLE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ControllerFault:
    action: str  # kill, pause or partition
    target: str  # "leader" or "follower": chosen among the controllers when the fault begins
    ms: int  # how long it lasts before it is healed
    wait_ms: int  # the quiet time before it

    def describe(self, node: int | None = None) -> str:
        who = f"controller {node}" if node is not None else f"the {self.target}"
        verb = {"kill": "kill", "pause": "pause", "partition": "cut off"}[self.action]
        return f"{verb} {who} for {self.ms / 1000:.1f} s"


def plan(seed: int, run: int, network: bool) -> list[ControllerFault]:
    """The faults of run `run` of a KRaft torture seeded with `seed`."""
    rng = random.Random(f"kraft/{seed}/{run}")
    actions = ACTIONS if network else ACTIONS[:2]
    faults = []
    for _ in range(FAULTS_PER_RUN):
        action = rng.choice(actions)
        length = {"kill": (500, 3000), "pause": (1500, 4000), "partition": (2000, 6000)}[action]
        faults.append(ControllerFault(action, rng.choice(("leader", "follower")), rng.randrange(*length),
                                      rng.randrange(300, 1500)))
    return faults


@dataclass
class KRaftRun:
    label: str
    faults: list[str]
    violations: list[dict]
    committed: int  # the highest high watermark reported
    leaderless_ms: list[float]  # per fault: the longest time without a quorum leader that began during it
    seconds: float
    error: str | None = None  # the run could not finish (a lab that would not start, a quorum that never settled)

    @property
    def verdict(self) -> str:
        if self.violations:
            return "divergent" if any(v["invariant"] == "committed-diverged" for v in self.violations) else "lost"
        return "stuck" if self.error else "ok"


@dataclass
class KRaftTotals:
    mode: str = "kraft"
    runs: list[KRaftRun] = field(default_factory=list)

    @property
    def expected(self) -> bool:
        return all(r.verdict == "ok" for r in self.runs)

    def as_json(self) -> dict:
        verdicts: dict[str, int] = {}
        for r in self.runs:
            verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
        leaderless = [ms for r in self.runs for ms in r.leaderless_ms]
        return {"mode": self.mode, "runs": len(self.runs), "expected": self.expected,
                "verdict": "ok" if self.expected else next(v for v in ("lost", "divergent", "stuck") if v in verdicts),
                "verdicts": verdicts, "committed": sum(r.committed for r in self.runs),
                "raft_violations": [{**v, "run": r.label} for r in self.runs for v in r.violations],
                "errors": [{"run": r.label, "why": r.error} for r in self.runs if r.error],
                "leaderless_ms": {"faults": len(leaderless),
                                  "median": round(statistics.median(leaderless)) if leaderless else 0,
                                  "max": round(max(leaderless, default=0))},
                "seconds": [round(r.seconds, 1) for r in self.runs]}


@dataclass
class KRaftTortureResult:
    seed: int
    runs: int
    faults: tuple[str, ...]
    totals: dict[str, KRaftTotals]

    @property
    def expected(self) -> bool:
        return all(t.expected for t in self.totals.values())

    def as_json(self) -> dict:
        return {"seed": self.seed, "runs": self.runs, "faults": list(self.faults),
                "modes": [t.as_json() for t in self.totals.values()]}


class _Load:
    """Appends NoOpRecords to whichever controller leads, every APPEND_EVERY_S, until stopped."""

    def __init__(self, lab: LabCluster) -> None:
        self.lab = lab
        self.appended = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kraft-torture-load", daemon=True)

    def __enter__(self) -> _Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        leader: int | None = None
        controllers = self.lab.load().controllers
        while not self._stop.wait(APPEND_EVERY_S):
            entry = next((c for c in controllers if c.id == leader), None)
            if entry is None or process_state(entry.pid) != "running":
                states = {c.id: kraft_lab.raft_state(c.control, 0.5) for c in controllers
                          if c.pid is not None and process_state(c.pid) == "running"}
                leader = next((n for n, s in states.items() if s and s["state"] == "leader"), None)
                controllers = self.lab.load().controllers
                continue
            try:
                with ControlClient(entry.control, 1.0) as client:
                    client.request({"command": "append", "count": APPEND_COUNT})
                self.appended += APPEND_COUNT
            except ControlError:
                leader = None  # not the leader any more, or gone: look again


def run_kraft_torture(runs: int, seed: int = 0, network: bool = True, narrate: Callable[[str], None] = print,
                      base_dir: Path | None = None) -> KRaftTortureResult:
    totals = KRaftTotals()
    for index in range(runs):
        faults = plan(seed, index, network)
        label = f"kraft-torture-{seed}-{index}"
        narrate(f"[torture] run {index + 1}/{runs} kraft: " + "; ".join(f.describe() for f in faults))
        with tempfile.TemporaryDirectory(prefix="zkbroker-kraft-torture-", dir=base_dir) as tmp:
            run = _one_run(LabCluster(Path(tmp) / "lab"), label, faults, network, seed, index, narrate)
        totals.runs.append(run)
        narrate(f"[torture] run {index + 1}/{runs} kraft: {run.verdict}, {run.committed} committed, "
                f"{len(run.violations)} Raft violations, longest without a leader "
                f"{max(run.leaderless_ms, default=0) / 1000:.1f} s ({run.seconds:.0f} s)"
                + (f"; {run.error}" if run.error else ""))
        for v in run.violations[:3]:
            narrate(f"[torture]     {v['invariant']}: {v['detail']}")
    return KRaftTortureResult(seed, runs, FAULT_KINDS, {"kraft": totals})


def _one_run(lab: LabCluster, label: str, faults: list[ControllerFault], network: bool, seed: int, index: int,
             narrate: Callable[[str], None]) -> KRaftRun:
    rng = random.Random(f"kraft/{seed}/{index}/targets")
    began = time.monotonic()
    done: list[str] = []
    windows: list[tuple[float, float]] = []  # each fault's span, epoch ms
    error = None
    states: dict[int, dict | None] = {}
    try:
        lab.up(kraft=True, controllers=CONTROLLERS, brokers=0, network=network,
               config=[f"{k}={v}" for k, v in QUORUM_CONFIG.items()])
        with _Load(lab):
            for fault in faults:
                time.sleep(fault.wait_ms / 1000)
                node = _target(lab, fault.target, rng)
                start = time.time() * 1000
                _apply(lab, fault, node)
                done.append(fault.describe(node))
                _settle(lab)
                # until the quorum has settled after the heal: a healed voter's disruption belongs to its fault
                windows.append((start, time.time() * 1000))
            time.sleep(1.0)
        states = _caught_up(lab)
    except (LabError, kraft_lab.KRaftLabError, TimeoutError) as e:
        error = str(e)
    finally:
        events = timeline.read(lab.timeline_file) if lab.timeline_file.exists() else []
        cluster = lab.load() if lab.cluster_file.exists() else None
        try:
            if cluster is not None:
                lab.down()
        except LabError as e:
            error = error or str(e)
    violations: list[dict] = []
    committed = 0
    if cluster is not None and cluster.controllers:
        voters = [read_voter_log(c.id, Path(c.config).parent / "data",
                                 (states.get(c.id) or {}).get("high_watermark"))
                  for c in cluster.controllers if (Path(c.config).parent / "data").exists()]
        report = check_quorum(voters, events)
        violations = [{"invariant": v.invariant, "detail": v.detail} for v in report.violations]
        committed = report.committed_end
    return KRaftRun(label, done, violations, committed, _leaderless(events, windows), time.monotonic() - began,
                    error)


def _target(lab: LabCluster, target: str, rng: random.Random) -> int:
    controllers = lab.load().controllers
    states = {c.id: kraft_lab.raft_state(c.control) for c in controllers}
    leader = next((n for n, s in states.items() if s and s["state"] == "leader"), None)
    if target == "leader" and leader is not None:
        return leader
    return rng.choice([c.id for c in controllers if c.id != leader])


def _apply(lab: LabCluster, fault: ControllerFault, node: int) -> None:
    member = f"controller:{node}"
    if fault.action == "kill":
        lab.kill(member)
        time.sleep(fault.ms / 1000)
        lab.start(member)
    elif fault.action == "pause":
        lab.pause(member)
        time.sleep(fault.ms / 1000)
        lab.resume(member)
    else:
        others = [f"controller:{c.id}" for c in lab.load().controllers if c.id != node]
        lab.partition(member, others)
        time.sleep(fault.ms / 1000)
        lab.heal()


def _settle(lab: LabCluster) -> None:
    """Until the controllers agree on a leader again (each fault is healed before the next begins)."""
    try:
        kraft_lab.wait_for_leader(lab.load().controllers, SETTLE_TIMEOUT_S)
    except kraft_lab.KRaftLabError as e:
        raise TimeoutError(str(e)) from None


def _caught_up(lab: LabCluster) -> dict[int, dict | None]:
    """Every controller's Raft state once all have the leader's log end and high watermark."""
    controllers = lab.load().controllers
    found: dict[int, dict | None] = {}

    def level() -> bool:
        found.clear()
        found.update({c.id: kraft_lab.raft_state(c.control) for c in controllers})
        marks = {(s["log_end_offset"], s["high_watermark"]) for s in found.values() if s is not None}
        return len(marks) == 1 and None not in found.values()
    if not wait_until(level, SETTLE_TIMEOUT_S, interval_s=0.2):
        raise TimeoutError("the controllers did not all catch up to the leader's log end and high watermark")
    return dict(found)


def _leaderless(events: list[dict], windows: list[tuple[float, float]]) -> list[float]:
    """For each fault span: the longest time without a quorum leader that began within it."""
    gaps = kraft_lab.leaderless_windows(events, CONTROLLERS)
    return [max((b - a for a, b in gaps if start <= a <= end), default=0.0) for start, end in windows]
