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
  election.timeout.ms;
* rejoin: in the same rounds, from the killed controller's restart (from its snapshot and log) until its log
  reaches the high watermark the leader had when it restarted;
* snapshot transfer: on a second quorum whose controllers snapshot every 64 KiB of records and roll 64 KiB
  segments, a follower is killed, 20,000 records are committed without it, so that the leader's log starts
  after the follower's end, and the follower restarted: the time until it has fetched the leader's snapshot
  (FetchSnapshot) and caught up to the high watermark. Median of the rounds.

Usage: python bench/raft.py [--seconds 10] [--latency-samples 200] [--failovers 10] [--snapshot-rounds 10]
       [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zkbroker.control_protocol import ControlError  # noqa: E402
from zkbroker.lab.control_client import ControlClient  # noqa: E402
from zkbroker.lab.ports import free_port  # noqa: E402

FIRST_ID = 3001
BATCH = 1000
SETTLE_S = 3.0
BEHIND = 20_000  # records committed while a follower is down, in the snapshot rounds
SMALL_SNAPSHOTS = ("metadata.log.max.record.bytes.between.snapshots=65536\nmetadata.log.segment.bytes=65536\n")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def cli(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "zkbroker", *args], check=True, capture_output=True,
                          text=True).stdout


class Node:
    def __init__(self, root: Path, node_id: int, ports: dict[int, int], extra: str = "") -> None:
        self.id = node_id
        self.dir = root / str(node_id)
        self.dir.mkdir(parents=True)
        self.sock = self.dir / "control.sock"
        self.config = self.dir / "server.properties"
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in sorted(ports.items()))
        self.config.write_text(f"process.roles=controller\nnode.id={node_id}\ncontroller.quorum.voters={voters}\n"
                               f"controller.listener.names=CONTROLLER\n"
                               f"listeners=CONTROLLER://127.0.0.1:{ports[node_id]}\nlog.dirs={self.dir / 'data'}\n"
                               + extra)
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

    def request(self, message: dict) -> dict:
        with ControlClient(self.sock, 5.0) as client:
            return client.request(message)

    def raft(self) -> dict | None:
        try:
            return self.request({"command": "state"})["state"]["raft"]
        except ControlError:
            return None


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


def quorum(root: Path, extra: str = "") -> list[Node]:
    """Three formatted controllers (not started)."""
    ports = {FIRST_ID + i: free_port() for i in range(3)}
    nodes = [Node(root, n, ports, extra) for n in ports]
    cluster_id = cli("storage", "random-uuid").strip()
    for node in nodes:
        cli("storage", "format", "-t", cluster_id, "-c", str(node.config))
    return nodes


def log_end(node: Node) -> int:
    raft = node.raft()
    return -1 if raft is None else raft["log_end_offset"]


def snapshot_transfer(nodes: list[Node]) -> float:
    """One round: a follower killed, BEHIND records committed without it, restarted; ms until it caught up."""
    leader_id, _ = wait(lambda: agreed_leader(nodes), 120, "a leader")
    leader = next(n for n in nodes if n.id == leader_id)
    follower = next(n for n in nodes if n.id != leader_id)
    behind = log_end(follower)
    follower.kill()
    last = -1
    for _ in range(BEHIND // BATCH):
        last = leader.request({"command": "append", "count": BATCH})["last_offset"]
    wait(lambda: high_watermark(leader) > last, 60, "the records to commit without the follower")
    wait(lambda: (leader.raft() or {}).get("log_start_offset", 0) > behind, 60,
         "the leader's log to start past the follower's end")
    target = high_watermark(leader)
    t0 = time.perf_counter()
    follower.start()
    wait(lambda: log_end(follower) >= target, 120, "the follower to catch up through the snapshot")
    took = (time.perf_counter() - t0) * 1000
    snapshot = (follower.raft() or {}).get("snapshot")
    print(f"  snapshot transfer: controller {follower.id} was at {behind}, the leader's log starts at "
          f"{leader.raft()['log_start_offset']}; caught up to {target} in {took:.0f} ms (its snapshot now ends at "
          f"{snapshot and snapshot['end_offset']})")
    return took


def snapshot_transfers(root: Path, rounds: int) -> list[float]:
    """Milliseconds from a far-behind follower's restart to its catching up through the leader's snapshot."""
    nodes = quorum(root, SMALL_SNAPSHOTS)
    times = []
    try:
        for node in nodes:
            node.start()
        for _ in range(rounds):
            times.append(snapshot_transfer(nodes))
            time.sleep(SETTLE_S)
    finally:
        for node in nodes:
            node.kill()
    return times


def high_watermark(node: Node) -> int:
    raft = node.raft()
    return -1 if raft is None or raft["high_watermark"] is None else raft["high_watermark"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--latency-samples", type=int, default=200)
    parser.add_argument("--failovers", type=int, default=10)
    parser.add_argument("--snapshot-rounds", type=int, default=10)
    parser.add_argument("--keep", metavar="DIR", help="run in DIR and keep the controllers' logs there")
    args = parser.parse_args()
    with (contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory(prefix="bench-raft-")) as tmp:
        nodes = quorum(Path(tmp) / "main")
        rejoins: list[float] = []
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
                target = high_watermark(by_id[new_leader])
                t0 = time.perf_counter()
                victim.start()
                wait(lambda e=epoch: agreed_leader(nodes, e), 120, "the killed controller to rejoin")
                wait(lambda v=victim, t=target: log_end(v) >= t, 120, "the killed controller to catch up")
                rejoins.append((time.perf_counter() - t0) * 1000)
                # Past one fetch timeout, so that every follower's timer runs from a fetch answered in steady state
                # (a follower that joined a moment before the kill times out from when it joined).
                time.sleep(SETTLE_S)
            if failovers:
                print(f"failover (kill -9 of the leader to an agreed new leader), {len(failovers)} rounds: median "
                      f"{statistics.median(failovers):.0f} ms, min {min(failovers):.0f}, max {max(failovers):.0f}; "
                      f"configured controller.quorum.fetch.timeout.ms 2000, election.timeout.ms 1000 "
                      f"(randomized up to 2000)")
                print(f"rejoin (restart from its snapshot and log to the high watermark at its restart), "
                      f"{len(rejoins)} rounds: median {statistics.median(rejoins):.0f} ms, min {min(rejoins):.0f}, "
                      f"max {max(rejoins):.0f}")
        finally:
            for node in nodes:
                node.kill()
        if args.snapshot_rounds:
            transfers = snapshot_transfers(Path(tmp) / "snapshots", args.snapshot_rounds)
            print(f"snapshot transfer (a follower {BEHIND:,} records behind a log that starts past it, restart to "
                  f"caught up), {len(transfers)} rounds: median {statistics.median(transfers):.0f} ms, "
                  f"min {min(transfers):.0f}, max {max(transfers):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
