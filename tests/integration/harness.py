"""Real broker processes for integration tests: configs, start/stop/signals, logs and ZooKeeper reads."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkbroker.lab.processes import process_state, stop_process

SESSION_TIMEOUT_MS = 2000  # the test ZooKeeper runs with tickTime 200, so 0.4-60 s sessions are allowed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.02):
    """Poll until condition() is truthy; fail the test naming `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


class Broker:
    """One `zkbroker server` process with its own server.properties, log file and data dir."""

    def __init__(self, root: Path, broker_id: int, zk_connect: str, dir_name: str | None = None,
                 **overrides: object) -> None:
        self.id = broker_id
        self.dir = root / (dir_name or f"broker-{broker_id}")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = int(overrides.pop("port", 0) or free_port())
        props = {"broker.id": broker_id, "port": self.port, "host.name": "127.0.0.1",
                 "advertised.host.name": "127.0.0.1", "log.dirs": self.dir / "data",
                 "zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS}
        props.update({k.replace("_", "."): v for k, v in overrides.items()})
        self.config = self.dir / "server.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log_path = self.dir / "server.log"
        self.proc: subprocess.Popen | None = None

    def start(self, *extra_args: str) -> Broker:
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "zkbroker", "server", str(self.config), *extra_args],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and process_state(self.proc.pid) != "dead"

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(5)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def terminate(self, timeout_s: float = 15.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        self.signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def wait_exit(self, timeout_s: float) -> int:
        return self.proc.wait(timeout_s)

    def cleanup(self) -> None:
        if self.proc is not None and self.alive():
            stop_process(self.proc.pid, timeout_s=5.0)
            self.proc.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_lines(self, pattern: str) -> list[str]:
        return [line for line in self.log().splitlines() if re.search(pattern, line)]


class ZkView:
    """A test's own kazoo client on the cluster's chroot, for reading what the brokers wrote."""

    def __init__(self, connect: str) -> None:
        self.client = KazooClient(hosts=connect, timeout=10.0)
        self.client.start(timeout=10.0)

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    def get(self, path: str) -> bytes | None:
        try:
            return self.client.get(path)[0]
        except NoNodeError:
            return None

    def stat(self, path: str):
        return self.client.exists(path)

    def children(self, path: str) -> list[str]:
        try:
            return sorted(self.client.get_children(path))
        except NoNodeError:
            return []

    def registered(self) -> set[int]:
        return {int(c) for c in self.children("/brokers/ids")}

    def controller(self) -> int | None:
        import json
        data = self.get("/controller")
        return json.loads(data)["brokerid"] if data else None

    def epoch(self) -> int | None:
        data = self.get("/controller_epoch")
        return int(data) if data else None
