"""Controller cost per partition: broker failure, controlled shutdown and controller failover (issue 4).

A 3-broker lab cluster holds N partitions (10,000 by default: `--topics` topics, replication factor 3, leaders
spread evenly, written straight into `/brokers/topics/<t>` as `admin.write_topic` does). Then, in one run:

1. Controlled shutdown of a broker leading a third of the partitions: this script sends the ControlledShutdown
   request (key 7 v1) itself, as the broker would, and times it from outside: request -> answer (every
   leadership moved, its `state` znodes written), and -> the LeaderAndIsr of the moves acknowledged. The broker
   is then stopped, started again and the leaderships returned with a preferred replica election (also timed).
2. Broker failure: SIGKILL of a broker leading a third; from the controller seeing the `/brokers/ids` change
   (its BrokerChange event) to every new `state` znode written, and to every LeaderAndIsr acknowledged.
3. Controller failover: `/controller` deleted (every broker stays up; one of them, perhaps the same, wins): from
   the new `/controller` node to the context loaded and UpdateMetadata acknowledged by every broker.

Where the times come from: the controller logs at INFO, per event, how long after the event began its znode
writes were done and when each kind of request had been acknowledged by every broker it went to:

    [Controller 1]: BrokerChange: 10000 znode writes done 412 ms after the event began; LeaderAndIsr ...
    [Controller 1]: BrokerChange: LeaderAndIsr (20000 partition states) acknowledged by brokers 1,2 640 ms after ...
    [Controller 2]: Controller failover: context loaded 95 ms after the event began (10 topics, ...)

(an event begins when the controller's event thread takes it; the failover when `/controller` became ours).
This script reads those lines from the brokers' server.log. The controlled shutdown is timed from outside too.

Each figure is printed per partition beside Kafka's: ~0.6 ms/partition with synchronous ZooKeeper calls (100,000
partitions, controller failover ~60 s) and ~0.17 ms/partition after Kafka 1.1's async controller (~17 s;
apache/kafka PR #3765). Target: <= 0.1 ms/partition. Also printed: ZooKeeper's own floor on this machine for
the same number of conditional `state` writes, one at a time (0.8.2's way) and in multi() batches.

Every broker holds every partition (replication factor 3 over 3 brokers), and each partition costs a broker two
file descriptors (its segment file and the mapping of its index). When the open-files limit cannot hold them, the
run uses as many partitions as fit and says so; per-partition figures are what compare.

`--stub-brokers` measures the controller alone, at partition counts no real broker here can hold (100,000): broker 1
is a real zkbroker that holds no replica and is the controller; brokers 2-4 are stand-ins (this script, run with
`--stub-broker`) that register in ZooKeeper and answer every controller request at once without keeping anything.
ZooKeeper, the controller's decisions and its requests are all real; the brokers' own work of applying LeaderAndIsr
is what is left out. The phases: broker failure (a stand-in SIGKILLed), controller failover (`/controller` deleted;
broker 1 wins again), then controlled shutdown of a stand-in.

Usage: python bench/failover.py [--partitions 10000] [--topics 10] [--session-timeout-ms 2000] [--keep]
       python bench/failover.py --stub-brokers --partitions 100000 --topics 100
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zkbroker import admin  # noqa: E402
from zkbroker.client.connection import BrokerConnection  # noqa: E402
from zkbroker.lab.cluster import LabCluster  # noqa: E402
from zkbroker.lab.zookeeper import ZooKeeperServer  # noqa: E402
from zkbroker.logconfig import configure  # noqa: E402
from zkbroker.protocol.api import ApiKey, encode_response  # noqa: E402
from zkbroker.protocol.errors import ErrorCode  # noqa: E402
from zkbroker.protocol.headers import parse_request_header  # noqa: E402
from zkbroker.zk import paths  # noqa: E402
from zkbroker.zk.client import ZkClient  # noqa: E402
from zkbroker.zk.znodes import BrokerRegistration, LeaderIsrState, encode_preferred_election  # noqa: E402

KAFKA_SYNC_MS = 0.6      # per partition, 0.8-1.0's synchronous ZkClient (PR #3765: 100k partitions in ~60 s)
KAFKA_ASYNC_MS = 0.17    # per partition, Kafka 1.1's async controller (PR #3765: ~17 s)
TARGET_MS = 0.1
BROKERS = (1, 2, 3)
STUBS = (2, 3, 4)  # --stub-brokers: the stand-ins holding every replica; broker 1 is the real one (the controller)
WAIT_S = 600.0
ISR_CHECK_S = 10.0  # replica.lag.time.max.ms: how often leaders drop stuck followers from their ISRs
FDS_PER_PARTITION = 2   # per broker: the segment's .log file and the mmap of its .index (Python's mmap dups the fd)
FDS_SPARE = 500         # sockets, ZooKeeper, checkpoint files...

_WRITES = re.compile(r"\[Controller (\d+)\]: (.+?): (\d+) znode writes done (\d+) ms after the event began"
                     r"(?: \((\d+) ms of it on the CPU\))?")
_ACKED = re.compile(r"\[Controller (\d+)\]: (.+?): (LeaderAndIsr|UpdateMetadata) \((\d+) partition states\) "
                    r"acknowledged by brokers ([\d,]+) (\d+) ms after the event began")
_LOADED = re.compile(r"\[Controller (\d+)\]: Controller failover: context loaded (\d+) ms after the event began")


@dataclass
class Event:
    """What one controller event logged: ms after it began."""

    controller: int
    writes: int = -1
    written_ms: float | None = None
    cpu_ms: float | None = None
    loaded_ms: float | None = None
    acked_ms: dict[str, float] = field(default_factory=dict)
    acked_states: dict[str, int] = field(default_factory=dict)


class Logs:
    """The brokers' server.log files, read from a mark onwards."""

    def __init__(self, lab_dir: Path, brokers: tuple[int, ...]) -> None:
        self.files = {b: lab_dir / f"broker-{b}" / "server.log" for b in brokers}
        self.offsets = {b: 0 for b in brokers}

    def mark(self) -> None:
        self.offsets = {b: f.stat().st_size if f.exists() else 0 for b, f in self.files.items()}

    def new_lines(self) -> list[str]:
        lines = []
        for b, f in self.files.items():
            with open(f, "rb") as fh:
                fh.seek(self.offsets[b])
                lines += fh.read().decode(errors="replace").splitlines()
        return lines

    def wait_event(self, label: str, need: tuple[str, ...], timeout_s: float = WAIT_S) -> Event:
        """Wait until the event `label` has logged its writes and the acknowledgements named in `need`."""
        deadline = time.monotonic() + timeout_s
        while True:
            event = self.parse(label)
            if event is not None and event.written_ms is not None and all(k in event.acked_ms for k in need):
                return event
            if time.monotonic() > deadline:
                raise TimeoutError(f"no complete {label} in the controller's log within {timeout_s:.0f} s")
            time.sleep(0.2)

    def parse(self, label: str) -> Event | None:
        event: Event | None = None
        for line in self.new_lines():
            if m := _LOADED.search(line):
                if label == "Controller failover":
                    event = Event(int(m[1]))
                    event.loaded_ms = float(m[2])
            elif (m := _WRITES.search(line)) and m[2] == label:
                if event is None or event.controller != int(m[1]):
                    event = Event(int(m[1]))
                if event.written_ms is None:
                    event.writes, event.written_ms = int(m[3]), float(m[4])
                    event.cpu_ms = float(m[5]) if m[5] else None
            elif (m := _ACKED.search(line)) and m[2] == label and event is not None and event.controller == int(m[1]):
                event.acked_ms.setdefault(m[3], float(m[6]))
                event.acked_states.setdefault(m[3], int(m[4]))
        return event


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.zookeeper = ZooKeeperServer(tick_time_ms=200, data_dir=workdir / "zookeeper")
        self.lab = LabCluster(workdir / "lab")
        self.real_brokers = (1,) if args.stub_brokers else BROKERS
        self.replica_brokers = STUBS if args.stub_brokers else BROKERS
        self.logs = Logs(workdir / "lab", self.real_brokers)
        self.zk: KazooClient | None = None
        self.zkc: ZkClient | None = None
        self.stubs: dict[int, subprocess.Popen] = {}
        self.partitions: list[tuple[str, int]] = []
        self.assignment: dict[tuple[str, int], tuple[int, ...]] = {}

    def __enter__(self) -> Bench:
        self.zookeeper.start()
        config = [f"zookeeper.session.timeout.ms={self.args.session_timeout_ms}",
                  # the rebalance timer would move leaderships on its own between the phases
                  "auto.leader.rebalance.enable=false",
                  # a slow broker (before the batching work) must not make the controller resend
                  "controller.socket.timeout.ms=300000"]
        try:
            self.cluster = self.lab.up(brokers=len(self.real_brokers), zookeeper=self.zookeeper.connect_string,
                                       config=config)
            self.zk = KazooClient(hosts=self.cluster.zookeeper, timeout=30)
            self.zk.start(timeout=30)
            self.zkc = ZkClient(self.cluster.zookeeper, name="bench")
            self.zkc.start()
            for broker_id in STUBS if self.args.stub_brokers else ():
                self.start_stub(broker_id)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.stubs.values():
            proc.kill()
            proc.wait()
        if self.zkc is not None:
            self.zkc.close()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
        try:
            self.lab.down()
        finally:
            self.zookeeper.stop()

    def start_stub(self, broker_id: int) -> None:
        self.stubs[broker_id] = subprocess.Popen(
            [sys.executable, __file__, "--stub-broker", self.cluster.zookeeper, str(broker_id),
             str(self.args.session_timeout_ms)], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while self.zk.exists(paths.broker_path(broker_id)) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"stand-in broker {broker_id} did not register")
            time.sleep(0.05)

    # ---- ZooKeeper reads --------------------------------------------------------------------------------------

    def controller_id(self) -> int:
        return json.loads(self.zk.get(paths.CONTROLLER)[0])["brokerid"]

    def states(self) -> dict[tuple[str, int], LeaderIsrState]:
        """Every partition's `state`."""
        found = self.zkc.get_many([paths.partition_state_path(*tp) for tp in self.partitions])
        return {tp: LeaderIsrState.decode(data) for tp, (data, stat) in zip(self.partitions, found) if stat}

    def wait_states(self, what: str, ok) -> None:
        deadline = time.monotonic() + WAIT_S
        while True:
            states = self.states()
            if len(states) == len(self.partitions) and all(ok(tp, s) for tp, s in states.items()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            time.sleep(1.0)

    def wait_metadata(self, brokers) -> None:
        """Until every given broker's metadata (UpdateMetadata from the controller) names a live leader for
        every partition: its LeaderAndIsr, sent before on the same connection, has been applied too."""
        deadline = time.monotonic() + WAIT_S
        entries = {b.id: b for b in self.lab.load().brokers}
        for broker_id in brokers:
            entry = entries[broker_id]
            while True:
                try:
                    with BrokerConnection(entry.host, entry.port, timeout_s=60) as conn:
                        response = conn.send(ApiKey.METADATA, 0, {"topics": sorted({t for t, _ in self.partitions})})
                    led = sum(1 for t in response.topics for p in t.partitions if p.leader >= 0)
                    if led == len(self.partitions):
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"broker {broker_id} did not learn every partition's leader")
                time.sleep(0.5)

    # ---- setup ------------------------------------------------------------------------------------------------

    def create_topics(self) -> float:
        """`--topics` topics of N / topics partitions, RF 3, partition i led by the (i mod 3)-th replica broker."""
        per_topic = self.args.partitions // self.args.topics
        replicas = self.replica_brokers
        started = time.monotonic()
        for t in range(self.args.topics):
            topic = f"bench-{t}"
            assignment = {p: tuple(replicas[(p + j) % 3] for j in range(3)) for p in range(per_topic)}
            for attempt in range(5):  # a loaded machine may drop the session's connection; kazoo reconnects
                try:
                    admin.write_topic(self.zkc, topic, assignment, {})
                    break
                except admin.TopicExistsError:
                    if attempt == 0:
                        raise
                    break  # the attempt before was written; only its answer was lost
                except ConnectionLoss:
                    if attempt == 4:
                        raise
                    time.sleep(2.0)
            for p, assigned in assignment.items():
                self.partitions.append((topic, p))
                self.assignment[(topic, p)] = assigned
        self.wait_full_isrs("every partition online with a full ISR",
                            lambda tp, s: s.leader == self.assignment[tp][0] and len(s.isr) == 3)
        self.wait_metadata(self.real_brokers)
        return time.monotonic() - started

    def wait_full_isrs(self, what: str, ok) -> None:
        """Until `ok` holds for every partition through one whole ISR check of the leaders (every
        replica.lag.time.max.ms, 10 s): followers slow to start fetching (thousands of new logs to create) are
        first dropped from the ISRs, then taken back, and a measurement must not run into that churn."""
        if self.args.stub_brokers:  # nobody changes the ISRs
            self.wait_states(what, ok)
            return
        while True:
            self.wait_states(what, ok)
            time.sleep(ISR_CHECK_S + 1)
            states = self.states()
            if len(states) == len(self.partitions) and all(ok(tp, s) for tp, s in states.items()):
                return

    def rebalance(self) -> Event:
        """Every replica back in the ISR, then a preferred replica election of every partition (timed)."""
        self.wait_full_isrs("every ISR full again", lambda tp, s: len(s.isr) == 3)
        self.logs.mark()
        self.zk.create(paths.PREFERRED_REPLICA_ELECTION, encode_preferred_election(sorted(self.partitions)))
        event = self.logs.wait_event("PreferredReplicaElectionChange", ("LeaderAndIsr", "UpdateMetadata"))
        self.wait_states("preferred leaders", lambda tp, s: s.leader == self.assignment[tp][0])
        return event

    def victim(self) -> int:
        """The broker other than the controller that leads the most partitions (each leads a third after a
        rebalance; with stand-ins, one shut down earlier leads none and never rejoins an ISR)."""
        controller = self.controller_id()
        led = collections.Counter(s.leader for s in self.states().values())
        return max((b for b in (2, 3, 1, 4) if b != controller and b in self.replica_brokers), key=lambda b: led[b])

    def led_by(self, broker: int) -> int:
        return sum(1 for s in self.states().values() if s.leader == broker)

    # ---- the three measurements ---------------------------------------------------------------------------------

    def controlled_shutdown(self, broker: int) -> tuple[float, Event, int]:
        controller = self.controller_id()
        entry = next(b for b in self.lab.load().brokers if b.id == controller)
        self.logs.mark()
        deadline = time.monotonic() + WAIT_S
        while True:
            with BrokerConnection(entry.host, entry.port, client_id="bench", timeout_s=WAIT_S) as conn:
                started = time.monotonic()
                response = conn.send(ApiKey.CONTROLLED_SHUTDOWN, 1, {"broker_id": broker})
                answered_s = time.monotonic() - started
            # UNKNOWN with nothing remaining is 0.8.2's ControllerMovedException: the broker asked is not (or not
            # yet: its context still loading) the active controller. A broker retries after a backoff, as here
            # (controlled.shutdown.max.retries, retry.backoff.ms); the figure is the attempt that was answered.
            if response.error_code != ErrorCode.UNKNOWN or response.partitions_remaining \
                    or time.monotonic() > deadline:
                break
            print(f"  controlled shutdown of {broker}: broker {controller} is not the active controller yet; "
                  "retrying", flush=True)
            time.sleep(1.0)
            controller = self.controller_id()
            entry = next(b for b in self.lab.load().brokers if b.id == controller)
        if response.error_code or response.partitions_remaining:
            raise RuntimeError(f"controlled shutdown answered error {response.error_code}, "
                               f"{len(response.partitions_remaining)} partitions remaining")
        event = self.logs.wait_event("ControlledShutdown", ("LeaderAndIsr",))
        if not self.args.stub_brokers:  # finish it for real: stop, start, give the leaderships back
            self.lab.stop(broker)
            self.lab.start(broker)
        return answered_s, event, broker

    def broker_failure(self) -> tuple[Event, int]:
        broker = self.victim()
        self.logs.mark()
        if self.args.stub_brokers:
            self.stubs.pop(broker).kill()
        else:
            self.lab.kill(broker)
        event = self.logs.wait_event("BrokerChange", ("LeaderAndIsr", "UpdateMetadata"))
        if self.args.stub_brokers:
            self.logs.mark()
            self.start_stub(broker)
            self.logs.wait_event("BrokerChange", ("UpdateMetadata",))  # its return handled before going on
        else:
            self.lab.start(broker)
        return event, broker

    def restart_stub(self, broker: int) -> float:
        """A stand-in gone (its death handled) and back (its return handled), as a controlled shutdown ends; the
        seconds from its start to the controller's UpdateMetadata for its return acknowledged (restart to serving)."""
        self.logs.mark()
        proc = self.stubs.pop(broker)
        proc.kill()
        proc.wait()
        # Its death must be handled before it registers again, or the controller could see no change at all.
        deadline = time.monotonic() + WAIT_S
        while not any(f"Broker {broker} failed" in line for line in self.logs.new_lines()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the controller did not handle the death of stand-in {broker}")
            time.sleep(0.2)
        self.logs.mark()
        started = time.monotonic()
        self.start_stub(broker)
        self.logs.wait_event("BrokerChange", ("UpdateMetadata",))
        return time.monotonic() - started

    def restore_by_failover(self) -> Event:
        """Stand-ins never rejoin an ISR (they fetch nothing): every partition's `state` is written back to a full
        ISR led by its preferred replica, behind the controller's back, and `/controller` deleted, so the next
        controller loads them (the failover is measured as controller_failover measures it)."""
        epoch = int(self.zk.get(paths.CONTROLLER_EPOCH)[0]) if self.zk.exists(paths.CONTROLLER_EPOCH) else 1
        states = self.states()
        pending = []
        for i in range(0, len(self.partitions), 500):
            tx = self.zk.transaction()
            for tp in self.partitions[i:i + 500]:
                assigned = self.assignment[tp]
                tx.set_data(paths.partition_state_path(*tp),
                            LeaderIsrState(assigned[0], states[tp].leader_epoch + 1, epoch, assigned).encode(), -1)
            pending.append(tx.commit_async())
        for result in pending:
            result.get()
        return self.controller_failover()

    def controller_failover(self) -> Event:
        old = self.controller_id()
        self.logs.mark()
        self.zk.delete(paths.CONTROLLER)
        event = self.logs.wait_event("Controller failover", ("UpdateMetadata",))
        event.old = old  # type: ignore[attr-defined]
        return event

    def zookeeper_floor(self) -> tuple[float, float]:
        """The same number of conditional `state` writes on scratch nodes: one synchronous multi() each (0.8.2's
        pattern plus our fence), and in multi() batches of 500 with several in flight (seconds)."""
        n = len(self.partitions)
        data = LeaderIsrState(1, 1, 1, (1, 2, 3)).encode()
        root = "/bench-floor"
        self.zk.ensure_path(root)
        for i in range(0, n, 1000):
            tx = self.zk.transaction()
            for j in range(i, min(n, i + 1000)):
                tx.create(f"{root}/{j}", data)
            tx.commit()
        sample = min(n, 1000)
        started = time.monotonic()
        for j in range(sample):
            tx = self.zk.transaction()
            tx.check(root, 0)
            tx.set_data(f"{root}/{j}", data, 0)
            tx.commit()
        one_by_one = (time.monotonic() - started) * n / sample
        started = time.monotonic()
        pending = []
        for i in range(0, n, 500):
            tx = self.zk.transaction()
            tx.check(root, 0)
            for j in range(i, min(n, i + 500)):
                tx.set_data(f"{root}/{j}", data, -1)
            pending.append(tx.commit_async())
        for result in pending:
            result.get()
        batched = time.monotonic() - started
        self.zk.delete(root, recursive=True)
        return one_by_one, batched


def zookeeper_rounds(bench: Bench, rounds: int, out=print) -> dict[str, list[float]]:
    """bench/kraft_vs_zk.py's ZooKeeper side (stand-ins): per round, a controlled shutdown of the stand-in leading
    the most (request -> answered), its restart to serving, and the ISRs restored through a controller failover
    (new /controller -> context loaded -> UpdateMetadata acknowledged by every broker: the handover). Figures in ms;
    "from_kill" adds zookeeper.session.timeout.ms, the wait before a killed controller's /controller vanishes (with
    stand-ins the only real broker is the controller: its kill cannot be measured here, only composed)."""
    figures: dict[str, list[float]] = {k: [] for k in ("shutdown", "restart", "loaded", "handover", "from_kill",
                                                       "led")}
    for r in range(rounds):
        shut = bench.victim()
        figures["led"].append(bench.led_by(shut))
        answered_s, _, _ = bench.controlled_shutdown(shut)
        figures["shutdown"].append(answered_s * 1000)
        figures["restart"].append(bench.restart_stub(shut) * 1000)
        failover = bench.restore_by_failover()
        figures["loaded"].append(failover.loaded_ms or 0)
        figures["handover"].append(failover.acked_ms["UpdateMetadata"])
        figures["from_kill"].append(bench.args.session_timeout_ms + failover.acked_ms["UpdateMetadata"])
        bench.wait_states("every partition back with its preferred leader and a full ISR",
                          lambda tp, st: st.leader == bench.assignment[tp][0] and len(st.isr) == 3)
        out(f"  ZooKeeper round {r + 1}: controlled shutdown of {figures['led'][-1]:,} leaderships "
            f"{figures['shutdown'][-1]:.0f} ms, restart to serving {figures['restart'][-1]:.0f} ms, failover: "
            f"context loaded {figures['loaded'][-1]:.0f} ms, UpdateMetadata acknowledged {figures['handover'][-1]:.0f}"
            f" ms; load {os.getloadavg()[0]:.1f}")
    return figures


def stand_in_args(partitions: int, topics: int, session_timeout_ms: int = 2000) -> argparse.Namespace:
    """The arguments of `--stub-brokers` for a Bench made by another script."""
    return argparse.Namespace(stub_brokers=True, partitions=partitions, topics=topics,
                              session_timeout_ms=session_timeout_ms, keep=False)


# ---- report -----------------------------------------------------------------------------------------------------


class Table:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        print(f"{'figure':<78} {'seconds':>8} {'ms/partition':>13}  target <= {TARGET_MS}")

    def row(self, name: str, ms: float | None) -> None:
        if ms is None:
            print(f"{name:<78} {'-':>8}")
            return
        per = ms / self.partitions
        print(f"{name:<78} {ms / 1000:8.2f} {per:13.3f}  {'meets' if per <= TARGET_MS else 'MISSES'}")


def fitting_partitions() -> int:
    """Raise our open-files limit to its maximum (the brokers inherit it); how many partitions it holds."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        return 10**9
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return (hard - FDS_SPARE) // FDS_PER_PARTITION


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--stub-broker":
        stub_broker_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return 0
    configure("WARNING")  # kazoo's reconnect chatter stays out of the report
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--session-timeout-ms", type=int, default=2000)
    parser.add_argument("--stub-brokers", action="store_true", help="the controller alone, with stand-in brokers")
    parser.add_argument("--keep", action="store_true", help="keep the working directory (logs) afterwards")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="zkbroker-bench-failover-"))
    fits = fitting_partitions()
    if args.partitions > fits and not args.stub_brokers:
        print(f"{args.partitions:,} partitions would need ~{args.partitions * FDS_PER_PARTITION + FDS_SPARE:,} open "
              f"files per broker; the limit here is {resource.getrlimit(resource.RLIMIT_NOFILE)[1]:,}: running "
              f"{fits:,} partitions instead")
        args.partitions = fits - fits % args.topics
    n = args.partitions
    who = ("broker 1 (the controller, holding no replica) and stand-ins 2-4 holding every replica"
           if args.stub_brokers else "3 brokers")
    print(f"{n:,} partitions ({args.topics} topics, replication factor 3, {who}); working in {workdir}", flush=True)
    election = None
    with Bench(args, workdir) as bench:
        created_s = bench.create_topics()
        print(f"  created and online in {created_s:.1f} s (setup, not a figure)", flush=True)
        if args.stub_brokers:
            # Stand-ins never rejoin an ISR (they fetch nothing), so no preferred replica election can give the
            # leaderships back: the controlled shutdown goes first, while each stand-in leads a third.
            shut = bench.victim()
            shutdown_led = bench.led_by(shut)
            answered_s, shutdown, shut = bench.controlled_shutdown(shut)
            print(f"  controlled shutdown of stand-in {shut}: answered after {answered_s * 1000:.0f} ms", flush=True)
            bench.restart_stub(shut)
            print(f"  stand-in {shut} stopped and started again", flush=True)
            killed = bench.victim()
            failure_led = bench.led_by(killed)
            failure, killed = bench.broker_failure()
            print(f"  stand-in {killed} killed and restarted", flush=True)
            failover = bench.controller_failover()
            print(f"  /controller deleted; broker {failover.controller} took over again", flush=True)
        else:
            shut = bench.victim()
            shutdown_led = bench.led_by(shut)
            answered_s, shutdown, shut = bench.controlled_shutdown(shut)
            print(f"  controlled shutdown of broker {shut}: answered after {answered_s * 1000:.0f} ms", flush=True)
            election = bench.rebalance()
            print("  leaderships returned (preferred replica election)", flush=True)
            killed = bench.victim()
            failure_led = bench.led_by(killed)
            failure, killed = bench.broker_failure()
            print(f"  broker {killed} killed and restarted", flush=True)
            bench.rebalance()
            failover = bench.controller_failover()
            print(f"  controller moved from broker {failover.old} to broker {failover.controller}", flush=True)
        floor_sync, floor_batched = bench.zookeeper_floor()

    print()
    print(f"Controller cost per partition, {n:,} partitions ({who}, replication factor 3)")
    table = Table(n)
    table.row(f"1. broker failure ({failure_led:,} led): BrokerChange -> state znodes written ({failure.writes:,})",
              failure.written_ms)
    table.row(f"   -> LeaderAndIsr acknowledged ({failure.acked_states['LeaderAndIsr']:,} partition states)",
              failure.acked_ms["LeaderAndIsr"])
    table.row("   -> UpdateMetadata acknowledged", failure.acked_ms["UpdateMetadata"])
    table.row("2. controller failover: new /controller -> context loaded", failover.loaded_ms)
    table.row(f"   -> LeaderAndIsr acknowledged ({failover.acked_states.get('LeaderAndIsr', 0):,} partition states)",
              failover.acked_ms.get("LeaderAndIsr"))
    table.row(f"   -> UpdateMetadata acknowledged by every broker ({failover.acked_states['UpdateMetadata']:,})",
              failover.acked_ms["UpdateMetadata"])
    table.row(f"3. controlled shutdown ({shutdown_led:,} led): request -> answered ({shutdown.writes:,} writes)",
              answered_s * 1000)
    table.row(f"   -> LeaderAndIsr acknowledged ({shutdown.acked_states['LeaderAndIsr']:,} partition states)",
              shutdown.acked_ms["LeaderAndIsr"])
    if election is not None:
        table.row("(preferred replica election of every partition -> LeaderAndIsr acknowledged)",
                  election.acked_ms["LeaderAndIsr"])
    print(f"The controller thread's CPU time within each event (the rest of the wall time is waiting for ZooKeeper, "
          f"the GIL and the machine): broker failure {failure.cpu_ms or 0:.0f} ms, controller failover "
          f"{failover.cpu_ms or 0:.0f} ms, controlled shutdown {shutdown.cpu_ms or 0:.0f} ms")
    print(f"Machine: {os.cpu_count()} CPUs shared by the brokers, ZooKeeper and whatever else runs; load average at "
          f"the end {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[1]:.1f} (5 min)")
    print(f"Kafka, per partition: ~{KAFKA_SYNC_MS} ms with synchronous ZooKeeper calls (100,000 partitions: "
          f"controller failover ~60 s), ~{KAFKA_ASYNC_MS} ms after Kafka 1.1's async controller (~17 s); "
          "apache/kafka PR #3765")
    print(f"ZooKeeper alone on this machine, {n:,} fenced conditional state writes: one multi() at a time "
          f"{floor_sync:.2f} s ({floor_sync * 1000 / n:.3f} ms each); multi() batches of 500, pipelined "
          f"{floor_batched:.2f} s ({floor_batched * 1000 / n:.3f} ms each)")
    if args.keep:
        print(f"logs kept in {workdir}")
    return 0


# ---- the stand-in broker (--stub-brokers) ------------------------------------------------------------------------

_STUB_ANSWERS = {ApiKey.LEADER_AND_ISR: {"error_code": 0, "partitions": []},
                 ApiKey.STOP_REPLICA: {"error_code": 0, "partitions": []},
                 ApiKey.UPDATE_METADATA: {"error_code": 0}}


def stub_broker_main(zk_connect: str, broker_id: int, session_timeout_ms: int) -> None:
    """Register as `broker_id` and answer the controller's requests at once, holding nothing, until killed."""
    configure("WARNING")
    parent = os.getppid()
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    server = socket.create_server(("127.0.0.1", 0))
    zk = ZkClient(zk_connect, session_timeout_ms=session_timeout_ms, name=f"stand-in-{broker_id}")
    zk.start()
    zk.create_ephemeral(paths.broker_path(broker_id),
                        BrokerRegistration(broker_id, "127.0.0.1", server.getsockname()[1]).encode())
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_stub_serve, args=(conn,), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """A stand-in outlives no benchmark, even one killed before it could clean up."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _stub_serve(conn: socket.socket) -> None:
    with conn:
        while True:
            size = _stub_read(conn, 4)
            if size is None:
                return
            frame = _stub_read(conn, int.from_bytes(size, "big"))
            if frame is None:
                return
            header, _ = parse_request_header(frame)
            answer = _STUB_ANSWERS.get(header.api_key)
            if answer is None:
                return
            conn.sendall(encode_response(header, answer))


def _stub_read(conn: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


if __name__ == "__main__":
    sys.exit(main())
