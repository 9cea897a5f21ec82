"""Each broker's own view, asked through its lab control socket (`DIR/broker-ID/control.sock`, DESIGN §10;
the protocol is zkbroker/control_protocol.py's): the read-only `state` query, with the lab's own client. A Unix
socket, so no network partition cuts the dashboard off from a broker; a paused or dead broker is not asked
(its view is then unknown, never guessed).

`parse_state` turns an answer into a BrokerBelief (pure)."""

from __future__ import annotations

import asyncio

from zkbroker.control_protocol import ControlError
from zkbroker.lab.control_client import ControlClient
from zkbroker.lab.dashboard.snapshot import BrokerBelief, ReplicaBelief

STATE_TIMEOUT_S = 1.0


def _ask(path: str, broker_id: int, timeout_s: float) -> BrokerBelief | None:
    try:
        with ControlClient(path, timeout_s) as client:
            return parse_state(client.state(), broker_id)
    except (ControlError, ValueError):
        return None


async def query_state(path: str | None, broker_id: int, timeout_s: float = STATE_TIMEOUT_S) -> BrokerBelief | None:
    """The broker's `state`, or None when it has no control socket or does not answer."""
    if path is None:
        return None
    return await asyncio.to_thread(_ask, path, broker_id, timeout_s)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _session(value: object) -> int | None:
    if isinstance(value, str):
        try:
            return int(value, 16)
        except ValueError:
            return None
    return _int(value)


def parse_state(state: object, broker_id: int) -> BrokerBelief:
    """A `state` answer (zkbroker/control_protocol.py): `broker`, `session` ("0x..."), `controller_epoch_seen`,
    `controller` (null unless this broker is the controller), `partitions` (each applied LeaderAndIsr with
    `zk_version`, `hw`, `leo`, `log_start`, `lso`, `open_transactions`, `metadata_leader`), `zookeeper_connected`,
    `faults`, `connections` and `quotas`.
    Fields it lacks are unknown; a malformed answer raises ValueError."""
    if not isinstance(state, dict):
        raise ValueError(f"a state answer must be a JSON object, got {type(state).__name__}")
    partitions = []
    for p in state.get("partitions") or ():
        if not isinstance(p, dict) or not isinstance(p.get("topic"), str) or _int(p.get("partition")) is None:
            raise ValueError(f"a partition of a state answer needs topic and partition: {p!r}")
        isr = p.get("isr")
        partitions.append(ReplicaBelief(
            p["topic"], p["partition"], _int(p.get("leader")), _int(p.get("leader_epoch")),
            tuple(isr) if isinstance(isr, list) else None, _int(p.get("zk_version")),
            _int(p.get("controller_epoch")), _int(p.get("metadata_leader")), _int(p.get("hw")),
            _int(p.get("leo")), _int(p.get("log_start")), _int(p.get("lso")), _int(p.get("open_transactions"))))
    connected = state.get("zookeeper_connected")
    faults = state.get("faults")
    connections, quotas = state.get("connections"), state.get("quotas")
    return BrokerBelief(_int(state.get("broker")) or broker_id, _int(state.get("controller_epoch_seen")),
                        _session(state.get("session")),
                        isinstance(state.get("controller"), dict) if "controller" in state else None,
                        tuple(partitions), connected if isinstance(connected, bool) else None,
                        tuple(f for f in faults if isinstance(f, dict)) if isinstance(faults, list) else (),
                        tuple(c for c in connections if isinstance(c, dict)) if isinstance(connections, list) else (),
                        tuple(q for q in quotas if isinstance(q, dict)) if isinstance(quotas, list) else ())
