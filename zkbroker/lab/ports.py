"""Choosing the port a server will listen on before it starts: one home for it (brokers, KRaft controllers,
ZooKeeper's client, quorum and election ports, Spark's master; the tests' and benches' own servers too).

Until the new process binds, anyone may take the port. Two kinds of anyone did, in the suite's side-by-side
runs (a KRaft controller exited with "Address already in use"):
- any outgoing connection on the machine: the kernel gives it a local port from the ephemeral range
  (`net.ipv4.ip_local_port_range`, 32768-60999 on Linux, 49152-65535 elsewhere), the very range a bind to
  port 0 picks from. A client connecting anywhere could hold the port a controller was about to bind;
- another lab choosing at the same moment.
So ports are chosen at random below the ephemeral range, where no outgoing connection is ever given one, and
each choice is claimed for CLAIM_S seconds with a file in a directory every process on the machine shares: a
port is chosen only if nobody claimed it lately and a bind to it succeeds now. A process restarted on its
own port later (a lab's `start`) is not claimed again: another lab would have to draw that one port of
~12,000 while it is down.
"""

from __future__ import annotations

import os
import random
import socket
import tempfile
import time
from pathlib import Path

CLAIM_S = 300.0  # a lab's slowest start (controllers, then brokers, then a ZooKeeper ensemble) binds well within
LOWEST = 20_000  # above every well-known port a lab or its tools use (ZooKeeper 2181/2888/3888, Spark, 9092)
DRAWS = 2_000
CLAIMS = Path(tempfile.gettempdir()) / "zkbroker-ports"


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` that no process listens on, no outgoing connection can be given, and no other caller
    of this function was given in the last CLAIM_S seconds."""
    highest = _ephemeral_low() - 1
    if highest - LOWEST < 1_000:  # the ephemeral range starts unusually low: leave the choice to the kernel
        return _kernel_pick(host)
    CLAIMS.mkdir(parents=True, exist_ok=True)
    for _ in range(DRAWS):
        port = random.randint(LOWEST, highest)
        if not _claim(port):
            continue
        if _bindable(host, port):
            return port
        (CLAIMS / str(port)).unlink(missing_ok=True)  # something else listens there: a claim means "given out"
    raise OSError(f"no free port between {LOWEST} and {highest} on {host} after {DRAWS} draws")


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports, as free_port() chooses them."""
    return [free_port(host) for _ in range(count)]


def _claim(port: int) -> bool:
    path = CLAIMS / str(port)
    for _ in range(2):
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            return True
        except FileExistsError:
            try:
                if time.time() - path.stat().st_mtime < CLAIM_S:
                    return False
                path.unlink()  # a stale claim: its process bound the port long ago, or never will
            except FileNotFoundError:
                pass  # another caller took the stale claim over at the same moment; try once more
    return False


def _bindable(host: str, port: int) -> bool:
    # Without SO_REUSEADDR, so a port still in TIME_WAIT from an earlier listener counts as taken.
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 49_152  # IANA's dynamic range, as macOS and Windows use it


def _kernel_pick(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
