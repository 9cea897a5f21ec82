"""The lab's network (`lab up --network`): every node in a network namespace of its own, and partitions
between nodes as packet-filter drop rules (Jepsen's method).

Each node (a broker, a ZooKeeper server) gets a namespace with one veth whose other end hangs on the lab's
bridge. The bridge has the subnet's first address in the root namespace, so everything outside the lab
(clients, `lab status`) reaches the nodes' addresses through it: that is the node `clients`. Addresses
tell the node: `zookeeper:N` is the subnet's host 10+N, `broker:ID` its host 100+ID, a KRaft lab's
`controller:ID` (3001...) its host 200+(ID-3000), the bridge host 1.

A partition is a list of directed drops, "what SRC sends to DST is dropped". Each drop is an nftables rule in
the receiving node's namespace (its input hook, matching the sender's address); a drop towards `clients`
goes in the sender's namespace (its output hook), since the root namespace is not the lab's to filter.
The rules live only in the lab's namespaces, so deleting them at `lab down` leaves nothing behind.
What is in force is kept in `DIR/network.json`; every change re-renders each namespace's table in one
`nft -f` transaction.

`tc netem` (latency, jitter) is not available on every kernel, and on this one it is not: the lab offers
no latency fault rather than pretend one.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

CLIENTS = "clients"
STATE_FILE = "network.json"
HOST_LOCK_FILE = "zkbroker-lab-network.lock"  # in the temporary directory: one subnet choice at a time
TABLE = "zkbroker"
DEFAULT_SUBNETS = ipaddress.ip_network("10.213.0.0/16")  # the first /24 in it that no interface uses


class NetworkError(RuntimeError):
    """The lab network cannot do what was asked; the message is one sentence."""


# ---- nodes and addresses (pure) ---------------------------------------------------------------------------


def broker_node(broker_id: int) -> str:
    return f"broker:{broker_id}"


def zookeeper_node(server_id: int) -> str:
    return f"zookeeper:{server_id}"


def controller_node(node_id: int) -> str:
    return f"controller:{node_id}"


def plan_addresses(subnet: str, zookeeper_ids: Iterable[int], broker_ids: Iterable[int],
                   controller_ids: Iterable[int] = ()) -> dict[str, str]:
    """{node: address} for every lab node, and `clients` (the bridge's address in the root namespace)."""
    try:
        network = ipaddress.ip_network(subnet)
    except ValueError as e:
        raise NetworkError(f"--subnet {subnet} is not an IPv4 network such as 10.213.0.0/24 ({e})") from None
    if network.version != 4 or network.prefixlen > 24:
        raise NetworkError(f"--subnet {subnet} must be an IPv4 network of /24 or larger")
    addresses = {CLIENTS: str(network[1])}
    for server_id in zookeeper_ids:
        if not 1 <= server_id <= 89:
            raise NetworkError(f"ZooKeeper server {server_id} has no address in the lab network (ids 1-89)")
        addresses[zookeeper_node(server_id)] = str(network[10 + server_id])
    for broker_id in broker_ids:
        if not 0 <= broker_id <= 150:
            raise NetworkError(f"Broker {broker_id} has no address in the lab network (ids 0-150)")
        addresses[broker_node(broker_id)] = str(network[100 + broker_id])
    for node_id in controller_ids:
        if not 3001 <= node_id <= 3050:
            raise NetworkError(f"Controller {node_id} has no address in the lab network (ids 3001-3050)")
        addresses[controller_node(node_id)] = str(network[200 + node_id - 3000])
    return addresses


#: The NODE names that stand for every node of their kind.
GROUPS = ("zookeeper", "controller")


def expand(name: str, nodes: Iterable[str]) -> list[str]:
    """The nodes a NODE argument names: `zookeeper` is every ZooKeeper server, `controller` every controller of a
    KRaft lab; the rest name one node."""
    nodes = list(nodes)
    if name in GROUPS:
        chosen = [n for n in nodes if n.startswith(name + ":")]
    else:
        chosen = [n for n in nodes if n == name]
    if not chosen:
        allowed = ", ".join([*(g for g in GROUPS if any(n.startswith(g + ":") for n in nodes)), *nodes])
        raise NetworkError(f"There is no node {name!r} in this lab (nodes: {allowed})")
    return chosen


@dataclass(frozen=True)
class Partition:
    """`lab partition NODE --from PEERS [--one-way]`, as given."""

    node: str
    peers: tuple[str, ...]
    one_way: bool = False

    def drops(self, nodes: Iterable[str]) -> set[tuple[str, str]]:
        """The directed (sender, receiver) pairs whose packets are dropped."""
        nodes = list(nodes)
        pairs = set()
        for a in expand(self.node, nodes):
            for peer in self.peers:
                for b in expand(peer, nodes):
                    if a == b and peer in GROUPS:
                        continue  # `controller:3001 --from controller`: from every other controller
                    if a == b:
                        raise NetworkError(f"{a} cannot be partitioned from itself")
                    pairs.add((a, b))
                    if not self.one_way:
                        pairs.add((b, a))
        return pairs

    def involves(self, name: str, nodes: Iterable[str]) -> bool:
        nodes = list(nodes)
        mine = {n for x in (self.node, *self.peers) for n in expand(x, nodes)}
        return bool(mine & set(expand(name, nodes)))

    def describe(self) -> str:
        how = "one way: what it sends is dropped" if self.one_way else "both directions"
        return f"{self.node} cut off from {', '.join(self.peers)} ({how})"


def separated(partitions: Iterable[Partition], nodes: Iterable[str]) -> dict[str, list[str]]:
    """{node: the nodes it cannot exchange packets with, either way} under the partitions in force."""
    nodes = list(nodes)
    out: dict[str, set[str]] = {}
    for partition in partitions:
        for a, b in partition.drops(nodes):
            out.setdefault(a, set()).add(b)
            out.setdefault(b, set()).add(a)
    return {node: sorted(peers) for node, peers in out.items()}


def rulesets(partitions: Iterable[Partition], addresses: dict[str, str]) -> dict[str, str]:
    """{node: its namespace's whole nftables table} for every lab node (an empty table where nothing drops)."""
    drops: set[tuple[str, str]] = set()
    for partition in partitions:
        drops |= partition.drops(addresses)
    inputs: dict[str, list[str]] = {n: [] for n in addresses if n != CLIENTS}
    outputs: dict[str, list[str]] = {n: [] for n in addresses if n != CLIENTS}
    for sender, receiver in sorted(drops):
        if receiver != CLIENTS:
            inputs[receiver].append(f"ip saddr {addresses[sender]} drop")
        else:
            outputs[sender].append(f"ip daddr {addresses[receiver]} drop")
    return {node: _table(inputs[node], outputs[node]) for node in inputs}


def _table(input_rules: list[str], output_rules: list[str]) -> str:
    # Declaring the table first makes the delete succeed on a fresh namespace: one idempotent transaction.
    def chain(name: str, rules: list[str]) -> str:
        body = "".join(f"    {rule}\n" for rule in rules)
        return f"  chain {name} {{\n    type filter hook {name} priority 0; policy accept;\n{body}  }}\n"

    return (f"table inet {TABLE}\ndelete table inet {TABLE}\n"
            f"table inet {TABLE} {{\n{chain('input', input_rules)}{chain('output', output_rules)}}}\n")


# ---- the namespaces, the bridge and the rules (needs root) -----------------------------------------------


@dataclass
class NetworkState:
    """`DIR/network.json`: what `lab down` removes and which partitions are in force."""

    lab_id: str
    subnet: str
    bridge: str
    addresses: dict[str, str]
    namespaces: dict[str, str]  # node -> namespace name
    partitions: list[Partition] = field(default_factory=list)


def check_privilege() -> None:
    """Raise NetworkError (one sentence) unless we may create namespaces and packet-filter rules."""
    if os.geteuid() != 0:
        raise NetworkError("The lab network (--network, partition, heal) needs root for network namespaces and "
                           "nftables; run the lab as root, or without --network.")
    missing = [tool for tool in ("ip", "nft") if shutil.which(tool) is None]
    if missing:
        raise NetworkError(f"The lab network needs {' and '.join(missing)} "
                           "(`apt-get install iproute2 nftables` on Debian/Ubuntu).")


def free_subnet() -> str:
    """The first /24 of DEFAULT_SUBNETS that no interface's network overlaps."""
    used = [ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network
            for link in json.loads(_run(["ip", "-j", "addr"]) or "[]") for a in link.get("addr_info", [])
            if a.get("family") == "inet"]
    for candidate in DEFAULT_SUBNETS.subnets(new_prefix=24):
        if not any(candidate.overlaps(net) for net in used):
            return str(candidate)
    raise NetworkError(f"No free /24 in {DEFAULT_SUBNETS}; choose one with --subnet")


class LabNetwork:
    def __init__(self, directory: Path) -> None:
        self.state_file = Path(directory) / STATE_FILE

    def load(self) -> NetworkState | None:
        try:
            raw = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return None
        raw["partitions"] = [Partition(p["node"], tuple(p["peers"]), p["one_way"]) for p in raw["partitions"]]
        return NetworkState(**raw)

    def save(self, state: NetworkState) -> None:
        tmp = self.state_file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
        tmp.replace(self.state_file)

    def create(self, subnet: str | None, zookeeper_ids: list[int], broker_ids: list[int],
               controller_ids: list[int] = ()) -> NetworkState:
        """The bridge and a namespace per node; recorded in network.json before each piece is made, so a
        failure half way is undone by :meth:`destroy`."""
        check_privilege()
        # Two labs started at once (a scenario's two modes side by side) must not both find the same /24 free:
        # the choice and the bridge's address that takes the subnet happen under one lock for this host.
        with open(Path(tempfile.gettempdir()) / HOST_LOCK_FILE, "a") as host_lock:
            fcntl.flock(host_lock, fcntl.LOCK_EX)
            subnet = subnet or free_subnet()
            addresses = plan_addresses(subnet, zookeeper_ids, broker_ids, controller_ids)
            lab_id = secrets.token_hex(3)
            network = ipaddress.ip_network(subnet)
            nodes = [n for n in addresses if n != CLIENTS]
            state = NetworkState(lab_id, str(network), f"zkb{lab_id}", addresses,
                                 {node: f"zkb{lab_id}-{node.replace(':', '-')}" for node in nodes})
            self.save(state)
            _run(["ip", "link", "add", state.bridge, "type", "bridge"])
            _run(["ip", "addr", "add", f"{addresses[CLIENTS]}/{network.prefixlen}", "dev", state.bridge])
        _run(["ip", "link", "set", state.bridge, "up"])
        for index, node in enumerate(nodes):
            namespace, outside = state.namespaces[node], f"zv{lab_id}{index}"
            _run(["ip", "netns", "add", namespace])
            _run(["ip", "link", "add", outside, "type", "veth", "peer", "name", f"zp{lab_id}{index}",
                  "netns", namespace])
            _run(["ip", "link", "set", outside, "master", state.bridge, "up"])
            inside = ["ip", "netns", "exec", namespace, "ip"]
            _run([*inside, "link", "set", f"zp{lab_id}{index}", "name", "eth0"])
            _run([*inside, "addr", "add", f"{addresses[node]}/{network.prefixlen}", "dev", "eth0"])
            _run([*inside, "link", "set", "eth0", "up"])
            _run([*inside, "link", "set", "lo", "up"])
        self._apply(state)
        return state

    def wrapper(self, node: str) -> tuple[str, ...]:
        """The command prefix that runs a program in the node's namespace (empty without a lab network)."""
        state = self.load()
        if state is None:
            return ()
        return ("ip", "netns", "exec", state.namespaces[node])

    def partition(self, partition: Partition) -> NetworkState:
        state = self._require()
        partition.drops(state.addresses)  # refuses unknown nodes before anything changes
        state.partitions.append(partition)
        self._apply(state)
        self.save(state)
        return state

    def heal(self, node: str | None = None) -> list[Partition]:
        """Remove every partition (or those involving `node`); returns what was removed."""
        state = self._require()
        if node is not None:
            expand(node, state.addresses)
        healed = [p for p in state.partitions if node is None or p.involves(node, state.addresses)]
        state.partitions = [p for p in state.partitions if p not in healed]
        self._apply(state)
        self.save(state)
        return healed

    def destroy(self) -> None:
        """Delete every namespace (their veths and rules go with them) and the bridge; forget the network."""
        state = self.load()
        if state is None:
            return
        existing = set(_run(["ip", "netns", "list"]).split())
        for index, namespace in enumerate(state.namespaces.values()):
            if namespace in existing:
                _run(["ip", "netns", "del", namespace])
            # A namespace outlives its name while an orphaned TCP socket in it still retransmits (after a
            # partition, for minutes), and keeps its veth pair: delete our end, which deletes both.
            _delete_link(f"zv{state.lab_id}{index}")
        _delete_link(state.bridge)
        self.state_file.unlink(missing_ok=True)

    def _require(self) -> NetworkState:
        state = self.load()
        if state is None:
            raise NetworkError("Partitions need a lab started with `zkbroker lab up --network` "
                               "(each node in its own network namespace); this one has none.")
        check_privilege()
        return state

    def _apply(self, state: NetworkState) -> None:
        for node, table in rulesets(state.partitions, state.addresses).items():
            _run(["ip", "netns", "exec", state.namespaces[node], "nft", "-f", "-"], stdin=table)


def _delete_link(name: str) -> None:
    """Delete a link if it is there; it may vanish meanwhile, with the namespace holding its peer."""
    done = subprocess.run(["ip", "link", "del", name], capture_output=True, text=True, timeout=30)
    # Deleting a namespace takes its veth end with it asynchronously: the link may go between two calls, and
    # `ip` says so in either of two ways.
    if done.returncode != 0 and "Cannot find device" not in done.stderr and "No such device" not in done.stderr:
        raise NetworkError(f"`ip link del {name}` failed: {done.stderr.strip()}")


def _run(command: list[str], stdin: str | None = None) -> str:
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise NetworkError(f"`{' '.join(command)}` failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout
