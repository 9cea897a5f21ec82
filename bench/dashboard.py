"""The dashboard's cost and speed (`zkbroker lab ui`), measured in a real headless Chromium on a real lab.

1. Event -> page latency, measured in the browser: lab commands (pause / resume of a broker) append events to
   the timeline; the page records when each one reached it (`window.zkbrokerDashboard.shown`), and the
   latency is that moment minus the event's own `ts` (one clock: the same machine). Beside it, the floor: a
   plain Python reader polling the same file as often as the dashboard does (every 50 ms), in the same run.
2. State -> page latency: a broker paused, then resumed; the time from the lab's event to the cluster strip
   showing the broker `paused` (then `running` again): a snapshot of ZooKeeper, /proc and the control
   sockets, pushed over the event stream and drawn.
3. Produce throughput (confluent-kafka, 100-byte values, acks=1, 3 partitions on 3 brokers) for a fixed time,
   with no dashboard, with the dashboard running and no page open, and with the page open and live; rounds
   alternated so that all three see the same load on a shared machine. Target: open at most 5% below closed.
   Beside it the CPU the dashboard's server and Chromium used meanwhile, in % of one core: on a busy shared
   machine the throughputs wander by more than 5% from run to run, the CPU taken from the brokers does not.

4. In a KRaft lab (three controllers, `--brokers 0`): the active controller SIGKILLed, round after round (started
   again between rounds). Two delays, each from a timeline event's own `ts` to the page: the lab's kill event to
   the page's receiving it, and the new quorum leader's own `raft_state` event (state leader, a higher epoch) to
   the quorum strip drawing that leader in that epoch (the dashboard asks every controller's control socket,
   pushes the snapshot, the page draws). Beside them, for reading only: the kill to the new leader's event (the
   election itself: the followers' fetch timeout, then a vote).

Usage: python bench/dashboard.py [--quick] [--lab zookeeper|kraft|both]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.dashboard_support import Dashboard, browser_page  # noqa: E402
from zkbroker import admin, timeline  # noqa: E402
from zkbroker.lab import kraft_lab  # noqa: E402
from zkbroker.lab.cluster import LabCluster  # noqa: E402
from zkbroker.lab.dashboard.server import TAIL_S  # noqa: E402
from zkbroker.zk.client import ZkClient  # noqa: E402

TARGET_SLOWDOWN = 0.05
VALUE_BYTES = 100
PRODUCER_CONFIG = {"acks": 1, "linger.ms": 5, "compression.codec": "none",
                   "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def produce_child(bootstrap: str, seconds: float) -> None:
    """In a process of its own: produce as fast as acknowledgements allow for `seconds`; print records/s."""
    from confluent_kafka import Producer

    acked = 0

    def delivered(error, message) -> None:
        nonlocal acked
        if error is None:
            acked += 1

    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
    value = b"x" * VALUE_BYTES
    for _ in range(1000):  # connect and learn the leaders before the clock starts
        producer.produce("load", value, on_delivery=delivered)
    producer.flush(30)
    acked = 0
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        for _ in range(1000):
            try:
                producer.produce("load", value, on_delivery=delivered)
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)
    print(json.dumps({"records_per_s": acked / (time.monotonic() - began)}))


def produce(bootstrap: str, seconds: float) -> float:
    out = subprocess.run([sys.executable, __file__, "--produce-child", bootstrap, str(seconds)], capture_output=True,
                         text=True, timeout=seconds + 120)
    if out.returncode != 0:
        raise RuntimeError(f"the producer failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["records_per_s"]


class FileTail(threading.Thread):
    """The floor: a plain reader of the timeline polling every TAIL_S, recording now - ts per event."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.offset = path.stat().st_size
        self.latencies: dict[float, float] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(TAIL_S):
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
            now = time.time() * 1000
            whole = data[:data.rfind(b"\n") + 1]
            self.offset += len(whole)
            for line in whole.splitlines():
                event = json.loads(line)
                self.latencies[event["ts"]] = now - event["ts"]


def event_latency(lab: LabCluster, page, events: int) -> tuple[list[float], list[float]]:
    """(browser latencies, file-tail latencies) of `events` lab events, in ms."""
    tail = FileTail(lab.timeline_file)
    tail.start()
    since = time.time() * 1000
    for i in range(events):
        (lab.pause if i % 2 == 0 else lab.resume)(3)
        time.sleep(0.05)
    if events % 2:
        lab.resume(3)
    ours = [e for e in timeline.read(lab.timeline_file) if e["ts"] >= since and e["kind"].startswith("process_")]
    page.wait_for_function("([since, n]) => window.zkbrokerDashboard.shown.filter(s => s.ts >= since).length >= n",
                           arg=[since, len(ours)], timeout=60_000)
    shown = page.evaluate("since => window.zkbrokerDashboard.shown.filter(s => s.ts >= since)", since)
    tail.stopping.set()
    tail.join()
    browser = [s["shownAt"] - s["ts"] for s in shown]
    floor = [tail.latencies[e["ts"]] for e in ours if e["ts"] in tail.latencies]
    return browser, floor


def state_latency(lab: LabCluster, page, rounds: int) -> list[float]:
    """ms from the lab's pause / resume event to the strip drawing the broker paused / running."""
    out = []
    for i in range(rounds * 2):
        pause = i % 2 == 0
        (lab.pause if pause else lab.resume)(3)
        event = [e for e in timeline.read(lab.timeline_file) if e["kind"].startswith("process_")][-1]
        want = "paused" if pause else "running"
        page.wait_for_function("([ts, want]) => window.zkbrokerDashboard.stripShown.some("
                               "s => s.shownAt >= ts && s.states['3'] === want)", arg=[event["ts"], want],
                               timeout=30_000)
        first = page.evaluate("([ts, want]) => window.zkbrokerDashboard.stripShown.find("
                              "s => s.shownAt >= ts && s.states['3'] === want).shownAt", [event["ts"], want])
        out.append(first - event["ts"])
        time.sleep(0.3)
    return out


def kraft_leader_latency(lab: LabCluster, page, rounds: int) -> tuple[list[float], list[float], list[float]]:
    """Per round, the active controller killed: (kill event -> the page has it, the new leader's raft_state event
    -> the strip draws that leader and epoch, kill event -> the new leader's event), in ms."""
    kill_shown, leader_drawn, election = [], [], []
    for _ in range(rounds):
        controllers = lab.load().controllers  # every one running again
        leader, epoch = kraft_lab.wait_for_leader(controllers, 60)
        page.wait_for_function("([l, e]) => window.zkbrokerDashboard.stripShown.some("
                               "s => s.controller === l && s.epoch === e)", arg=[leader, epoch], timeout=60_000)
        lab.kill(f"controller:{leader}")
        killed = [e for e in timeline.read(lab.timeline_file) if e["kind"] == "process_killed"][-1]
        new_leader, new_epoch = kraft_lab.wait_for_leader([c for c in controllers if c.id != leader], 60,
                                                         above_epoch=epoch)
        elected = next(e for e in timeline.read(lab.timeline_file)
                       if e["kind"] == "raft_state" and e.get("state") == "leader" and e.get("node") == new_leader
                       and e.get("epoch") == new_epoch)
        page.wait_for_function("([l, e]) => window.zkbrokerDashboard.stripShown.some("
                               "s => s.controller === l && s.epoch === e)", arg=[new_leader, new_epoch],
                               timeout=60_000)
        drawn = page.evaluate("([l, e]) => window.zkbrokerDashboard.stripShown.find("
                              "s => s.controller === l && s.epoch === e).shownAt", [new_leader, new_epoch])
        page.wait_for_function("ts => window.zkbrokerDashboard.shown.some(s => s.ts === ts)", arg=killed["ts"],
                               timeout=60_000)
        shown = page.evaluate("ts => window.zkbrokerDashboard.shown.find(s => s.ts === ts).shownAt", killed["ts"])
        kill_shown.append(shown - killed["ts"])
        leader_drawn.append(drawn - elected["ts"])
        election.append(elected["ts"] - killed["ts"])
        lab.start(f"controller:{leader}")
        time.sleep(1.0)
    return kill_shown, leader_drawn, election


def kraft_section(rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="zkbroker-bench-dashboard-kraft-") as tmp:
        lab = LabCluster(Path(tmp) / "lab")
        lab.up(kraft=True, controllers=3, brokers=0)
        try:
            dashboard = Dashboard(lab.dir)
            try:
                with browser_page() as page:
                    page.goto(dashboard.url)
                    page.wait_for_selector("#live.on")
                    kill_shown, leader_drawn, election = kraft_leader_latency(lab, page, rounds)
            finally:
                dashboard.close()
        finally:
            lab.down()
    print("\nA KRaft lab (3 controllers), the active controller killed (measured in Chromium):")
    row("kill event shown in the page", kill_shown, "the stream and the page")
    row("new quorum leader's event -> strip redrawn", leader_drawn,
        "every controller's control socket read, pushed, drawn")
    row("for reading: kill -> new leader's event", election, "the followers' fetch timeout, then a vote")


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def cpu_seconds(pids: set[int]) -> float:
    """User + system CPU time of the given processes (those still alive)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def chromium_pids() -> set[int]:
    out = set()
    for pid in _descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"chromium" in f.read().split(b"\0")[0]:
                    out.add(pid)
        except OSError:
            continue
    return out


def row(name: str, values: list[float], reference: str) -> None:
    print(f"  {name:<44} p50 {statistics.median(values):7.1f} ms   p99 {percentile(values, 0.99):7.1f} ms   "
          f"(n={len(values)}; {reference})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer events and shorter produce runs")
    parser.add_argument("--lab", choices=("zookeeper", "kraft", "both"), default="both",
                        help="which labs' figures (default both)")
    parser.add_argument("--produce-child", nargs=2, metavar=("BOOTSTRAP", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce_child:
        produce_child(args.produce_child[0], float(args.produce_child[1]))
        return 0
    events, rounds, seconds, repeats = (60, 5, 4.0, 2) if args.quick else (300, 20, 10.0, 5)
    if args.lab in ("zookeeper", "both"):
        zookeeper_section(events, rounds, seconds, repeats)
    if args.lab in ("kraft", "both"):
        kraft_section(rounds)
    return 0


def zookeeper_section(events: int, rounds: int, seconds: float, repeats: int) -> None:
    with tempfile.TemporaryDirectory(prefix="zkbroker-bench-dashboard-") as tmp:
        lab = LabCluster(Path(tmp) / "lab")
        lab.up(brokers=3, config=["zookeeper.session.timeout.ms=6000"])
        try:
            zk = ZkClient(lab.load().zookeeper, name="bench-admin")
            zk.start()
            try:
                admin.create_topic(zk, "load", 3, 1)
            finally:
                zk.close()
            bootstrap = ",".join(f"{b.host}:{b.port}" for b in lab.load().brokers)
            produce(bootstrap, 1.0)  # warm: leaders elected, logs created
            print(f"Dashboard bench: a lab of 3 brokers in {lab.dir}, {os.cpu_count()} CPUs")
            rates: dict[str, list[float]] = {"no dashboard": [], "dashboard, no page": [], "page open": []}
            cpu: dict[tuple[str, str], list[float]] = {}
            dashboard = Dashboard(lab.dir)
            try:
                with browser_page() as page:
                    page.goto(dashboard.url)
                    page.wait_for_selector("#live.on")
                    print("\nEvent -> page latency (the timeline's events, measured in Chromium):")
                    browser, floor = event_latency(lab, page, events)
                    row("timeline event shown in the page", browser, "the stream and the page")
                    row("floor: a Python reader of the same file", floor, f"polling every {TAIL_S * 1000:.0f} ms")
                    row("broker paused/resumed -> strip redrawn", state_latency(lab, page, rounds),
                        "ZooKeeper, /proc and control sockets read, pushed, drawn")
                    # Each round measures the three cases, in a rotating order, so that a shared machine's
                    # changing load falls on all of them alike.
                    cases = list(rates)
                    for r in range(repeats):
                        for case in cases[r % 3:] + cases[:r % 3]:
                            if case == "no dashboard":
                                page.goto("about:blank")
                                dashboard.close()
                            elif dashboard.process.poll() is not None:
                                dashboard = Dashboard(lab.dir)
                            if case == "page open":
                                page.goto(dashboard.url)
                                page.wait_for_selector("#live.on")
                            elif case == "dashboard, no page":
                                page.goto("about:blank")
                            watched = {"dashboard": {dashboard.process.pid} if case != "no dashboard" else set(),
                                       "Chromium": chromium_pids()}
                            before = {k: cpu_seconds(v) for k, v in watched.items()}
                            began = time.monotonic()
                            rates[case].append(produce(bootstrap, seconds))
                            wall = time.monotonic() - began
                            for k, v in watched.items():
                                cpu.setdefault((case, k), []).append((cpu_seconds(v) - before[k]) / wall)
            finally:
                dashboard.close()
        finally:
            lab.down()
    print(f"\nProduce throughput (confluent-kafka, {VALUE_BYTES}-byte values, acks=1, {seconds:.0f} s runs, "
          f"median of {repeats}):")
    closed = statistics.median(rates["dashboard, no page"])
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"  {name:<22} {median:12,.0f} records/s   ({', '.join(f'{v:,.0f}' for v in values)})"
              + ("" if name == "dashboard, no page" else f"   {median / closed - 1:+.1%} vs dashboard closed"))
    slowdown = 1 - statistics.median(rates["page open"]) / closed
    for case in ("dashboard, no page", "page open"):
        print(f"  CPU while producing, {case}: dashboard server {statistics.median(cpu[(case, 'dashboard')]):.1%} "
              f"of a core, Chromium {statistics.median(cpu[(case, 'Chromium')]):.1%}")
    print(f"  page open vs closed: {abs(slowdown):.1%} {'lower' if slowdown >= 0 else 'higher'} "
          f"(target: at most {TARGET_SLOWDOWN:.0%} lower)")


if __name__ == "__main__":
    sys.exit(main())
