"""The lab cluster: a real ZooKeeper and broker processes on 127.0.0.1, described by `DIR/cluster.json`.

`up` returns only when every broker is registered and a controller is elected. The processes are
detached (their own sessions, output to files under DIR), so they outlive the command that started them;
every later command finds them again through `cluster.json`, whose format is a contract (DESIGN §7):

    {"zookeeper": "127.0.0.1:2181/zkbroker-<id>", "zookeeper_pid": 123,
     "brokers": [{"id": 1, "host": "127.0.0.1", "port": 9092, "pid": 456,
                  "config": "DIR/broker-1/server.properties"}]}

`zookeeper_pid` is null when the lab did not start ZooKeeper itself (`--zookeeper HOST:PORT`).

`up --secure` starts its ZooKeeper with a SASL DIGEST-MD5 login for the brokers and the brokers with
`zookeeper.set.acl=true` (zkbroker.zk.security); the login is written to `DIR/jaas.conf`, which the lab's
brokers get through $ZKBROKER_JAAS_CONFIG and which tools need the same way to change anything.

A lab cannot leak processes: every command that starts, stops or signals processes (up, down, start, stop,
kill, pause, resume) holds an exclusive lock on `DIR/lab.lock` (fcntl), so `down` never runs while another
command is half-way through starting something; and `down` stops every process of the lab, found by the
configuration file inside DIR that its command line names (not only by the pids in cluster.json, which an
interrupted `up` may not have written).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
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

from zkbroker.lab.processes import process_state, processes_matching, signal_process, stop_process, wait_until
from zkbroker.zk import paths
from zkbroker.zk.security import JAAS_CONFIG_ENV, AclKazooClient, client_jaas
from zkbroker.zk.znodes import (
    ControllerRegistration,
    LeaderIsrState,
    TopicAssignment,
    ZnodeFormatError,
    decode_controller_epoch,
)

HOST = "127.0.0.1"
DEFAULT_BASE_PORT = 9092
LAB_TICK_TIME_MS = 500  # ZooKeeper allows sessions of 2-20 ticks by default; we raise the maximum too
LOCK_FILE = "lab.lock"
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


@dataclass
class ClusterFile:
    zookeeper: str
    zookeeper_pid: int | None
    brokers: list[BrokerEntry] = field(default_factory=list)

    def broker(self, broker_id: int) -> BrokerEntry:
        for entry in self.brokers:
            if entry.id == broker_id:
                return entry
        raise LabError(f"There is no broker {broker_id} in this lab (brokers: "
                       f"{', '.join(str(b.id) for b in self.brokers)})")


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
        return ClusterFile(raw["zookeeper"], raw.get("zookeeper_pid"),
                           [BrokerEntry(**b) for b in raw.get("brokers", [])])

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
        tmp.write_text(json.dumps(asdict(cluster), indent=2) + "\n")
        tmp.replace(self.cluster_file)

    # ---- up / down ----------------------------------------------------------------------------------------

    def up(self, brokers: int = 3, zookeeper: str = "auto", config: list[str] | tuple[str, ...] = (),
           base_port: int | None = None, timeout_s: float = 60.0, secure: bool = False) -> ClusterFile:
        if brokers < 1:
            raise LabError("A lab needs at least one broker (--brokers 1 or more)")
        if secure and zookeeper != "auto":
            raise LabError("--secure needs the lab's own ZooKeeper (--zookeeper auto), which it starts with the "
                           "brokers' SASL login")
        with self.locked(create=True):
            if self._lab_processes() or (self.cluster_file.exists() and self._anything_running(self.load())):
                raise LabError(f"A lab cluster is already running in {self.dir}; "
                               f"stop it with `zkbroker lab down --dir {self.dir}`")
            return self._up(brokers, zookeeper, config, base_port, timeout_s, secure)

    def _up(self, brokers: int, zookeeper: str, config: list[str] | tuple[str, ...], base_port: int | None,
            timeout_s: float, secure: bool) -> ClusterFile:
        overrides = _parse_overrides(config)
        (self.dir / JAAS_FILE).unlink(missing_ok=True)  # a login left by an earlier --secure lab in DIR
        login = self._write_login() if secure else None
        if secure:
            overrides.setdefault("zookeeper.set.acl", "true")
        zookeeper_pid = None
        if zookeeper == "auto":
            zk_hosts, zookeeper_pid = self._start_zookeeper(login)
        else:
            zk_hosts = zookeeper.split("/", 1)[0]
        chroot = f"/zkbroker-{secrets.token_hex(4)}"
        with _zk(zk_hosts, login) as zk:
            zk.ensure_path(chroot)  # with Kafka's secure ACL when secure, like every znode below it
        cluster = ClusterFile(zk_hosts + chroot, zookeeper_pid)
        ports = _choose_ports(brokers, base_port)
        for broker_id, port in zip(range(1, brokers + 1), ports):
            cluster.brokers.append(self._write_broker_config(cluster.zookeeper, broker_id, port, overrides))
        self.save(cluster)
        try:
            for entry in cluster.brokers:
                entry.pid = self._spawn_broker(entry)
            self.save(cluster)
            self._wait_usable(cluster, [b.id for b in cluster.brokers], timeout_s)
        except BaseException:
            self._stop_everything()
            raise
        return cluster

    def _write_login(self) -> dict[str, str]:
        """A fresh ZooKeeper login for a --secure lab, written to DIR/jaas.conf (readable by its owner only)."""
        password = secrets.token_hex(16)
        jaas = self.dir / JAAS_FILE
        jaas.touch(mode=0o600)
        jaas.write_text(client_jaas(LAB_ZK_USER, password))
        return {"mechanism": "DIGEST-MD5", "username": LAB_ZK_USER, "password": password}

    def _start_zookeeper(self, login: dict[str, str] | None) -> tuple[str, int]:
        from zkbroker.lab.zookeeper import ZooKeeperServer, find_zookeeper

        server = ZooKeeperServer(data_dir=str(self.dir / "zookeeper"), tick_time_ms=LAB_TICK_TIME_MS,
                                 install=find_zookeeper(),
                                 sasl_users={login["username"]: login["password"]} if login else None)
        server.start()
        server.detach()
        if server.container_id:  # a Docker ZooKeeper has no pid of ours; `down` stops it by container id
            (self.dir / "zookeeper").mkdir(parents=True, exist_ok=True)
            (self.dir / "zookeeper" / "container-id").write_text(server.container_id)
        return server.connect_string, server.pid

    def down(self) -> None:
        """Stop every broker (paused ones are resumed first so they can exit) and our ZooKeeper."""
        with self.locked():
            if not self.cluster_file.exists() and not self._lab_processes():
                self.load()  # raises the usual "No lab cluster in DIR"
            self._stop_everything()

    def _stop_everything(self) -> None:
        """Brokers first (those cluster.json names, in its order, then any other), then ZooKeeper; each one
        found by its command line as well as by cluster.json, so an interrupted `up` leaves nothing behind."""
        from zkbroker.lab.zookeeper import stop_container, stop_pid

        cluster = self.load() if self.cluster_file.exists() else ClusterFile("", None)
        lab_brokers = self._lab_processes(_is_broker)
        known = [e.pid for e in cluster.brokers if e.pid in lab_brokers]
        for pid in known + [pid for pid in lab_brokers if pid not in known]:
            stop_process(pid, timeout_s=10.0)
        for pid in {cluster.zookeeper_pid, *self._lab_processes(_is_zookeeper)} - {None}:
            stop_pid(pid, timeout=10.0)
        container = self.dir / "zookeeper" / "container-id"
        if container.exists():
            stop_container(container.read_text().strip(), timeout=10.0)
            container.unlink()
        for pid in self._lab_processes():  # whatever would not stop
            signal_process(pid, signal.SIGKILL)
        if not wait_until(lambda: not self._lab_processes(), 5.0):
            raise LabError(f"Processes of the lab in {self.dir} are still running: {self._lab_processes()}")
        self.cluster_file.unlink(missing_ok=True)

    def _lab_processes(self, kind: Callable[[list[str]], bool] | None = None) -> list[int]:
        """The brokers and ZooKeeper (or only those of `kind`) run on a configuration file inside DIR."""
        inside = str(self.dir) + os.sep
        kinds = (_is_broker, _is_zookeeper) if kind is None else (kind,)

        def of_this_lab(argv: list[str]) -> bool:
            return argv[-1].startswith(inside) and any(k(argv) for k in kinds)
        return processes_matching(of_this_lab)

    def _anything_running(self, cluster: ClusterFile) -> bool:
        pids = [b.pid for b in cluster.brokers] + [cluster.zookeeper_pid]
        return any(pid is not None and process_state(pid) != "dead" for pid in pids)

    # ---- one broker ----------------------------------------------------------------------------------------

    def kill(self, broker_id: int) -> BrokerEntry:
        return self._signal(broker_id, signal.SIGKILL)

    def pause(self, broker_id: int) -> BrokerEntry:
        return self._signal(broker_id, signal.SIGSTOP)

    def resume(self, broker_id: int) -> BrokerEntry:
        return self._signal(broker_id, signal.SIGCONT)

    def _signal(self, broker_id: int, sig: signal.Signals) -> BrokerEntry:
        with self.locked():
            entry = self.load().broker(broker_id)
            if entry.pid is None or not signal_process(entry.pid, sig):
                raise LabError(f"Broker {broker_id} is not running")
            if sig == signal.SIGKILL:
                wait_until(lambda: process_state(entry.pid) == "dead", 5.0)
        return entry

    def stop(self, broker_id: int, timeout_s: float = 30.0) -> BrokerEntry:
        """Stop one broker with SIGTERM: a clean (and, with the controller issue, controlled) shutdown."""
        with self.locked():
            entry = self.load().broker(broker_id)
            if entry.pid is None or process_state(entry.pid) == "dead":
                raise LabError(f"Broker {broker_id} is not running")
            stop_process(entry.pid, timeout_s=timeout_s)
        return entry

    def start(self, broker_id: int, timeout_s: float = 60.0) -> BrokerEntry:
        """Start a stopped or killed broker again from its server.properties; wait until it registers."""
        with self.locked():
            cluster = self.load()
            entry = cluster.broker(broker_id)
            if entry.pid is not None and process_state(entry.pid) != "dead":
                raise LabError(f"Broker {broker_id} is already running (pid {entry.pid})")
            entry.pid = self._spawn_broker(entry)
            self.save(cluster)
            self._wait_usable(cluster, [broker_id], timeout_s)
        return entry

    def _write_broker_config(self, zk_connect: str, broker_id: int, port: int,
                             overrides: dict[str, str]) -> BrokerEntry:
        broker_dir = self.dir / f"broker-{broker_id}"
        broker_dir.mkdir(parents=True, exist_ok=True)
        props = {
            "broker.id": str(broker_id),
            "port": str(port),
            "host.name": HOST,
            "advertised.host.name": HOST,
            "log.dirs": str(broker_dir / "data"),
            "zookeeper.connect": zk_connect,
        }
        props.update(overrides)
        config = broker_dir / "server.properties"
        config.write_text("# written by `zkbroker lab up`\n" + "".join(f"{k}={v}\n" for k, v in props.items()))
        return BrokerEntry(broker_id, HOST, int(props["port"]), None, str(config))

    def _spawn_broker(self, entry: BrokerEntry) -> int:
        log_path = Path(entry.config).parent / "server.log"
        env = os.environ.copy()
        if self.secure:
            env[JAAS_CONFIG_ENV] = str(self.dir / JAAS_FILE)
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "zkbroker", "server", entry.config],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=str(self.dir), env=env)
        return proc.pid

    def _wait_usable(self, cluster: ClusterFile, broker_ids: list[int], timeout_s: float) -> None:
        """Wait until the given brokers are registered and some controller is elected."""
        deadline = time.monotonic() + timeout_s
        with _zk(cluster.zookeeper) as zk:
            while True:
                registered = {int(c) for c in _children(zk, paths.BROKER_IDS) if c.isdigit()}
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
        """Controller and epoch, each broker (process state, registration) and each partition's leader/ISR."""
        cluster = self.load()
        out: dict = {"zookeeper": cluster.zookeeper, "zookeeper_pid": cluster.zookeeper_pid,
                     "controller": None, "controller_epoch": None, "brokers": [], "topics": []}
        with _zk(cluster.zookeeper) as zk:
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
            for entry in cluster.brokers:
                state = process_state(entry.pid) if entry.pid is not None else "dead"
                out["brokers"].append({"id": entry.id, "host": entry.host, "port": entry.port, "pid": entry.pid,
                                       "process": state, "registered": entry.id in registered,
                                       "alive": state == "running" and entry.id in registered})
            for topic in _children(zk, paths.BROKER_TOPICS):
                out["topics"].append(_topic_status(zk, topic))
        return out


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

    def __init__(self, connect: str, login: dict[str, str] | None = None) -> None:
        self.client = AclKazooClient(login is not None, hosts=connect, timeout=10.0, sasl_options=login)

    def __enter__(self) -> KazooClient:
        try:
            self.client.start(timeout=10.0)
        except Exception as e:
            raise LabError(f"Cannot reach the lab's ZooKeeper at {self.client.hosts}: {e}") from None
        return self.client

    def __exit__(self, *exc) -> None:
        self.client.stop()
        self.client.close()


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
    if base_port is not None:
        ports = list(range(base_port, base_port + count))
        busy = [p for p in ports if not _port_free(p)]
        if busy:
            raise LabError(f"Port {busy[0]} on {HOST} is in use; choose another --base-port")
        return ports
    ports = list(range(DEFAULT_BASE_PORT, DEFAULT_BASE_PORT + count))
    if all(_port_free(p) for p in ports):
        return ports
    # 9092... is taken (a real Kafka, another lab): let the kernel pick free ports instead.
    chosen: list[int] = []
    while len(chosen) < count:
        with socket.socket() as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port not in chosen:
            chosen.append(port)
    return chosen


def _is_broker(argv: list[str]) -> bool:
    """`python -m zkbroker server DIR/broker-N/server.properties`, as _spawn_broker runs it."""
    return "zkbroker" in argv and "server" in argv and argv[-1].endswith(os.sep + "server.properties")


def _is_zookeeper(argv: list[str]) -> bool:
    """ZooKeeperServerMain run on `DIR/zookeeper/zoo.cfg` (zkbroker.lab.zookeeper.java_command)."""
    return any(arg.startswith("org.apache.zookeeper") for arg in argv) and argv[-1].endswith(os.sep + "zoo.cfg")


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except FileNotFoundError:
        return "no log written"
    return lines[-1] if lines else "no log written"
