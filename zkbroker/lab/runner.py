"""The scenario runner (`zkbroker lab scenario run`, DESIGN §10): one scenario, one seed, one run per mode.

Each run starts a lab of its own (the scenario's cluster shape, its configuration plus the mode's), carries
out the steps in order with a narration line each, then waits a moment for leaders and ISRs to settle,
reads every replica of every partition the run wrote to, and hands the producers' history, the replicas and
the timeline to the checker. The run's verdict is the gravest of what the checker found, a wait that never
came true (`stuck`) and one that came true too late (`slow`); it matched its expectation when that verdict
is the mode's `expect` and every `expect` step held.

The lab is always brought down at the end, also when a step fails or the run is interrupted (Ctrl-C sets
`cancelled`, every wait of the run watches it), unless `keep` asks to leave it running.

Stepping is an interface, not a prompt: before each step the run calls its Stepper, which returns when the
step may go. `EnterStepper` waits for Enter on a terminal; `QueueStepper` waits for `release()`, which a
dashboard's Step button calls.
"""

from __future__ import annotations

import ctypes
import functools
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from zkbroker import admin, fault_points, timeline
from zkbroker.client.admin_client import AdminClient, AdminError
from zkbroker.config import parse_properties
from zkbroker.lab import kraft_lab, recorder
from zkbroker.lab.checker import Attempt, Report, check
from zkbroker.lab.cluster import LabCluster, LabError
from zkbroker.lab.kraft_observer import KRaftObserver
from zkbroker.lab.lab_security import LabClients
from zkbroker.lab.narration import format_line
from zkbroker.lab.observer import LabObserver, Unknown, cut_log
from zkbroker.lab.processes import process_state, signal_process
from zkbroker.lab.quorum_checker import check_quorum, read_voter_log
from zkbroker.lab.recorder import RecordingProducer
from zkbroker.lab.scenario import KRAFT_MODES, Scenario, Step, fault_parameters
from zkbroker.lab.spark_read import SparkRead
from zkbroker.lab.spark_stream import SparkStream
from zkbroker.protocol.errors import ErrorCode
from zkbroker.topic_partition import TopicPartition

# The verdicts from gravest to mildest (DESIGN §10).
GRAVITY = ("lost", "aborted_read", "torn", "divergent", "duplicated", "stuck", "unavailable", "slow", "ok")
DEFAULT_WAIT_MS = 30000
# Timeline kinds a run's narration shows under its steps (what happened inside the cluster meanwhile).
NARRATED_KINDS = ("controller_elected", "controller_resigned", "broker_registered", "broker_expired", "broker_fenced",
                  "broker_unfenced", "raft_state",
                  "vote", "leader_changed", "isr_changed", "truncated", "zookeeper_role", "stream_started",
                  "stream_batch", "stream_stopped", "stream_failed")
# The conditions a KRaft mode reads from the quorum; the others from the brokers' metadata images (KRaftObserver).
QUORUM_CONDITIONS = ("controller_elected", "controller_changed", "controller_epoch")
ZOOKEEPER_ONLY_CONDITIONS = ("transactions_at_most", "deletion_pending")
STREAM_STOP_MS = 120000  # how long a stream's running batch may take to finish once it is asked to stop


def gravest(*verdicts: str) -> str:
    return min(verdicts, key=GRAVITY.index)


class Cancelled(Exception):
    """The run was interrupted (Ctrl-C): it stops where it is and tears its lab down."""


class StepFailed(Exception):
    """A step could not be carried out; the run stops there (its lab is still checked and torn down)."""


class Stepper(Protocol):
    def wait(self, label: str, index: int, step: Step, cancelled: threading.Event) -> None:
        """Return when step `index` (0-based) of run `label` may go; raise Cancelled if `cancelled` is set."""


class EnterStepper:
    """Waits for Enter on stdin before each step (`--step`); the prompt goes to stderr. It watches `cancelled`
    while it waits, so Ctrl-C ends a run that waits for Enter."""

    def __init__(self, stdin=None, prompt_to=None) -> None:
        self.stdin = stdin or sys.stdin
        self.prompt_to = prompt_to or sys.stderr

    def wait(self, label: str, index: int, step: Step, cancelled: threading.Event) -> None:
        print(f"[{label}] press Enter for step {index + 1} ({describe_step(step)})", file=self.prompt_to, flush=True)
        while True:
            if cancelled.is_set():
                raise Cancelled()
            ready, _, _ = select.select([self.stdin], [], [], 0.1)
            if ready:
                if not self.stdin.readline():  # end of input: go on without stepping
                    self.wait = lambda *args: None  # type: ignore[method-assign]
                return


class QueueStepper:
    """Waits for `release()` before each step: the dashboard's Step button."""

    def __init__(self) -> None:
        self._tokens = threading.Semaphore(0)
        self.waiting: tuple[str, int, Step] | None = None  # what the run waits to do, for a dashboard to show

    def release(self) -> None:
        self._tokens.release()

    def wait(self, label: str, index: int, step: Step, cancelled: threading.Event) -> None:
        self.waiting = (label, index, step)
        try:
            while not self._tokens.acquire(timeout=0.1):
                if cancelled.is_set():
                    raise Cancelled()
        finally:
            self.waiting = None


@dataclass
class RunResult:
    """One run of a scenario in one mode; `as_json()` is DESIGN §10's object."""

    scenario: str
    mode: str
    expect: str
    verdict: str = "ok"
    report: Report = field(default_factory=Report)
    failures: list[str] = field(default_factory=list)  # expect steps that did not hold, a step that failed
    stuck: list[str] = field(default_factory=list)  # waits that never came true
    slow: list[str] = field(default_factory=list)  # waits that came true too late
    seconds: float = 0.0
    directory: Path | None = None
    step_times: list[tuple[Step, float, float]] = field(default_factory=list)  # each step, its start and end (ms)
    # A KRaft mode's quorum verdicts: the Raft invariants broken, the longest time without a quorum leader
    quorum: dict | None = None

    @property
    def expected(self) -> bool:
        return self.verdict == self.expect and not self.failures

    def as_json(self) -> dict:
        checked = self.report.as_json()
        out = {"mode": self.mode, "verdict": self.verdict, "expected": self.expected,
               "acknowledged": checked["acknowledged"], "lost": checked["lost"],
               "duplicated": checked["duplicated"], "divergent": checked["divergent"],
               "unavailable_ms_max": checked["unavailable_ms_max"], "losses": checked["losses"]}
        if self.quorum is not None:  # the quorum's unavailability: the longest time without a leader
            out["unavailable_ms_max"] = max(out["unavailable_ms_max"], round(self.quorum["leaderless_ms_max"]))
            out["raft_violations"] = self.quorum["violations"]
        return out


Narrate = Callable[[str], None]


class ScenarioRun:
    """One scenario in one mode on a lab of its own in `directory`."""

    def __init__(self, scenario: Scenario, mode: str, seed: int, directory: Path, narrate: Narrate,
                 stepper: Stepper | None = None, cancelled: threading.Event | None = None, keep: bool = False,
                 subnet: str | None = None, security: str = "plaintext") -> None:
        self.scenario = scenario
        self.security = security  # `lab up --security`: the run's clients log in as the lab's admin
        self.mode = mode
        self.spec = scenario.modes[mode]
        self.seed = seed
        self.directory = directory
        self.say = narrate
        self.stepper = stepper
        self.cancelled = cancelled or threading.Event()
        self.keep = keep
        self.subnet = subnet
        self.label = f"{scenario.name} {mode}"
        self.lab = LabCluster(directory)
        self.observer: LabObserver | None = None
        self.names: dict[str, int] = {}  # `as` names of brokers
        self.producers: dict[str, RecordingProducer] = {}
        self.all_producers: list[RecordingProducer] = []
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.topics: set[str] = set()
        self.consumers: dict[str, subprocess.Popen] = {}
        self.coordinator_groups: set[str] = set()  # groups whose consumers the group coordinator manages
        self.reads: dict[str, SparkRead | recorder.ConsumerRead] = {}
        self._reads_done: set[str] = set()
        self.streams: dict[str, SparkStream] = {}
        self.until_end: list[RecordingProducer] = []
        self.result = RunResult(scenario.name, mode, self.spec.expect, directory=directory)
        self.kraft = mode in KRAFT_MODES
        self._timeline_seen = 0
        self._log_marks: dict[int, int] = {}

    # ---- the run ----------------------------------------------------------------------------------------------

    def run(self) -> RunResult:
        started = time.monotonic()
        try:
            self._up()
            # A KRaft lab has no ZooKeeper to observe: its brokers' metadata images and its quorum are asked
            if not self.kraft or self.scenario.brokers:
                self.observer = KRaftObserver(self.lab) if self.kraft else LabObserver(self.lab)
                self._log_marks = {b.id: len(self.observer.server_log(b.id)) for b in self.observer.cluster.brokers}
            steps = [s for s in self.scenario.steps if s.runs_in(self.mode)]
            for index, step in enumerate(steps):
                if self.stepper is not None:
                    self.stepper.wait(self.label, index, step, self.cancelled)
                self._check_cancelled()
                self.say(f"[{self.label}] {index + 1}/{len(steps)} {describe_step(step)}"
                         + (f": {step.narrate}" if step.narrate else ""))
                began = time.time() * 1000
                try:
                    getattr(self, "_" + step.action)(step, **step.fields)
                except (StepFailed, LabError, Unknown) as e:
                    self.result.failures.append(f"step {index + 1} ({step.action}, line {step.line}): {e}")
                    self.say(f"[{self.label}]     the step failed: {e}; the run stops here")
                    break
                finally:
                    self.result.step_times.append((step, began, time.time() * 1000))
                    self._narrate_timeline()
            self._finish()
        except (Cancelled, KeyboardInterrupt):
            self.result.failures.append("interrupted")
            raise
        except BaseException as e:  # a lab that would not start, a bug: nothing of the lab stays behind either
            self.result.failures.append(f"error: {e}")
            raise
        finally:
            self.result.seconds = time.monotonic() - started
            self._teardown()
        return self.result

    def _up(self) -> None:
        config = {**self.scenario.config, **self.spec.config}
        self.say(f"[{self.label}] starting a lab of "
                 + (f"{self.scenario.controllers} KRaft controllers and " if self.kraft else "")
                 + f"{self.scenario.brokers} brokers"
                 + (f" and {self.scenario.zookeepers} ZooKeeper servers"
                    if self.scenario.zookeepers > 1 and not self.kraft else "")
                 + (" in a lab network" if self.scenario.network else "") + f" in {self.directory}"
                 + (f" ({', '.join(f'{k}={v}' for k, v in self.spec.config.items())})" if self.spec.config else ""))
        # base_port=0: free ports (zkbroker.lab.ports), so that labs run side by side never race for 9092
        if self.kraft:
            self.lab.up(kraft=True, controllers=self.scenario.controllers, brokers=self.scenario.brokers,
                        network=self.scenario.network, subnet=self.subnet if self.scenario.network else None,
                        config=[f"{k}={v}" for k, v in config.items()], security=self.security,
                        directory_ids=self.spec.directory_ids)
            self._timeline_seen = len(timeline.read(self.lab.timeline_file))
            self._check_cancelled()
            return
        self.lab.up(brokers=self.scenario.brokers, zookeepers=self.scenario.zookeepers, network=self.scenario.network,
                    base_port=0, subnet=self.subnet if self.scenario.network else None,
                    config=[f"{k}={v}" for k, v in config.items()], security=self.security)
        self._timeline_seen = len(timeline.read(self.lab.timeline_file))
        self._check_cancelled()

    def _teardown(self) -> None:
        for read in self.reads.values():
            read.kill("the run ended before the read did")
        for stream in self.streams.values():
            stream.kill()
        for process in self.consumers.values():
            signal_process(process.pid, signal.SIGCONT)
            process.kill()
            process.wait(10)
        for producer in self.all_producers:
            producer.cancelled.set()
        for thread in self.threads:
            thread.join(timeout=15)
        if self.observer is not None:
            self.observer.close()
        interrupted = "interrupted" in self.result.failures
        broken = any(f.startswith("error: ") for f in self.result.failures)
        if interrupted or broken:
            self.say(f"[{self.label}] {'interrupted' if interrupted else 'stopped by an error'}: "
                     f"tearing the lab down")
        if self.keep and not interrupted and not broken and self.lab.cluster_file.exists():
            self.say(f"[{self.label}] the lab keeps running in {self.directory} "
                     f"(zkbroker lab down --dir {self.directory})")
            return
        try:
            self.lab.down()
        except LabError:
            pass  # nothing was started (an `up` that failed stops what it started itself)
        except Exception as e:  # said, and counted against the run: something of the lab may be left
            self.result.failures.append(f"the lab did not come down cleanly: {e}")
            self.say(f"[{self.label}] the lab did not come down cleanly: {e}; `zkbroker lab down --dir "
                     f"{self.directory}` tries again")

    def _check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()

    def _idle(self, seconds: float) -> None:
        if self.cancelled.wait(seconds):
            raise Cancelled()

    # ---- steps (one method per action, named after it) ----------------------------------------------------------

    def _create_topic(self, step: Step, topic: str, partitions: int = 1, replication_factor: int | None = None,
                      replicas: list | None = None, config: dict | None = None, wait: bool = True) -> None:
        configs = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (config or {}).items()}
        if replicas is not None:  # a row per partition, or one row for every partition
            rows = replicas if replicas and isinstance(replicas[0], list) else [replicas] * partitions
            assignment = {p: tuple(self._broker(b) for b in row) for p, row in enumerate(rows)}
        else:
            live = sorted(self.observer.registered()) if self.kraft else admin.live_broker_ids(self.observer.zk)
            assignment = admin.assign_replicas_to_brokers(live, partitions,
                                                          replication_factor or min(3, self.scenario.brokers))
        try:
            if self.kraft:  # CreateTopics, which a broker forwards to the active controller (KIP-590)
                self._admin(lambda client: client.create_topics(
                    [{"name": topic, "assignments": assignment, "configs": configs}]), topic)
            else:
                admin.write_topic(self.observer.zk, topic, assignment, configs)
        except admin.AdminError as e:
            raise StepFailed(str(e)) from None
        self.topics.add(topic)
        if wait:
            self._wait_for(lambda: all((lead := self.observer.leadership(topic, p)) is not None
                                       and lead.leader is not None and set(lead.isr) == set(replicas_)
                                       for p, replicas_ in assignment.items()),
                           DEFAULT_WAIT_MS, f"{topic}'s partitions to have leaders and full ISRs", fail=True)

    def _choose(self, step: Step, broker: int | str | None = None, controller: int | str | None = None,
                **named) -> None:
        if controller is not None or (self.kraft and broker == "controller"):
            self.names[named["as"]] = chosen = self._controller("active" if controller is None else controller)
            self.say(f"[{self.label}]     {named['as']} is controller {chosen}")
            return
        self.names[named["as"]] = chosen = self._broker(broker)
        self.say(f"[{self.label}]     {named['as']} is broker {chosen}")

    def _consumer(self, step: Step, name: str, group: str, topic: str, config: dict | None = None,
                  coordinator: bool = False) -> None:
        """A consumer as a process of its own, so that it can be paused and killed; its output goes to
        DIR/consumer-NAME.log. By default a 0.8.2 high-level consumer (zkbroker console-consumer) of a ZooKeeper
        group, consumer id GROUP_NAME; with `coordinator` a confluent-kafka subscribe() member of a coordinator
        group, client.id NAME (zkbroker/lab/group_member.py), CONFIG being librdkafka settings."""
        if self.kraft and not coordinator:
            raise StepFailed("a 0.8.2 ZooKeeper consumer has no KRaft form (coordinator = true is a group member)")
        if coordinator:
            self.coordinator_groups.add(group)
            command = [sys.executable, "-m", "zkbroker.lab.group_member", *self._clients().command_config(),
                       self._bootstrap(), group, topic, name,
                       *(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in (config or {}).items())]
        else:
            properties = {"consumer.id": name, "auto.offset.reset": "smallest", **self._client_properties(),
                          **(config or {})}
            config_file = self.directory / f"consumer-{name}.properties"
            config_file.write_text("".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n"
                                           for k, v in properties.items()))
            config_file.chmod(0o600)  # a secured lab's admin password is among them
            command = [sys.executable, "-m", "zkbroker", "console-consumer", "--zookeeper",
                       self.observer.cluster.zookeeper, "--topic", topic, "--group", group,
                       "--consumer.config", str(config_file)]
        with open(self.directory / f"consumer-{name}.log", "ab") as out:
            self.consumers[name] = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                                    stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)

    def _spark_read(self, step: Step, topic: str, end: int, partition: int = 0, start: int = 0,
                    options: dict | None = None, background: bool = False, timeout_ms: int = 300000,
                    master: str = "local[2]", **named) -> None:
        """A Spark batch read of offsets [start, end) through the zkkafka source, in a process of its own
        (zkbroker/lab/spark_read.py); its rows are checked against the final log at the end of the run."""
        name = named.get("as") or f"read{self.scenario.steps.index(step) + 1}"
        options = self._spark_options(options)
        self.reads[name] = read = SparkRead.launch(self.directory, name, self.observer.cluster.zookeeper, topic,
                                                   partition, start, end, options, timeout_ms / 1000, master,
                                                   _die_with_parent)
        self.topics.add(topic)
        if not background:
            self._await_read(read)

    def _await_read(self, read: SparkRead) -> None:
        if read.name in self._reads_done:
            return
        while read.running():
            if time.monotonic() > read.deadline:
                read.kill(f"the read did not end within {read.timeout_s * 1000:.0f} ms")
                break
            self._idle(0.2)
        self._reads_done.add(read.name)
        result = read.result()
        self.say(f"[{self.label}]     {read.name} " + (f"failed: {result.error}" if result.error else
                 f"read {len(result.rows)} rows of {read.topic}-{read.partition} offsets [{read.start}, {read.end})"))

    def _spark_stream(self, step: Step, topic: str, trigger: str = "processing-time=500ms",
                      options: dict | None = None, master: str = "local[1]", **named) -> None:
        """A streaming ingest of the topic into Parquet (what `spark-ingest --stream` runs) in a process of its own
        (zkbroker/lab/spark_stream.py), from the earliest offsets; it runs until a stop or kill step, or the end of
        the run, which stops it and checks what its sink holds."""
        options = self._spark_options(options)
        name = named["as"]
        self.streams[name] = SparkStream.launch(self.directory, name, self.observer.cluster.zookeeper, topic,
                                                trigger, options, master, _die_with_parent)
        self.topics.add(topic)

    def _stream_process(self, action: str, name: str, timeout_ms: int = STREAM_STOP_MS) -> None:
        stream = self.streams[name]  # the checker saw the spark_stream step that named it
        if action == "kill":
            stream.kill()
        elif action == "stop":
            if not stream.stop(timeout_ms / 1000, self._idle):
                raise StepFailed(f"the stream {name} did not stop within {timeout_ms} ms of SIGTERM")
            self._say_stream(stream)
        elif action == "start":
            if stream.running():
                raise StepFailed(f"the stream {name} is running already")
            stream.start()
        else:
            raise StepFailed(f"a stream cannot {action}")

    def _say_stream(self, stream: SparkStream) -> None:
        status = stream.status()
        offsets = ", ".join(f"{t}-{p} at {o}" for t, parts in sorted(status.get("offsets", {}).items())
                            for p, o in sorted(parts.items(), key=lambda item: int(item[0])))
        self.say(f"[{self.label}]     stream {stream.name} {status.get('state')}"
                 + (f": {status['error']}" if status.get("error") else "")
                 + (f"; its committed batches end at {offsets}" if offsets else ""))

    def _admin(self, request: Callable[[AdminClient], dict], topic: str) -> None:
        """An Admin API request about one topic (a KRaft lab's topics are created and deleted so); StepFailed
        naming the error a broker answered with."""
        try:
            with AdminClient(self._bootstrap(), client_id="zkbroker-scenario", timeout_s=30) as client:
                answer = request(client)[topic]
        except (OSError, AdminError) as e:
            raise StepFailed(f"no broker took the request about topic {topic}: {e}") from None
        code = answer[0] if isinstance(answer, tuple) else answer
        if code != ErrorCode.NONE:
            raise StepFailed(f"the request about topic {topic} was refused: {ErrorCode(code).name}"
                             + (f" ({answer[1]})" if isinstance(answer, tuple) and answer[1] else ""))

    def _delete_topic(self, step: Step, topic: str) -> None:
        if self.kraft:
            self._admin(lambda client: client.delete_topics([topic]), topic)
            return
        if not admin.mark_topic_for_deletion(self.observer.zk, topic):
            raise StepFailed(f"topic {topic} is already marked for deletion")

    def _produce(self, step: Step, topic: str, count: int, partition: int = 0, acks: int | str = "all",
                 timeout_ms: int = 10000, interval_ms: int = 0, background: bool = False, until_end: bool = False,
                 transactional_id: str | None = None, transaction: str | None = None,
                 transaction_timeout_ms: int | None = None, via: int | str | None = None, **named) -> None:
        name = named.get("as") or f"step{self.scenario.steps.index(step) + 1}"
        values = [f"{self.scenario.name}/{self.mode}/seed{self.seed}/{name}/{i}".encode() for i in range(count)]
        producer = RecordingProducer(self._bootstrap(via), topic, partition, values, acks, timeout_ms, interval_ms,
                                     transactional_id=transactional_id, transaction=transaction, name=name,
                                     transaction_timeout_ms=transaction_timeout_ms,
                                     security=self._clients().librdkafka(),
                                     via=self._broker(via) if via is not None else None)
        self.producers[name] = producer
        self.all_producers.append(producer)
        self.topics.add(topic)
        thread = recorder.background(producer, self.errors.append)
        if background:  # until_end: it stops sending when the last step is done
            self.threads.append(thread)
            if until_end:
                self.until_end.append(producer)
            return
        while thread.is_alive():
            if self.cancelled.wait(0.05):
                producer.cancelled.set()
                thread.join(10)
                raise Cancelled()
        acked = producer.acknowledged()
        errors = sorted({a.error for a in producer.attempts() if a.error})
        if transactional_id is not None:
            self.say(f"[{self.label}]     transaction {producer.outcome}: {acked} of {count} acknowledged")
            return
        self.say(f"[{self.label}]     {acked} of {count} acknowledged"
                 + (f"; errors: {', '.join(errors)}" if errors else ""))

    def _read(self, step: Step, topic: str, partition: int = 0, isolation_level: str = "read_committed",
              via: int | str | None = None, **named) -> None:
        """What a consumer reads of the partition at the isolation level, now: judged at the end (checker)."""
        name = named.get("as") or f"read{self.scenario.steps.index(step) + 1}"
        read = recorder.ConsumerRead(name, self._bootstrap(via), topic, partition, isolation_level,
                                     self._clients().security)
        read.run()
        self.reads[name] = read
        self._reads_done.add(name)
        self.topics.add(topic)
        result = read.result()
        self.say(f"[{self.label}]     {name} " + (f"failed: {result.error}" if result.error else
                 f"read {len(result.rows)} records of {topic}-{partition} offsets [{read.start}, {read.end}) at "
                 f"{isolation_level}"))

    def _bootstrap(self, via: int | str | None = None) -> str:
        """Every broker; with `via`, that broker alone (a client that learns the cluster from it only)."""
        cluster = self.observer.reload()
        if via is None:
            return cluster.bootstrap()
        broker = cluster.broker(self._broker(via))
        return f"{broker.host}:{broker.port}"

    def _clients(self) -> LabClients:
        """How the run's clients reach the brokers: as the lab's admin on a secured lab (cluster.json)."""
        return self.observer.clients

    def _spark_options(self, options: dict | None) -> dict[str, str]:
        """A spark step's zkkafka options as strings, with the lab's admin login on a secured lab: the file that
        holds it (kafka.consumer.config), so no password is on the read's command line or in Spark's plans."""
        out = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (options or {}).items()}
        properties = self._clients().properties
        if properties:
            out.setdefault("kafka.consumer.config", properties)
        return out

    def _client_properties(self) -> dict[str, str]:
        """The admin's client properties (security.protocol, sasl.*, ssl.*) for a 0.8.2 console consumer's
        --consumer.config; nothing on a plaintext lab."""
        properties = self._clients().properties
        return parse_properties(Path(properties).read_text(encoding="utf-8")) if properties else {}

    def _kill(self, step: Step, **target) -> None:
        self._process(step, "kill", target)

    def _pause(self, step: Step, **target) -> None:
        self._process(step, "pause", target)

    def _resume(self, step: Step, **target) -> None:
        self._process(step, "resume", target)

    def _start(self, step: Step, **target) -> None:
        self._process(step, "start", target)

    def _stop(self, step: Step, **target) -> None:
        self._process(step, "stop", target)

    def _process(self, step: Step, action: str, target: dict) -> None:
        if "stream" in target:
            self._stream_process(action, target["stream"])
            return
        if "consumer" in target:
            process = self.consumers[target["consumer"]]  # the checker saw the consumer step that named it
            signal_process(process.pid, {"kill": signal.SIGKILL, "pause": signal.SIGSTOP,
                                         "resume": signal.SIGCONT}[action])
            return
        if "broker" in target and self.kraft and target["broker"] in ("controller", *self._controller_names()):
            target = {**{k: v for k, v in target.items() if k != "broker"}, "controller": target["broker"]}
        if "controller" in target:
            node = self._controller(target["controller"])
            if "as" in target:
                self.names[target["as"]] = node
            method = {"kill": self.lab.kill, "pause": self.lab.pause, "resume": self.lab.resume,
                      "start": self.lab.start, "stop": self.lab.stop}[action]
            method(f"controller:{node}")
            return
        if "zookeeper" in target:
            server = self._zookeeper(target["zookeeper"])
            method = {"kill": self.lab.kill_zookeeper, "pause": self.lab.pause_zookeeper,
                      "resume": self.lab.resume_zookeeper, "start": self.lab.start_zookeeper,
                      "stop": self.lab.stop_zookeeper}[action]
            method(server)
        else:
            broker = self._broker(target["broker"])
            if "as" in target:
                self.names[target["as"]] = broker
            method = {"kill": self.lab.kill, "pause": self.lab.pause, "resume": self.lab.resume,
                      "start": self.lab.start, "stop": self.lab.stop}[action]
            if action == "start":  # log_contains looks at what this process of the broker has logged
                self._log_marks[broker] = len(self.observer.server_log(broker))
                if not target.get("wait", True):  # do not wait for its registration
                    method = functools.partial(self.lab.start, timeout_s=0.0)
            try:
                method(broker)
            except LabError:
                if action != "start" or target.get("wait", True):
                    raise
        if self.observer is not None:
            self.observer.reload()

    def _partition(self, step: Step, node: str, **fields) -> None:
        peers = fields["from"] if isinstance(fields["from"], list) else [fields["from"]]
        self.lab.partition(self._node(node), [self._node(p) for p in peers], fields.get("one_way", False))

    def _heal(self, step: Step, node: str | None = None) -> None:
        self.lab.heal(self._node(node) if node else None)

    def _fault(self, step: Step, point: str, broker: int | str, **args) -> None:
        broker_id = self._broker(broker)
        in_force = self.lab.fault(broker_id, point, **fault_parameters(args))
        if in_force and self.observer.running(broker_id):
            self.say(f"[{self.label}]     in force on broker {broker_id}: "
                     + "; ".join(fault_points.describe(f) for f in in_force))

    def _heal_faults(self, step: Step, broker: int | str, point: str | None = None) -> None:
        self.lab.heal_faults(self._broker(broker), point)

    def _cut_log(self, step: Step, broker: int | str, topic: str, keep: int, partition: int = 0) -> None:
        broker_id = self._broker(broker)
        pid = self.observer.reload().broker(broker_id).pid
        if pid is not None and process_state(pid) != "dead":
            raise StepFailed(f"broker {broker_id} is running; a log loses its unflushed tail only in a crash "
                             f"(kill or stop it first)")
        removed = cut_log(self.observer.partition_dir(broker_id, topic, partition), keep)
        self.say(f"[{self.label}]     {topic}-{partition} on broker {broker_id} keeps {keep} messages; "
                 f"{removed} lost with the unflushed tail")

    def _lose_disk(self, step: Step, controller: int | str) -> None:
        node = self._controller(controller)
        entry = self.lab.load().controller(node)
        if entry.pid is not None and process_state(entry.pid) != "dead":
            raise StepFailed(f"controller {node} is running; a disk is replaced with the node down (kill or stop it "
                             f"first)")
        directory_id = kraft_lab.lose_disk(entry)
        self.say(f"[{self.label}]     controller {node}'s log dir is empty and formatted again (directory id "
                 f"{directory_id})")

    def _sleep(self, step: Step, ms: int) -> None:
        self._idle(ms / 1000)

    def _wait(self, step: Step, condition: str, timeout_ms: int = DEFAULT_WAIT_MS, slow_ms: int | None = None,
              negate: bool = False, **args) -> None:
        began = time.monotonic()
        what = describe_condition(condition, args, negate)
        if not self._wait_for(lambda: self._holds(condition, args) != negate, timeout_ms, what):
            return
        took = (time.monotonic() - began) * 1000
        if took >= 1000:
            self.say(f"[{self.label}]     after {took / 1000:.1f} s")
        if slow_ms is not None and took > slow_ms:
            self.result.slow.append(f"{what} took {took:.0f} ms (more than {slow_ms})")
            self.say(f"[{self.label}]     slow: {what} took {took:.0f} ms (more than {slow_ms} ms)")

    def _expect(self, step: Step, condition: str, negate: bool = False, **args) -> None:
        what = describe_condition(condition, args, negate)
        try:
            holds = self._holds(condition, args) != negate
        except (Unknown, StepFailed):
            holds = False
        if holds:
            self.say(f"[{self.label}]     as expected: {what}")
        else:
            self.result.failures.append(f"line {step.line}: expected {what}")
            self.say(f"[{self.label}]     NOT as expected: {what}")

    def _wait_for(self, condition: Callable[[], bool], timeout_ms: float, what: str, fail: bool = False,
                  quiet: bool = False) -> bool:
        """Poll until `condition` holds; a timeout is `stuck` (a failed step with `fail`, nothing with `quiet`)."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            try:
                if condition():
                    return True
            except (Unknown, StepFailed):  # e.g. "leader:t-0" while t-0 has no leader
                pass
            if time.monotonic() > deadline:
                if quiet:
                    return False
                if fail:
                    raise StepFailed(f"{what} did not happen within {timeout_ms} ms")
                self.result.stuck.append(f"{what} did not happen within {timeout_ms} ms")
                self.say(f"[{self.label}]     stuck: {what} did not happen within {timeout_ms} ms")
                return False
            self._idle(0.1)

    # ---- conditions ----------------------------------------------------------------------------------------------

    def _holds(self, condition: str, args: dict) -> bool:
        if self.kraft and (condition in QUORUM_CONDITIONS or self.observer is None):
            return self._holds_kraft(condition, args)
        if self.kraft and condition in ZOOKEEPER_ONLY_CONDITIONS:
            raise StepFailed(f"the condition {condition} reads ZooKeeper and has no KRaft form")
        o = self.observer
        broker = self._broker(args["broker"]) if "broker" in args and condition != "controller_changed" else None
        topic, partition = args.get("topic"), args.get("partition", 0)
        if condition == "registered":
            return broker in o.registered()
        if condition == "unregistered":
            return broker not in o.registered()
        if condition == "controller_elected":
            controller = o.controller()
            return controller is not None and (broker is None or controller == broker)
        if condition == "controller_changed":
            controller = o.controller()
            return controller is not None and controller != self._broker(args["broker"])
        if condition == "controller_epoch":
            return o.controller_epoch() == args["size"]
        if condition == "running":
            return o.running(broker)
        if condition == "log_contains" and "consumer" in args:
            path = self.directory / f"consumer-{args['consumer']}.log"
            text = path.read_text(errors="replace") if path.exists() else ""
            return re.search(args["pattern"], text, re.MULTILINE) is not None
        if condition == "log_contains":
            return o.log_contains(broker, args["pattern"], self._log_marks.get(broker, 0))
        if condition in ("owns", "owners") and args["group"] in self.coordinator_groups:
            group = o.coordinator_group(args["group"])
            members = [m for tp, m in group.owners.items() if tp.topic == topic]
            if group.state != "Stable":  # its coordinator hands out no assignment while it rebalances
                return False
            if condition == "owns":
                return members.count(args["consumer"]) == args["size"]
            return len(set(members)) == args["size"]
        if condition == "rebalancing":
            return o.coordinator_group(args["group"]).state in ("PreparingRebalance", "CompletingRebalance")
        if condition in ("owns", "owners"):
            owners = o.consumer_owners(args["group"], topic)
            if condition == "owns":
                owner = f"{args['group']}_{args['consumer']}"
                return sum(1 for o_ in owners.values() if o_.rpartition("-")[0] == owner) == args["size"]
            return len({o_.rpartition("-")[0] for o_ in owners.values()}) == args["size"]
        if condition in ("believes_leader", "hw", "stable"):
            view = self._broker_view(broker, topic, partition)
            if view is None:
                return False
            if condition == "stable":
                return view["lso"] == view["hw"]
            return view["role"] == "leader" if condition == "believes_leader" else view["hw"] == args["size"]
        if condition == "log_end":
            return len(o.replica_log(broker, topic, partition)) == args["size"]
        if condition in ("acked", "refused"):
            producer = self.producers[args["of"]]
            if not producer.answered():
                return False
            acked = producer.acknowledged()
            return acked == len(producer.values) if condition == "acked" else acked == 0
        if condition == "stream_offset":
            reached = self.streams[args["of"]].offset(topic, partition)
            return reached is not None and reached >= args["size"]
        if condition == "stream_batches":
            return self.streams[args["of"]].status().get("batches", 0) >= args["size"]
        if condition == "stream_caught_up":
            return self._caught_up(self.streams[args["of"]])
        if condition in ("read_tasks_running", "read_tasks_done"):
            counted = "active" if condition == "read_tasks_running" else "done"
            return self.reads[args["of"]].status().get(counted, 0) >= args["size"]
        if condition in ("leads_all", "transactions_at_most"):
            stats = o.state_stats(topic) or {}
            if condition == "leads_all":
                return bool(stats) and all(lead.leader == broker for lead, _ in stats.values())
            return len({zxid for _, zxid in stats.values()}) <= args["size"]
        if condition in ("isr_shrinks", "isr_expansions"):
            shrinks, expansions = isr_changes(timeline.read(self.lab.timeline_file), topic, partition)
            return (shrinks if condition == "isr_shrinks" else expansions) == args["size"]
        if condition == "topic_exists":
            return o.assignment(topic) is not None
        if condition == "topic_deleted":
            return o.assignment(topic) is None and not o.deletion_pending(topic)
        if condition == "deletion_pending":
            return o.deletion_pending(topic)
        if condition == "zookeeper_quorum":
            return o.zookeeper_quorum()
        if condition == "zookeeper_quorum_lost":
            return not o.zookeeper_quorum()
        leadership = o.leadership(topic, partition)
        # A leader counts while it is registered: a controller that cannot elect another leaves the dead one
        # in the `state` znode (0.8.2 wrote nothing when no replica could lead).
        live_leader = leadership is not None and leadership.leader is not None \
            and leadership.leader in o.registered()
        if condition == "leader":
            return live_leader and (broker is None or leadership.leader == broker)
        if condition == "no_leader":
            return not live_leader
        if leadership is None:
            return False
        if condition == "isr_contains":
            return broker in leadership.isr
        if condition == "isr_excludes":
            return broker not in leadership.isr
        if condition == "isr_size":
            return len(leadership.isr) == args["size"]
        raise StepFailed(f"condition {condition} is not known to this runner")

    def _caught_up(self, stream: SparkStream) -> bool:
        """Whether the stream's committed batches end at the high watermark its leader has now, in every partition
        of its topic."""
        assignment = self.observer.assignment(stream.topic)
        for partition in assignment or ():
            leadership = self.observer.leadership(stream.topic, partition)
            view = self._broker_view(leadership.leader, stream.topic, partition) \
                if leadership is not None and leadership.leader is not None else None
            reached = stream.offset(stream.topic, partition)
            if view is None or view["role"] != "leader" or reached is None or reached < view["hw"]:
                return False
        return bool(assignment)

    def _broker_view(self, broker: int, topic: str, partition: int) -> dict | None:
        """The broker's own view of a partition (its `state` answer), None when it cannot answer."""
        try:
            state = self.lab.broker_state(broker)
        except LabError:
            return None
        return next((p for p in state["partitions"] if (p["topic"], p["partition"]) == (topic, partition)), None)

    def _quorum(self) -> dict:
        rows = [kraft_lab.controller_row(entry) for entry in self.lab.load().controllers]
        quorum = kraft_lab.quorum_status(rows)
        agreed = kraft_lab.agreed_leader(r["raft"] for r in rows if r["process"] == "running")
        return {**quorum, "agreed": agreed, "majority": kraft_lab.majority_leader(rows)}

    def _holds_kraft(self, condition: str, args: dict) -> bool:
        """The conditions a KRaft mode reads from the quorum (DESIGN §17): controller_elected (a controller leads
        that a majority of the voters follow; `broker`: that one), controller_changed (such a leader other than
        `broker`), controller_epoch (the leader's epoch is `size`)."""
        quorum = self._quorum()
        leader = quorum["majority"]
        if condition == "controller_elected":
            return leader is not None and ("broker" not in args or leader[0] == self._controller(args["broker"]))
        if condition == "controller_changed":
            return leader is not None and leader[0] != self._controller(args["broker"])
        if condition == "controller_epoch":
            return quorum["epoch"] == args["size"]
        raise StepFailed(f"the condition {condition} has no KRaft form yet (the KRaft modes read the quorum only)")

    def _controller_names(self) -> list[str]:
        """The `as` names bound to controllers (a choose of broker "controller" in a KRaft mode)."""
        return [name for name, node in self.names.items() if node >= kraft_lab.FIRST_CONTROLLER_ID]

    def _controller(self, target: int | str) -> int:
        """A controller's node id from an id, "active" / "controller" (the quorum's leader now), "follower" (the
        lowest running voter that does not lead) or a name bound with `as`."""
        if isinstance(target, int):
            return target
        if target in self.names:
            return self.names[target]
        rows = [kraft_lab.controller_row(entry) for entry in self.lab.load().controllers]
        leader = kraft_lab.quorum_status(rows)["leader"]
        if target in ("active", "controller"):
            if leader is None:
                raise StepFailed("the quorum has no leader now")
            return leader
        if target == "follower":
            others = [r["id"] for r in rows if r["id"] != leader and r["process"] == "running"]
            if not others:
                raise StepFailed("no running controller follows now")
            return others[0]
        if target.startswith("not:"):
            excluded = {int(part) if part.isdigit() else self._controller(part) for part in target[4:].split(",")}
            others = [r["id"] for r in rows if r["id"] not in excluded and r["process"] == "running"]
            if not others:
                raise StepFailed(f"every running controller is one of {target[4:]}")
            return others[0]
        raise StepFailed(f"no controller is called {target!r}")

    # ---- targets ---------------------------------------------------------------------------------------------------

    def _broker(self, target: int | str) -> int:
        """A broker id from an id, "controller", "leader:TOPIC-PARTITION" or a name bound with `as`."""
        if isinstance(target, int):
            return target
        if target in self.names:
            return self.names[target]
        if target.startswith("not:"):
            excluded = {int(part) if part.isdigit() else self._broker(part) for part in target[4:].split(",")}
            others = sorted(b.id for b in self.observer.cluster.brokers if b.id not in excluded)
            if not others:
                raise StepFailed(f"every broker is one of {target[4:]}")
            return others[0]
        if target == "controller":
            controller = self.observer.controller()
            if controller is None:
                raise StepFailed("there is no controller now")
            return controller
        if target.startswith("leader:"):
            topic, _, partition = target.removeprefix("leader:").rpartition("-")
            leadership = self.observer.leadership(topic, int(partition))
            if leadership is None or leadership.leader is None:
                raise StepFailed(f"{topic}-{partition} has no leader now")
            return leadership.leader
        raise StepFailed(f"no broker is called {target!r}")

    def _zookeeper(self, target: int | str) -> int:
        if isinstance(target, int):
            return target
        if target == "leader":
            leaders = [server for server, role in self.observer.zookeeper_roles().items()
                       if role in ("leader", "standalone")]
            if not leaders:
                raise StepFailed("no ZooKeeper server leads now")
            return leaders[0]
        raise StepFailed(f"no ZooKeeper server is called {target!r}")

    def _node(self, node: str) -> str:
        """A partition NODE, with broker:NAME resolved (broker:controller, broker:leader:t-0, broker:<as name>)."""
        kind, _, rest = node.partition(":")
        if kind == "broker" and rest and not rest.isdigit():
            return f"broker:{self._broker(rest)}"
        if kind == "controller" and rest and not rest.isdigit():
            return f"controller:{self._controller(rest)}"
        return node

    # ---- the end of a run ---------------------------------------------------------------------------------------

    def _finish_kraft(self) -> None:
        """A KRaft mode's verdict: the quorum checker's Raft invariants on every voter's log dir, and the longest
        time without a quorum leader (from the timeline's raft_state events) against max_unavailable_ms; with
        brokers, also the data verdict of ZooKeeper mode's end (every replica read, the checker), and the gravest
        of the two. The unavailability allowed is then the partitions' (the checker's), the quorum's being
        reported beside it."""
        self._wait_for(lambda: self._quorum()["agreed"] is not None, self.scenario.settle_ms, "a quorum leader",
                       quiet=True)
        controllers = self.lab.load().controllers
        states = {c.id: kraft_lab.raft_state(c.control) for c in controllers}
        events = timeline.read(self.lab.timeline_file)
        voters = [read_voter_log(c.id, Path(c.config).parent / "data", (states.get(c.id) or {}).get("high_watermark"))
                  for c in controllers if (Path(c.config).parent / "data" / "__cluster_metadata-0").exists()]
        report = check_quorum(voters, events)
        gaps = [b - a for a, b in kraft_lab.leaderless_windows(events, len(controllers), time.time() * 1000)]
        self.result.quorum = {"violations": [{"invariant": v.invariant, "detail": v.detail}
                                             for v in report.violations],
                              "leaderless_ms_max": max(gaps, default=0.0)}
        verdict = "ok"
        if report.violations:
            verdict = "divergent" if any(v.invariant == "committed-diverged" for v in report.violations) else "lost"
        elif self.observer is None and self.spec.max_unavailable_ms is not None \
                and max(gaps, default=0.0) > self.spec.max_unavailable_ms:
            verdict = "unavailable"
        if self.observer is not None:
            self._finish_data()
            verdict = gravest(verdict, self.result.verdict)
        else:
            self.result.report = check([], [], events)
        if self.result.stuck:
            verdict = gravest(verdict, "stuck")
        self.result.verdict = verdict
        self.say(f"[{self.label}] the quorum: {len(report.violations)} Raft violations, the longest time without "
                 f"a leader {max(gaps, default=0.0):.0f} ms")

    def _finish(self) -> None:
        if self.kraft:
            self._finish_kraft()
        else:
            self._finish_data()

    def _finish_data(self) -> None:
        """The data verdict: the producers' history, every replica of the partitions written and the reads, judged
        by the checker, with the waits that were stuck or slow."""
        if self.until_end:
            # The last step healed the last fault; a partition still recovering refuses writes for a moment. Stop
            # once each producer has had a write acknowledged again (or after settle_ms): ending sooner would judge
            # that moment, not the cluster, as stuck.
            healed = time.time() * 1000  # the clock of the producers' acknowledgement times
            self._wait_for(lambda: all(p.acknowledged_since(healed) for p in self.until_end),
                           self.scenario.settle_ms, "writes acknowledged again", quiet=True)
        for producer in self.until_end:
            producer.stop_sending.set()
        for thread in self.threads:
            while thread.is_alive():
                thread.join(0.1)
                self._check_cancelled()
        for read in self.reads.values():
            self._await_read(read)
        for stream in self.streams.values():
            if stream.running():
                self.say(f"[{self.label}] stopping stream {stream.name}")
                stream.stop(STREAM_STOP_MS / 1000, self._idle)
                self._say_stream(stream)
        reads = [read.result() for read in self.reads.values()]
        reads += [stream.result() for stream in self.streams.values()]
        tps = self._partitions()
        if tps:
            self.say(f"[{self.label}] reading every replica of {', '.join(map(str, tps))}")
            # An end that does not settle is judged by the checker (no leader: stuck), not as a wait.
            self._wait_for(lambda: self.observer.settled(tps), self.scenario.settle_ms, "settle", quiet=True)
        attempts: list[Attempt] = [a for p in self.all_producers for a in p.attempts()]
        states = [self.observer.final_state(tp) for tp in tps]
        events = timeline.read(self.lab.timeline_file)
        transactions = [t for p in self.all_producers if (t := p.transaction_record()) is not None]
        self.result.report = check(attempts, states, events, reads=reads, transactions=transactions)
        verdict = self.result.report.verdict(self.spec.max_unavailable_ms)
        if self.result.stuck:
            verdict = gravest(verdict, "stuck")
        if self.result.slow:
            verdict = gravest(verdict, "slow")
        self.result.verdict = verdict
        for error in self.errors:
            self.result.failures.append(f"a producer failed: {error}")
        self.result.failures += [f"the read {r.name} failed: {r.error}" if r.name in self._consumer_reads()
                                 else f"the Spark read {r.name} failed: {r.error}" for r in reads if r.error]
        self.result.failures += [f"the Spark stream {s.name} failed: {s.error()}" for s in self.streams.values()
                                 if s.error()]

    def _consumer_reads(self) -> set[str]:
        return {name for name, read in self.reads.items() if isinstance(read, recorder.ConsumerRead)}

    def _partitions(self) -> list[TopicPartition]:
        """The partitions the run wrote to, of the topics that still exist."""
        out = set()
        written = {TopicPartition(p.topic, p.partition) for p in self.all_producers}
        written |= {TopicPartition(r.topic, r.partition) for r in self.reads.values()}
        written |= {tp for s in self.streams.values() for tp in s.result().ranges}
        for topic in sorted({tp.topic for tp in written}):
            try:
                assignment = self.observer.assignment(topic)
            except Unknown:
                assignment = None
            if assignment is not None:
                out |= {tp for tp in written if tp.topic == topic and tp.partition in assignment}
        return sorted(out)

    def _narrate_timeline(self) -> None:
        events = timeline.read(self.lab.timeline_file)
        fresh, self._timeline_seen = events[self._timeline_seen:], len(events)
        for event in fresh:
            if event.get("kind") in NARRATED_KINDS:
                self.say(f"[{self.label}]     {format_line(event)}")


def isr_changes(events: list[dict], topic: str, partition: int) -> tuple[int, int]:
    """How many times the partition's leaders shrank and expanded its ISR in the timeline: its `isr_changed`
    events, each a leader's own write of the ISR to ZooKeeper (Kafka's IsrShrinksPerSec and IsrExpandsPerSec;
    the controller's removals of dead replicas come as `leader_changed`)."""
    shrinks = expansions = 0
    for e in events:
        if e.get("kind") != "isr_changed" or (e.get("topic"), e.get("partition")) != (topic, partition):
            continue
        before, after = len(e.get("from") or ()), len(e.get("isr") or ())
        shrinks += after < before
        expansions += after > before
    return shrinks, expansions


def _die_with_parent() -> None:
    """In a client process the runner starts: end with the runner, whatever ends it (Linux's PDEATHSIG)."""
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def describe_step(step: Step) -> str:
    """`kill broker 2`, `produce 2 records to t-0 (acks=all)`, `wait until broker 1 is out of t-0's ISR`."""
    f = step.fields
    if step.action in ("kill", "pause", "resume", "start", "stop"):
        target = (f"broker {f['broker']}" if "broker" in f else f"consumer {f['consumer']}" if "consumer" in f
                  else f"stream {f['stream']}" if "stream" in f else f"controller {f['controller']}"
                  if "controller" in f else f"ZooKeeper server {f['zookeeper']}")
        return f"{step.action} {target}"
    if step.action == "produce":
        how = " in the background" if f.get("background") else ""
        if "transactional_id" in f:
            return (f"produce {f['count']} record{'s' if f['count'] != 1 else ''} to {f['topic']}-"
                    f"{f.get('partition', 0)} in a transaction of {f['transactional_id']}, then "
                    f"{f['transaction']} it{how}")
        via = f", going by broker {f['via']}'s metadata" if "via" in f else ""
        return (f"produce {f['count']} record{'s' if f['count'] != 1 else ''} to {f['topic']}-{f.get('partition', 0)} "
                f"(acks={f.get('acks', 'all')}){via}{how}")
    if step.action == "read":
        via = f", going by broker {f['via']}'s metadata" if "via" in f else ""
        return f"read {f['topic']}-{f.get('partition', 0)} at {f.get('isolation_level', 'read_committed')}{via}"
    if step.action == "partition":
        peers = f["from"] if isinstance(f["from"], list) else [f["from"]]
        return f"cut {f['node']} off from {', '.join(peers)}" + (" (one way)" if f.get("one_way") else "")
    if step.action == "heal":
        return f"heal {f['node']}" if "node" in f else "heal every partition"
    if step.action in ("wait", "expect"):
        verb = "wait until" if step.action == "wait" else "expect"
        return f"{verb} {describe_condition(f['condition'], f)}"
    if step.action == "sleep":
        return f"sleep {f['ms']} ms"
    if step.action == "fault":
        return f"fault point {f['point']} on broker {f['broker']}"
    if step.action == "heal_faults":
        return f"heal {f.get('point', 'every fault point')} on broker {f['broker']}"
    if step.action == "create_topic":
        return f"create topic {f['topic']}"
    if step.action == "delete_topic":
        return f"delete topic {f['topic']}"
    if step.action == "consumer":
        kind = "coordinator-group member" if f.get("coordinator") else "consumer"
        return f"start {kind} {f['name']} of group {f['group']} on topic {f['topic']}"
    if step.action == "spark_read":
        how = " in the background" if f.get("background") else ""
        return f"a Spark read of {f['topic']}-{f.get('partition', 0)} offsets [{f.get('start', 0)}, {f['end']}){how}"
    if step.action == "spark_stream":
        return (f"a Spark stream {f['as']} of {f['topic']} into Parquet "
                f"({f.get('trigger', 'processing-time=500ms')}) in the background")
    if step.action == "choose":
        return (f"call controller {f['controller']} {f['as']}" if "controller" in f
                else f"call broker {f['broker']} {f['as']}")
    if step.action == "lose_disk":
        return f"controller {f['controller']} loses its disk (formatted again, empty)"
    if step.action == "cut_log":
        return f"broker {f['broker']} loses {f['topic']}-{f.get('partition', 0)}'s log after {f['keep']} messages"
    return step.action


def describe_condition(condition: str, f: dict, negate: bool = False) -> str:
    words = _condition_words(condition, f)
    return f"not ({words})" if negate or f.get("negate") else words


def _condition_words(condition: str, f: dict) -> str:
    broker = f.get("broker")
    tp = f"{f.get('topic')}-{f.get('partition', 0)}"
    words = {
        "registered": f"broker {broker} is registered",
        "unregistered": f"broker {broker} is not registered",
        "controller_elected": "a controller is elected" if broker is None else f"broker {broker} is the controller",
        "controller_changed": f"a controller other than {broker} is elected",
        "leader": f"{tp} has a live leader" if broker is None else f"broker {broker} leads {tp}",
        "no_leader": f"{tp} has no live leader",
        "isr_contains": f"broker {broker} is in {tp}'s ISR",
        "isr_excludes": f"broker {broker} is out of {tp}'s ISR",
        "controller_epoch": f"/controller_epoch is {f.get('size')}",
        "isr_size": f"{tp}'s ISR has {f.get('size')} members",
        "isr_shrinks": f"{tp}'s leaders shrank its ISR {f.get('size')} times",
        "isr_expansions": f"{tp}'s leaders expanded its ISR {f.get('size')} times",
        "topic_exists": f"topic {f.get('topic')} exists",
        "topic_deleted": f"topic {f.get('topic')} is deleted",
        "deletion_pending": f"topic {f.get('topic')} is marked for deletion",
        "zookeeper_quorum": "a quorum serves (ZooKeeper's; in KRaft, the controllers')",
        "zookeeper_quorum_lost": "no quorum serves (ZooKeeper's; in KRaft, the controllers')",
        "running": f"broker {broker}'s process runs",
        "log_contains": (f"consumer {f['consumer']}" if "consumer" in f else f"broker {broker}")
        + f" logs /{f.get('pattern')}/",
        "log_end": f"broker {broker}'s log of {tp} holds {f.get('size')} records",
        "believes_leader": f"broker {broker} believes it leads {tp}",
        "hw": f"broker {broker}'s high watermark of {tp} is {f.get('size')}",
        "stable": f"broker {broker}'s last stable offset of {tp} reaches its high watermark (no transaction open)",
        "leads_all": f"broker {broker} leads every partition of {f.get('topic')}",
        "transactions_at_most": f"{f.get('topic')}'s state znodes were last written in at most {f.get('size')} "
                                f"ZooKeeper transactions",
        "owns": f"consumer {f.get('consumer')} owns {f.get('size')} partitions of {f.get('topic')} in group "
                f"{f.get('group')}",
        "owners": f"{f.get('size')} consumers of group {f.get('group')} own {f.get('topic')}'s partitions",
        "rebalancing": f"group {f.get('group')}'s coordinator is rebalancing it",
        "acked": f"every record of {f.get('of')} is acknowledged",
        "refused": f"no record of {f.get('of')} is acknowledged",
        "read_tasks_running": f"at least {f.get('size')} of {f.get('of')}'s Spark tasks are running",
        "read_tasks_done": f"at least {f.get('size')} of {f.get('of')}'s Spark tasks are done",
        "stream_offset": f"stream {f.get('of')}'s committed batches reach offset {f.get('size')} of {tp}",
        "stream_caught_up": f"stream {f.get('of')}'s committed batches reach the high watermark of every partition",
        "stream_batches": f"stream {f.get('of')} has committed at least {f.get('size')} batches",
    }
    return words.get(condition, condition)


# ---- a scenario in one or both modes ------------------------------------------------------------------------------


@dataclass
class ScenarioResult:
    scenario: str
    seed: int
    runs: list[RunResult]

    @property
    def expected(self) -> bool:
        return all(run.expected for run in self.runs)

    def as_json(self) -> dict:
        return {"scenario": self.scenario, "seed": self.seed, "runs": [run.as_json() for run in self.runs]}


def _wait_through_interrupts(events) -> None:
    """Wait for the runs to tear their labs down, whatever further Ctrl-C comes meanwhile."""
    for event in events:
        while True:
            try:
                if event.wait(0.5):
                    break
            except KeyboardInterrupt:
                continue


def modes_to_run(scenario: Scenario, mode: str) -> list[str]:
    """`both` is the scenario's 0.8 and fixed modes, `all` every mode it has (DESIGN §17); a mode it lacks is an
    error that says why it lacks it."""
    if mode == "all":
        return [m for m in ("0.8", "fixed", *KRAFT_MODES) if m in scenario.modes]
    if mode == "both":
        both = [m for m in ("0.8", "fixed") if m in scenario.modes]
        if not both:
            raise LabError(f"Scenario {scenario.name} has no 0.8 or fixed mode; run it with --mode all "
                           f"({', '.join(scenario.modes)})")
        return both
    if mode not in scenario.modes:
        why = f": {scenario.no_kraft}" if scenario.no_kraft and mode in KRAFT_MODES \
            else f": {scenario.why_one_mode}" if scenario.why_one_mode else ""
        raise LabError(f"Scenario {scenario.name} has no {mode} mode{why}")
    return [mode]


def run_scenario(scenario: Scenario, mode: str = "both", seed: int = 0, directory: Path | None = None,
                 keep: bool = False, stepper: Stepper | None = None, narrate: Narrate = print,
                 cancelled: threading.Event | None = None, parallel: bool = True,
                 subnets: dict[str, str] | None = None, keep_unexpected: bool = True,
                 security: str = "plaintext") -> ScenarioResult:
    """Run the scenario in `mode` (0.8, fixed or both). With both modes and no stepper the two runs go side by
    side (each lab has its own ZooKeeper, ports and namespaces). `directory`: where the labs go (one mode: that
    directory; both: DIR/0.8 and DIR/fixed); by default temporary directories, removed after a run that matched
    its expectation and kept (and named) otherwise (`keep_unexpected` false: removed too). `security`: the labs'
    listeners (`lab up --security`), the run's clients logging in as the lab's admin."""
    modes = modes_to_run(scenario, mode)
    cancelled = cancelled or threading.Event()
    runs: dict[str, ScenarioRun] = {}
    temporary: dict[str, bool] = {}
    for m in modes:
        if directory is None:
            where, temporary[m] = Path(tempfile.mkdtemp(prefix=f"zkbroker-{scenario.name}-{m}-")), True
        else:
            where, temporary[m] = (directory if len(modes) == 1 else directory / m), False
        runs[m] = ScenarioRun(scenario, m, seed, where, narrate, stepper, cancelled, keep,
                              (subnets or {}).get(m), security)
    if scenario.why_one_mode and len(scenario.modes) == 1:
        narrate(f"[{scenario.name}] one mode only: {scenario.why_one_mode}")
    if scenario.faithful:
        narrate(f"[{scenario.name}] how faithful: {scenario.faithful}")
    results: dict[str, RunResult] = {}
    errors: list[BaseException] = []

    def one(m: str, finished: threading.Event) -> None:
        try:
            results[m] = runs[m].run()
        except BaseException as e:  # handed to the caller's thread
            errors.append(e)
            cancelled.set()
        finally:
            finished.set()

    # Each run goes on a thread of its own, so that Ctrl-C (which Python raises in the main thread) only sets
    # `cancelled`, and every run stops at its next wait and tears its lab down before this returns. (The main
    # thread waits on events, not Thread.join: a join interrupted by Ctrl-C may report a thread as finished.)
    side_by_side = parallel and stepper is None
    batches = [modes] if side_by_side else [[m] for m in modes]
    for batch in batches:
        finished = {m: threading.Event() for m in batch}
        for m in batch:
            threading.Thread(target=one, args=(m, finished[m]), name=f"scenario-{m}").start()
        try:
            for event in finished.values():
                while not event.wait(0.2):
                    pass
        except BaseException:
            cancelled.set()
            _wait_through_interrupts(finished.values())
            raise
        if errors:
            break
    if errors:
        raise errors[0]
    for m in modes:
        run = results[m]
        if temporary[m] and not keep:
            if run.expected or not keep_unexpected:
                shutil.rmtree(runs[m].directory, ignore_errors=True)
                run.directory = None
            else:
                narrate(f"[{runs[m].label}] its lab's logs and timeline are kept in {runs[m].directory}")
    return ScenarioResult(scenario.name, seed, [results[m] for m in modes])
