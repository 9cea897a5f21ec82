"""A real 3-voter KRaft quorum (three `zkbroker server` processes with process.roles=controller, formatted with
`storage format`, on loopback): metadata records committed per second, commit latency, and failover time.

* throughput: the leader appends NoOpRecords in batches (the lab control interface's `append`), and the
  figure is records divided by the time until the last one is below the high watermark;
* commit latency: one record appended, then the leader's high watermark polled (every millisecond) until it
  passes the record: p50 and p99 over the samples, which include the polling (about a millisecond);
* failover: SIGKILL of the leader, then the time until both survivors name the same new leader of a higher
  epoch; the killed controller is restarted and rejoins, and the quorum runs for 3 s (past the fetch timeout)
  before the next round. Median of the rounds, beside the
  configured controller.quorum.fetch.timeout.ms (a follower stands once its leader is silent that long) and
  election.timeout.ms.

Usage: python bench/raft.py [--seconds 10] [--latency-samples 200] [--failovers 10] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zkbroker.control_protocol import ControlError  # noqa: E402
from zkbroker.lab.control_client import ControlClient  # noqa: E402

FIRST_ID = 3001
BATCH = 1000
SETTLE_S = 3.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def cli(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "zkbroker", *args], check=True, capture_output=True,
                          text=True).stdout


class Node:
    def __init__(self, root: Path, node_id: int, ports: dict[int, int]) -> None:
        self.id = node_id
        self.dir = root / str(node_id)
        self.dir.mkdir()
        self.sock = self.dir / "control.sock"
        self.config = self.dir / "server.properties"
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in sorted(ports.items()))
        self.config.write_text(f"process.roles=controller\nnode.id={node_id}\ncontroller.quorum.voters={voters}\n"
                               f"controller.listener.names=CONTROLLER\n"
                               f"listeners=CONTROLLER://127.0.0.1:{ports[node_id]}\nlog.dirs={self.dir / 'data'}\n")
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, "ZKBROKER_LAB_CONTROL": str(self.sock)}
        with open(self.dir / "server.log", "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "zkbroker", "server", str(self.config)], env=env,
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def request(self, message: dict) -> dict | None:
        try:
            with ControlClient(self.sock, 5.0) as client:
                return client.request(message)
        except ControlError:
            return None

    def raft(self) -> dict | None:
        answer = self.request({"command": "state"})
        return None if answer is None else answer["state"]["raft"]


def wait(condition, timeout_s: float, what: str, interval_s: float = 0.01):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval_s)
    raise SystemExit(f"timed out waiting for {what}")


def agreed_leader(nodes: list[Node], above_epoch: int = 0) -> tuple[int, int] | None:
    seen = set()
    for node in nodes:
        raft = node.raft()
        if raft is None:
            return None
        seen.add((raft["leader"], raft["epoch"]))
    if len(seen) == 1:
        leader, epoch = seen.pop()
        if leader is not None and epoch > above_epoch:
            return leader, epoch
    return None


def high_watermark(node: Node) -> int:
    raft = node.raft()
    return -1 if raft is None or raft["high_watermark"] is None else raft["high_watermark"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--latency-samples", type=int, default=200)
    parser.add_argument("--failovers", type=int, default=10)
    parser.add_argument("--keep", metavar="DIR", help="run in DIR and keep the controllers' logs there")
    args = parser.parse_args()
    with (contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory(prefix="bench-raft-")) as tmp:
        ports = {FIRST_ID + i: free_port() for i in range(3)}
        nodes = [Node(Path(tmp), n, ports) for n in ports]
        cluster_id = cli("storage", "random-uuid").strip()
        for node in nodes:
            cli("storage", "format", "-t", cluster_id, "-c", str(node.config))
        try:
            for node in nodes:
                node.start()
            leader_id, epoch = wait(lambda: agreed_leader(nodes), 120, "a leader")
            by_id = {n.id: n for n in nodes}
            leader = by_id[leader_id]

            start = time.perf_counter()
            records = 0
            last = -1
            while time.perf_counter() - start < args.seconds:
                last = leader.request({"command": "append", "count": BATCH})["last_offset"]
                records += BATCH
            wait(lambda: high_watermark(leader) > last, 60, "the last batch to commit", interval_s=0.001)
            elapsed = time.perf_counter() - start
            print(f"throughput: {records} NoOpRecords in batches of {BATCH} committed in {elapsed:.2f} s: "
                  f"{records / elapsed:,.0f} records/s")

            latencies = []
            for _ in range(args.latency_samples):
                t0 = time.perf_counter()
                offset = leader.request({"command": "append", "count": 1})["last_offset"]
                wait(lambda offset=offset: high_watermark(leader) > offset, 30, "a record to commit", interval_s=0.001)
                latencies.append((time.perf_counter() - t0) * 1000)
            print(f"commit latency ({len(latencies)} single records): p50 {percentile(latencies, 50):.1f} ms, "
                  f"p99 {percentile(latencies, 99):.1f} ms")

            failovers = []
            for round_ in range(args.failovers):
                leader_id, epoch = wait(lambda: agreed_leader(nodes), 120, "a leader before the kill")
                victim = by_id[leader_id]
                survivors = [n for n in nodes if n is not victim]
                t0 = time.perf_counter()
                victim.kill()
                new_leader, new_epoch = wait(lambda s=survivors, e=epoch: agreed_leader(s, e), 60,
                                             "a new leader")
                failovers.append((time.perf_counter() - t0) * 1000)
                print(f"  failover {round_ + 1}: leader {leader_id} (epoch {epoch}) killed, {new_leader} leads epoch "
                      f"{new_epoch} after {failovers[-1]:.0f} ms")
                victim.start()
                wait(lambda e=epoch: agreed_leader(nodes, e), 120, "the killed controller to rejoin")
                # Past one fetch timeout, so that every follower's timer runs from a fetch answered in steady state
                # (a follower that joined a moment before the kill times out from when it joined).
                time.sleep(SETTLE_S)
            if failovers:
                print(f"failover (kill -9 of the leader to an agreed new leader), {len(failovers)} rounds: median "
                      f"{statistics.median(failovers):.0f} ms, min {min(failovers):.0f}, max {max(failovers):.0f}; "
                      f"configured controller.quorum.fetch.timeout.ms 2000, election.timeout.ms 1000 "
                      f"(randomized up to 2000)")
        finally:
            for node in nodes:
                node.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
