"""POST /api/faults: a fault request checked (pure), then carried out by the lab's own fault commands
(LabCluster's kill, pause, resume, start, stop, partition and heal, under the lab's lock), never by writing
to ZooKeeper. The body is one JSON object:

    {"action": "kill", "broker": 1}        kill | pause | resume | start | stop, of a broker ...
    {"action": "stop", "zookeeper": 2}     ... or of a ZooKeeper server (its myid)
    {"action": "partition", "node": "broker:2", "from": ["zookeeper"], "one_way": false}
    {"action": "heal"}                     or {"action": "heal", "node": "broker:2"}
"""

from __future__ import annotations

from dataclasses import dataclass

from zkbroker.lab.cluster import LabCluster

PROCESS_ACTIONS = ("kill", "pause", "resume", "start", "stop")
ACTIONS = (*PROCESS_ACTIONS, "partition", "heal")


class BadFaultRequest(ValueError):
    """The request names no fault the lab knows; the message says what is wrong."""


@dataclass(frozen=True)
class FaultRequest:
    action: str
    broker: int | None = None
    zookeeper: int | None = None
    node: str | None = None
    peers: tuple[str, ...] = ()
    one_way: bool = False


def parse(body: object) -> FaultRequest:
    if not isinstance(body, dict):
        raise BadFaultRequest("The body must be a JSON object such as {\"action\": \"kill\", \"broker\": 1}")
    action = body.get("action")
    if action not in ACTIONS:
        raise BadFaultRequest(f"Unknown action {action!r}; allowed: {', '.join(ACTIONS)}")
    allowed = {"action", "broker", "zookeeper"} if action in PROCESS_ACTIONS else (
        {"action", "node", "from", "one_way"} if action == "partition" else {"action", "node"})
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise BadFaultRequest(f"{action} takes {', '.join(sorted(allowed))}; unknown: {', '.join(unknown)}")
    if action in PROCESS_ACTIONS:
        which = [k for k in ("broker", "zookeeper") if k in body]
        if len(which) != 1:
            raise BadFaultRequest(f"{action} needs exactly one of broker or zookeeper")
        value = body[which[0]]
        if not isinstance(value, int) or isinstance(value, bool):
            raise BadFaultRequest(f"{which[0]} must be an integer id, got {value!r}")
        return FaultRequest(action, **{which[0]: value})
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


def apply(lab: LabCluster, request: FaultRequest) -> str:
    """Carry the fault out with the lab's own command; returns what it did in the CLI's words. LabError
    (the command cannot do it) passes to the caller."""
    a = request.action
    if a == "partition":
        return f"Partitioned: {lab.partition(request.node, list(request.peers), request.one_way).describe()}."
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
    b = getattr(lab, a)(request.broker)
    if a == "start":
        return f"Started broker {b.id} (pid {b.pid}); it is registered."
    return f"{_DONE[a]} broker {b.id} (pid {b.pid})."


_DONE = {"kill": "Killed", "pause": "Paused", "resume": "Resumed", "stop": "Stopped"}
