"""KRaft controller processes for integration tests: a quorum's server.properties files, `storage format` and
`zkbroker server` run through the CLI as an operator would, and the lab control socket to watch each Raft node."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.harness import Broker, free_port, wait_for

FIRST_ID = 3001


class Controller(Broker):
    """One `zkbroker server` with process.roles=controller; the Broker harness's process handling, a KRaft config."""

    def __init__(self, root: Path, node_id: int, ports: dict[int, int], **overrides: object) -> None:
        self.id = node_id
        self.dir = root / f"controller-{node_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.control_path = self.dir / "control.sock"
        self.host, self.port = "127.0.0.1", ports[node_id]
        props = {"process.roles": "controller", "node.id": node_id,
                 "controller.quorum.voters": ",".join(f"{n}@127.0.0.1:{p}" for n, p in sorted(ports.items())),
                 "controller.listener.names": "CONTROLLER", "listeners": f"CONTROLLER://127.0.0.1:{self.port}",
                 "log.dirs": self.dir / "data"}
        props.update({k.replace("_", "."): v for k, v in overrides.items()})
        self.config = self.dir / "server.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log_path = self.dir / "server.log"
        self.proc = None

    def raft(self) -> dict:
        """The Raft node's state from the lab control interface (zkbroker/control_protocol.py)."""
        with self.control() as client:
            return client.state()["raft"]

    def append(self, count: int) -> dict:
        with self.control() as client:
            return client.request({"command": "append", "count": count})


def cli(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zkbroker", *args], capture_output=True, text=True,
                          timeout=timeout_s, stdin=subprocess.DEVNULL)


def make_quorum(root: Path, count: int = 3, **overrides: object) -> list[Controller]:
    """`count` controllers (ids 3001...), each formatted with one cluster id from `storage random-uuid`."""
    ports = {FIRST_ID + i: free_port() for i in range(count)}
    controllers = [Controller(root, node, ports, **overrides) for node in ports]
    format_nodes(cli("storage", "random-uuid").stdout.strip(), [c.config for c in controllers])
    return controllers


def format_nodes(cluster_id: str, configs: list[Path]) -> None:
    """`storage format` of every node's config, side by side (each is a Python start of about a second)."""
    formats = [subprocess.Popen([sys.executable, "-m", "zkbroker", "storage", "format", "-t", cluster_id, "-c",
                                 str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL) for config in configs]
    for done in formats:
        _, err = done.communicate(timeout=60)
        assert done.returncode == 0, err


def leader_of(controllers: list[Controller], timeout_s: float = 60.0, above_epoch: int = 0) -> tuple[int, int]:
    """(leader, epoch) once every running controller agrees on a leader of an epoch above `above_epoch`."""
    def agreed():
        seen = {(r["leader"], r["epoch"]) for r in (c.raft() for c in controllers if c.alive())}
        if len(seen) == 1:
            leader, epoch = seen.pop()
            if leader is not None and epoch > above_epoch:
                return leader, epoch
        return None

    return wait_for(agreed, timeout_s, "the controllers to agree on a leader", interval_s=0.2)


class KRaftBroker(Broker):
    """One `zkbroker server` with process.roles=broker: clients on its PLAINTEXT listener, metadata from the
    quorum of `voters` ({id: port})."""

    def __init__(self, root: Path, node_id: int, voters: dict[int, int], **overrides: object) -> None:
        self.id = node_id
        self.dir = root / f"broker-{node_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.control_path = None
        self.host, self.port = "127.0.0.1", free_port()
        props = {"process.roles": "broker", "node.id": node_id,
                 "controller.quorum.voters": ",".join(f"{n}@127.0.0.1:{p}" for n, p in sorted(voters.items())),
                 "controller.listener.names": "CONTROLLER", "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                 "log.dirs": self.dir / "data"}
        props.update({k.replace("_", "."): v for k, v in overrides.items()})
        self.config = self.dir / "server.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log_path = self.dir / "server.log"
        self.proc = None


def make_kraft_cluster(root: Path, controllers: int = 3, brokers: int = 3, controller_overrides: dict | None = None,
                       **broker_overrides: object) -> tuple[list[Controller], list[KRaftBroker]]:
    """`controllers` controllers (ids 3001...) and `brokers` brokers (ids 1...), all formatted with one cluster id,
    none started."""
    voters = {FIRST_ID + i: free_port() for i in range(controllers)}
    quorum = [Controller(root, node, voters, **(controller_overrides or {})) for node in voters]
    members = [KRaftBroker(root, node, voters, **broker_overrides) for node in range(1, brokers + 1)]
    format_nodes(cli("storage", "random-uuid").stdout.strip(), [n.config for n in (*quorum, *members)])
    return quorum, members


def make_combined_node(root: Path, node_id: int = 1) -> KRaftBroker:
    """One node with process.roles=broker,controller, the quorum's only voter, formatted, not started."""
    controller_port = free_port()
    node = KRaftBroker(root, node_id, {node_id: controller_port})
    props = node.config.read_text().replace("process.roles=broker\n", "process.roles=broker,controller\n")
    props = props.replace(f"listeners=PLAINTEXT://127.0.0.1:{node.port}\n",
                          f"listeners=PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{controller_port}\n")
    node.config.write_text(props)
    node.controller_port = controller_port
    format_nodes(cli("storage", "random-uuid").stdout.strip(), [node.config])
    return node


def stop_all(nodes) -> None:
    """SIGTERM to every live node at once, then each reaped (SIGKILL after 5 s): brokers' controlled shutdowns run
    side by side instead of one after another."""
    import signal as signals

    for node in nodes:
        if node.proc is not None and node.alive():
            node.signal(signals.SIGTERM)
    for node in nodes:
        node.cleanup()
