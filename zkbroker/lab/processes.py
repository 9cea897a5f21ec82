"""OS processes of the lab: their state from /proc, signals, and a stop that always ends them."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable


def _reap(pid: int) -> None:
    # A broker we spawned ourselves stays a zombie (and looks alive to kill(pid, 0)) until waited for.
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def process_state(pid: int) -> str:
    """"running", "paused" (SIGSTOP) or "dead" (gone, or a zombie)."""
    _reap(pid)
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return "dead"
    # The state letter follows the command name, which is in parentheses and may contain spaces.
    state = stat[stat.rfind(b")") + 2:][:1]
    if state in (b"Z", b"X", b"x"):
        return "dead"
    if state in (b"T", b"t"):
        return "paused"
    return "running"


def signal_process(pid: int, sig: signal.Signals) -> bool:
    """Send sig; False when the process is already gone."""
    if process_state(pid) == "dead":
        return False
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)


def stop_process(pid: int, timeout_s: float = 10.0) -> None:
    """SIGTERM (after SIGCONT, so a paused process can act on it); SIGKILL if it has not exited in time."""
    if not signal_process(pid, signal.SIGCONT):
        return
    signal_process(pid, signal.SIGTERM)
    if not wait_until(lambda: process_state(pid) == "dead", timeout_s):
        signal_process(pid, signal.SIGKILL)
        wait_until(lambda: process_state(pid) == "dead", 5.0)


def processes_matching(match: Callable[[list[str]], bool]) -> list[int]:
    """Pids of the live processes (other than this one) whose command line (argv) satisfies match.

    The lab finds its processes this way, not only through the pids it saved: a broker or ZooKeeper names its
    configuration file (inside the lab directory) on its command line from the moment it is exec'd, before
    any pid of it could have been written down."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                argv = [arg.decode(errors="replace") for arg in f.read().rstrip(b"\0").split(b"\0")]
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if match(argv) and process_state(int(entry.name)) != "dead":
            found.append(int(entry.name))
    return found
