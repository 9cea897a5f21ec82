"""Helpers for the client tests: consumer processes (the examples, run as separate OS processes), a steady
producer, owner znodes read back, and a TCP proxy that can cut a consumer off from ZooKeeper."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.integration.harness import ZkView, wait_for
from zkbroker.client.producer import Producer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

#: Consumer settings that keep the tests quick: 1 s sessions (the test ZooKeeper ticks every 200 ms), short
#: backoffs, and enough retries that a rebalance among several processes on two cores does not give up.
FAST_CONSUMER = {
    "zookeeper.session.timeout.ms": 1000,
    "zookeeper.connection.timeout.ms": 10000,
    "rebalance.backoff.ms": 200,
    "rebalance.max.retries": 30,
    "refresh.leader.backoff.ms": 100,
    "fetch.wait.max.ms": 100,
    "auto.offset.reset": "smallest",
}


class ConsumerProcess:
    """One example consumer (`at_least_once`, `at_most_once`, `sqlite_exactly_once`) as an OS process."""

    def __init__(self, workdir: Path, example: str, zk_connect: str, group: str, topic: str, name: str,
                 sink: Path, **config) -> None:
        self.name = name
        self.sink = sink
        self.log_path = workdir / f"{name}.log"
        settings = FAST_CONSUMER | {k.replace("_", "."): v for k, v in config.items()}
        argv = [sys.executable, str(EXAMPLES / f"{example}.py"), "--zookeeper", zk_connect, "--group", group,
                "--topic", topic, "--db" if example == "sqlite_exactly_once" else "--out", str(sink)]
        for key, value in settings.items():
            argv += ["--config", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)})

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cleanup(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def members(zk: ZkView, group: str) -> list[str]:
    return zk.children(f"/consumers/{group}/ids")


def owners(zk: ZkView, group: str, topic: str) -> dict[int, str]:
    """{partition: owning thread id} from /consumers/<g>/owners/<t>/<p>."""
    out = {}
    for child in zk.children(f"/consumers/{group}/owners/{topic}"):
        data = zk.get(f"/consumers/{group}/owners/{topic}/{child}")
        if data is not None:
            out[int(child)] = data.decode()
    return out


def owner_sessions(zk: ZkView, group: str, topic: str) -> dict[int, int]:
    """{partition: ephemeralOwner session of its owner znode}."""
    out = {}
    for child in zk.children(f"/consumers/{group}/owners/{topic}"):
        stat = zk.stat(f"/consumers/{group}/owners/{topic}/{child}")
        if stat is not None:
            out[int(child)] = stat.ephemeralOwner
    return out


def settled(zk: ZkView, group: str, topic: str, partitions: int, expected_members: int | None = None) -> bool:
    """Every partition owned, by a thread of a registered member, and (if given) that many members, each
    owning its even share or one more."""
    ids = members(zk, group)
    if expected_members is not None and len(ids) != expected_members:
        return False
    owned = owners(zk, group, topic)
    if set(owned) != set(range(partitions)):
        return False
    by_member: dict[str, int] = dict.fromkeys(ids, 0)
    for thread in owned.values():
        member = thread.rsplit("-", 1)[0]
        if member not in by_member:
            return False
        by_member[member] += 1
    share = partitions // max(len(ids), 1)
    return all(share <= n <= share + 1 for n in by_member.values())


def wait_settled(zk: ZkView, group: str, topic: str, partitions: int, expected_members: int | None = None,
                 timeout_s: float = 30.0, stable_s: float = 0.5) -> dict[int, str]:
    """Wait until the group is settled and stays so, unchanged, for stable_s (a herd of rebalances passes
    through settled-looking states)."""
    def stable() -> dict[int, str] | None:
        if not settled(zk, group, topic, partitions, expected_members):
            return None
        before = (members(zk, group), owners(zk, group, topic))
        time.sleep(stable_s)
        after = (members(zk, group), owners(zk, group, topic))
        return after[1] if before == after and settled(zk, group, topic, partitions, expected_members) else None

    return wait_for(stable, timeout_s,
                    f"group {group} to own all {partitions} partitions of {topic} with {expected_members} members",
                    interval_s=0.05)


def registration(zk: ZkView, group: str, member: str) -> dict:
    return json.loads(zk.get(f"/consumers/{group}/ids/{member}"))


class SteadyProducer(threading.Thread):
    """Sends `value-<n>` records at a steady rate with acks=all and retries until stopped; `sent` holds the
    values the brokers acknowledged."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 200.0) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.interval = 1.0 / rate
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 10, "linger.ms": 5})
        self.sent: set[str] = set()
        self.errors: list[BaseException] = []
        self._halt = threading.Event()

    def run(self) -> None:
        n = 0
        next_at = time.monotonic()
        while not self._halt.is_set():
            value = f"value-{n}"
            n += 1
            self.producer.send(self.topic, value.encode(), callback=self._done(value))
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._halt.wait(delay)

    def _done(self, value: str):
        def callback(metadata, error) -> None:
            if error is None:
                self.sent.add(value)
            else:
                self.errors.append(error)
        return callback

    def stop(self) -> None:
        self._halt.set()
        self.join(10)
        self.producer.close(30)


def read_values(path: Path) -> list[str]:
    """The values an at-least-once / at-most-once example wrote (`topic partition offset value` lines)."""
    if not path.exists():
        return []
    return [line.split(" ", 3)[3] for line in path.read_text().splitlines() if line.count(" ") >= 3]


class ZkProxy:
    """A TCP proxy in front of ZooKeeper that can cut every connection (and refuse new ones) and heal, and can
    first black-hole them (bytes are dropped, connections stay open), so requests sent meanwhile are in flight,
    unanswered, when the cut comes."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        self._cut = threading.Event()
        self._blackhole = threading.Event()
        self._closed = False
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self._cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if not self._blackhole.is_set():
                    sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def blackhole(self) -> None:
        self._blackhole.set()

    def cut(self) -> None:
        self._cut.set()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def heal(self) -> None:
        self._blackhole.clear()
        self._cut.clear()

    def close(self) -> None:
        self._closed = True
        self.cut()
        self.server.close()
