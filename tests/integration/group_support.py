"""Group members as processes (tests/integration/group_member.py, or the KafkaJS one under tests/node/), and
what the tests read from them: the partitions each owns, the records each read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.harness import wait_for

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / "tests" / "node"


def require_client(client: str) -> None:
    """KafkaJS runs from tests/node/node_modules, which `make test` installs (tests/real_tools.py); without it
    the test skips, and under CI fails (tests/conftest.py)."""
    if client == "kafkajs":
        from tests.real_tools import require_node_package

        require_node_package("kafkajs")


class Member:
    """One consumer process of a group; its JSON lines are in `events()`."""

    def __init__(self, workdir: Path, client: str, bootstrap: str, group: str, name: str,
                 topics: list[str] | None = None, pattern: str | None = None, assignor: str = "range",
                 session_timeout_ms: int = 6000, max_poll_interval_ms: int = 300000,
                 stall_after: int | None = None) -> None:
        require_client(client)
        self.name = name
        self.client = client
        self.out_path = workdir / f"{name}.jsonl"
        self.err_path = workdir / f"{name}.stderr"
        args = ["--bootstrap", bootstrap, "--group", group, "--name", name, "--assignor", assignor,
                "--session-timeout-ms", str(session_timeout_ms), "--max-poll-interval-ms", str(max_poll_interval_ms)]
        for topic in topics or []:
            args += ["--topic", topic]
        if pattern:
            args += ["--pattern", pattern]
        if stall_after is not None:
            args += ["--stall-after", str(stall_after)]
        if client == "kafkajs":
            command = ["node", str(NODE_DIR / "group_member.js"), *args]
        else:
            command = [sys.executable, "-m", "tests.integration.group_member", "--client", client, *args]
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=ROOT,
                                         start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})

    def events(self) -> list[dict]:
        if not self.out_path.exists():
            return []
        lines = self.out_path.read_text(errors="replace").splitlines()
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line being written
        return out

    def assignment(self) -> set[tuple[str, int]]:
        """The partitions of the last assignment (empty after a revocation without a new one)."""
        owned: set[tuple[str, int]] = set()
        for e in self.events():
            if e["event"] == "assigned":
                owned = {tuple(p) for p in e["partitions"]}
            elif e["event"] == "revoked":
                owned -= {tuple(p) for p in e["partitions"]}
        return owned

    def assignments(self) -> int:
        return sum(1 for e in self.events() if e["event"] == "assigned")

    def records(self) -> list[dict]:
        return [e for e in self.events() if e["event"] == "record"]

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(5)

    def stop(self, timeout_s: float = 20.0) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def describe(self) -> str:
        err = self.err_path.read_text(errors="replace")[-2000:] if self.err_path.exists() else ""
        return f"{self.name} ({self.client}): {self.events()[-5:]} stderr: {err}"


def wait_for_assignments(members: list[Member], partitions: set[tuple[str, int]], timeout_s: float) -> None:
    """Until the members' current assignments cover `partitions` exactly once, together, each member owning some
    (a member that joined late may own nothing until the group has rebalanced with it)."""
    def balanced() -> bool:
        owned = [p for m in members for p in m.assignment()]
        return (len(owned) == len(set(owned)) and set(owned) == partitions
                and all(m.assignment() for m in members[:len(partitions)]))

    try:
        wait_for(balanced, timeout_s, "every partition owned exactly once", interval_s=0.2)
    except AssertionError:
        raise AssertionError("assignments never balanced: " + "; ".join(
            f"{m.name}: {sorted(m.assignment())}" for m in members) + "\n" + "\n".join(
            m.describe() for m in members)) from None


def read_values(members: list[Member]) -> dict[tuple[str, int, int], str]:
    return {(r["topic"], r["partition"], r["offset"]): r["value"] for m in members for r in m.records()}


def wait_for_values(members: list[Member], expected: set[str], timeout_s: float) -> None:
    def done() -> bool:
        return expected <= set(read_values(members).values())

    try:
        wait_for(done, timeout_s, "every record read", interval_s=0.2)
    except AssertionError:
        missing = expected - set(read_values(members).values())
        raise AssertionError(f"{len(missing)} of {len(expected)} records never read, e.g. {sorted(missing)[:5]}\n"
                             + "\n".join(m.describe() for m in members)) from None


def stop_all(members: list[Member]) -> None:
    for m in members:
        if m.alive():
            os.kill(m.proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    for m in members:
        try:
            m.proc.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            m.kill()
