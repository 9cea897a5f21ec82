"""`zkbroker lab torture`: seeded random faults under a steady acks=all load, checked like a scenario (DESIGN §10).

Each run is a scenario written by `plan()` from the seed and the run's number: a lab of three brokers (three
ZooKeeper servers when ZooKeeper faults are asked for, a lab network when partitions are), a topic of three
partitions with replication factor 3, one producer per partition writing acks=all records every 50 ms from
the first step to the last, and a few faults one after another, each healed before the next:

- kill: SIGKILL a broker, start it again after a moment;
- pause: SIGSTOP a broker past its session timeout (a long GC pause), then SIGCONT;
- partition: cut a broker off from ZooKeeper, from the other brokers, from the clients, or (Jepsen's) from the
  other brokers and, once its ISRs have shrunk to it, from ZooKeeper too; heal;
- zookeeper: SIGKILL one ZooKeeper server of three, start it again.

After each fault the run waits until every partition has its three replicas in its ISR again. The same
schedule runs in both modes: `0.8` with 0.8.2's defaults (min.insync.replicas=1, unclean election on,
high-watermark truncation) and `fixed` with the safe configuration (min.insync.replicas=2, unclean election
off, leader-epoch truncation, broker epochs). The runner's checker judges each run; torture sums them per mode
and measures unavailability per fault kind (the longest window without an acknowledgement that began while a
fault was in force).
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from zkbroker.lab.runner import GRAVITY, RunResult, gravest, run_scenario
from zkbroker.lab.scenario import ModeSpec, Scenario, Step

FAULT_KINDS = ("kill", "pause", "partition", "zookeeper")
FAULTS_PER_RUN = 3
PARTITIONS = 3
SESSION_MS = 3000
INTERVAL_MS = 50  # between two records of one producer
# Per producer: 16 minutes at INTERVAL_MS, far more than a run lasts (each value is made before the first send: a
# million of them cost seconds of CPU per producer)
LOAD_RECORDS = 20_000
COMMON = {"zookeeper.session.timeout.ms": str(SESSION_MS), "replica.lag.time.max.ms": "3000",
          "replica.fetch.wait.max.ms": "500"}
SAFE = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false",
        "replication.truncation": "leader-epoch", "broker.epoch.enable": "true"}


@dataclass(frozen=True)
class Fault:
    kind: str
    what: str  # e.g. "kill broker 2 for 1.4 s"
    first_step: int  # its steps in the plan, [first, last]
    last_step: int


@dataclass(frozen=True)
class Plan:
    scenario: Scenario
    faults: tuple[Fault, ...]


def plan(seed: int, run: int, faults: tuple[str, ...] = FAULT_KINDS) -> Plan:
    """The scenario of run `run` of a torture seeded with `seed` (the same for every mode)."""
    rng = random.Random(f"{seed}/{run}")
    steps: list[Step] = []
    done: list[Fault] = []

    def add(action: str, narrate: str = "", **fields) -> None:
        steps.append(Step(action, fields, narrate))

    rows = [rng.sample([1, 2, 3], 3) for _ in range(PARTITIONS)]
    add("create_topic", topic="t", partitions=PARTITIONS, replicas=rows)
    for partition in range(PARTITIONS):
        add("produce", topic="t", partition=partition, count=LOAD_RECORDS, interval_ms=INTERVAL_MS, timeout_ms=4000,
            background=True, until_end=True, **{"as": f"load-{partition}"})
    for _ in range(FAULTS_PER_RUN):
        add("sleep", ms=rng.randrange(300, 1500))
        kind = rng.choice(faults)
        first = len(steps)
        broker = rng.randrange(1, 4)
        if kind == "kill":
            down = rng.randrange(500, 3000)
            add("kill", broker=broker)
            add("sleep", ms=down)
            add("start", broker=broker)
            what = f"kill broker {broker} for {down / 1000:.1f} s"
        elif kind == "pause":
            stalled = SESSION_MS + rng.randrange(500, 2500)
            add("pause", broker=broker)
            add("sleep", ms=stalled)
            add("resume", broker=broker)
            what = f"pause broker {broker} for {stalled / 1000:.1f} s"
        elif kind == "partition":
            others = [f"broker:{b}" for b in (1, 2, 3) if b != broker]
            peers = rng.choice([["zookeeper"], others, ["clients"], others + ["then zookeeper"]])
            cut = rng.randrange(2000, 6000)
            if peers[-1] == "then zookeeper":  # Jepsen's: its ISRs shrink to it, then it loses ZooKeeper too
                add("partition", node=f"broker:{broker}", **{"from": others})
                add("sleep", ms=4000)
                add("partition", node=f"broker:{broker}", **{"from": ["zookeeper"]})
            else:
                add("partition", node=f"broker:{broker}", **{"from": peers})
            add("sleep", ms=cut)
            add("heal")
            what = f"cut broker {broker} off from {' '.join(peers)} for {cut / 1000:.1f} s"
        else:
            server = rng.randrange(1, 4)
            down = rng.randrange(1000, 3000)
            add("kill", zookeeper=server)
            add("sleep", ms=down)
            add("start", zookeeper=server)
            what = f"kill ZooKeeper server {server} for {down / 1000:.1f} s"
        for partition in range(PARTITIONS):
            add("wait", condition="isr_size", topic="t", partition=partition, size=3, timeout_ms=30000)
        done.append(Fault(kind, what, first, len(steps) - 1))
    scenario = Scenario(
        name=f"torture-{seed}-{run}", source="lab torture", summary="; ".join(f.what for f in done), brokers=3,
        zookeepers=3 if "zookeeper" in faults else 1, network="partition" in faults, config=dict(COMMON),
        modes={"0.8": ModeSpec({}, "ok", why="0.8.2's defaults"),
               "fixed": ModeSpec(dict(SAFE), "ok", why="RF 3, acks=all, min.insync.replicas=2, unclean election "
                                                       "off, leader epochs, broker epochs")},
        steps=steps, settle_ms=15000)
    return Plan(scenario, tuple(done))


#: The modes whose configuration promises that no acknowledged record is lost and no replica diverges (and, in a
#: KRaft lab, no Raft invariant is broken); 0.8.2's defaults promise none of it.
SAFE_MODES = ("fixed", "kraft")


@dataclass
class ModeTotals:
    mode: str
    runs: int = 0
    faults: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    divergent: int = 0
    unavailable_ms_max: float = 0.0
    losses: list[dict] = field(default_factory=list)
    stuck: list[dict] = field(default_factory=list)  # why each stuck run was called stuck
    unavailable_by_fault: dict[str, list[float]] = field(default_factory=dict)  # kind -> per fault occurrence
    seconds: list[float] = field(default_factory=list)
    # A KRaft lab's quorum (RunResult.quorum): the metadata records checked on every voter, the Raft invariants
    # broken, and per fault the longest time without a quorum leader that began while it was in force
    metadata_committed: int = 0
    raft_violations: list[dict] = field(default_factory=list)
    leaderless_by_fault: dict[str, list[float]] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return gravest(*self.verdicts) if self.verdicts else "ok"

    @property
    def expected(self) -> bool:
        """The safe configuration promises no acknowledged record lost and no divergence (and a quorum that keeps
        Raft's invariants); 0.8.2 promises none."""
        return self.mode not in SAFE_MODES or (self.lost == 0 and self.divergent == 0 and not self.raft_violations)

    def add(self, run: RunResult, faults: tuple[Fault, ...], label: str) -> None:
        j = run.as_json()
        self.runs += 1
        self.faults += len(faults)
        self.verdicts[run.verdict] = self.verdicts.get(run.verdict, 0) + 1
        self.acknowledged += j["acknowledged"]
        self.lost += j["lost"]
        self.duplicated += j["duplicated"]
        self.divergent += j["divergent"]
        self.unavailable_ms_max = max(self.unavailable_ms_max, run.report.unavailable_ms_max)
        self.losses += [{**loss, "run": label} for loss in j["losses"]]
        if run.verdict == "stuck":
            self.stuck += [{"run": label, "why": why} for why in stuck_reasons(run)]
        self.seconds.append(run.seconds)
        for kind, ms in unavailability_by_fault(run, faults):
            self.unavailable_by_fault.setdefault(kind, []).append(ms)
        if run.quorum is not None:
            self.metadata_committed += run.quorum.get("committed", 0)
            self.raft_violations += [{**v, "run": label} for v in run.quorum["violations"]]
            for fault, ms in zip(faults, run.quorum.get("leaderless_ms", ())):
                self.leaderless_by_fault.setdefault(fault.kind, []).append(ms)

    def as_json(self) -> dict:
        out = {"mode": self.mode, "runs": self.runs, "faults": self.faults, "verdict": self.verdict,
               "expected": self.expected, "acknowledged": self.acknowledged, "lost": self.lost,
               "duplicated": self.duplicated, "divergent": self.divergent,
               "unavailable_ms_max": round(self.unavailable_ms_max), "losses": self.losses, "stuck": self.stuck,
               "verdicts": dict(sorted(self.verdicts.items(), key=lambda kv: GRAVITY.index(kv[0]))),
               "unavailable_ms_by_fault": _figures(self.unavailable_by_fault)}
        if self.mode == "kraft":
            out.update({"metadata_committed": self.metadata_committed, "raft_violations": self.raft_violations,
                        "leaderless_ms_by_fault": _figures(self.leaderless_by_fault),
                        "leaderless_ms_max": round(max((ms for v in self.leaderless_by_fault.values() for ms in v),
                                                       default=0))})
        return out


def _figures(by_kind: dict[str, list[float]]) -> dict[str, dict]:
    return {kind: {"faults": len(v), "median": round(statistics.median(v)), "max": round(max(v))}
            for kind, v in sorted(by_kind.items())}


def stuck_reasons(run: RunResult) -> list[str]:
    """Why a run ended stuck: the waits that never came true, then what the checker found at the end."""
    return [*run.stuck, *run.report.stuck_reasons()]


def unavailability_by_fault(run: RunResult, faults: tuple[Fault, ...]) -> list[tuple[str, float]]:
    """For each fault of the run: its kind and the longest window without acknowledgement (on any partition)
    that began while it was in force (from its first step to the end of its last, the ISR waits included)."""
    times = run.step_times
    out = []
    for fault in faults:
        if fault.last_step >= len(times):
            continue  # the run stopped before this fault
        start, end = times[fault.first_step][1], times[fault.last_step][2]
        windows = [w.length_ms(run.report.run_end) for w in run.report.windows if start <= w.start <= end]
        out.append((fault.kind, max(windows, default=0.0)))
    return out


@dataclass
class TortureResult:
    seed: int
    runs: int
    faults: tuple[str, ...]
    totals: dict[str, ModeTotals]

    @property
    def expected(self) -> bool:
        return all(t.expected for t in self.totals.values())

    def as_json(self) -> dict:
        return {"seed": self.seed, "runs": self.runs, "faults": list(self.faults),
                "modes": [t.as_json() for t in self.totals.values()]}


def check_fault_kinds(faults: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    unknown = [f for f in faults if f not in allowed]
    if unknown or not faults:
        raise ValueError(f"unknown fault kind {unknown[0]!r}; allowed: {', '.join(allowed)}" if unknown
                         else f"--faults needs at least one of {', '.join(allowed)}")


Played = list[tuple[RunResult, tuple[Fault, ...]]]  # each mode's run of one schedule, with its faults' steps


def torture_loop(runs: int, seed: int, faults: tuple[str, ...], modes: list[str],
                 schedule: Callable[[int], tuple[str, str]], play: Callable[[int], Played],
                 narrate: Callable[[str], None] = print,
                 each: Callable[[int, list[RunResult]], None] | None = None,
                 until: float | None = None) -> TortureResult:
    """The one loop of every torture, ZooKeeper's and KRaft's: `schedule(i)` names run i and says its faults,
    `play(i)` plays it in each mode; the runs are told as they end and summed per mode. `until` (a
    time.monotonic() deadline): no run starts after it, and the result counts the runs done."""
    totals = {m: ModeTotals(m) for m in modes}
    done = 0
    for index in range(runs):
        if until is not None and time.monotonic() > until:
            narrate(f"[torture] out of time: {done} of {runs} runs done")
            break
        label, summary = schedule(index)
        narrate(f"[torture] run {index + 1}/{runs}: {summary}")
        played = play(index)
        for run, its_faults in played:
            totals[run.mode].add(run, its_faults, label)
            _tell(narrate, f"[torture] run {index + 1}/{runs} {run.mode}", run)
        done += 1
        if each is not None:
            each(index, [run for run, _ in played])
    return TortureResult(seed, done, tuple(faults), totals)


def _tell(narrate: Callable[[str], None], head: str, run: RunResult) -> None:
    quorum = run.quorum
    narrate(f"{head}: {run.verdict}, {run.report.acknowledged} acknowledged, {len(run.report.losses)} lost, "
            f"{len(run.report.divergences)} divergent offsets, longest unavailability "
            f"{run.report.unavailable_ms_max / 1000:.1f} s"
            + (f"; the quorum: {quorum.get('committed', 0)} metadata records committed, "
               f"{len(quorum['violations'])} Raft violations, longest without a leader "
               f"{max(quorum.get('leaderless_ms') or [0]) / 1000:.1f} s" if quorum is not None else "")
            + f" ({run.seconds:.0f} s)")
    for loss in run.report.losses[:3]:
        narrate(f"[torture]     lost {loss.cause}")
    for duplicate in run.report.duplicates[:3]:
        narrate(f"[torture]     duplicated {duplicate.value.decode(errors='replace')} at "
                f"{duplicate.topic}-{duplicate.partition} offsets {', '.join(map(str, duplicate.offsets))}"
                + (f": {duplicate.cause}" if duplicate.cause else ""))
    for violation in (quorum or {}).get("violations", [])[:3]:
        narrate(f"[torture]     {violation['invariant']}: {violation['detail']}")
    if run.verdict == "stuck":
        for why in stuck_reasons(run)[:3]:
            narrate(f"[torture]     stuck: {why}")
    for failure in run.failures[:3]:
        narrate(f"[torture]     {failure}")


def run_torture(runs: int, seed: int = 0, faults: tuple[str, ...] = FAULT_KINDS, mode: str = "both",
                narrate: Callable[[str], None] = print, cancelled: threading.Event | None = None,
                each: Callable[[int, list[RunResult]], None] | None = None,
                until: float | None = None, security: str = "plaintext") -> TortureResult:
    """`runs` seeded runs on ZooKeeper labs, each in `mode` (0.8, fixed or both side by side); `each` is told of
    every run. `security`: each lab's listeners (`lab up --security`); the producers and the checker's reads log in
    as the lab's admin. (A KRaft lab's torture: kraft_torture.run_kraft_torture, through the same loop.)"""
    check_fault_kinds(faults, FAULT_KINDS)
    modes = ["0.8", "fixed"] if mode == "both" else [mode]
    cancelled = cancelled or threading.Event()
    plans: dict[int, Plan] = {}

    def schedule(index: int) -> tuple[str, str]:
        p = plans[index] = plan(seed, index, faults)
        return p.scenario.name, p.scenario.summary

    def play(index: int) -> Played:
        p = plans.pop(index)
        result = run_scenario(p.scenario, mode, seed, narrate=_steps_only_on_failure(narrate), cancelled=cancelled,
                              keep_unexpected=False, security=security)
        return [(run, p.faults) for run in result.runs]

    return torture_loop(runs, seed, faults, modes, schedule, play, narrate, each, until)


def _steps_only_on_failure(narrate: Callable[[str], None]) -> Callable[[str], None]:
    """The runner's narration, without the step-by-step lines (a torture run has many)."""
    def filtered(line: str) -> None:
        if "the step failed" in line or "stuck:" in line or "interrupted" in line:
            narrate(line)
    return filtered
