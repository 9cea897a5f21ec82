"""The lab control interface (DESIGN §10): one Unix socket per broker of a lab, for fault points and a
read-only `state` query. This module is its protocol and its command handler, without I/O (plus the socket
address both ends use), below both the broker and the lab: the broker serves it (zkbroker/server/lab_control.py)
and the lab's commands, the scenario runner and the dashboard ask it (zkbroker/lab/control_client.py).

Where: `DIR/broker-ID/control.sock`, announced in cluster.json as the broker's "control". The lab starts each
broker with ZKBROKER_LAB_CONTROL naming that path (and, for fault points in force from its first instant,
ZKBROKER_LAB_FAULTS holding a JSON list of fault requests); a broker started without it opens nothing. A Unix
socket is a file, so no network partition of the lab network cuts it.

Protocol: line-delimited JSON over the stream socket. The client writes one JSON object a line; the broker
answers each with one JSON object a line, in order; a connection may carry any number of requests. Every
answer has "ok"; a refused request gets {"ok": false, "error": "<one sentence>"} and the connection stays
usable (a line that is not a JSON object, or longer than MAX_LINE bytes, gets the error and the connection
is closed).

    {"command": "state"}       -> {"ok": true, "state": {...}}           (the broker's view; docs/lab.md)
    {"command": "faults"}      -> {"ok": true, "faults": [...]}          (the fault points in force)
    {"command": "fault", "point": "hold_fetchers"}                       -> {"ok": true, "faults": [...]}
    {"command": "fault", "point": "drop_next_leader_and_isr", "count": 3}
    {"command": "fault", "point": "delay_next_update_metadata", "count": 1, "ms": 2000}
    {"command": "fault", "point": "stop_before_zookeeper_write", "write": "isr_update", "action": "kill"}
    {"command": "fault", "point": "hold_cleaner_at", "phase": "swap-renamed"}
                 -> {"ok": true, "faults": [{"point": "hold_cleaner_at", "phase": "swap-renamed", "held": 0}]}
    {"command": "heal"}                                  -> every point healed; {"ok": true, "faults": []}
    {"command": "heal", "point": "hold_fetchers"}        -> that point healed
    {"command": "append", "count": 100}   -> {"ok": true, "last_offset": 104}   (a KRaft controller that leads:
                                             that many NoOpRecords appended to the metadata log, one batch)

The fault points and their parameters are zkbroker/fault_points.py's. `state` is a JSON object:

    {"broker": 2, "pid": 456, "session": "0x18c...", "zookeeper_connected": true,
     "controller_epoch_seen": 3,              # the newest controller epoch this broker has accepted
     "partitions": [{"topic": "t", "partition": 0, "role": "leader", "leader": 2, "leader_epoch": 4,
                     "isr": [2, 1], "replicas": [2, 1], "zk_version": 7, "controller_epoch": 3,
                     "hw": 10, "leo": 10, "log_start": 0, "metadata_leader": 2}],   # the applied LeaderAndIsr
     "metadata": {"controller": 1, "live_brokers": [1, 2, 3],                      # the metadata cache
                  "partitions": [{"topic": "t", "partition": 0, "leader": 2, "leader_epoch": 4, "isr": [2, 1],
                                  "replicas": [2, 1]}]},
     "controller": null,                      # or, on the controller: {"epoch": 3, "epoch_zk_version": 2,
                                              #  "live_brokers": [...], "shutting_down": [...], "queue_held": false,
                                              #  "queued_events": 0, "partitions": [{..., "zk_version": 7}]}
     "faults": [{"point": "hold_fetchers"}],
     "quotas": [{"quota": "producer_byte_rate", "user": "alice", "client_id": null,   # each quota entity in use:
                 "bound": 1048576.0, "rate": 1046201.5,                              # the broker's windowed rate
                 "throttle_ms": 312, "throttled_s_ago": 0.4}],                       # the last throttle
     "connections": [{"listener": "SASL_SSL", "security_protocol": "SASL_SSL",        # each open connection:
                      "principal": "User:alice", "authenticated": true,             # who it acts as (Kafka's
                      "client_id": "rdkafka", "address": "127.0.0.1:50412"}]}      # User:ANONYMOUS until then)

A KRaft controller's `state` (DESIGN §17) is instead:

    {"node": 3001, "pid": 789, "role": "controller", "faults": [],
     "raft": {"state": "leader", "epoch": 5, "leader": 3001, "voted_for": null, "log_start_offset": 0,
              "log_end_offset": 120, "high_watermark": 120, "snapshot": {"end_offset": 100, "epoch": 4},
              "voters": [3001, 3002, 3003]}}

and a KRaft broker's (process.roles=broker) keeps the broker's keys ("session" and "controller" null) and adds:

    {"role": "broker", "metadata_offset": 118,            # the offset of the metadata image it applied
     "lifecycle": {"state": "running", "broker_epoch": 9, "fenced": false, "incarnation_id": "8ec9af5f..."},
     "raft": {"state": "follower", "epoch": 5, "leader": 3001, "log_end_offset": 120, "high_watermark": 120}}
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from zkbroker.fault_points import FaultPointError, FaultPoints

SOCKET_NAME = "control.sock"
ENV_VAR = "ZKBROKER_LAB_CONTROL"  # the socket a lab broker opens (unset: none)
FAULTS_ENV_VAR = "ZKBROKER_LAB_FAULTS"  # fault requests in force from the broker's first instant (JSON list)
MAX_LINE = 64 * 1024
COMMANDS = ("state", "faults", "fault", "heal", "append")


class ControlError(RuntimeError):
    """A control request that failed; the message is one sentence."""


def encode(message: dict) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def decode(line: bytes) -> dict:
    """One request or answer line; ControlError unless it is a JSON object."""
    try:
        message = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ControlError(f"not a JSON line: {e}") from None
    if not isinstance(message, dict):
        raise ControlError("a control message is a JSON object")
    return message


def fault_request(point: str, **params: Any) -> dict:
    """The request that applies a fault point, e.g. fault_request("drop_next_leader_and_isr", count=2)."""
    return {"command": "fault", "point": point, **{k: v for k, v in params.items() if v is not None}}


def initial_faults(value: str | None) -> list[dict]:
    """The fault requests of ZKBROKER_LAB_FAULTS (a JSON list of them), or []."""
    if not value:
        return []
    try:
        requests = json.loads(value)
    except json.JSONDecodeError as e:
        raise ControlError(f"{FAULTS_ENV_VAR} is not a JSON list of fault requests: {e}") from None
    if not isinstance(requests, list) or not all(isinstance(r, dict) for r in requests):
        raise ControlError(f"{FAULTS_ENV_VAR} is not a JSON list of fault requests")
    return requests


class ControlHandler:
    """Answers control requests: `state` from the given function, faults on the given FaultPoints."""

    def __init__(self, faults: FaultPoints, state: Callable[[], dict],
                 append: Callable[[int], dict] | None = None) -> None:
        self.faults = faults
        self.state = state
        self.append = append  # a KRaft controller's: append that many records, the answer's fields

    def handle_line(self, line: bytes) -> tuple[bytes, bool]:
        """The answer line to a request line, and whether the connection may go on."""
        try:
            request = decode(line)
        except ControlError as e:
            return encode({"ok": False, "error": str(e)}), False
        return encode(self.handle(request)), True

    def handle(self, request: dict) -> dict:
        try:
            return {"ok": True, **self._dispatch(request)}
        except (ControlError, FaultPointError) as e:
            return {"ok": False, "error": str(e)}

    def _dispatch(self, request: dict) -> dict:
        command = request.get("command")
        if command not in COMMANDS:
            raise ControlError(f"unknown command {command!r}; allowed: {', '.join(COMMANDS)}")
        allowed = {"state": (), "faults": (), "heal": ("point",), "fault": None, "append": ("count",)}[command]
        if allowed is not None:
            extra = [k for k in request if k != "command" and k not in allowed]
            if extra:
                raise ControlError(f"{command} takes {', '.join(allowed) or 'nothing'}, not {extra[0]!r}")
        if command == "state":
            return {"state": self.state()}
        if command == "append":
            count = request.get("count", 1)
            if self.append is None:
                raise ControlError("append is answered by a KRaft controller only")
            if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 100_000:
                raise ControlError("append takes a count from 1 to 100000")
            return self.append(count)
        if command == "fault":
            point = request.get("point")
            if not isinstance(point, str):
                raise ControlError("fault needs a point, e.g. {\"command\": \"fault\", \"point\": \"hold_fetchers\"}")
            self.faults.apply(point, **{k: v for k, v in request.items() if k not in ("command", "point")})
        elif command == "heal":
            self.faults.heal(request.get("point"))
        return {"faults": self.faults.in_force()}


@contextlib.contextmanager
def unix_address(path: str | os.PathLike) -> Iterator[str]:
    """An address for bind()/connect() naming the socket at `path`. A Unix socket's address holds at most 107
    bytes; a longer path (a deep lab directory) is reached through its directory's descriptor instead."""
    path = os.fspath(path)
    if len(os.fsencode(path)) < 100:
        yield path
        return
    fd = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{os.path.basename(path)}"
    finally:
        os.close(fd)
