"""`zkbroker lab torture --mode kraft` (`--kraft`): seeded random faults on a KRaft lab's brokers and controllers
under a steady acks=all load, judged by the data checker (checker.py) and the quorum checker's Raft invariants
(quorum_checker.py), through torture.py's loop (DESIGN §17).

Each run starts its own `lab up --kraft` (three controllers and three brokers; in the lab network when partitions
are drawn) with short quorum and session timeouts, so that elections and fencings come within seconds, and the
safe configuration (min.insync.replicas=2, unclean election off: KRaft's default; KRaft brokers truncate by
leader epoch). A topic of three partitions with replication factor 3 gets one producer per partition writing
acks=all records every 50 ms, and a load thread appends five NoOpRecords to the quorum's leader every 50 ms (so
that the metadata log grows through every fault). The faults come one after another, each healed before the
next, and after each the run waits until the quorum has a leader and every partition its three replicas in its
ISR again:

- kill: SIGKILL a broker, start it again after a moment (it registers with a new incarnation id);
- pause: SIGSTOP a broker past broker.session.timeout.ms (the active controller fences it), then SIGCONT;
- partition: cut a broker off from the other brokers, from the controllers, from the clients, or (Jepsen's)
  from the other brokers and, once its ISRs have shrunk to it, from the controllers too; heal;
- controller: kill the quorum's leader or a follower and start it again, pause one past the fetch timeout, or cut
  one off from the other two.

At the end the producers stop once writes are acknowledged again, every partition's replicas are read (leader
and ISR from the newest metadata image a serving broker has applied), the controllers catch up to the leader's
high watermark, the lab stops and every voter's metadata log is read. A run's verdict is the gravest of the data
checker's, the quorum's (`lost`/`divergent`: a Raft invariant broken) and `stuck` (a wait that never came true).
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zkbroker import timeline
from zkbroker.client.admin_client import AdminClient, AdminError
from zkbroker.control_protocol import ControlError
from zkbroker.lab import kraft_lab, recorder
from zkbroker.lab.checker import check
from zkbroker.lab.cluster import LabCluster, LabError
from zkbroker.lab.control_client import ControlClient
from zkbroker.lab.kraft_observer import KRaftObserver
from zkbroker.lab.observer import Unknown
from zkbroker.lab.processes import process_state, wait_until
from zkbroker.lab.quorum_checker import DIVERGED, check_quorum, read_voter_log
from zkbroker.lab.runner import RunResult, gravest
from zkbroker.lab.scenario import Step
from zkbroker.lab.torture import Fault, Played, TortureResult, check_fault_kinds, torture_loop
from zkbroker.protocol.errors import ErrorCode
from zkbroker.topic_partition import TopicPartition

FAULT_KINDS = ("kill", "pause", "partition", "controller")
ACTIONS = ("kill", "pause", "partition")
FAULTS_PER_RUN = 3
CONTROLLERS = 3
BROKERS = 3
PARTITIONS = 3
TOPIC = "t"
INTERVAL_MS = 50  # between two records of one producer
LOAD_RECORDS = 20_000  # per producer: 16 minutes at INTERVAL_MS, far more than a run lasts
APPEND_EVERY_S = 0.05
APPEND_COUNT = 5
SESSION_MS = 3000
#: Short timeouts, so that a run's elections come within a second or two (a loaded machine still keeps up).
QUORUM_CONFIG = {"controller.quorum.election.timeout.ms": "500", "controller.quorum.fetch.timeout.ms": "1000",
                 "controller.quorum.election.backoff.max.ms": "500", "controller.quorum.request.timeout.ms": "1000"}
BROKER_CONFIG = {"broker.session.timeout.ms": str(SESSION_MS), "broker.heartbeat.interval.ms": "500",
                 "replica.lag.time.max.ms": "3000", "replica.fetch.wait.max.ms": "500"}
SAFE = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
SETTLE_TIMEOUT_S = 60.0
ISR_TIMEOUT_S = 30.0
#: Whom a cut-off broker loses: the NODE names of `lab partition --from`, "then controller" last for Jepsen's
BROKER_CUTS = ("brokers", "controller", "clients", "brokers then controller")


@dataclass(frozen=True)
class KRaftFault:
    kind: str  # kill, pause or partition (of a broker), or controller
    action: str  # kill, pause or partition
    target: str  # a broker's id, or for a controller "leader" / "follower" (chosen when the fault begins)
    ms: int  # how long it lasts before it is healed
    wait_ms: int  # the quiet time before it
    cut: str = ""  # a broker partition's peers (BROKER_CUTS)

    def describe(self, node: str | None = None) -> str:
        who = node or (f"broker {self.target}" if self.kind != "controller" else f"the {self.target} controller")
        verb = {"kill": "kill", "pause": "pause", "partition": "cut off"}[self.action]
        peers = {"brokers": " from the other brokers", "controller": " from the controllers",
                 "clients": " from the clients", "brokers then controller":
                 " from the other brokers, then from the controllers"}.get(self.cut, "")
        return f"{verb} {who}{peers} for {self.ms / 1000:.1f} s"


@dataclass(frozen=True)
class KRaftPlan:
    name: str
    faults: tuple[KRaftFault, ...]
    network: bool  # partitions are drawn: the lab runs in a lab network (root only)
    rows: tuple[tuple[int, ...], ...]  # each partition's replicas, the preferred leader first
    controllers: int = CONTROLLERS
    brokers: int = BROKERS

    @property
    def summary(self) -> str:
        return "; ".join(f.describe() for f in self.faults)


def plan(seed: int, run: int, faults: tuple[str, ...] = FAULT_KINDS) -> KRaftPlan:
    """The schedule of run `run` of a KRaft torture seeded with `seed` (partitions only among `faults`' kinds)."""
    rng = random.Random(f"kraft/{seed}/{run}")
    rows = tuple(tuple(rng.sample(range(1, BROKERS + 1), BROKERS)) for _ in range(PARTITIONS))
    drawn = []
    for _ in range(FAULTS_PER_RUN):
        kind = rng.choice(faults)
        wait_ms = rng.randrange(300, 1500)
        if kind == "controller":
            actions = ACTIONS if "partition" in faults else ACTIONS[:2]
            action = rng.choice(actions)
            length = {"kill": (500, 3000), "pause": (1500, 4000), "partition": (2000, 6000)}[action]
            drawn.append(KRaftFault(kind, action, rng.choice(("leader", "follower")), rng.randrange(*length), wait_ms))
            continue
        broker = str(rng.randrange(1, BROKERS + 1))
        if kind == "kill":
            drawn.append(KRaftFault(kind, "kill", broker, rng.randrange(500, 3000), wait_ms))
        elif kind == "pause":
            drawn.append(KRaftFault(kind, "pause", broker, SESSION_MS + rng.randrange(500, 2500), wait_ms))
        else:
            drawn.append(KRaftFault(kind, "partition", broker, rng.randrange(2000, 6000), wait_ms,
                                    rng.choice(BROKER_CUTS)))
    return KRaftPlan(f"kraft-torture-{seed}-{run}", tuple(drawn), "partition" in faults, rows)


def run_kraft_torture(runs: int, seed: int = 0, faults: tuple[str, ...] = FAULT_KINDS,
                      narrate: Callable[[str], None] = print, base_dir: Path | None = None,
                      cancelled: threading.Event | None = None,
                      each: Callable[[int, list[RunResult]], None] | None = None,
                      until: float | None = None) -> TortureResult:
    """`runs` seeded runs on KRaft labs (mode `kraft`), through torture.py's loop (`until`: see there)."""
    check_fault_kinds(faults, FAULT_KINDS)
    cancelled = cancelled or threading.Event()

    def schedule(index: int) -> tuple[str, str]:
        p = plan(seed, index, faults)
        return p.name, p.summary

    def play(index: int) -> Played:
        with tempfile.TemporaryDirectory(prefix="zkbroker-kraft-torture-", dir=base_dir) as tmp:
            return [KRaftRun(plan(seed, index, faults), seed, Path(tmp) / "lab", cancelled).play()]

    return torture_loop(runs, seed, faults, ["kraft"], schedule, play, narrate, each, until)


class _MetadataLoad:
    """Appends NoOpRecords to whichever controller leads, every APPEND_EVERY_S, until stopped."""

    def __init__(self, lab: LabCluster) -> None:
        self.lab = lab
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kraft-torture-load", daemon=True)

    def __enter__(self) -> _MetadataLoad:
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
            except ControlError:
                leader = None  # not the leader any more, or gone: look again


class KRaftRun:
    """One run of a KRaft torture on a lab of its own in `directory`; `play()` gives its RunResult (mode kraft)
    and the faults it played, each with its span in the result's step_times."""

    def __init__(self, schedule: KRaftPlan, seed: int, directory: Path, cancelled: threading.Event) -> None:
        self.plan = schedule
        self.seed = seed
        self.lab = LabCluster(directory)
        self.cancelled = cancelled
        self.rng = random.Random(f"kraft/{seed}/{schedule.name}/targets")
        self.result = RunResult(schedule.name, "kraft", "ok", directory=directory)
        self.producers: list[recorder.RecordingProducer] = []
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.played: list[Fault] = []
        self.observer: KRaftObserver | None = None

    def play(self) -> tuple[RunResult, tuple[Fault, ...]]:
        began = time.monotonic()
        states, voter_states = [], {}
        try:
            config = {**QUORUM_CONFIG, **BROKER_CONFIG, **SAFE}
            self.lab.up(kraft=True, controllers=self.plan.controllers, brokers=self.plan.brokers,
                        network=self.plan.network,
                        config=[f"{k}={v}" for k, v in config.items()])
            self.observer = KRaftObserver(self.lab)
            self._create_topic()
            self._produce()
            with _MetadataLoad(self.lab):
                for fault in self.plan.faults:
                    self._idle(fault.wait_ms / 1000)
                    start = time.time() * 1000
                    node = self._apply(fault)
                    self._settle()
                    # until the cluster has settled after the heal: what the heal sets off belongs to its fault
                    self.result.step_times.append((Step(fault.action, {"node": node}, fault.describe(node)), start,
                                                   time.time() * 1000))
                    self.played.append(Fault(fault.kind, fault.describe(node), len(self.played), len(self.played)))
                states = self._final_states()
            voter_states = self._caught_up()
        except (LabError, kraft_lab.KRaftLabError, TimeoutError, AdminError, Unknown) as e:
            self.result.failures.append(f"error: {e}")
            self.result.stuck.append(str(e))
        finally:
            for producer in self.producers:
                producer.cancelled.set()
            for thread in self.threads:
                thread.join(15)
            events = timeline.read(self.lab.timeline_file) if self.lab.timeline_file.exists() else []
            cluster = self.lab.load() if self.lab.cluster_file.exists() else None
            try:
                if cluster is not None:
                    self.lab.down()
            except LabError as e:
                self.result.failures.append(f"the lab did not come down cleanly: {e}")
        self.result.seconds = time.monotonic() - began
        self._judge(states, events, cluster, voter_states)
        return self.result, tuple(self.played)

    # ---- the run ----------------------------------------------------------------------------------------------

    def _idle(self, seconds: float) -> None:
        if self.cancelled.wait(seconds):
            raise KeyboardInterrupt()

    def _bootstrap(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self.lab.load().brokers)

    def _create_topic(self) -> None:
        with AdminClient(self._bootstrap(), client_id="kraft-torture") as admin:
            code, message = admin.create_topics([{"name": TOPIC, "assignments": dict(enumerate(self.plan.rows))}])[
                TOPIC]
        if code != ErrorCode.NONE:
            raise LabError(f"CreateTopics {TOPIC}: {ErrorCode(code).name} {message or ''}".strip())
        self._wait_isrs()

    def _produce(self) -> None:
        for partition in range(len(self.plan.rows)):
            name = f"load-{partition}"
            values = [f"{self.plan.name}/kraft/seed{self.seed}/{name}/{i}".encode() for i in range(LOAD_RECORDS)]
            producer = recorder.RecordingProducer(self._bootstrap(), TOPIC, partition, values, "all", 4000,
                                                  INTERVAL_MS, name=name)
            self.producers.append(producer)
            self.threads.append(recorder.background(producer, self.errors.append))

    def _apply(self, fault: KRaftFault) -> str:
        """Plays the fault and heals it; the member it hit."""
        if fault.kind == "controller":
            member = f"controller:{self._controller(fault.target)}"
            peers = [f"controller:{c.id}" for c in self.lab.load().controllers if f"controller:{c.id}" != member]
        else:
            member = f"broker:{fault.target}"
            peers = [f"broker:{b.id}" for b in self.lab.load().brokers if str(b.id) != fault.target]
            if fault.cut == "controller" or fault.cut == "clients":
                peers = [fault.cut]
        name = member.replace(":", " ")
        process = int(fault.target) if fault.kind != "controller" else member  # the verbs take a broker's id
        if fault.action == "kill":
            self.lab.kill(process)
            self._idle(fault.ms / 1000)
            self.lab.start(process)
        elif fault.action == "pause":
            self.lab.pause(process)
            self._idle(fault.ms / 1000)
            self.lab.resume(process)
        else:
            self.lab.partition(member, peers)
            if fault.cut == "brokers then controller":  # its ISRs shrink to it, then it loses the controllers too
                self._idle(4.0)
                self.lab.partition(member, ["controller"])
            self._idle(fault.ms / 1000)
            self.lab.heal()
        return name

    def _controller(self, target: str) -> int:
        controllers = self.lab.load().controllers
        states = {c.id: kraft_lab.raft_state(c.control) for c in controllers}
        leader = next((n for n, s in states.items() if s and s["state"] == "leader"), None)
        if target == "leader" and leader is not None:
            return leader
        return self.rng.choice([c.id for c in controllers if c.id != leader])

    def _settle(self) -> None:
        """Until the quorum agrees on a leader and every partition has its replicas in its ISR again (a wait
        that never comes true is `stuck`, and the run goes on)."""
        try:
            kraft_lab.wait_for_leader(self.lab.load().controllers, SETTLE_TIMEOUT_S)
        except kraft_lab.KRaftLabError as e:
            raise TimeoutError(str(e)) from None
        self._wait_isrs()

    def _wait_isrs(self) -> None:
        def full() -> bool:
            try:
                found = [self.observer.leadership(TOPIC, p) for p in range(len(self.plan.rows))]
            except (LabError, Unknown):
                return False
            return all(f is not None and f.leader is not None and len(f.isr) == len(row)
                       for f, row in zip(found, self.plan.rows))
        if not wait_until(full, ISR_TIMEOUT_S, interval_s=0.2):
            why = f"every partition of {TOPIC} back to all its replicas in its ISR did not happen within " \
                  f"{ISR_TIMEOUT_S * 1000:.0f} ms"
            self.result.stuck.append(why)

    def _final_states(self):
        """Stop the producers once writes are acknowledged again, then read every replica of every partition."""
        healed = time.time() * 1000
        wait_until(lambda: all(p.acknowledged_since(healed) for p in self.producers), 15.0, interval_s=0.1)
        for producer in self.producers:
            producer.stop_sending.set()
        for thread in self.threads:
            thread.join(30)
        tps = [TopicPartition(TOPIC, p) for p in range(len(self.plan.rows))]
        wait_until(lambda: self.observer.settled(tps), 15.0, interval_s=0.2)
        return [self.observer.final_state(tp) for tp in tps]

    def _caught_up(self) -> dict[int, dict | None]:
        """Every controller's Raft state once all have the leader's log end and high watermark."""
        controllers = self.lab.load().controllers
        found: dict[int, dict | None] = {}

        def level() -> bool:
            found.clear()
            found.update({c.id: kraft_lab.raft_state(c.control) for c in controllers})
            marks = {(s["log_end_offset"], s["high_watermark"]) for s in found.values() if s is not None}
            return len(marks) == 1 and None not in found.values()
        if not wait_until(level, SETTLE_TIMEOUT_S, interval_s=0.2):
            raise TimeoutError("the controllers did not all catch up to the leader's log end and high watermark")
        return dict(found)

    # ---- the verdict ------------------------------------------------------------------------------------------

    def _judge(self, states, events: list[dict], cluster, voter_states: dict[int, dict | None]) -> None:
        attempts = [a for p in self.producers for a in p.attempts()]
        self.result.report = check(attempts, states, events)
        voters = []
        if cluster is not None:
            data = {c.id: Path(c.config).parent / "data" for c in cluster.controllers}
            voters = [read_voter_log(node, where, (voter_states.get(node) or {}).get("high_watermark"))
                      for node, where in data.items() if (where / "__cluster_metadata-0").exists()]
        quorum = check_quorum(voters, events)
        spans = [(start, end) for _, start, end in self.result.step_times]
        gaps = kraft_lab.leaderless_windows(events, self.plan.controllers)
        leaderless = [max((b - a for a, b in gaps if start <= a <= end), default=0.0) for start, end in spans]
        self.result.quorum = {"violations": [{"invariant": v.invariant, "detail": v.detail}
                                             for v in quorum.violations],
                              "leaderless_ms_max": max(leaderless, default=0.0), "leaderless_ms": leaderless,
                              "committed": quorum.committed_end}
        verdict = self.result.report.verdict()
        if quorum.violations:
            verdict = gravest(verdict, "divergent" if any(v.invariant == DIVERGED for v in quorum.violations)
                              else "lost")
        if self.result.stuck:
            verdict = gravest(verdict, "stuck")
        self.result.verdict = verdict
        self.result.failures += [f"a producer failed: {e}" for e in self.errors]
