"""The lab cluster: a real ZooKeeper (one server or an ensemble) and broker processes on 127.0.0.1,
described by `DIR/cluster.json`.

`up` returns only when every broker is registered and a controller is elected. The processes are
detached (their own sessions, output to files under DIR), so they outlive the command that started them;
every later command finds them again through `cluster.json`, whose format is a contract (docs/lab.md):

    {"zookeeper": "127.0.0.1:2181/zkbroker-<id>", "zookeeper_pid": 123,
     "zookeepers": [{"id": 1, "host": "127.0.0.1", "port": 2181, "pid": 123}],
     "brokers": [{"id": 1, "host": "127.0.0.1", "port": 9092, "pid": 456,
                  "config": "DIR/broker-1/server.properties"}]}

`zookeepers` lists the servers the lab started, numbered by their myid, and the `zookeeper`
connect string names every one of them, chroot last. `zookeeper_pid` is the pid of a lone server, null for
an ensemble (each member's pid is in `zookeepers`) and when the lab did not start ZooKeeper itself
(`--zookeeper HOST:PORT`, when `zookeepers` is empty). Everything the lab does is also appended to
`DIR/timeline.jsonl` (zkbroker/timeline.py), and the brokers are started with ZKBROKER_TIMELINE naming it.

`up --kraft` starts no ZooKeeper: dedicated controller processes (ids 3001..300N, `"controllers"` beside
`"brokers"`, `"mode": "kraft"` and no `zookeeper` keys; zkbroker/lab/kraft_lab.py) elect a quorum leader, and the
lab verbs take `controller:ID` wherever they take a broker id.

`up --secure` starts its ZooKeeper with a SASL DIGEST-MD5 login for the brokers and the brokers with
`zookeeper.set.acl=true` (zkbroker.zk.security); the login is written to `DIR/jaas.conf`, which the lab's
brokers get through $ZKBROKER_JAAS_CONFIG and which tools need the same way to change anything.
`up --security ssl|sasl_plaintext|sasl_ssl` gives every broker one listener of that protocol, TLS certificates
and SASL users as zkbroker/lab/lab_security.py makes them, and cluster.json a "security" entry (DESIGN §19).

A lab cannot leak processes: every command that starts, stops or signals processes (up, down, start, stop,
kill, pause, resume, partition, heal) holds an exclusive lock on `DIR/lab.lock` (fcntl), so `down` never runs
while another command is half-way through starting something; and `down` stops every process of the lab,
found by the configuration file inside DIR that its command line names (not only by the pids in
cluster.json, which an interrupted `up` may not have written).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkbroker import fault_points, timeline
from zkbroker.control_protocol import ENV_VAR as CONTROL_ENV_VAR
from zkbroker.control_protocol import FAULTS_ENV_VAR, SOCKET_NAME, ControlError, fault_request
from zkbroker.lab import kraft_lab
from zkbroker.lab.control_client import ControlClient
from zkbroker.lab.lab_security import CLIENT_PROPERTIES, PROTOCOLS, LabClients, lab_security, write_lab_files
from zkbroker.lab.network import (
    CLIENTS,
    LabNetwork,
    NetworkError,
    Partition,
    broker_node,
    controller_node,
    zookeeper_node,
)
from zkbroker.lab.ports import free_ports
from zkbroker.lab.processes import process_state, processes_matching, signal_process, stop_process, wait_until
from zkbroker.zk import paths
from zkbroker.zk.security import JAAS_CONFIG_ENV, AclKazooClient, client_jaas
from zkbroker.zk.znodes import (
    ControllerRegistration,
    EntityConfig,
    LeaderIsrState,
    TopicAssignment,
    ZnodeFormatError,
    decode_controller_epoch,
)

HOST = "127.0.0.1"
DEFAULT_BASE_PORT = 9092
LAB_TICK_TIME_MS = 500  # ZooKeeper allows sessions of 2-20 ticks by default; we raise the maximum too
ENSEMBLE_SIZES = (1, 3, 5)
LOCK_FILE = "lab.lock"
FAULTS_AT_START_FILE = "faults-at-start.json"  # in DIR/broker-ID/: fault points for the broker's next start
CONTROL_TIMEOUT_S = 2.0  # a running broker answers its control socket in milliseconds
JAAS_FILE = "jaas.conf"  # the ZooKeeper login of a --secure lab, for its brokers and tools
LAB_ZK_USER = "kafka"
# Long enough for the slowest locked command (an `up` that waits 60 s for its brokers after starting
# ZooKeeper, then stops them all again on failure), bounded so that a hung holder is reported.
LOCK_WAIT_S = 180.0


class LabError(RuntimeError):
    """A lab command cannot do what was asked; the message says why in one sentence."""


@dataclass
class BrokerEntry:
    id: int
    host: str
    port: int
    pid: int | None
    config: str
    control: str | None = None  # the broker's lab control socket (zkbroker/control_protocol.py)


@dataclass
class ControllerEntry:
    """A KRaft controller (process.roles=controller) of a `--kraft` lab; a lab member as a broker is."""

    id: int  # its node.id, 3001...
    host: str
    port: int  # its controller listener
    pid: int | None
    config: str
    control: str | None = None


#: A lab member a verb acts on: a broker id, or "controller:ID".
Member = int | str


def member_node(which: Member) -> str:
    """The member's timeline source and network node: broker:ID or controller:ID."""
    return which if isinstance(which, str) else broker_node(which)


def member_label(which: Member) -> str:
    return f"Controller {which.split(':', 1)[1]}" if isinstance(which, str) else f"Broker {which}"


@dataclass
class ZooKeeperEntry:
    id: int  # the server's myid
    host: str
    port: int
    pid: int | None


@dataclass
class ClusterFile:
    zookeeper: str
    zookeeper_pid: int | None
    zookeepers: list[ZooKeeperEntry] = field(default_factory=list)
    brokers: list[BrokerEntry] = field(default_factory=list)
    mode: str = "zookeeper"  # or "kraft" (DESIGN §17)
    controllers: list[ControllerEntry] = field(default_factory=list)
    security: dict | None = None  # `up --security`: protocol, mechanisms, ca, admin (lab_security.py)

    @property
    def kraft(self) -> bool:
        return self.mode == "kraft"

    @property
    def clients(self) -> LabClients:
        """How the lab's own clients reach the brokers (the admin's TLS and SASL settings on a secured lab)."""
        return LabClients.of(self.security)

    def bootstrap(self) -> str:
        """The brokers as a bootstrap list (each at the lab's listener)."""
        return ",".join(f"{b.host}:{b.port}" for b in self.brokers)

    def to_json(self) -> dict:
        """cluster.json's object: a KRaft lab has `controllers` and no `zookeeper` keys (DESIGN §17)."""
        out = asdict(self)
        if self.kraft:
            for key in ("zookeeper", "zookeeper_pid", "zookeepers"):
                out.pop(key)
        else:
            out.pop("controllers")
        if out["security"] is None:  # a plaintext lab's cluster.json is as before --security existed
            del out["security"]
        return out

    def controller(self, node_id: int) -> ControllerEntry:
        for entry in self.controllers:
            if entry.id == node_id:
                return entry
        if not self.controllers:
            raise LabError("This lab has no controller processes (it runs in ZooKeeper mode; "
                           "`lab up --kraft` starts a KRaft lab)")
        raise LabError(f"There is no controller {node_id} in this lab (controllers: "
                       f"{', '.join(str(c.id) for c in self.controllers)})")

    def member(self, which: Member) -> BrokerEntry | ControllerEntry:
        """A broker by id, or a controller by "controller:ID"."""
        if isinstance(which, str):
            kind, _, node_id = which.partition(":")
            if kind != "controller" or not node_id.isdigit():
                raise LabError(f"{which!r} names no lab member (broker ids, or controller:ID)")
            return self.controller(int(node_id))
        return self.broker(which)

    def broker(self, broker_id: int) -> BrokerEntry:
        for entry in self.brokers:
            if entry.id == broker_id:
                return entry
        raise LabError(f"There is no broker {broker_id} in this lab (brokers: "
                       f"{', '.join(str(b.id) for b in self.brokers)})")

    def zookeeper_server(self, server_id: int) -> ZooKeeperEntry:
        for entry in self.zookeepers:
            if entry.id == server_id:
                return entry
        if not self.zookeepers:
            raise LabError("This lab did not start its ZooKeeper (it uses --zookeeper HOST:PORT), "
                           "so it cannot stop or start it")
        raise LabError(f"There is no ZooKeeper server {server_id} in this lab (servers: "
                       f"{', '.join(str(z.id) for z in self.zookeepers)})")


def _under_lock(method):
    """Run a lab command holding the lab's lock (LabCluster.locked)."""
    @functools.wraps(method)
    def locked_method(self: LabCluster, *args, **kwargs):
        with self.locked():
            return method(self, *args, **kwargs)
    return locked_method


class LabCluster:
    def __init__(self, directory: str | os.PathLike) -> None:
        self.dir = Path(directory).resolve()
        self.cluster_file = self.dir / "cluster.json"

    # ---- cluster.json -------------------------------------------------------------------------------------

    def load(self) -> ClusterFile:
        try:
            raw = json.loads(self.cluster_file.read_text())
        except FileNotFoundError:
            raise LabError(f"No lab cluster in {self.dir} (no cluster.json); start one with "
                           f"`zkbroker lab up --dir {self.dir}`") from None
        except json.JSONDecodeError as e:
            raise LabError(f"{self.cluster_file} is not valid JSON: {e}") from None
        return ClusterFile(raw.get("zookeeper", ""), raw.get("zookeeper_pid"),
                           [ZooKeeperEntry(**z) for z in raw.get("zookeepers", [])],
                           [BrokerEntry(**b) for b in raw.get("brokers", [])], raw.get("mode", "zookeeper"),
                           [ControllerEntry(**c) for c in raw.get("controllers", [])], raw.get("security"))

    @contextlib.contextmanager
    def locked(self, create: bool = False, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
        """Hold the lab's lock (waiting for another lab command to finish); `create` makes DIR if missing."""
        if create:
            self.dir.mkdir(parents=True, exist_ok=True)
        elif not self.dir.is_dir():
            self.load()  # raises the usual "No lab cluster in DIR"
        path = self.dir / LOCK_FILE
        with open(path, "a+") as lock:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        lock.seek(0)
                        holder = lock.read().strip() or "another process"
                        raise LabError(f"Another lab command ({holder}) has held {path} for {wait_s:.0f} s; "
                                       f"try again when it has finished") from None
                    time.sleep(0.05)
            lock.truncate(0)
            lock.write(f"pid {os.getpid()}: {' '.join(sys.argv[1:]) or sys.argv[0]}\n")
            lock.flush()
            yield  # closing the file releases the lock, also when this process dies

    @property
    def secure(self) -> bool:
        """Whether this is a --secure lab: its brokers log in to ZooKeeper with DIR/jaas.conf."""
        return (self.dir / JAAS_FILE).exists()

    def save(self, cluster: ClusterFile) -> None:
        tmp = self.cluster_file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(cluster.to_json(), indent=2) + "\n")
        tmp.replace(self.cluster_file)

    # ---- up / down ----------------------------------------------------------------------------------------

    def up(self, brokers: int = 3, zookeeper: str = "auto", config: list[str] | tuple[str, ...] = (),
           base_port: int | None = None, timeout_s: float = 60.0, zookeepers: int = 1, network: bool = False,
           subnet: str | None = None, secure: bool = False, kraft: bool = False,
           controllers: int = 3, security: str = "plaintext", directory_ids: bool = False) -> ClusterFile:
        """`directory_ids` (KRaft only): the voters are named with their log dirs' directory ids (KIP-853)."""
        if kraft:
            if security != "plaintext":
                raise LabError("A KRaft lab runs PLAINTEXT listeners only (lab up --security is for ZooKeeper mode)")
            return self._up_kraft_checked(brokers, controllers, zookeeper, config, timeout_s, zookeepers, network,
                                          subnet, secure, directory_ids)
        if directory_ids:
            raise LabError("--directory-ids names the voters of a KRaft quorum (KIP-853): it goes with --kraft")
        if brokers < 1:
            raise LabError("A lab needs at least one broker (--brokers 1 or more)")
        if zookeepers not in ENSEMBLE_SIZES:
            raise LabError(f"--zookeepers takes {', '.join(map(str, ENSEMBLE_SIZES))} (an odd ensemble), "
                           f"not {zookeepers}")
        if zookeepers > 1 and zookeeper != "auto":
            raise LabError("--zookeepers starts the lab's own ensemble; "
                           "it cannot be combined with --zookeeper HOST:PORT")
        if network and zookeeper != "auto":
            raise LabError("--network puts the lab's own ZooKeeper in the lab network; "
                           "it cannot be combined with --zookeeper HOST:PORT")
        if subnet is not None and not network:
            raise LabError("--subnet chooses the lab network's addresses; it needs --network")
        if secure and zookeeper != "auto":
            raise LabError("--secure needs the lab's own ZooKeeper (--zookeeper auto), which it starts with the "
                           "brokers' SASL login")
        if security.lower() not in PROTOCOLS:
            raise LabError(f"--security takes {', '.join(PROTOCOLS)}, not {security}")
        if network:
            _check_network_privilege()
        with self.locked(create=True):
            if self._lab_processes() or (self.cluster_file.exists() and self._anything_running(self.load())):
                raise LabError(f"A lab cluster is already running in {self.dir}; "
                               f"stop it with `zkbroker lab down --dir {self.dir}`")
            return self._up(brokers, zookeeper, config, base_port, timeout_s, zookeepers, network, subnet, secure,
                            security)

    def _up(self, brokers: int, zookeeper: str, config: list[str] | tuple[str, ...], base_port: int | None,
            timeout_s: float, zookeepers: int, network: bool, subnet: str | None, secure: bool,
            security: str) -> ClusterFile:
        overrides = _parse_overrides(config)
        secured = lab_security(security, self.dir)
        (self.dir / CLIENT_PROPERTIES).unlink(missing_ok=True)  # an earlier secured lab's in DIR
        (self.dir / JAAS_FILE).unlink(missing_ok=True)  # a login left by an earlier --secure lab in DIR
        login = self._write_login() if secure else None
        if secure:
            overrides.setdefault("zookeeper.set.acl", "true")
        cluster = ClusterFile("", None)
        chroot = f"/zkbroker-{secrets.token_hex(4)}"
        self.save(cluster)  # from here on `down` finds (and undoes) whatever part of the lab exists
        try:
            addresses = {}
            if network:
                addresses = self.network.create(subnet, list(range(1, zookeepers + 1)),
                                                list(range(1, brokers + 1))).addresses
                self._record("network_created", subnet=self.network.load().subnet)
            if zookeeper == "auto":
                self._start_zookeepers(cluster, zookeepers, addresses, login)
                zk_hosts = ",".join(f"{z.host}:{z.port}" for z in cluster.zookeepers)
                cluster.zookeeper_pid = cluster.zookeepers[0].pid if zookeepers == 1 else None
            else:
                zk_hosts = zookeeper.split("/", 1)[0]
            cluster.zookeeper = zk_hosts + chroot
            if secured is not None:
                write_lab_files(secured, sorted(set(addresses.values())))
                cluster.security = secured.cluster_entry()
            self.save(cluster)
            with _zk(zk_hosts, login) as zk:
                zk.ensure_path(chroot)  # with Kafka's secure ACL when secure, like every znode below it
                for user, credentials in (secured.scram_users() if secured is not None else {}).items():
                    zk.create(chroot + paths.user_config_path(user), EntityConfig(credentials).encode(),
                              makepath=True)
            # In the lab network every broker has an address of its own, so all can use the same port.
            ports = [base_port or DEFAULT_BASE_PORT] * brokers if network else _choose_ports(brokers, base_port)
            for broker_id, port in zip(range(1, brokers + 1), ports):
                host = addresses.get(broker_node(broker_id), HOST)
                secured_props = secured.broker_properties(host, port) if secured is not None else {}
                cluster.brokers.append(self._write_broker_config(cluster.zookeeper, broker_id, host, port,
                                                                 {**secured_props, **overrides}))
            self.save(cluster)
            for entry in cluster.brokers:
                entry.pid = self._spawn(entry, broker_node(entry.id))
            self.save(cluster)
            self._wait_usable(cluster, [b.id for b in cluster.brokers], timeout_s)
        except BaseException:
            self._stop_everything()
            raise
        self._record_zookeeper_roles(cluster)
        return cluster

    # ---- up --kraft (DESIGN §17) -------------------------------------------------------------------------------

    def _up_kraft_checked(self, brokers: int, controllers: int, zookeeper: str, config: list[str] | tuple[str, ...],
                          timeout_s: float, zookeepers: int, network: bool, subnet: str | None,
                          secure: bool, directory_ids: bool = False) -> ClusterFile:
        if controllers not in kraft_lab.QUORUM_SIZES:
            raise LabError(f"--controllers takes {', '.join(map(str, kraft_lab.QUORUM_SIZES))} (an odd quorum), "
                           f"not {controllers}")
        if zookeeper != "auto" or zookeepers != 1 or secure:
            raise LabError("--kraft starts no ZooKeeper; it cannot be combined with --zookeeper, --zookeepers or "
                           "--secure")
        if brokers < 0:
            raise LabError("--brokers cannot be negative")
        if subnet is not None and not network:
            raise LabError("--subnet chooses the lab network's addresses; it needs --network")
        if network:
            _check_network_privilege()
        with self.locked(create=True):
            if self._lab_processes() or (self.cluster_file.exists() and self._anything_running(self.load())):
                raise LabError(f"A lab cluster is already running in {self.dir}; "
                               f"stop it with `zkbroker lab down --dir {self.dir}`")
            return self._up_kraft(brokers, controllers, config, timeout_s, network, subnet, directory_ids)

    def _up_kraft(self, brokers: int, controllers: int, config: list[str] | tuple[str, ...], timeout_s: float,
                  network: bool, subnet: str | None, directory_ids: bool = False) -> ClusterFile:
        overrides = _parse_overrides(config)
        (self.dir / JAAS_FILE).unlink(missing_ok=True)
        cluster = ClusterFile("", None, mode="kraft")
        self.save(cluster)  # from here on `down` finds (and undoes) whatever part of the lab exists
        try:
            ids = kraft_lab.controller_ids(controllers)
            addresses = {}
            if network:
                addresses = self.network.create(subnet, [], list(range(1, brokers + 1)), ids).addresses
                self._record("network_created", subnet=self.network.load().subnet)
                ports = [kraft_lab.CONTROLLER_PORT] * controllers
            else:
                ports = _choose_ports(controllers, 0)  # free ports: never 9092, which a ZooKeeper-mode lab may want
            hosts = [addresses.get(controller_node(node), HOST) for node in ids]
            voters = kraft_lab.voters_value(zip(ids, hosts, ports))
            cluster_id = kraft_lab.random_cluster_id()
            for node, host, port in zip(ids, hosts, ports):
                directory = self.dir / f"controller-{node}"
                config = self._write_kraft_node(directory, f"controller {node}", cluster_id,
                                                 kraft_lab.controller_properties(node, host, port, voters,
                                                                                 directory / "data", overrides))
                cluster.controllers.append(ControllerEntry(node, host, port, None, config,
                                                           str(directory / SOCKET_NAME)))
            if directory_ids:  # as `storage format --initial-controllers` would: each voter with its log dir's id
                voters = kraft_lab.voters_with_directories(cluster.controllers)
            self.save(cluster)
            for entry in cluster.controllers:
                entry.pid = self._spawn(entry, controller_node(entry.id))
            self.save(cluster)
            leader, epoch = kraft_lab.wait_for_leader(cluster.controllers, timeout_s)
            self._start_kraft_brokers(cluster, brokers, addresses, voters, cluster_id, overrides, timeout_s)
        except kraft_lab.KRaftLabError as e:
            self._stop_everything()
            raise LabError(str(e)) from None
        except BaseException:
            self._stop_everything()
            raise
        return cluster

    @staticmethod
    def _write_kraft_node(directory: Path, name: str, cluster_id: str, properties: str) -> str:
        """A KRaft node's directory, its server.properties and its formatted storage, as an operator makes them;
        the config file's path."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / FAULTS_AT_START_FILE).unlink(missing_ok=True)  # armed in an earlier lab in DIR: not ours
        config_path = directory / "server.properties"
        config_path.write_text("# written by `zkbroker lab up --kraft`\n" + properties)
        kraft_lab.format_storage(cluster_id, config_path, name)
        return str(config_path)

    def _start_kraft_brokers(self, cluster: ClusterFile, count: int, addresses: dict[str, str], voters: str,
                             cluster_id: str, overrides: dict[str, str], timeout_s: float) -> None:
        """KRaft brokers (process.roles=broker, ids 1..count), written and formatted as an operator does it, and
        awaited until the active controller has registered and unfenced each one."""
        # In the lab network every broker has an address of its own, so all can use the same port.
        ports = [DEFAULT_BASE_PORT] * count if addresses else _choose_ports(count, 0)
        for broker_id, port in zip(range(1, count + 1), ports):
            host = addresses.get(broker_node(broker_id), HOST)
            directory = self.dir / f"broker-{broker_id}"
            config = self._write_kraft_node(directory, f"broker {broker_id}", cluster_id, kraft_lab.broker_properties(
                broker_id, host, port, voters, directory / "data", overrides))
            cluster.brokers.append(BrokerEntry(broker_id, host, port, None, config, str(directory / SOCKET_NAME)))
        self.save(cluster)
        for entry in cluster.brokers:
            entry.pid = self._spawn(entry, broker_node(entry.id))
        self.save(cluster)
        kraft_lab.wait_for_brokers(cluster.brokers, timeout_s)

    def _zookeeper_dir(self, server_id: int, ensemble: bool) -> Path:
        return self.dir / (f"zookeeper-{server_id}" if ensemble else "zookeeper")

    def _write_login(self) -> dict[str, str]:
        """A fresh ZooKeeper login for a --secure lab, written to DIR/jaas.conf (readable by its owner only)."""
        password = secrets.token_hex(16)
        jaas = self.dir / JAAS_FILE
        jaas.touch(mode=0o600)
        jaas.write_text(client_jaas(LAB_ZK_USER, password))
        return {"mechanism": "DIGEST-MD5", "username": LAB_ZK_USER, "password": password}

    def _start_zookeepers(self, cluster: ClusterFile, count: int, addresses: dict[str, str],
                          login: dict[str, str] | None = None) -> None:
        """Start the lab's ZooKeeper servers, recording each in `cluster` (and cluster.json) once it runs.
        In the lab network (`addresses`) each has an address of its own and ZooKeeper's usual ports; with a
        `login` (--secure) each accepts the brokers' SASL login."""
        from zkbroker.lab.zookeeper import QuorumPeer, ZooKeeperServer, find_zookeeper, start_ensemble

        install = find_zookeeper()
        sasl_users = {login["username"]: login["password"]} if login else None
        if count == 1:
            node = zookeeper_node(1)
            server = ZooKeeperServer(data_dir=str(self._zookeeper_dir(1, False)), tick_time_ms=LAB_TICK_TIME_MS,
                                     install=install, host=addresses.get(node, HOST),
                                     port=2181 if addresses else None, wrapper=self.network.wrapper(node),
                                     sasl_users=sasl_users)
            servers = [server]
            server.start()
        else:
            peers = tuple(QuorumPeer(i, addresses[zookeeper_node(i)], 2181, 2888, 3888) if addresses
                          else QuorumPeer(i, HOST, *free_ports(3, HOST))
                          for i in range(1, count + 1))
            servers = [ZooKeeperServer(install, data_dir=self._zookeeper_dir(peer.id, True),
                                       tick_time_ms=LAB_TICK_TIME_MS, myid=peer.id, peers=peers,
                                       wrapper=self.network.wrapper(zookeeper_node(peer.id)), sasl_users=sasl_users)
                       for peer in peers]
            start_ensemble(servers)
        for server_id, server in enumerate(servers, start=1):
            server.detach()
            host, port = server.connect_string.rsplit(":", 1)
            cluster.zookeepers.append(ZooKeeperEntry(server_id, host, int(port), server.pid))
            if server.container_id:  # a Docker ZooKeeper has no pid of ours; `down` stops it by container id
                (self.dir / "zookeeper").mkdir(parents=True, exist_ok=True)
                (self.dir / "zookeeper" / "container-id").write_text(server.container_id)
            if server.pid is not None:
                self._record("process_started", node=f"zookeeper:{server_id}", pid=server.pid)

    def down(self) -> None:
        """Stop every broker (paused ones are resumed first so they can exit) and our ZooKeeper servers, then
        remove the lab network's namespaces, veths, bridge and rules."""
        with self.locked():
            if not self.cluster_file.exists() and not self._lab_processes() and self.network.load() is None:
                self.load()  # raises the usual "No lab cluster in DIR"
            self._stop_everything()

    def _stop_everything(self) -> None:
        """Brokers first (those cluster.json names, in its order, then any other), then the ZooKeeper servers;
        each found by its command line as well as by cluster.json, so an interrupted `up` leaves nothing
        behind; then the lab network, whatever happened to the processes."""
        try:
            self._stop_processes()
        finally:  # whatever happened to the processes, the namespaces, veths, bridge and rules go
            if self.network.load() is not None:
                self.network.destroy()
        self.cluster_file.unlink(missing_ok=True)
        self._record("lab_down")

    def _stop_processes(self) -> None:
        from zkbroker.lab.zookeeper import stop_container, stop_pid

        cluster = self.load() if self.cluster_file.exists() else ClusterFile("", None)
        lab_brokers = self._lab_processes(_is_broker)  # controllers too: `zkbroker server` on DIR/controller-N/...
        known = [e.pid for e in [*cluster.brokers, *cluster.controllers] if e.pid in lab_brokers]
        for pid in known + [pid for pid in lab_brokers if pid not in known]:
            stop_process(pid, timeout_s=10.0)
        zookeepers = {cluster.zookeeper_pid, *(z.pid for z in cluster.zookeepers), *self._lab_processes(_is_zookeeper)}
        for pid in zookeepers - {None}:
            signal_process(pid, signal.SIGCONT)  # a paused JVM cannot act on SIGTERM
            stop_pid(pid, timeout=10.0)
        container = self.dir / "zookeeper" / "container-id"
        if container.exists():
            stop_container(container.read_text().strip(), timeout=10.0)
            container.unlink()
        for pid in self._lab_processes():  # whatever would not stop
            signal_process(pid, signal.SIGKILL)
        if not wait_until(lambda: not self._lab_processes(), 5.0):
            raise LabError(f"Processes of the lab in {self.dir} are still running: {self._lab_processes()}")

    def _lab_processes(self, kind: Callable[[list[str]], bool] | None = None) -> list[int]:
        """The brokers and ZooKeeper servers (or only those of `kind`) run on a configuration file inside DIR."""
        inside = str(self.dir) + os.sep
        kinds = (_is_broker, _is_zookeeper) if kind is None else (kind,)

        def of_this_lab(argv: list[str]) -> bool:
            return bool(argv) and argv[-1].startswith(inside) and any(k(argv) for k in kinds)
        return processes_matching(of_this_lab)

    def _anything_running(self, cluster: ClusterFile) -> bool:
        pids = [b.pid for b in cluster.brokers] + [z.pid for z in cluster.zookeepers] + [cluster.zookeeper_pid]
        pids += [c.pid for c in cluster.controllers]
        return any(pid is not None and process_state(pid) != "dead" for pid in pids)

    # ---- the lab network -------------------------------------------------------------------------------------

    @property
    def network(self) -> LabNetwork:
        return LabNetwork(self.dir)

    @_under_lock
    def partition(self, node: str, peers: list[str], one_way: bool = False) -> Partition:
        """Drop traffic between `node` and each of `peers` (only what `node` sends, with `one_way`)."""
        self.load()
        partition = Partition(node, tuple(peers), one_way)
        try:
            self.network.partition(partition)
        except NetworkError as e:
            raise LabError(str(e)) from None
        self._record("fault_applied", fault="partition", node=node, peers=list(peers), one_way=one_way)
        return partition

    @_under_lock
    def heal(self, node: str | None = None) -> list[Partition]:
        """Remove every partition, or those involving `node`; returns those removed."""
        self.load()
        try:
            healed = self.network.heal(node)
        except NetworkError as e:
            raise LabError(str(e)) from None
        for p in healed:
            self._record("fault_healed", fault="partition", node=p.node, peers=list(p.peers), one_way=p.one_way)
        return healed

    # ---- the timeline ---------------------------------------------------------------------------------------

    @property
    def timeline_file(self) -> Path:
        return timeline.path_in(self.dir)

    def _record(self, kind: str, source: str = "lab", **fields: object) -> None:
        timeline.append(self.timeline_file, source, kind, **fields)

    def _record_zookeeper_roles(self, cluster: ClusterFile) -> list[dict]:
        """Ask each of the lab's ZooKeeper servers its role; append a `zookeeper_role` event for each role
        that differs from the last one the timeline holds for that server. Returns every server's state."""
        from zkbroker.lab.zookeeper import server_role

        last = {e.get("server"): e.get("role") for e in timeline.read(self.timeline_file)
                if e.get("kind") == "zookeeper_role"}
        servers = []
        for z in cluster.zookeepers:
            process = process_state(z.pid) if z.pid is not None else "unknown"
            role = "down" if process in ("dead", "paused") else server_role(z.port, z.host, timeout=1.0)
            if last.get(z.id) != role:
                self._record("zookeeper_role", source=f"zookeeper:{z.id}", server=z.id, role=role)
            servers.append({"id": z.id, "host": z.host, "port": z.port, "pid": z.pid, "process": process,
                            "role": role})
        return servers

    # ---- one broker ----------------------------------------------------------------------------------------

    def kill(self, broker_id: int) -> BrokerEntry:
        return self._signal(broker_id, signal.SIGKILL)

    def pause(self, broker_id: int) -> BrokerEntry:
        return self._signal(broker_id, signal.SIGSTOP)

    def resume(self, broker_id: int) -> BrokerEntry:
        return self._signal(broker_id, signal.SIGCONT)

    @_under_lock
    def _signal(self, broker_id: Member, sig: signal.Signals) -> BrokerEntry | ControllerEntry:
        entry = self.load().member(broker_id)
        _send(member_label(broker_id), entry.pid, sig)
        self._record(_SIGNAL_EVENTS[sig], node=member_node(broker_id), pid=entry.pid, signal=sig.name)
        return entry

    @_under_lock
    def stop(self, broker_id: Member, timeout_s: float = 30.0) -> BrokerEntry | ControllerEntry:
        """Stop one broker with SIGTERM: a clean (and, with the controller issue, controlled) shutdown. A KRaft
        controller that leads resigns first (EndQuorumEpoch)."""
        entry = self.load().member(broker_id)
        if entry.pid is None or process_state(entry.pid) == "dead":
            raise LabError(f"{member_label(broker_id)} is not running")
        stop_process(entry.pid, timeout_s=timeout_s)
        self._record("process_stopped", node=member_node(broker_id), pid=entry.pid, signal="SIGTERM")
        return entry

    @_under_lock
    def start(self, broker_id: Member, timeout_s: float = 60.0,
              faults: list[dict] | tuple[dict, ...] = ()) -> BrokerEntry | ControllerEntry:
        """Start a stopped or killed broker again from its server.properties; wait until it registers.

        `faults` ({"point": ..., params}, as `fault` takes them) are in force from the broker's first instant,
        with any that `fault` armed while it was down. A stop at its registration write ends the wait once the
        broker has stopped there instead."""
        cluster = self.load()
        entry = cluster.member(broker_id)
        if entry.pid is not None and process_state(entry.pid) != "dead":
            raise LabError(f"{member_label(broker_id)} is already running (pid {entry.pid})")
        added = []
        for spec in faults:
            params = {k: v for k, v in spec.items() if k != "point"}
            try:
                fault_points.check(str(spec.get("point")), params)
            except fault_points.FaultPointError as e:
                raise LabError(str(e)) from None
            added.append(fault_request(spec["point"], **params))
        pending = self._pending_faults(broker_id) + added
        if added:
            self._faults_at_start(broker_id).write_text(json.dumps(pending))
        for request in added:
            self._record("fault_applied", fault=request["point"], node=member_node(broker_id), at_start=True,
                         **{k: v for k, v in request.items() if k not in ("command", "point")})
        if isinstance(entry, ControllerEntry):
            # A controller is back once it answers with its Raft state (it rejoins the quorum on its own).
            entry.pid = self._spawn(entry, controller_node(entry.id))
            self.save(cluster)
            pid = entry.pid
            if not wait_until(lambda: process_state(pid) != "running" or kraft_lab.raft_state(entry.control)
                              is not None, timeout_s, interval_s=0.1) or process_state(pid) == "dead":
                raise LabError(f"Controller {entry.id} did not come up: "
                               f"{_last_line(Path(entry.config).parent / 'server.log')}")
            return entry
        if cluster.kraft:
            # A KRaft broker is back once the active controller has unfenced its new incarnation (a registration
            # of the previous process is replaced: the incarnation id differs, KAFKA-1120's KRaft form).
            entry.pid = self._spawn(entry, broker_node(entry.id))
            self.save(cluster)
            try:
                kraft_lab.wait_for_brokers([entry], timeout_s)
            except kraft_lab.KRaftLabError as e:
                raise LabError(str(e)) from None
            return entry
        # A broker restarted within its session timeout finds the registration of its previous process still
        # there (KAFKA-1029): it counts only once the new process has registered under a new znode.
        previous = self._registration_czxid(cluster, broker_id)
        entry.pid = self._spawn(entry, broker_node(entry.id))
        self.save(cluster)
        if any(r.get("write") == "registration" for r in pending):
            pid = entry.pid
            wait_until(lambda: process_state(pid) != "running" or self._registered(cluster, broker_id), timeout_s,
                       interval_s=0.2)
            return entry
        self._wait_usable(cluster, [broker_id], timeout_s, {broker_id: previous} if previous is not None else None)
        return entry

    def _registration_czxid(self, cluster: ClusterFile, broker_id: int) -> int | None:
        try:
            with _zk(cluster.zookeeper, timeout_s=5.0) as zk:
                stat = zk.exists(paths.broker_path(broker_id))
        except LabError:
            return None
        return stat.czxid if stat is not None else None

    def _registered(self, cluster: ClusterFile, broker_id: int) -> bool:
        try:
            with _zk(cluster.zookeeper, timeout_s=5.0) as zk:
                return zk.exists(paths.broker_path(broker_id)) is not None
        except LabError:
            return False

    # ---- the lab control interface: fault points and state (zkbroker/control_protocol.py) -----------------------

    def control(self, broker_id: Member, timeout_s: float = CONTROL_TIMEOUT_S) -> ControlClient:
        """A client of the member's control socket (which answers only while it runs)."""
        entry = self.load().member(broker_id)
        label = member_label(broker_id)
        if entry.control is None:
            raise LabError(f"{label} has no control socket in cluster.json (a lab started by an older "
                           f"zkbroker); start the lab again")
        return ControlClient(entry.control, timeout_s, name=f"{label.lower()}'s control socket")

    def _running(self, broker_id: Member) -> BrokerEntry | ControllerEntry:
        entry = self.load().member(broker_id)
        state = process_state(entry.pid) if entry.pid is not None else "dead"
        if state == "dead":
            raise LabError(f"{member_label(broker_id)} is not running")
        if state == "paused":
            raise LabError(f"{member_label(broker_id)} is paused and cannot answer; resume it first")
        return entry

    def broker_state(self, broker_id: Member) -> dict:
        """The member's own view (its `state` answer: a broker's applied LeaderAndIsr, HW, LEO, session, ...; a
        controller's Raft state and metadata log offsets)."""
        self._running(broker_id)
        try:
            with self.control(broker_id) as client:
                return client.state()
        except ControlError as e:
            raise LabError(str(e)) from None

    def fault(self, broker_id: Member, point: str, **params: object) -> list[dict]:
        """Put a fault point in force in a broker (zkbroker/fault_points.py); returns the points in force there.
        A broker that is not running gets it from the first instant of its next start (`start`)."""
        params = {k: v for k, v in params.items() if v is not None}
        try:
            fault_points.check(point, params)
        except fault_points.FaultPointError as e:
            raise LabError(str(e)) from None
        entry = self.load().member(broker_id)
        if entry.pid is None or process_state(entry.pid) == "dead":
            with self.locked():
                pending = self._pending_faults(broker_id) + [fault_request(point, **params)]
                self._faults_at_start(broker_id).write_text(json.dumps(pending))
            self._record("fault_applied", fault=point, node=member_node(broker_id), at_start=True, **params)
            return [{k: v for k, v in r.items() if k != "command"} for r in pending]
        self._running(broker_id)
        try:
            with self.control(broker_id) as client:
                in_force = client.fault(point, **params)
        except ControlError as e:
            raise LabError(str(e)) from None
        kind = "fault_healed" if point in fault_points.RELEASES else "fault_applied"
        self._record(kind, fault=fault_points.RELEASES.get(point, point), node=member_node(broker_id), **params)
        return in_force

    def heal_faults(self, broker_id: Member, point: str | None = None) -> list[dict]:
        """Heal one fault point of a broker, or all of them (those armed for its next start too); returns what
        is still in force."""
        if point is not None and point not in fault_points.POINTS:
            raise LabError(f"unknown fault point {point!r}; allowed: {', '.join(fault_points.POINTS)}")
        entry = self.load().member(broker_id)
        pending = self._pending_faults(broker_id)
        kept = [r for r in pending if point is not None and r.get("point") != point]
        if len(kept) != len(pending):
            with self.locked():
                if kept:
                    self._faults_at_start(broker_id).write_text(json.dumps(kept))
                else:
                    self._faults_at_start(broker_id).unlink(missing_ok=True)
        in_force: list[dict] = []
        if entry.pid is not None and process_state(entry.pid) != "dead":
            self._running(broker_id)
            try:
                with self.control(broker_id) as client:
                    in_force = client.heal(point)
            except ControlError as e:
                raise LabError(str(e)) from None
        self._record("fault_healed", fault=point or "all", node=member_node(broker_id))
        return in_force

    def _faults_at_start(self, broker_id: Member) -> Path:
        return self.dir / member_node(broker_id).replace(":", "-") / FAULTS_AT_START_FILE

    def _pending_faults(self, broker_id: Member) -> list[dict]:
        try:
            return json.loads(self._faults_at_start(broker_id).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return []

    def _faults_in_force(self, entry: BrokerEntry) -> list[dict] | None:
        """The fault points a running broker reports (None when it cannot answer: dead, paused, no socket)."""
        if entry.control is None or entry.pid is None or process_state(entry.pid) != "running":
            return None
        try:
            with ControlClient(entry.control, 1.0) as client:
                return client.faults()
        except ControlError:
            return None

    # ---- one ZooKeeper server -------------------------------------------------------------------------------

    def kill_zookeeper(self, server_id: int) -> ZooKeeperEntry:
        return self._signal_zookeeper(server_id, signal.SIGKILL)

    def pause_zookeeper(self, server_id: int) -> ZooKeeperEntry:
        return self._signal_zookeeper(server_id, signal.SIGSTOP)

    def resume_zookeeper(self, server_id: int) -> ZooKeeperEntry:
        return self._signal_zookeeper(server_id, signal.SIGCONT)

    @_under_lock
    def _signal_zookeeper(self, server_id: int, sig: signal.Signals) -> ZooKeeperEntry:
        cluster = self.load()
        entry = cluster.zookeeper_server(server_id)
        _send(f"ZooKeeper server {server_id}", entry.pid, sig)
        self._record(_SIGNAL_EVENTS[sig], node=f"zookeeper:{server_id}", pid=entry.pid, signal=sig.name)
        self._settle_zookeeper_roles(cluster)
        return entry

    @_under_lock
    def stop_zookeeper(self, server_id: int, timeout_s: float = 10.0) -> ZooKeeperEntry:
        """Stop one ZooKeeper server with SIGTERM."""
        from zkbroker.lab.zookeeper import stop_pid

        cluster = self.load()
        entry = cluster.zookeeper_server(server_id)
        if entry.pid is None or process_state(entry.pid) == "dead":
            raise LabError(f"ZooKeeper server {server_id} is not running")
        signal_process(entry.pid, signal.SIGCONT)
        stop_pid(entry.pid, timeout=timeout_s)
        self._record("process_stopped", node=f"zookeeper:{server_id}", pid=entry.pid, signal="SIGTERM")
        self._settle_zookeeper_roles(cluster)
        return entry

    @_under_lock
    def start_zookeeper(self, server_id: int, timeout_s: float = 60.0) -> tuple[ZooKeeperEntry, bool]:
        """Start a stopped or killed ZooKeeper server again with its data dir (its znodes, its sessions).

        Returns the entry and whether it serves: a member of an ensemble serves only once a majority of the
        ensemble runs, so it is awaited only then.
        """
        from zkbroker.lab.zookeeper import ZooKeeperServer, find_zookeeper, read_peers

        cluster = self.load()
        entry = cluster.zookeeper_server(server_id)
        if entry.pid is None:
            raise LabError(f"ZooKeeper server {server_id} runs in Docker; the lab cannot start it again")
        if process_state(entry.pid) != "dead":
            raise LabError(f"ZooKeeper server {server_id} is already running (pid {entry.pid})")
        ensemble = len(cluster.zookeepers) > 1
        data_dir = self._zookeeper_dir(server_id, ensemble)
        peers = read_peers((data_dir / "zoo.cfg").read_text(), {z.id: z.port for z in cluster.zookeepers})
        server = ZooKeeperServer(find_zookeeper(), port=entry.port, data_dir=data_dir, host=entry.host,
                                 tick_time_ms=LAB_TICK_TIME_MS, myid=server_id if ensemble else None, peers=peers,
                                 wrapper=self.network.wrapper(zookeeper_node(server_id)))
        running = 1 + sum(1 for z in cluster.zookeepers
                          if z.id != server_id and z.pid is not None and process_state(z.pid) == "running")
        quorum = running > len(cluster.zookeepers) // 2
        if quorum:
            server.start(timeout_s)
        else:
            server.launch()
        server.detach()
        entry.pid = server.pid
        if len(cluster.zookeepers) == 1:
            cluster.zookeeper_pid = entry.pid
        self.save(cluster)
        self._record("process_started", node=f"zookeeper:{server_id}", pid=entry.pid)
        self._settle_zookeeper_roles(cluster)
        return entry, quorum

    def _settle_zookeeper_roles(self, cluster: ClusterFile, timeout_s: float = 10.0) -> None:
        """After a ZooKeeper fault, give the ensemble a moment to elect (when a majority runs) and record the
        roles it ends with."""
        from zkbroker.lab.zookeeper import server_role

        alive = [z for z in cluster.zookeepers if z.pid is not None and process_state(z.pid) == "running"]
        if len(alive) > len(cluster.zookeepers) // 2:
            wait_until(lambda: all(server_role(z.port, z.host, 1.0) not in ("looking", "down") for z in alive),
                       timeout_s, interval_s=0.1)
        self._record_zookeeper_roles(cluster)

    def _write_broker_config(self, zk_connect: str, broker_id: int, host: str, port: int,
                             overrides: dict[str, str]) -> BrokerEntry:
        broker_dir = self.dir / f"broker-{broker_id}"
        broker_dir.mkdir(parents=True, exist_ok=True)
        (broker_dir / FAULTS_AT_START_FILE).unlink(missing_ok=True)  # armed in an earlier lab in DIR: not ours
        props = {
            "broker.id": str(broker_id),
            "port": str(port),
            "host.name": host,
            "advertised.host.name": host,
            "log.dirs": str(broker_dir / "data"),
            "zookeeper.connect": zk_connect,
        }
        props.update(overrides)
        config = broker_dir / "server.properties"
        config.write_text("# written by `zkbroker lab up`\n" + "".join(f"{k}={v}\n" for k, v in props.items()))
        return BrokerEntry(broker_id, host, int(props["port"]), None, str(config), str(broker_dir / SOCKET_NAME))

    def _spawn(self, entry: BrokerEntry | ControllerEntry, node: str) -> int:
        """Start a broker's or a controller's `zkbroker server` (in its namespace in a lab network)."""
        log_path = Path(entry.config).parent / "server.log"
        env = {**os.environ, timeline.ENV_VAR: str(self.timeline_file)}
        env.pop(FAULTS_ENV_VAR, None)
        if entry.control is not None:
            env[CONTROL_ENV_VAR] = entry.control
            pending = self._faults_at_start(entry.id if node.startswith("broker:") else node)
            if pending.exists():  # fault points `lab fault` armed while the broker was down
                env[FAULTS_ENV_VAR] = pending.read_text()
                pending.unlink()
        if self.secure:
            env[JAAS_CONFIG_ENV] = str(self.dir / JAAS_FILE)
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                [*self.network.wrapper(node), sys.executable, "-m", "zkbroker", "server", entry.config],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=str(self.dir), env=env)
        self._record("process_started", node=node, pid=proc.pid)
        return proc.pid

    def _wait_usable(self, cluster: ClusterFile, broker_ids: list[int], timeout_s: float,
                     stale: dict[int, int] | None = None) -> None:
        """Wait until the given brokers are registered and some controller is elected. `stale`: broker id ->
        the czxid of a registration left by its previous process, which does not count."""
        deadline = time.monotonic() + timeout_s
        with _zk(cluster.zookeeper) as zk:
            while True:
                registered = {int(c) for c in _children(zk, paths.BROKER_IDS) if c.isdigit()}
                for broker_id, czxid in (stale or {}).items():
                    stat = zk.exists(paths.broker_path(broker_id))
                    if stat is not None and stat.czxid == czxid:
                        registered.discard(broker_id)
                missing = [b for b in broker_ids if b not in registered]
                controller = zk.exists(paths.CONTROLLER)
                if not missing and controller is not None:
                    return
                for broker_id in missing:
                    entry = cluster.broker(broker_id)
                    if entry.pid is not None and process_state(entry.pid) == "dead":
                        raise LabError(f"Broker {broker_id} exited during startup: "
                                       f"{_last_line(Path(entry.config).parent / 'server.log')}")
                if time.monotonic() > deadline:
                    what = f"brokers {missing} did not register" if missing else "no controller was elected"
                    raise LabError(f"The lab cluster did not become usable within {timeout_s:.0f} s: {what}")
                time.sleep(0.05)

    # ---- status --------------------------------------------------------------------------------------------

    def status(self) -> dict:
        """Each ZooKeeper server's role, the controller and epoch, each broker (process state, registration)
        and each partition's leader/ISR. Without a ZooKeeper quorum only what the processes tell is known:
        `zookeeper_reachable` is false and `registered` null."""
        cluster = self.load()
        if cluster.kraft:
            return self._kraft_status(cluster)
        out: dict = {"zookeeper": cluster.zookeeper, "zookeeper_pid": cluster.zookeeper_pid,
                     "zookeepers": self._record_zookeeper_roles(cluster), "zookeeper_reachable": True,
                     "network": self._network_status(),
                     "controller": None, "controller_epoch": None, "brokers": [], "topics": []}
        try:
            with _zk(cluster.zookeeper, timeout_s=5.0 if cluster.zookeepers else 10.0) as zk:
                self._zookeeper_status(zk, cluster, out)
        except LabError:
            if not cluster.zookeepers:
                raise
            out["zookeeper_reachable"] = False
            out["brokers"] = [_broker_row(entry, None) for entry in cluster.brokers]
        for entry, row in zip(cluster.brokers, out["brokers"]):
            row["faults"] = self._faults_in_force(entry)
            row["faults_at_start"] = [{k: v for k, v in r.items() if k != "command"}
                                      for r in self._pending_faults(entry.id)]
        return out

    def _kraft_status(self, cluster: ClusterFile) -> dict:
        """A KRaft lab's status: each controller's process and Raft state, the quorum they see, the brokers."""
        rows = [kraft_lab.controller_row(entry) for entry in cluster.controllers]
        for entry, row in zip(cluster.controllers, rows):
            row["faults"] = self._faults_in_force(entry)
            row["faults_at_start"] = [{k: v for k, v in r.items() if k != "command"}
                                      for r in self._pending_faults(controller_node(entry.id))]
        quorum = kraft_lab.quorum_status(rows)
        active = next((r["raft"] for r in rows if r["id"] == quorum["leader"] and r["raft"] is not None), None)
        believed = {b["id"]: b for b in (self._active_controller_view(cluster, quorum["leader"]) or {}).get(
            "brokers", [])} if active is not None else {}
        brokers = [kraft_lab.broker_row(entry, believed.get(entry.id)) for entry in cluster.brokers]
        for entry, row in zip(cluster.brokers, brokers):
            row["faults"] = self._faults_in_force(entry)
            row["faults_at_start"] = [{k: v for k, v in r.items() if k != "command"}
                                      for r in self._pending_faults(entry.id)]
        return {"mode": "kraft", "network": self._network_status(), "controller": quorum["leader"],
                "controller_epoch": quorum["epoch"], "quorum": quorum, "controllers": rows,
                "brokers": brokers, "topics": self._kraft_topics(cluster, brokers)}

    @staticmethod
    def _active_controller_view(cluster: ClusterFile, leader: int | None) -> dict | None:
        """The active controller's quorum_controller view (its brokers: registered, fenced, metadata offset)."""
        if leader is None:
            return None
        entry = next((c for c in cluster.controllers if c.id == leader), None)
        if entry is None or entry.control is None:
            return None
        try:
            with ControlClient(entry.control, 1.0) as client:
                return client.state().get("quorum_controller")
        except ControlError:
            return None

    @staticmethod
    def _kraft_topics(cluster: ClusterFile, rows: list[dict]) -> list[dict]:
        """Each partition's leader and ISR as an unfenced broker's metadata cache has them (the image of the
        committed metadata log: what the active controller decided, as far as that broker has applied it)."""
        for entry, row in sorted(zip(cluster.brokers, rows), key=lambda er: -(er[1]["metadata_offset"] or -1)):
            if not row["alive"]:
                continue
            state = kraft_lab.broker_state(entry.control)
            if state is None:
                continue
            topics: dict[str, list[dict]] = {}
            for p in state["metadata"]["partitions"]:
                topics.setdefault(p["topic"], []).append(
                    {"partition": p["partition"], "replicas": p["replicas"], "leader": p["leader"],
                     "leader_epoch": p["leader_epoch"], "isr": p["isr"]})
            return [{"topic": t, "partitions": parts} for t, parts in sorted(topics.items())]
        return []

    def _network_status(self) -> dict | None:
        state = self.network.load()
        if state is None:
            return None
        return {"subnet": state.subnet, "bridge": state.bridge, "clients": state.addresses[CLIENTS],
                "partitions": [p.describe() for p in state.partitions]}

    def _zookeeper_status(self, zk: KazooClient, cluster: ClusterFile, out: dict) -> None:
        registered = {int(c) for c in _children(zk, paths.BROKER_IDS) if c.isdigit()}
        data = _get(zk, paths.CONTROLLER)
        if data is not None:
            try:
                out["controller"] = ControllerRegistration.decode(data).broker_id
            except ZnodeFormatError:
                pass
        epoch = _get(zk, paths.CONTROLLER_EPOCH)
        if epoch is not None:
            out["controller_epoch"] = decode_controller_epoch(epoch)
        out["brokers"] = [_broker_row(entry, registered) for entry in cluster.brokers]
        for topic in _children(zk, paths.BROKER_TOPICS):
            out["topics"].append(_topic_status(zk, topic))


def _broker_row(entry: BrokerEntry, registered: set[int] | None) -> dict:
    """A broker's line of `status`; `registered` is None when ZooKeeper cannot be asked."""
    state = process_state(entry.pid) if entry.pid is not None else "dead"
    known = registered is not None
    return {"id": entry.id, "host": entry.host, "port": entry.port, "pid": entry.pid, "process": state,
            "registered": entry.id in registered if known else None,
            "alive": state == "running" and entry.id in registered if known else None}


def _check_network_privilege() -> None:
    from zkbroker.lab.network import check_privilege

    try:
        check_privilege()
    except NetworkError as e:
        raise LabError(str(e)) from None


_SIGNAL_EVENTS = {signal.SIGKILL: "process_killed", signal.SIGSTOP: "process_paused",
                  signal.SIGCONT: "process_resumed"}


def _send(what: str, pid: int | None, sig: signal.Signals) -> None:
    if pid is None or not signal_process(pid, sig):
        raise LabError(f"{what} is not running")
    if sig == signal.SIGKILL:
        wait_until(lambda: process_state(pid) == "dead", 5.0)


def _topic_status(zk: KazooClient, topic: str) -> dict:
    raw = _get(zk, paths.topic_path(topic))
    assignment = TopicAssignment.decode(raw, topic) if raw else TopicAssignment({})
    partitions = []
    for partition, replicas in sorted(assignment.partitions.items()):
        raw = _get(zk, paths.partition_state_path(topic, partition))
        state = LeaderIsrState.decode(raw) if raw else None
        partitions.append({"partition": partition, "replicas": list(replicas),
                           "leader": state.leader if state else None,
                           "leader_epoch": state.leader_epoch if state else None,
                           "isr": list(state.isr) if state else []})
    return {"topic": topic, "partitions": partitions}


class _zk:
    """A short-lived kazoo client for one lab command."""

    def __init__(self, connect: str, login: dict[str, str] | None = None, timeout_s: float = 10.0) -> None:
        # kazoo warns of every refused connection; a lab command reports the one outcome instead. With a
        # `login` (a --secure lab) what it creates carries Kafka's secure ACLs.
        self.client = AclKazooClient(login is not None, hosts=connect, timeout=10.0, sasl_options=login,
                                     logger=_QUIET_KAZOO)
        self.timeout_s = timeout_s

    def __enter__(self) -> KazooClient:
        try:
            self.client.start(timeout=self.timeout_s)
        except Exception as e:
            raise LabError(f"Cannot reach the lab's ZooKeeper at {self.client.hosts}: {e}") from None
        return self.client

    def __exit__(self, *exc) -> None:
        self.client.stop()
        self.client.close()


_QUIET_KAZOO = logging.getLogger("zkbroker.lab.kazoo")
_QUIET_KAZOO.addHandler(logging.NullHandler())
_QUIET_KAZOO.propagate = False


def _children(zk: KazooClient, path: str) -> list[str]:
    try:
        return sorted(zk.get_children(path))
    except NoNodeError:
        return []


def _get(zk: KazooClient, path: str) -> bytes | None:
    try:
        return zk.get(path)[0]
    except NoNodeError:
        return None


def _parse_overrides(config: list[str] | tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in config:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise LabError(f"--config takes key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _choose_ports(count: int, base_port: int | None) -> list[int]:
    """Ports from `base_port` on; None: 9092 on if free, else free ports (zkbroker.lab.ports); 0: free ports
    (labs started side by side, as the scenario runner's, would otherwise race for 9092 between the check
    and the brokers' bind)."""
    if base_port:
        ports = list(range(base_port, base_port + count))
        busy = [p for p in ports if not _port_free(p)]
        if busy:
            raise LabError(f"Port {busy[0]} on {HOST} is in use; choose another --base-port")
        return ports
    ports = list(range(DEFAULT_BASE_PORT, DEFAULT_BASE_PORT + count))
    if base_port is None and all(_port_free(p) for p in ports):
        return ports
    # 9092... is taken (a real Kafka, another lab): free ports chosen as every lab chooses them.
    return free_ports(count, HOST)


def _is_broker(argv: list[str]) -> bool:
    """`python -m zkbroker server DIR/broker-N/server.properties` (or DIR/controller-N/...), as _spawn runs it."""
    return "zkbroker" in argv and "server" in argv and argv[-1].endswith(os.sep + "server.properties")


def _is_zookeeper(argv: list[str]) -> bool:
    """ZooKeeper (a lone server or an ensemble member) run on `DIR/zookeeper[-N]/zoo.cfg`
    (zkbroker.lab.zookeeper.java_command)."""
    return any(arg.startswith("org.apache.zookeeper") for arg in argv) and argv[-1].endswith(os.sep + "zoo.cfg")


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except FileNotFoundError:
        return "no log written"
    return lines[-1] if lines else "no log written"
