"""Each broker's own view, asked through its lab control socket (`DIR/broker-ID/control.sock`, DESIGN §10):
the read-only `state` query. A Unix socket, so no network partition cuts the dashboard off from a broker;
a paused or dead broker simply does not answer (its view is then unknown, never guessed).

The request is one JSON line, `{"command": "state"}`, and the answer one JSON line; `parse_state` turns the
answer into a BrokerBelief (pure)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from zkbroker.lab.dashboard.snapshot import BrokerBelief, ReplicaBelief

STATE_REQUEST = b'{"command": "state"}\n'
STATE_TIMEOUT_S = 1.0
MAX_ANSWER_BYTES = 16 << 20


def control_socket(lab_dir: Path, broker_id: int, announced: str | None = None) -> Path:
    """The broker's control socket: as cluster.json announces it, else where the lab puts it."""
    return Path(announced) if announced else Path(lab_dir) / f"broker-{broker_id}" / "control.sock"


async def query_state(path: Path, broker_id: int, timeout_s: float = STATE_TIMEOUT_S) -> BrokerBelief | None:
    """The broker's `state`, or None when it does not answer (no socket, paused, dead, a bad answer)."""
    if not path.exists():
        return None
    writer = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_unix_connection(str(path), limit=MAX_ANSWER_BYTES)
            writer.write(STATE_REQUEST)
            await writer.drain()
            line = await reader.readline()
        return parse_state(json.loads(line), broker_id)
    except (OSError, TimeoutError, ValueError):
        return None
    finally:
        if writer is not None:
            writer.close()


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _session(value: object) -> int | None:
    if isinstance(value, str):
        try:
            return int(value, 16)
        except ValueError:
            return None
    return _int(value)


def parse_state(answer: object, broker_id: int) -> BrokerBelief:
    """A `state` answer: `{"broker": 1, "controller_epoch": 3, "session": "0x..", "is_controller": false,
    "partitions": [{"topic": "t", "partition": 0, "leader": 1, "leader_epoch": 4, "isr": [1, 2],
    "zk_version": 7, "controller_epoch": 3, "metadata_leader": 1, "hw": 10, "leo": 10, "log_start": 0}]}`.
    Fields it lacks are unknown; a malformed answer raises ValueError."""
    if not isinstance(answer, dict):
        raise ValueError(f"a state answer must be a JSON object, got {type(answer).__name__}")
    if "error" in answer and "partitions" not in answer:
        raise ValueError(str(answer["error"]))
    state = answer.get("state", answer)  # tolerate {"ok": true, "state": {...}}
    partitions = []
    for p in state.get("partitions") or ():
        if not isinstance(p, dict) or not isinstance(p.get("topic"), str) or _int(p.get("partition")) is None:
            raise ValueError(f"a partition of a state answer needs topic and partition: {p!r}")
        isr = p.get("isr")
        partitions.append(ReplicaBelief(
            p["topic"], p["partition"], _int(p.get("leader")), _int(p.get("leader_epoch")),
            tuple(isr) if isinstance(isr, list) else None, _int(p.get("zk_version")),
            _int(p.get("controller_epoch")), _int(p.get("metadata_leader")), _int(p.get("hw")),
            _int(p.get("leo")), _int(p.get("log_start"))))
    is_controller = state.get("is_controller")
    return BrokerBelief(_int(state.get("broker")) or broker_id, _int(state.get("controller_epoch")),
                        _session(state.get("session")), is_controller if isinstance(is_controller, bool) else None,
                        tuple(partitions))
