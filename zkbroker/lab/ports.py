"""Ports for the servers a lab, a bench or a test starts: one that nothing listens on and that the kernel will not
hand out by itself.

A port the kernel picks (a bind to port 0) comes from its ephemeral range, the range it also draws the local port
of every outgoing connection from. Between picking such a port and the server binding it (for a JVM, seconds) a
connection made anywhere on the machine may take it as its local port: a suite of tests running side by side makes
thousands. The server then fails with "Address already in use", or, as Spark's master does, quietly moves up one.
A port below the ephemeral range can only be taken by another picker, and picking it at random makes that
unlikely; `free_port` checks it is free as well.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Collection
from pathlib import Path

HOST = "127.0.0.1"
#: Below this are the well-known and registered services' ports most machines use.
LOWEST = 10000
#: Linux's default ephemeral range, when /proc cannot be read.
DEFAULT_EPHEMERAL = (32768, 60999)

_random = random.SystemRandom()  # forked test workers must not share one sequence


def ephemeral_range() -> tuple[int, int]:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL


def candidate_ranges(ephemeral: tuple[int, int]) -> list[range]:
    """The ports outside the ephemeral range, at or above LOWEST (empty if the ephemeral range covers them)."""
    low, high = ephemeral
    return [r for r in (range(LOWEST, min(low, 65536)), range(max(high + 1, LOWEST), 65536)) if len(r)]


def port_free(port: int, host: str = HOST) -> bool:
    """Nothing listens on `port` and no socket holds it without SO_REUSEADDR (as a server's own bind would see)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = HOST, taken: Collection[int] = ()) -> int:
    """A free port on `host`, not in `taken`, outside the kernel's ephemeral range when there is room."""
    ranges = candidate_ranges(ephemeral_range())
    for _ in range(200 if ranges else 0):
        chosen = _random.choice(ranges)
        port = chosen[_random.randrange(len(chosen))]
        if port not in taken and port_free(port, host):
            return port
    while True:  # no room outside the ephemeral range (or all of it busy): let the kernel pick
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in taken:
            return port
