"""A deterministic simulation of a Raft quorum: RaftNodes on a simulated network, driven by a schedule of
faults, with the invariants of Kafka's RaftEventSimulationTest checked after every event.

One event at a time from a time-ordered queue (a message delivery, a node's timer, a fault, the client
appending to the leader); everything random (delays, drops, each node's election timeouts) comes from
generators seeded by the schedule, so a seed replays a run exactly.

The network: each message takes a delay drawn in [min_delay_ms, max_delay_ms] and may be reordered; before
the heal time it is dropped with probability drop_rate; a partition cuts the nodes of one group from the
others; a crash kills the process's connections: a message sent to it before the crash, or an answer to
a request it made before the crash, is lost, while what it sent before it died still arrives. A crash may
also come in the middle of a step, after a random part of the step's effects. Crashed nodes keep their
disk: the log and the quorum-state (kept as the JSON Kafka writes, and read back through it on restart).
At the heal time every node is up, partitions and drops end, and the liveness check starts: a leader must
commit a record appended after the heal within `liveness_bound_ms`.

Invariants, checked after every event (InvariantViolation names the seed and the simulated time):
  - at most one leader per epoch, over the whole run;
  - each node's epoch never goes down (across restarts too) and its high watermark never goes down;
  - committed entries never change: what a node holds below the highest high watermark it ever had equals
    what every other node holds there (a truncation below it is itself a violation);
  - a majority of voters holds the committed log up to the highest high watermark of any node;
  - every epoch's first entry in every log is the LeaderChange record of that epoch's leader (checked at the end).
"""

from __future__ import annotations

import base64
import heapq
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from zkbroker.raft import quorum_state
from zkbroker.raft.config import QuorumConfig
from zkbroker.raft.effects import Effect, PersistQuorumState, Send, Timer
from zkbroker.raft.log import InMemoryLog
from zkbroker.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    LeaderChangeMessage,
    LogEntry,
    Message,
    VoteRequest,
)
from zkbroker.raft.node import RaftNode
from zkbroker.raft.states import Leader

OBSERVER_BASE_ID = 100
REQUESTS = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest)


def directory_id(node: int, generation: int) -> str:
    """A node's log dir's id (a Kafka Uuid, base64url) as formatted the `generation`-th time."""
    return base64.urlsafe_b64encode(struct.pack(">qq", node, generation)).decode("ascii").rstrip("=")


class InvariantViolation(AssertionError):
    pass


@dataclass(frozen=True)
class Fault:
    at_ms: int
    kind: str  # crash | crash-mid-step | restart | partition | heal | resign | crash-leader | isolate-leader
    #            | isolate-follower | wipe-follower
    # crash, crash-mid-step, restart: the node (resign, crash-leader, isolate-leader: whoever leads then;
    # isolate-follower: the lowest voter that does not lead then; wipe-follower: the highest voter that does not
    # lead then and is not cut off, which loses its disk and restarts at once on an empty one). A
    # crash-mid-step crashes the node during its next step, after a random part of the step's effects.
    node: int = 0
    group: frozenset[int] = frozenset()  # partition: these nodes are cut from the rest


@dataclass(frozen=True)
class Schedule:
    seed: int
    voters: int = 3
    observers: int = 0
    drop_rate: float = 0.0
    min_delay_ms: int = 1
    max_delay_ms: int = 20
    append_every_ms: int = 250
    faults: tuple[Fault, ...] = ()
    heal_at_ms: int = 4000
    liveness_bound_ms: int = 20000
    pre_vote: bool = False  # KIP-996 on every node
    run_until_ms: int | None = None  # run this long even once liveness is shown (to see what a heal leads to)
    directory_ids: bool = False  # KIP-853: voters known by their log dir's id too

    @property
    def voter_ids(self) -> list[int]:
        return list(range(1, self.voters + 1))

    @property
    def observer_ids(self) -> list[int]:
        return [OBSERVER_BASE_ID + i for i in range(1, self.observers + 1)]


def random_schedule(seed: int) -> Schedule:
    """The bench's and the seeded tests' schedules: everything drawn from `seed`."""
    rng = random.Random(seed)
    voters = rng.choice((1, 3, 3, 3, 5, 5))
    observers = rng.choice((0, 0, 1, 2))
    nodes = list(range(1, voters + 1)) + [OBSERVER_BASE_ID + i for i in range(1, observers + 1)]
    heal_at = rng.randrange(500, 5000)
    faults = [random_fault(rng, rng.randrange(heal_at), nodes) for _ in range(rng.randrange(0, 8))]
    return Schedule(
        seed=seed, voters=voters, observers=observers,
        drop_rate=rng.choice((0.0, 0.0, 0.05, 0.2)),
        min_delay_ms=1, max_delay_ms=rng.choice((5, 20, 100)),
        append_every_ms=rng.choice((100, 250, 1000)),
        faults=tuple(sorted(faults, key=lambda f: f.at_ms)), heal_at_ms=heal_at,
        pre_vote=rng.random() < 0.5,  # drawn last, so that a seed's other draws are what they were before it
    )


def random_fault(rng: random.Random, at_ms: int, nodes: list[int]) -> Fault:
    kind = rng.choice(("crash", "crash-mid-step", "restart", "partition", "partition", "heal", "resign",
                       "crash-leader", "isolate-leader"))
    if kind == "partition":
        return Fault(at_ms, kind, group=frozenset(rng.sample(nodes, rng.randrange(1, len(nodes) + 1))))
    return Fault(at_ms, kind, node=rng.choice(nodes))


class CheckedLog(InMemoryLog):
    """The in-memory log, remembering the lowest offset it was truncated to since the last check."""

    def __init__(self) -> None:
        super().__init__()
        self.lowest_truncation: int | None = None

    def truncate_to(self, offset: int) -> None:
        if offset < self.end_offset:
            self.lowest_truncation = min(offset, self.lowest_truncation if self.lowest_truncation is not None
                                         else offset)
        super().truncate_to(offset)


@dataclass
class Disk:
    directory_id: str  # what formatting the disk gave it (meta.properties' directory.id)
    log: CheckedLog = field(default_factory=CheckedLog)
    quorum_state: str | None = None  # the quorum-state file's content


@dataclass
class Outcome:
    events: int
    end_ms: int
    live_at_ms: int | None  # when a record appended after the heal was committed
    max_epoch: int
    committed: int


class Simulation:
    def __init__(self, schedule: Schedule, trace: Callable[[str], None] | None = None) -> None:
        self.schedule = schedule
        self.trace = trace
        self.now = 0
        self.net_rng = random.Random(f"{schedule.seed}-network")
        self.voters = frozenset(schedule.voter_ids)
        self.node_ids = schedule.voter_ids + schedule.observer_ids
        self.disks = {n: Disk(directory_id(n, 0)) for n in self.node_ids}
        self.wiped: set[int] = set()  # nodes that lost their disk
        self.nodes: dict[int, RaftNode | None] = {n: None for n in self.node_ids}
        self.incarnation = dict.fromkeys(self.node_ids, 0)
        self.wake_token = dict.fromkeys(self.node_ids, 0)
        self.side = dict.fromkeys(self.node_ids, 0)  # a message passes between nodes on the same side
        self.healed = False
        self.queue: list[tuple[int, int, str, tuple]] = []
        self.seq = 0
        self.events = 0
        self.appended = 0
        # What the invariants remember.
        self.leaders: dict[int, int] = {}  # epoch -> its leader
        self.max_epoch = dict.fromkeys(self.node_ids, 0)
        self.max_hw = dict.fromkeys(self.node_ids, 0)
        self.committed: list[LogEntry] = []
        self.fresh: set[tuple[int, int]] = set()  # (offset, epoch) of records appended after the heal
        self.live_at: int | None = None
        self.touched: set[int] = set()  # nodes that took a step since the last check
        self.crash_mid_step: set[int] = set()
        self.open_requests: dict[tuple[int, int, int], int] = {}  # (responder, requester, correlation id) -> life
        self.history: dict[int, list[tuple[int, str, int]]] = {n: [] for n in self.node_ids}  # (ms, state, epoch)

    # --- running --------------------------------------------------------------------------------------------

    def run(self) -> Outcome:
        s = self.schedule
        for n in self.node_ids:
            self._start(n)
        for fault in s.faults:
            self._push(fault.at_ms, "fault", (fault,))
        self._push(s.heal_at_ms, "heal", ())
        self._push(0, "append", ())
        end = s.heal_at_ms + s.liveness_bound_ms
        while self.queue:
            at, _, kind, args = heapq.heappop(self.queue)
            if s.run_until_ms is not None:
                if at > s.run_until_ms:
                    break
            elif at > end or (self.live_at is not None and at > self.live_at + 500):
                break
            self.now = at
            getattr(self, "_on_" + kind)(*args)
            if self.touched:
                self.events += 1
                self._check()
        self._check_leader_change_records()
        return Outcome(self.events, self.now, self.live_at, max(self.max_epoch.values()), len(self.committed))

    def check_liveness(self, outcome: Outcome) -> None:
        if outcome.live_at_ms is None:
            states = {n: (node.state.name, node.epoch, node.high_watermark) if node else "down"
                      for n, node in self.nodes.items()}
            self._fail(f"no record appended after the heal at {self.schedule.heal_at_ms} ms was committed within "
                       f"{self.schedule.liveness_bound_ms} ms; nodes: {states}")

    def _push(self, at: int, kind: str, args: tuple) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (at, self.seq, kind, args))

    def _start(self, n: int) -> None:
        disk = self.disks[n]
        self.incarnation[n] += 1
        stored = quorum_state.decode(disk.quorum_state) if disk.quorum_state is not None else None
        # Without directory ids (Kafka 3.7) a node neither knows nor sends its log dir's id.
        directories = {v: directory_id(v, 0) for v in self.voters} if self.schedule.directory_ids else None
        config = QuorumConfig(node_id=n, voters=self.voters, pre_vote=self.schedule.pre_vote,
                              directory_id=disk.directory_id if directories else None,
                              voter_directories=directories)
        rng = random.Random(f"{self.schedule.seed}-{n}-{self.incarnation[n]}")
        node = RaftNode(config, disk.log, stored, rng, self.now)
        self.nodes[n] = node
        self.touched.add(n)
        self._log(f"node {n} starts as {node.state.name} in epoch {node.epoch}")
        self._perform(n, node.poll(self.now))

    def _step(self, n: int, call: Callable[[RaftNode], list[Effect]]) -> None:
        node = self.nodes[n]
        if node is None:
            return
        self.touched.add(n)
        try:
            effects = call(node)
        except InvariantViolation:
            raise
        except Exception as exc:  # a RaftStateError, or a bug: either way the run has found something
            self._fail(f"node {n} raised {exc!r}")
        self._perform(n, effects)

    def _perform(self, n: int, effects: list[Effect]) -> None:
        crash = n in self.crash_mid_step
        if crash:
            # The process dies part way through the step: what comes after a quorum-state write may be lost,
            # never what comes before it.
            self.crash_mid_step.discard(n)
            effects = effects[:self.net_rng.randrange(len(effects))]
        for effect in effects:
            if isinstance(effect, Send):
                self._send(n, effect)
            elif isinstance(effect, PersistQuorumState):
                self.disks[n].quorum_state = quorum_state.encode(effect.state)
            elif isinstance(effect, Timer):
                self.wake_token[n] += 1
                self._push(effect.deadline_ms, "wake", (n, self.wake_token[n]))
            # FlushLog: the simulated disk loses nothing the node wrote.
        if crash:
            self._crash(n)

    def _connected(self, a: int, b: int) -> bool:
        return self.side[a] == self.side[b] and self.nodes[a] is not None and self.nodes[b] is not None

    def _send(self, src: int, send: Send) -> None:
        """A request travels on a connection to the receiver's current process; a response on the connection its
        request came by, which died if the requester has restarted since."""
        dst = send.destination
        if isinstance(send.message, REQUESTS):
            dst_life = self.incarnation[dst]
        else:
            dst_life = self.open_requests.pop((src, dst, send.correlation_id), -1)
        if dst not in self.nodes or not self._connected(src, dst):
            return
        if not self.healed and self.schedule.drop_rate and self.net_rng.random() < self.schedule.drop_rate:
            return
        delay = self.net_rng.randint(self.schedule.min_delay_ms, self.schedule.max_delay_ms)
        self._push(self.now + delay, "deliver",
                   (src, dst, self.incarnation[src], dst_life, send.correlation_id, send.message))

    # --- events ---------------------------------------------------------------------------------------------

    def _on_deliver(self, src: int, dst: int, src_life: int, dst_life: int, correlation_id: int,
                    message: Message) -> None:
        # What a process wrote before it died still arrives (its kernel sends it); nothing arrives at a process
        # that was not the one the connection was made to.
        if self.incarnation[dst] != dst_life or self.nodes[dst] is None or self.side[src] != self.side[dst]:
            return
        if isinstance(message, REQUESTS):
            self.open_requests[(dst, src, correlation_id)] = src_life
        if self.trace is not None:
            self._log(f"{src} -> {dst} #{correlation_id} {message}")
        self._step(dst, lambda node: node.handle(self.now, src, correlation_id, message))

    def _on_wake(self, n: int, token: int) -> None:
        if token == self.wake_token[n]:
            self._step(n, lambda node: node.poll(self.now))

    def _on_append(self) -> None:
        self._push(self.now + self.schedule.append_every_ms, "append", ())
        for n, node in self.nodes.items():
            if node is not None and isinstance(node.state, Leader):
                self.appended += 1
                offset, epoch = node.log.end_offset, node.epoch
                record = f"{n}:{self.appended}".encode()
                self._step(n, lambda node: node.append(self.now, [record]))  # noqa: B023 (called at once)
                if self.healed:
                    self.fresh.add((offset, epoch))

    def _on_fault(self, fault: Fault) -> None:
        self._log(f"fault {fault}")
        if fault.kind == "crash":
            self._crash(fault.node)
        elif fault.kind == "crash-mid-step":
            if self.nodes[fault.node] is not None:
                self.crash_mid_step.add(fault.node)
        elif fault.kind == "restart":
            if self.nodes[fault.node] is None:
                self._start(fault.node)
        elif fault.kind == "partition":
            for n in self.node_ids:
                self.side[n] = 1 if n in fault.group else 0
        elif fault.kind == "heal":
            self.side = dict.fromkeys(self.node_ids, 0)
        elif fault.kind == "resign":
            for n in self._leaders():
                self._step(n, lambda node: node.resign(self.now))
        elif fault.kind == "crash-leader":
            for n in self._leaders():
                self._crash(n)
        elif fault.kind == "isolate-leader":
            leaders = self._leaders()
            for n in self.node_ids:
                self.side[n] = 1 if n in leaders else 0
        elif fault.kind == "wipe-follower":
            leaders = self._leaders()
            leader_side = self.side[leaders[0]] if leaders else 0
            n = max(v for v in self.voters if v not in leaders and self.side[v] == leader_side)
            self._crash(n)
            self.wiped.add(n)
            self.disks[n] = Disk(directory_id(n, len(self.wiped)))
            self.max_epoch[n] = self.max_hw[n] = 0  # a new disk starts from nothing: not a step back
            self._start(n)
        elif fault.kind == "isolate-follower":
            leaders = self._leaders()
            cut = min(v for v in self.voters if v not in leaders)
            for n in self.node_ids:
                self.side[n] = 1 if n == cut else 0

    def _leaders(self) -> list[int]:
        return [n for n, node in self.nodes.items() if node is not None and isinstance(node.state, Leader)]

    def _on_heal(self) -> None:
        self._log("heal")
        self.healed = True
        self.crash_mid_step.clear()
        self.side = dict.fromkeys(self.node_ids, 0)
        for n in self.node_ids:
            if self.nodes[n] is None:
                self._start(n)

    def _crash(self, n: int) -> None:
        self.crash_mid_step.discard(n)
        if self.nodes[n] is not None:
            self.nodes[n] = None
            self.incarnation[n] += 1  # what was in flight to or from it is lost
            self.wake_token[n] += 1

    # --- invariants -----------------------------------------------------------------------------------------

    def _check(self) -> None:
        """Only a node that took a step can have broken an invariant; the majority holding the committed log
        can change only when the log is committed further or a voter truncates."""
        committed, truncated = len(self.committed), False
        for n in self.touched:
            node = self.nodes[n]
            disk = self.disks[n]
            if disk.log.lowest_truncation is not None:
                if disk.log.lowest_truncation < self.max_hw[n]:
                    self._fail(f"node {n} truncated its log to {disk.log.lowest_truncation}, below its high "
                               f"watermark {self.max_hw[n]}")
                disk.log.lowest_truncation = None
                truncated = True
            if node is None:
                continue
            epoch = node.epoch
            history = self.history[n]
            if not history or history[-1][1:] != (node.state.name, epoch):
                history.append((self.now, node.state.name, epoch))
            if epoch < self.max_epoch[n]:
                self._fail(f"node {n} went from epoch {self.max_epoch[n]} back to {epoch}")
            self.max_epoch[n] = epoch
            if isinstance(node.state, Leader):
                leader = self.leaders.setdefault(epoch, n)
                if leader != n:
                    self._fail(f"epoch {epoch} has two leaders: {leader} and {n}")
            hw = node.high_watermark
            if hw is not None and hw != self.max_hw[n]:
                if hw < self.max_hw[n]:
                    self._fail(f"node {n}'s high watermark went from {self.max_hw[n]} back to {hw}")
                self._commit(n, node, self.max_hw[n], hw)
                self.max_hw[n] = hw
        self.touched.clear()
        if truncated or len(self.committed) != committed:
            self._check_majority()

    def _commit(self, n: int, node: RaftNode, start: int, end: int) -> None:
        entries = self.disks[n].log.entries[start:end]
        if len(entries) < end - start:
            self._fail(f"node {n} has high watermark {end} beyond its log end {node.log.end_offset}")
        for entry in entries:
            if entry.offset < len(self.committed):
                if self.committed[entry.offset] != entry:
                    self._fail(f"node {n} committed {entry} where {self.committed[entry.offset]} was committed")
            else:
                self.committed.append(entry)
                if self.live_at is None and (entry.offset, entry.epoch) in self.fresh:
                    self.live_at = self.now

    def _check_majority(self) -> None:
        hw = len(self.committed)
        if hw == 0 or self.wiped:
            # A lost disk takes its copies with it: Raft assumes durable disks, so after a wipe what must hold is
            # that the committed log never changes, not that a majority still holds it.
            return
        last = self.committed[-1]
        holding = 0
        for v in self.voters:
            log = self.disks[v].log
            if log.end_offset >= hw and log.entries[hw - 1] == last:
                holding += 1
        if holding < len(self.voters) // 2 + 1:
            self._fail(f"only {holding} of {len(self.voters)} voters hold the committed log up to {hw}")

    def _check_leader_change_records(self) -> None:
        for n in self.node_ids:
            previous_epoch = None
            for entry in self.disks[n].log.entries:
                if entry.epoch != previous_epoch:
                    record = entry.record
                    # A leader that crashed in the step that elected it was never seen leading; its record was.
                    leader = self.leaders.setdefault(entry.epoch, getattr(record, "leader_id", None))
                    if not isinstance(record, LeaderChangeMessage) or record.leader_id != leader:
                        self._fail(f"node {n}'s first entry of epoch {entry.epoch} is {entry}, not the LeaderChange "
                                   f"of its leader {leader}")
                    previous_epoch = entry.epoch

    def _fail(self, message: str) -> None:
        raise InvariantViolation(f"seed {self.schedule.seed}, at {self.now} ms: {message}\nschedule: {self.schedule}")

    def _log(self, line: str) -> None:
        if self.trace is not None:
            self.trace(f"{self.now:>7} {line}")
