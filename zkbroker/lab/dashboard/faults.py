"""POST /api/faults: a fault request checked (pure), then carried out by the lab's own fault commands
(LabCluster's kill, pause, resume, start, stop, partition and heal, under the lab's lock), never by writing
to ZooKeeper. The body is one JSON object:

    {"action": "kill", "broker": 1}        kill | pause | resume | start | stop, of a broker ...
    {"action": "stop", "zookeeper": 2}     ... or of a ZooKeeper server (its myid)
    {"action": "kill", "controller": 3001} ... or of a KRaft lab's controller (its node id)
    {"action": "partition", "node": "broker:2", "from": ["zookeeper"], "one_way": false}
    {"action": "heal"}                     or {"action": "heal", "node": "broker:2"}
    {"action": "fault_point", "broker": 2, "point": "drop_next_leader_and_isr", "count": 1}
                                           a fault point inside a broker (zkbroker/fault_points.py); the
                                           stop_*_zookeeper_write points take "write" and "stop" (kill|pause),
                                           hold_cleaner_at takes "phase"
    {"action": "heal_fault_points", "broker": 2}    or with "point": one of them
"""

from __future__ import annotations

from dataclasses import dataclass

from zkbroker import fault_points
from zkbroker.lab.cluster import LabCluster

PROCESS_ACTIONS = ("kill", "pause", "resume", "start", "stop")
ACTIONS = (*PROCESS_ACTIONS, "partition", "heal", "fault_point", "heal_fault_points")
_FIELDS = {"partition": {"node", "from", "one_way"}, "heal": {"node"},
           "fault_point": {"broker", "point", "count", "ms", "write", "stop", "phase"},
           "heal_fault_points": {"broker", "point"}}


class BadFaultRequest(ValueError):
    """The request names no fault the lab knows; the message says what is wrong."""


@dataclass(frozen=True)
class FaultRequest:
    action: str
    broker: int | None = None
    zookeeper: int | None = None
    controller: int | None = None
    node: str | None = None
    point: str | None = None
    params: tuple[tuple[str, object], ...] = ()  # a fault point's parameters, as fault_points names them
    peers: tuple[str, ...] = ()
    one_way: bool = False


def parse(body: object) -> FaultRequest:
    if not isinstance(body, dict):
        raise BadFaultRequest("The body must be a JSON object such as {\"action\": \"kill\", \"broker\": 1}")
    action = body.get("action")
    if action not in ACTIONS:
        raise BadFaultRequest(f"Unknown action {action!r}; allowed: {', '.join(ACTIONS)}")
    allowed = {"action", *(("broker", "zookeeper", "controller") if action in PROCESS_ACTIONS else _FIELDS[action])}
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise BadFaultRequest(f"{action} takes {', '.join(sorted(allowed))}; unknown: {', '.join(unknown)}")
    if action in PROCESS_ACTIONS:
        which = [k for k in ("broker", "zookeeper", "controller") if k in body]
        if len(which) != 1:
            raise BadFaultRequest(f"{action} needs exactly one of broker, zookeeper or controller")
        value = body[which[0]]
        if not isinstance(value, int) or isinstance(value, bool):
            raise BadFaultRequest(f"{which[0]} must be an integer id, got {value!r}")
        return FaultRequest(action, **{which[0]: value})
    if action in ("fault_point", "heal_fault_points"):
        return _fault_point(action, body)
    node = body.get("node")
    if node is not None and (not isinstance(node, str) or not node):
        raise BadFaultRequest(f"node must be a lab node such as broker:2, got {node!r}")
    if action == "heal":
        return FaultRequest(action, node=node)
    if node is None:
        raise BadFaultRequest("partition needs node (such as broker:2) and from (such as [\"zookeeper\"])")
    peers = body.get("from")
    if isinstance(peers, str):
        peers = [p.strip() for p in peers.split(",") if p.strip()]
    if not isinstance(peers, list) or not peers or not all(isinstance(p, str) and p for p in peers):
        raise BadFaultRequest(f"from must name one or more lab nodes, got {peers!r}")
    one_way = body.get("one_way", False)
    if not isinstance(one_way, bool):
        raise BadFaultRequest(f"one_way must be true or false, got {one_way!r}")
    return FaultRequest(action, node=node, peers=tuple(peers), one_way=one_way)


def _fault_point(action: str, body: dict) -> FaultRequest:
    broker, point = body.get("broker"), body.get("point")
    if not isinstance(broker, int) or isinstance(broker, bool):
        raise BadFaultRequest(f"{action} needs broker, an integer id, got {broker!r}")
    if action == "fault_point" and not isinstance(point, str):
        raise BadFaultRequest(f"fault_point needs point, one of: {', '.join(fault_points.POINTS)}")
    if point is not None and point not in fault_points.POINTS:
        raise BadFaultRequest(f"Unknown fault point {point!r}; allowed: {', '.join(fault_points.POINTS)}")
    params = {k: body[k] for k in ("count", "ms", "write", "phase") if body.get(k) is not None}
    if body.get("stop") is not None:
        params["action"] = body["stop"]  # what a stop_*_zookeeper_write point does to the broker
    if action == "fault_point":
        try:
            fault_points.check(point, params)
        except fault_points.FaultPointError as e:
            raise BadFaultRequest(str(e)) from None
    return FaultRequest(action, broker=broker, point=point, params=tuple(sorted(params.items())))


def apply(lab: LabCluster, request: FaultRequest) -> str:
    """Carry the fault out with the lab's own command; returns what it did in the CLI's words. LabError
    (the command cannot do it) passes to the caller."""
    a = request.action
    if a == "partition":
        return f"Partitioned: {lab.partition(request.node, list(request.peers), request.one_way).describe()}."
    if a == "fault_point":
        in_force = lab.fault(request.broker, request.point, **dict(request.params))
        return (f"Fault point {request.point} in force on broker {request.broker}; in force: "
                + ("; ".join(map(fault_points.describe, in_force)) or "nothing") + ".")
    if a == "heal_fault_points":
        in_force = lab.heal_faults(request.broker, request.point)
        return (f"Healed {request.point or 'every fault point'} on broker {request.broker}; still in force: "
                + ("; ".join(map(fault_points.describe, in_force)) or "nothing") + ".")
    if a == "heal":
        healed = lab.heal(request.node)
        return " ".join(f"Healed: {p.describe()}." for p in healed) or "Nothing to heal."
    if request.zookeeper is not None:
        if a == "start":
            z, serving = lab.start_zookeeper(request.zookeeper)
            return (f"Started ZooKeeper server {z.id} (pid {z.pid}); "
                    + ("it serves." if serving else "it waits for a majority of the ensemble to run."))
        z = getattr(lab, f"{a}_zookeeper")(request.zookeeper)
        return f"{_DONE[a]} ZooKeeper server {z.id} (pid {z.pid})."
    if request.controller is not None:
        c = getattr(lab, a)(f"controller:{request.controller}")
        if a == "start":
            return f"Started controller {c.id} (pid {c.pid}); it rejoins the quorum."
        return f"{_DONE[a]} controller {c.id} (pid {c.pid})."
    b = getattr(lab, a)(request.broker)
    if a == "start":
        return f"Started broker {b.id} (pid {b.pid}); it is registered."
    return f"{_DONE[a]} broker {b.id} (pid {b.pid})."


_DONE = {"kill": "Killed", "pause": "Paused", "resume": "Resumed", "stop": "Stopped"}
