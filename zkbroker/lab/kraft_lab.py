"""The KRaft parts of a lab (`lab up --kraft`, DESIGN §17): controller processes (process.roles=controller,
node ids 3001..300N) written, formatted and started the way an operator does it (server.properties, `zkbroker
storage random-uuid`, `storage format`, `zkbroker server`), the quorum's leader read from each controller's lab
control socket, and the controllers' lines of `lab status`. No ZooKeeper anywhere.

cluster.py keeps the lab's verbs (kill, pause, resume, stop, start, partition, heal, fault, state): a controller
is a lab member as a broker is, named `controller:ID`. KRaft brokers (process.roles=broker, ids 1..N) are written
by `broker_properties` and started by LabCluster._start_kraft_brokers; a broker counts as up once its own `state`
says the active controller has unfenced it (`broker_serving`), and its line of `lab status` joins what it says of
itself with what the active controller believes of it (`broker_row`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from zkbroker.control_protocol import ControlError
from zkbroker.lab.control_client import ControlClient
from zkbroker.lab.processes import process_state
from zkbroker.server import meta_properties

FIRST_CONTROLLER_ID = 3001
QUORUM_SIZES = (1, 3, 5)
#: In the lab network every controller has an address of its own, so all listen on this port.
CONTROLLER_PORT = 9093
CONTROLLER_LISTENER = "CONTROLLER"


class KRaftLabError(RuntimeError):
    """One sentence saying why (cluster.py turns it into a LabError)."""


def controller_ids(count: int) -> list[int]:
    return [FIRST_CONTROLLER_ID + i for i in range(count)]


def voters_value(controllers: Iterable[tuple[int, str, int]]) -> str:
    """controller.quorum.voters for (node id, host, port) of each controller."""
    return ",".join(f"{node}@{host}:{port}" for node, host, port in controllers)


def controller_properties(node_id: int, host: str, port: int, voters: str, data_dir: Path,
                          overrides: dict[str, str] | None = None) -> str:
    """A controller's server.properties, as Kafka 3.7's config/kraft/controller.properties has them."""
    props = {"process.roles": "controller", "node.id": str(node_id), "controller.quorum.voters": voters,
             "controller.listener.names": CONTROLLER_LISTENER, "listeners": f"{CONTROLLER_LISTENER}://{host}:{port}",
             "log.dirs": str(data_dir)}
    props.update(overrides or {})
    return "".join(f"{k}={v}\n" for k, v in props.items())


def broker_properties(node_id: int, host: str, port: int, voters: str, data_dir: Path,
                      overrides: dict[str, str] | None = None) -> str:
    """A KRaft broker's server.properties, as Kafka 3.7's config/kraft/broker.properties has them."""
    props = {"process.roles": "broker", "node.id": str(node_id), "controller.quorum.voters": voters,
             "controller.listener.names": CONTROLLER_LISTENER, "listeners": f"PLAINTEXT://{host}:{port}",
             "log.dirs": str(data_dir)}
    props.update(overrides or {})
    return "".join(f"{k}={v}\n" for k, v in props.items())


def voters_with_directories(entries: list) -> str:
    """KIP-853's controller.quorum.voters (ID@HOST:PORT:DIRECTORY_ID) for formatted controllers (cluster.json's
    entries), each with the directory id its storage was formatted with; written into each one's server.properties
    in place of the plain form, and returned for the brokers'."""
    voters = ",".join(f"{e.id}@{e.host}:{e.port}:{_meta(e.config).directory_id}" for e in entries)
    for entry in entries:
        path = Path(entry.config)
        path.write_text("".join(f"controller.quorum.voters={voters}\n" if line.startswith("controller.quorum.voters=")
                                else line + "\n" for line in path.read_text().splitlines()))
    return voters


def _meta(config: str):
    data = Path(config).parent / "data"
    found = meta_properties.read(str(data))
    if found is None:
        raise KRaftLabError(f"{data} is not formatted (no meta.properties)")
    return found


def lose_disk(entry) -> str:
    """A controller's log dir lost and formatted again, as an operator replaces a dead disk: the same cluster id and
    node id, an empty metadata log and quorum-state, and a new directory id (returned). The process must be down."""
    meta = _meta(entry.config)
    shutil.rmtree(Path(entry.config).parent / "data")
    format_storage(meta.cluster_id, Path(entry.config), f"controller {entry.id}")
    return _meta(entry.config).directory_id


def zkbroker(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
    """One `zkbroker` tool command (storage random-uuid, storage format ...); one that outlasts `timeout_s` (a
    machine loaded far beyond its cores) is a KRaftLabError, which `lab up` reports like any other."""
    try:
        return subprocess.run([sys.executable, "-m", "zkbroker", *args], capture_output=True, text=True,
                              timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise KRaftLabError(f"`zkbroker {' '.join(args[:2])}` did not finish within {timeout_s:.0f} s") from None


def random_cluster_id() -> str:
    done = zkbroker("storage", "random-uuid")
    if done.returncode != 0:
        raise KRaftLabError(f"storage random-uuid failed: {done.stderr.strip()}")
    return done.stdout.strip()


def format_storage(cluster_id: str, config: Path, what: str) -> None:
    done = zkbroker("storage", "format", "-t", cluster_id, "-c", str(config))
    if done.returncode != 0:
        raise KRaftLabError(f"storage format failed for {what}: {done.stderr.strip() or done.stdout.strip()}")


def raft_state(control: str | None, timeout_s: float = 1.0) -> dict | None:
    """A controller's Raft state from its control socket (`state`'s "raft"), None when it does not answer."""
    if control is None:
        return None
    try:
        with ControlClient(control, timeout_s) as client:
            return client.state().get("raft")
    except ControlError:
        return None


def broker_state(control: str | None, timeout_s: float = 1.0) -> dict | None:
    """A KRaft broker's `state` from its control socket, None when it does not answer."""
    if control is None:
        return None
    try:
        with ControlClient(control, timeout_s) as client:
            return client.state()
    except ControlError:
        return None


def broker_serving(state: dict | None) -> bool:
    """A KRaft broker is serving once registered and unfenced (what its own lifecycle says)."""
    lifecycle = (state or {}).get("lifecycle")
    return bool(lifecycle) and lifecycle["broker_epoch"] >= 0 and not lifecycle["fenced"]


def wait_for_brokers(entries: list, timeout_s: float) -> None:
    """Until every one of `entries` (BrokerEntry) is registered and unfenced; KRaftLabError naming the first that
    exited or did not get there otherwise."""
    deadline = time.monotonic() + timeout_s
    waiting = list(entries)
    while waiting:
        for entry in list(waiting):
            if entry.pid is not None and process_state(entry.pid) == "dead":
                log = Path(entry.config).parent / "server.log"
                lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()] \
                    if log.exists() else []
                raise KRaftLabError(f"Broker {entry.id} exited: {lines[-1] if lines else 'no log written'}")
            if broker_serving(broker_state(entry.control)):
                waiting.remove(entry)
        if waiting and time.monotonic() > deadline:
            raise KRaftLabError(f"Brokers {[e.id for e in waiting]} were not unfenced by the active controller "
                                f"within {timeout_s:.0f} s")
        if waiting:
            time.sleep(0.1)


def broker_row(entry, believed: dict | None) -> dict:
    """A KRaft broker's line of `lab status`: its process, what it says of itself (lifecycle state, broker epoch,
    the metadata offset it applied) and what the active controller believes (`believed`: its describe()'s entry
    for the broker, None when it has none: not registered, or no active controller answers)."""
    process = process_state(entry.pid) if entry.pid is not None else "dead"
    own = broker_state(entry.control) if process == "running" else None
    lifecycle = (own or {}).get("lifecycle") or {}
    return {"id": entry.id, "host": entry.host, "port": entry.port, "pid": entry.pid, "process": process,
            "registered": believed is not None,
            "fenced": believed["fenced"] if believed is not None else None,
            "alive": process == "running" and believed is not None and not believed["fenced"],
            "broker_epoch": believed["epoch"] if believed is not None else lifecycle.get("broker_epoch"),
            "metadata_offset": own["metadata_offset"] if own is not None else None,
            "controller_metadata_offset": believed["metadata_offset"] if believed is not None else None,
            "lifecycle": lifecycle.get("state"), "incarnation_id": lifecycle.get("incarnation_id")}


def agreed_leader(states: Iterable[dict | None]) -> tuple[int, int] | None:
    """(leader, epoch) when every controller that answers names the same leader, None otherwise."""
    seen = {(s["leader"], s["epoch"]) for s in states if s is not None}
    if len(seen) == 1:
        leader, epoch = next(iter(seen))
        if leader is not None:
            return leader, epoch
    return None


def wait_for_leader(entries: list, timeout_s: float, above_epoch: int = -1) -> tuple[int, int]:
    """(leader, epoch) once every running controller agrees on a leader (of an epoch above `above_epoch`);
    KRaftLabError naming what went wrong otherwise. `entries`: cluster.json's controllers."""
    deadline = time.monotonic() + timeout_s
    while True:
        running = [e for e in entries if e.pid is not None and process_state(e.pid) == "running"]
        for entry in entries:
            if entry.pid is not None and process_state(entry.pid) == "dead":
                log = Path(entry.config).parent / "server.log"
                lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()] \
                    if log.exists() else []
                raise KRaftLabError(f"Controller {entry.id} exited: {lines[-1] if lines else 'no log written'}")
        agreed = agreed_leader([raft_state(e.control) for e in running]) if running else None
        if agreed is not None and agreed[1] > above_epoch:
            return agreed
        if time.monotonic() > deadline:
            raise KRaftLabError(f"The controllers did not agree on a quorum leader within {timeout_s:.0f} s")
        time.sleep(0.1)


def controller_row(entry) -> dict:
    """A controller's line of `lab status` (and the dashboard's quorum strip): its process and Raft state."""
    process = process_state(entry.pid) if entry.pid is not None else "dead"
    raft = raft_state(entry.control) if process == "running" else None
    return {"id": entry.id, "host": entry.host, "port": entry.port, "pid": entry.pid, "process": process,
            "raft": raft}


def quorum_status(rows: list[dict]) -> dict:
    """The quorum as the controllers that answer see it: the leader and epoch the highest epoch names, its high
    watermark, and each voter's state, log end and lag behind the leader's log end."""
    answering = [r["raft"] for r in rows if r["raft"] is not None]
    # The leader of the highest epoch a leader holds (a voter cut off may stand in higher epochs meanwhile)
    leaders = [s for s in answering if s["state"] == "leader"]
    top = max(leaders or answering, key=lambda s: s["epoch"], default=None)
    leader = top["leader"] if top else None
    leader_state = next((r["raft"] for r in rows if r["id"] == leader and r["raft"] is not None), None)
    leader_end = leader_state["log_end_offset"] if leader_state else None
    voters = []
    for r in rows:
        raft = r["raft"]
        voters.append({"id": r["id"], "state": raft["state"] if raft else ("paused" if r["process"] == "paused"
                                                                             else "down"),
                       "epoch": raft["epoch"] if raft else None,
                       "voted_for": raft["voted_for"] if raft else None,
                       "log_end_offset": raft["log_end_offset"] if raft else None,
                       "high_watermark": raft["high_watermark"] if raft else None,
                       "lag": (leader_end - raft["log_end_offset"]) if raft and leader_end is not None else None})
    return {"leader": leader, "epoch": top["epoch"] if top else None,
            "high_watermark": leader_state["high_watermark"] if leader_state else None,
            "voters": voters, "observers": []}


def quorum_bands(events: Iterable[dict]) -> list[dict]:
    """The quorum's leadership epochs: a band opens when a controller reports itself leader of an epoch and
    closes when it reports anything else, or when any controller reports a higher epoch (time-ordered events)."""
    bands: list[dict] = []
    for e in events:
        if e.get("kind") != "raft_state" or not isinstance(e.get("epoch"), int):
            continue
        current = bands[-1] if bands and bands[-1]["end"] is None else None
        if e.get("state") == "leader":
            if current is not None and (current["node"], current["epoch"]) == (e.get("node"), e["epoch"]):
                continue
            _close_band(bands, e["ts"])
            bands.append({"start": e["ts"], "end": None, "node": e.get("node"), "epoch": e["epoch"]})
        elif current is not None and (e.get("node") == current["node"] or e["epoch"] > current["epoch"]):
            _close_band(bands, e["ts"])
    return bands


def _close_band(bands: list[dict], ts: float) -> None:
    if bands and bands[-1]["end"] is None:
        bands[-1]["end"] = ts


def leaderless_windows(events: Iterable[dict], voters: int, until: float | None = None) -> list[tuple[float, float]]:
    """The spans (epoch ms) in which the quorum had no leader, from the controllers' raft_state events: it has
    one while a node reports itself leader of an epoch and a majority of the `voters` (that node included) last
    reported that epoch and that leader. A killed leader thus counts until its followers give up on it (their
    fetch timeout), and a voter cut off alone that stands in higher epochs takes nothing away. Spans from the
    first leader on; one still open ends at `until` (default: the last event)."""
    last: dict[int, tuple[str, int, int | None]] = {}
    majority = voters // 2 + 1
    windows: list[tuple[float, float]] = []
    began: float | None = None
    seen_leader = False
    ts = None
    # the voters' own reports only: a KRaft broker following the log as an observer is no part of a majority
    for e in sorted((e for e in events if e.get("kind") == "raft_state" and isinstance(e.get("ts"), (int, float))
                     and not str(e.get("source", "")).startswith("broker:")), key=lambda e: e["ts"]):
        ts = e["ts"]
        last[e.get("node")] = (e.get("state"), e.get("epoch"), e.get("leader"))
        leaders = [(n, epoch) for n, (state, epoch, _) in last.items() if state == "leader"]
        has_leader = any(sum(1 for state, epoch, leader in last.values() if epoch == le and leader == n) >= majority
                         for n, le in leaders)
        if has_leader:
            seen_leader = True
            if began is not None:
                windows.append((began, ts))
                began = None
        elif seen_leader and began is None:
            began = ts
    if began is not None:
        windows.append((began, until if until is not None else ts))
    return windows


def majority_leader(rows: list[dict]) -> tuple[int, int] | None:
    """(leader, epoch) of a controller that reports itself leader and that a majority of the voters (it included)
    follow in that epoch: the quorum has a leader, whatever a voter cut off from it believes."""
    states = [r["raft"] for r in rows if r.get("raft") is not None]
    majority = len(rows) // 2 + 1
    for s in states:
        if s["state"] == "leader":
            following = sum(1 for o in states if o["epoch"] == s["epoch"] and o["leader"] == s["leader"])
            if following >= majority:
                return s["leader"], s["epoch"]
    return None
