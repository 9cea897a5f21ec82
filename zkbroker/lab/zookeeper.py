"""The ZooKeeper launcher: finds an Apache ZooKeeper and runs a standalone server or an ensemble member.

Kafka 0.8.2 keeps all cluster metadata in ZooKeeper, so the lab, the demo and the integration tests run a
real ZooKeeper server, never a fake. It comes from, in this order:

1. ``ZOOKEEPER_HOME``: an Apache ZooKeeper 3.x install (``lib/*.jar`` and ``conf/``, or the jar directly in it);
2. Debian's ``zookeeper`` package (``/usr/share/java/zookeeper.jar``), installed with apt-get when allowed;
3. the ``zookeeper:3.8`` Docker image through testcontainers, when a Docker daemon answers.

Command line (the Makefile runs ``ensure`` before ``make test`` and ``make demo``)::

    python -m zkbroker.lab.zookeeper ensure [--no-install]
    python -m zkbroker.lab.zookeeper run [--port P] [--data-dir D] [--tick-time MS]
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zkbroker.lab.debian import AptGetFailed, apt_get_install
from zkbroker.lab.ports import free_port
from zkbroker.zk.security import SASL_AUTH_PROVIDER, server_jaas

DEBIAN_JAR = Path("/usr/share/java/zookeeper.jar")
DEBIAN_CONF = Path("/etc/zookeeper/conf")
DOCKER_IMAGE = "zookeeper:3.8"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"  # an ensemble member
LOG_FILE = "zookeeper.log"  # ZooKeeper's own log, in its data dir
OUT_FILE = "zookeeper.out"  # the JVM's stdout and stderr, in its data dir
BUSY_PORT_GRACE_S = 5.0  # how long start() keeps trying a given port that another process holds

# Measured on Debian 12 / Java 17 / ZooKeeper 3.8.0, 2 cores: ZooKeeperServer.start() takes 0.27 s (median)
# with these flags against 0.33 s with the JVM's defaults. `zookeeper.jmx.log4j.disable` skips registering
# an MBean per log4j logger; C1-only compilation and the serial GC start faster and are plenty for a metadata
# store; the small heap keeps a lab of several JVMs light; -UsePerfData leaves no hsperfdata file in /tmp.
JVM_FLAGS = (
    "-Xshare:auto",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xms32m",
    "-Xmx512m",
    "-XX:-UsePerfData",
    "-Dzookeeper.jmx.log4j.disable=true",
)

_JAR_NAME = re.compile(r"^zookeeper-(\d+\.\d+\.\d+(?:-alpha|-beta)?)\.jar$")  # not -tests, -jute...
_DOCKER_SENTENCE = f"start a Docker daemon so testcontainers can run the {DOCKER_IMAGE} image"


class ZooKeeperNotFound(Exception):
    """No usable ZooKeeper; the message is one sentence saying how to get one."""


class ZooKeeperStartError(RuntimeError):
    """The server did not come up; the message ends with the tail of ZooKeeper's log."""


@dataclass(frozen=True)
class ZooKeeperInstall:
    """Where a ZooKeeper comes from: ``kind`` is ``home`` (ZOOKEEPER_HOME), ``debian`` or ``docker``."""

    kind: str
    version: str | None
    location: str  # the zookeeper jar, or the Docker image
    classpath: tuple[str, ...] = ()
    java: str | None = None

    def describe(self) -> str:
        version = self.version or "(unknown version)"
        if self.kind == "debian":
            return f"ZooKeeper: Debian package zookeeper {version} ({self.location})"
        if self.kind == "home":
            return f"ZooKeeper: Apache ZooKeeper {version} from ZOOKEEPER_HOME ({self.location})"
        return f"ZooKeeper: Docker image {self.location} through testcontainers"


# -- discovery ------------------------------------------------------------------------------------------


def find_zookeeper(
    environ: Mapping[str, str] = os.environ,
    install: bool = False,
    *,
    debian_jar: Path = DEBIAN_JAR,
    docker_ping: Callable[[], bool] | None = None,
    apt_install: Callable[[], bool] | None = None,
) -> ZooKeeperInstall:
    """Find a ZooKeeper: ZOOKEEPER_HOME, then the Debian package (apt-installed when ``install`` is true and
    we may), then Docker; raise :class:`ZooKeeperNotFound` otherwise.

    ``debian_jar``, ``docker_ping`` and ``apt_install`` exist so that tests can stand in for the machine.
    """
    docker_ping = docker_ping or (lambda: docker_daemon_answers(environ))
    apt_install = apt_install or apt_install_zookeeper
    java = find_java(environ)
    found: ZooKeeperInstall | None = None

    home = environ.get("ZOOKEEPER_HOME")
    if home:
        found = _home_install(Path(home), java)
        if found is None:
            # An explicit setting that points nowhere is a mistake to report, not a reason to look elsewhere.
            raise ZooKeeperNotFound(
                f"ZOOKEEPER_HOME={home} holds no zookeeper jar (neither zookeeper-*.jar in it nor in its lib/): "
                "point it at an Apache ZooKeeper 3.x install, or unset it to use the Debian package or Docker."
            )
    else:
        if not debian_jar.is_file() and install:
            apt_install()
        if debian_jar.is_file():
            found = _debian_install(debian_jar, java)

    if found is not None and java is not None:
        return found
    if docker_ping():
        return ZooKeeperInstall("docker", DOCKER_IMAGE.partition(":")[2], DOCKER_IMAGE)
    if found is not None:
        raise ZooKeeperNotFound(
            f"Found ZooKeeper ({found.location}) but no `java` on PATH or in JAVA_HOME: "
            f"install a Java runtime (`apt-get install default-jre-headless` on Debian/Ubuntu), or {_DOCKER_SENTENCE}."
        )
    raise ZooKeeperNotFound(
        "No ZooKeeper found: set ZOOKEEPER_HOME to an Apache ZooKeeper 3.x install, "
        f"run `apt-get install zookeeper` on Debian/Ubuntu, or {_DOCKER_SENTENCE}."
    )


def find_java(environ: Mapping[str, str] = os.environ) -> str | None:
    """The ``java`` launcher: ``$JAVA_HOME/bin/java`` if executable, else the first on PATH."""
    java_home = environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home, "bin", "java"), os.X_OK):
        return str(Path(java_home, "bin", "java"))
    return shutil.which("java", path=environ.get("PATH", os.defpath))


def _home_install(home: Path, java: str | None) -> ZooKeeperInstall | None:
    # 3.5+ tarballs put zookeeper-X.Y.Z.jar in lib/; 3.4 tarballs put it in the top directory.
    jars = sorted(home.glob("*.jar")) + sorted(home.glob("lib/*.jar"))
    server_jar = next((jar for jar in jars if _JAR_NAME.match(jar.name) or jar.name == "zookeeper.jar"), None)
    if server_jar is None:
        return None
    conf = [str(home / "conf")] if (home / "conf").is_dir() else []
    return ZooKeeperInstall(
        "home", _jar_version(server_jar), str(server_jar), tuple(conf + [str(jar) for jar in jars]), java
    )


def _debian_install(jar: Path, java: str | None) -> ZooKeeperInstall:
    # The jar's manifest names its dependencies but no SLF4J binding, so without these two ZooKeeper
    # falls back to SLF4J's no-op logger and logs nothing at all.
    logging_jars = [jar.parent / "slf4j-log4j12.jar", jar.parent / "log4j-1.2.jar"]
    classpath = [str(DEBIAN_CONF)] if DEBIAN_CONF.is_dir() else []
    classpath += [str(jar)] + [str(extra) for extra in logging_jars if extra.is_file()]
    return ZooKeeperInstall("debian", _jar_version(jar), str(jar), tuple(classpath), java)


def _jar_version(jar: Path) -> str | None:
    """The version Maven recorded inside the jar, else the one in its file name."""
    try:
        with zipfile.ZipFile(jar) as archive:
            pom = archive.read("META-INF/maven/org.apache.zookeeper/zookeeper/pom.properties").decode()
    except (OSError, KeyError, zipfile.BadZipFile):
        pom = ""
    match = re.search(r"^version=(\S+)", pom, re.MULTILINE) or _JAR_NAME.match(jar.name)
    return match.group(1) if match else None


def docker_daemon_answers(environ: Mapping[str, str] = os.environ, timeout: float = 2.0) -> bool:
    """Whether a Docker daemon answers a ping within ``timeout`` seconds (never hangs)."""
    try:
        import docker

        client = docker.from_env(timeout=timeout, environment=dict(environ))
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no SDK, no socket, refused, timed out: all mean "no Docker here"
        return False


def apt_install_zookeeper() -> bool:
    """Install Debian's ``zookeeper`` package if we may (root, Debian/Ubuntu, apt-get); False if we may not."""
    try:
        return apt_get_install(["zookeeper"])
    except AptGetFailed as error:
        raise ZooKeeperNotFound(
            f"{error}: install ZooKeeper yourself, set ZOOKEEPER_HOME, or {_DOCKER_SENTENCE}."
        ) from None


# -- configuration (pure) -------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuorumPeer:
    """One member of an ensemble as every member's zoo.cfg names it: ``server.ID=HOST:QUORUM:ELECTION``."""

    id: int  # its myid, 1..N
    host: str
    client_port: int
    quorum_port: int  # followers connect to the leader here
    election_port: int  # leader election

    def cfg_line(self) -> str:
        return f"server.{self.id}={self.host}:{self.quorum_port}:{self.election_port}"


_PEER_LINE = re.compile(r"^server\.(\d+)=([^:\s]+):(\d+):(\d+)$", re.MULTILINE)


def read_peers(cfg: str, client_ports: Mapping[int, int]) -> tuple[QuorumPeer, ...]:
    """The ensemble a zoo.cfg describes (empty for a standalone server); zoo.cfg names each member's quorum
    and election ports, ``client_ports`` (by myid) the client ports."""
    return tuple(QuorumPeer(int(i), host, client_ports[int(i)], int(q), int(e))
                 for i, host, q, e in _PEER_LINE.findall(cfg))


def zoo_cfg(port: int, data_dir: Path, tick_time_ms: int = 2000, max_session_timeout_ms: int = 60000,
            host: str = "127.0.0.1", peers: tuple[QuorumPeer, ...] = ()) -> str:
    """The zoo.cfg of a lab server listening on ``host``: standalone, or a member of the ensemble ``peers``."""
    # A follower has initLimit ticks to sync with a new leader and syncLimit ticks to answer it afterwards.
    ensemble = ["initLimit=20", "syncLimit=10", *(peer.cfg_line() for peer in peers)] if peers else []
    return "\n".join(
        [
            f"tickTime={tick_time_ms}",
            f"dataDir={data_dir}",
            f"clientPort={port}",
            f"clientPortAddress={host}",
            # ZooKeeper clamps a client's requested session timeout into [min, max]: min is its own
            # default (2 ticks), max must let brokers keep their 6-30 s zookeeper.session.timeout.ms.
            f"minSessionTimeout={2 * tick_time_ms}",
            f"maxSessionTimeout={max_session_timeout_ms}",
            "maxClientCnxns=0",  # many brokers and clients from one IP; 0 means no limit
            "admin.enableServer=false",  # the Jetty admin server needs another port and more jars
            "4lw.commands.whitelist=*",  # `ruok`/`conf`/`srvr`/`mntr` for readiness checks and lab status
            *ensemble,
            "",
        ]
    )


def _log4j_properties(log_file: Path) -> str:
    # For log4j 1.2 (Debian's package, ZooKeeper 3.4-3.7 tarballs).
    return "\n".join(
        [
            "log4j.rootLogger=INFO, FILE",
            "log4j.appender.FILE=org.apache.log4j.FileAppender",
            f"log4j.appender.FILE.File={log_file}",
            "log4j.appender.FILE.Append=true",
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout",
            "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n",
            "",
        ]
    )


def _logback_xml(log_file: Path) -> str:
    # For logback (ZooKeeper 3.8+ tarballs).
    return (
        "<configuration>\n"
        '  <appender name="FILE" class="ch.qos.logback.core.FileAppender">\n'
        f"    <file>{log_file}</file>\n"
        "    <append>true</append>\n"
        "    <encoder><pattern>%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n</pattern></encoder>\n"
        "  </appender>\n"
        '  <root level="INFO"><appender-ref ref="FILE"/></root>\n'
        "</configuration>\n"
    )


def java_command(install: ZooKeeperInstall, data_dir: Path, ensemble: bool = False) -> list[str]:
    """The command line that runs ``data_dir/zoo.cfg``, logging to ``data_dir/zookeeper.log``."""
    return [
        install.java or "java",
        *JVM_FLAGS,
        # Both logging back ends are named: whichever the install carries reads its file, the other is ignored.
        f"-Dlog4j.configuration=file:{data_dir / 'log4j.properties'}",
        f"-Dlogback.configurationFile={data_dir / 'logback.xml'}",
        "-cp",
        os.pathsep.join(install.classpath),
        QUORUM_MAIN_CLASS if ensemble else MAIN_CLASS,
        str(data_dir / "zoo.cfg"),
    ]


def sasl_jvm_flags(data_dir: Path, users: Mapping[str, str]) -> list[str]:
    """JVM flags that make ZooKeeper authenticate SASL DIGEST-MD5 clients against ``users``, whose JAAS
    Server section is written to ``data_dir/jaas.conf`` (ZooKeeper's SASL guide: the JAAS file through
    java.security.auth.login.config, and the SASL provider among zookeeper.authProvider.*)."""
    jaas = data_dir / "jaas.conf"
    jaas.write_text(server_jaas(users))
    jaas.chmod(0o600)
    return [f"-Djava.security.auth.login.config={jaas}", f"-Dzookeeper.authProvider.sasl={SASL_AUTH_PROVIDER}"]


# -- the server -----------------------------------------------------------------------------------------


def four_letter_word(word: str, port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> str:
    """Send a four-letter word (``ruok``, ``conf``, ``srvr``, ``mntr``...) and return the whole answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def server_role(port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> str:
    """What ``srvr`` says the server is: ``leader``, ``follower``, ``standalone`` or ``observer``;
    ``looking`` while it answers but serves nothing (no quorum yet); ``down`` when it does not answer."""
    try:
        answer = four_letter_word("srvr", port, host, timeout)
    except OSError:
        return "down"
    return parse_srvr_mode(answer)


def parse_srvr_mode(answer: str) -> str:
    match = re.search(r"^Mode: (\w+)", answer, re.MULTILINE)
    if match:
        return match.group(1)
    return "looking" if "not currently serving" in answer else "down"


class ZooKeeperServer:
    """A ZooKeeper server with its own data dir: a local JVM, or a container when ``install`` is the Docker
    image (then ``pid`` is None and ``container_id`` names it). Standalone on ``host`` (127.0.0.1 by
    default); with ``peers`` (which include itself, as ``myid``) a member of an ensemble, listening on its
    peer's host and client port. ``wrapper`` prefixes the JVM's command line (``ip netns exec NS`` runs it in a network
    namespace; the JVM keeps its own pid, since ``ip netns exec`` execs it).

    It is stopped (and a temporary data dir removed) when the interpreter exits, unless :meth:`detach` was
    called. Usable as a context manager::

        with ZooKeeperServer(tick_time_ms=200) as zk:
            client = KazooClient(zk.connect_string)
    """

    def __init__(
        self,
        install: ZooKeeperInstall | None = None,
        *,
        port: int | None = None,
        data_dir: str | Path | None = None,
        tick_time_ms: int = 2000,
        max_session_timeout_ms: int = 60000,
        host: str = "127.0.0.1",
        myid: int | None = None,
        peers: tuple[QuorumPeer, ...] = (),
        wrapper: tuple[str, ...] = (),
        sasl_users: Mapping[str, str] | None = None,
    ) -> None:
        """``sasl_users`` (user -> password): the SASL DIGEST-MD5 logins the server accepts, for clusters with
        Kafka's ``zookeeper.set.acl`` (see zkbroker.zk.security); a local JVM only."""
        self.install = install or find_zookeeper()
        if sasl_users and self.install.kind == "docker":
            raise ZooKeeperStartError("SASL logins need a local ZooKeeper (a JVM), not the Docker image")
        self.sasl_users = dict(sasl_users or {})
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.myid = myid
        self.peers = peers
        self.wrapper = wrapper
        me = next((peer for peer in peers if peer.id == myid), None)
        if peers and me is None:
            raise ValueError(f"myid {myid} is not one of the ensemble's servers {[p.id for p in peers]}")
        if peers and self.install.kind == "docker":
            raise ZooKeeperNotFound("An ensemble needs a local ZooKeeper (the Debian package or ZOOKEEPER_HOME), "
                                    "not the Docker image.")
        self.host = me.host if me else host
        if me is not None:
            port = me.client_port
        self._port = port
        self._port_fixed = port is not None
        self._temp_data_dir = data_dir is None and self.install.kind != "docker"
        if self._temp_data_dir:
            data_dir = tempfile.mkdtemp(prefix="zkbroker-zookeeper-")
        self._data_dir = Path(data_dir).resolve() if data_dir is not None else None
        runner = _DockerContainer if self.install.kind == "docker" else _JavaProcess
        self._runner = runner(self)
        self._detached = False
        self._at_exit_registered = False

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("ZooKeeper has not been started")
        return self._port

    @property
    def connect_string(self) -> str:
        return f"{self._runner.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The JVM's process id (None for a Docker container or before start)."""
        return self._runner.pid

    @property
    def container_id(self) -> str | None:
        """The Docker container's id (None when ZooKeeper runs as a local JVM)."""
        return self._runner.container_id

    @property
    def data_dir(self) -> Path | None:
        """Snapshots, transaction logs, zoo.cfg and zookeeper.log (None: inside a Docker container)."""
        return self._data_dir

    def log_tail(self, lines: int = 20) -> str:
        """The last lines ZooKeeper wrote (its log and its stdout) since it was last launched."""
        return self._runner.log_tail(lines)

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        """Start the server and return once it serves requests; :class:`ZooKeeperStartError` otherwise."""
        if self._port is not None and self.running:
            return self
        if not self._at_exit_registered:
            atexit.register(self.close)
            self._at_exit_registered = True
        deadline = None
        busy_until = None  # a given port found taken: how long it may still be released
        while True:
            if not self._port_fixed or self._port is None:
                self._port = free_port()
            self._runner.launch(self.port)
            # Counted from the first launch, so pulling a Docker image does not eat the wait.
            deadline = deadline or time.monotonic() + timeout
            if self._wait_until_serving(deadline):
                # The port is ours from now on: restart() must come back where the clients look for it.
                self._port_fixed = True
                return self
            # Lost the race for the port (another process bound it between free_port() and the JVM's bind):
            # try another port. A given port is tried again for a few seconds only, which covers a previous
            # owner (a container, our own stopped JVM) still releasing it, not a squatter that stays.
            if self._port_fixed and busy_until is None:
                busy_until = time.monotonic() + BUSY_PORT_GRACE_S
            if time.monotonic() >= min(deadline, busy_until or deadline):
                self._runner.terminate(5.0)
                raise ZooKeeperStartError(
                    f"ZooKeeper could not bind {self.host}:{self.port}; end of its log:\n{self._runner.log_tail()}"
                )
            time.sleep(0.1 if self._port_fixed else 0)

    def launch(self) -> None:
        """Start the process without waiting for it to serve: an ensemble member serves only once a
        majority of its peers runs, so :func:`start_ensemble` launches them all before waiting."""
        if not self._port_fixed:
            raise RuntimeError("launch() needs a fixed port (an ensemble member's); use start()")
        if not self._at_exit_registered:
            atexit.register(self.close)
            self._at_exit_registered = True
        self._runner.launch(self.port)

    def wait_serving(self, timeout: float = 30.0) -> ZooKeeperServer:
        """Wait until a launched server serves requests; :class:`ZooKeeperStartError` otherwise."""
        if not self._wait_until_serving(time.monotonic() + timeout):
            raise ZooKeeperStartError(f"ZooKeeper could not bind {self.host}:{self.port}; "
                                      f"end of its log:\n{self._runner.log_tail()}")
        return self

    def _wait_until_serving(self, deadline: float) -> bool:
        while True:
            if self._runner.serving(self.port):
                return True
            if self._runner.exited():
                if self._runner.bind_failed():
                    return False
                raise ZooKeeperStartError(f"ZooKeeper exited during start; end of its log:\n{self._runner.log_tail()}")
            if time.monotonic() >= deadline:
                self._runner.terminate(5.0)
                # On a loaded machine the JVM may report the failed bind just as time runs out: say so.
                what = (f"could not bind {self.host}:{self.port}" if self._runner.bind_failed()
                        else f"did not answer on {self.connect_string} in time")
                raise ZooKeeperStartError(f"ZooKeeper {what}; end of its log:\n{self._runner.log_tail()}")
            time.sleep(0.02)

    @property
    def running(self) -> bool:
        """Whether the JVM or the container is still running (serving or not)."""
        return not self._runner.exited()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``timeout`` seconds. The data dir stays."""
        self._runner.terminate(timeout)

    def restart(self, timeout: float = 30.0) -> ZooKeeperServer:
        """Stop and start again on the same port with the same data dir.

        Keeping the data dir is the point: the snapshot and transaction log hold the znodes *and the open
        sessions*, so a client that reconnects within its session timeout finds its session and its
        ephemeral nodes still there, as a broker does when ZooKeeper comes back quickly.
        """
        self.stop()
        return self.start(timeout)

    def detach(self) -> None:
        """Let the server outlive this interpreter (``zkbroker lab up``); stop it later with :func:`stop_pid`."""
        self._detached = True
        if self._at_exit_registered:
            atexit.unregister(self.close)
            self._at_exit_registered = False

    def close(self) -> None:
        """Stop the server and remove the temporary data dir this object created (unless detached)."""
        if self._detached:
            return
        self._runner.terminate(10.0)
        self._runner.close()
        if self._temp_data_dir and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
        if self._at_exit_registered:
            atexit.unregister(self.close)
            self._at_exit_registered = False

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _JavaProcess:
    """Runs ZooKeeperServerMain (QuorumPeerMain in an ensemble) in a JVM of its own session, logging into
    the data dir."""

    container_id = None

    def __init__(self, server: ZooKeeperServer) -> None:
        self._server = server
        self.host = server.host
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = (0, 0)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def launch(self, port: int) -> None:
        server, data_dir = self._server, self._server.data_dir
        assert data_dir is not None
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "zoo.cfg").write_text(zoo_cfg(port, data_dir, server.tick_time_ms, server.max_session_timeout_ms,
                                                  server.host, server.peers))
        if server.peers:
            (data_dir / "myid").write_text(f"{server.myid}\n")
        (data_dir / "log4j.properties").write_text(_log4j_properties(data_dir / LOG_FILE))
        (data_dir / "logback.xml").write_text(_logback_xml(data_dir / LOG_FILE))
        self._log_offset = _size(data_dir / LOG_FILE), _size(data_dir / OUT_FILE)
        command = java_command(server.install, data_dir, ensemble=bool(server.peers))
        if server.sasl_users:
            command[1:1] = sasl_jvm_flags(data_dir, server.sasl_users)
        with open(data_dir / OUT_FILE, "ab") as out:
            # A session of its own keeps the terminal's Ctrl-C away from it (we stop it ourselves) and lets
            # a detached server survive the command that started it.
            self._proc = subprocess.Popen(
                [*server.wrapper, *command],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=data_dir,
                start_new_session=True,
            )

    def serving(self, port: int) -> bool:
        # `conf` (not just `ruok`) proves the answer comes from *our* server: it names our data dir.
        try:
            answer = four_letter_word("conf", port, self.host, timeout=0.5)
            return f"dataDir={self._server.data_dir}/version-2\n" in answer
        except OSError:
            return False

    def exited(self) -> bool:
        return self._proc is None or self._proc.poll() is not None

    def bind_failed(self) -> bool:
        return "Address already in use" in self._new_output()

    def terminate(self, timeout: float) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(10.0)

    def close(self) -> None:
        pass

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self._new_output().splitlines()[-lines:]) or "(ZooKeeper wrote nothing)"

    def _new_output(self) -> str:
        """What ZooKeeper wrote to its log and stdout since the last launch."""
        data_dir = self._server.data_dir
        assert data_dir is not None
        texts = []
        for name, offset in zip((LOG_FILE, OUT_FILE), self._log_offset):
            try:
                with open(data_dir / name, "rb") as file:
                    file.seek(offset)
                    texts.append(file.read().decode(errors="replace"))
            except OSError:
                pass
        return "\n".join(text.strip() for text in texts if text.strip())


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _DockerContainer:
    """Runs the ``zookeeper`` image through testcontainers, its client port bound to a host port we pick."""

    pid = None

    def __init__(self, server: ZooKeeperServer) -> None:
        self._server = server
        self._container = None
        self._start_error = ""
        self.host = "127.0.0.1"

    @property
    def container_id(self) -> str | None:
        return self._container.get_container_id() if self._container is not None else None

    def launch(self, port: int) -> None:
        if self._container is not None:
            # A restart: same container, so the same /data and /datalog, and the same host port binding.
            self._start(self._container.get_wrapped_container().start)
            return
        from testcontainers.core.config import testcontainers_config
        from testcontainers.core.container import DockerContainer

        # The Ryuk reaper removes a session's containers when the session's process ends, which a detached
        # lab ZooKeeper must survive; we stop the container ourselves at exit, as we stop a JVM.
        testcontainers_config.ryuk_disabled = True
        server = self._server
        extra = f"minSessionTimeout={2 * server.tick_time_ms} maxSessionTimeout={server.max_session_timeout_ms}"
        container = (
            DockerContainer(DOCKER_IMAGE)
            .with_bind_ports(2181, port)
            .with_env("ZOO_TICK_TIME", str(server.tick_time_ms))
            .with_env("ZOO_MAX_CLIENT_CNXNS", "0")
            .with_env("ZOO_ADMINSERVER_ENABLED", "false")
            .with_env("ZOO_4LW_COMMANDS_WHITELIST", "*")
            .with_env("ZOO_CFG_EXTRA", extra)
        )
        if server.data_dir is not None:
            server.data_dir.mkdir(parents=True, exist_ok=True)
            container = container.with_volume_mapping(str(server.data_dir), "/data", "rw").with_env(
                "ZOO_DATA_LOG_DIR", "/data"
            )
        if self._start(container.start):
            self._container = container
            self.host = container.get_container_host_ip()
        else:
            self._remove(container)  # created but not started: do not leave it behind

    def _start(self, start: Callable[[], object]) -> bool:
        try:
            start()
        except Exception as error:  # the docker SDK's APIError, e.g. "port is already allocated"
            self._start_error = str(error)
            return False
        self._start_error = ""
        return True

    @staticmethod
    def _remove(container: Any) -> None:
        try:
            container.stop()  # testcontainers' stop() removes the container
        except Exception:
            pass

    def serving(self, port: int) -> bool:
        try:
            return self._container is not None and four_letter_word("ruok", port, self.host, 0.5) == "imok"
        except OSError:
            return False

    def exited(self) -> bool:
        if self._container is None:
            return True
        self._container.reload()
        return self._container.status not in ("running", "restarting")

    def bind_failed(self) -> bool:
        return "already allocated" in self._start_error or "address already in use" in self._start_error

    def terminate(self, timeout: float) -> None:
        if self._container is not None:
            self._container.get_wrapped_container().stop(timeout=max(1, int(timeout)))

    def close(self) -> None:
        if self._container is not None:
            self._remove(self._container)
            self._container = None

    def log_tail(self, lines: int = 20) -> str:
        if self._container is None:
            return self._start_error or "(no container)"
        stdout, stderr = self._container.get_logs()
        return "\n".join((stdout + stderr).decode(errors="replace").splitlines()[-lines:])


def start_ensemble(servers: list[ZooKeeperServer], timeout: float = 60.0) -> None:
    """Launch every member, then wait until each serves (they elect a leader once a majority runs)."""
    try:
        for server in servers:
            server.launch()
        deadline = time.monotonic() + timeout
        for server in servers:
            server.wait_serving(max(0.0, deadline - time.monotonic()))
    except BaseException:
        for server in servers:
            server.close()
        raise


def stop_pid(pid: int, timeout: float = 10.0) -> bool:
    """Stop a (detached) ZooKeeper by process id: SIGTERM, then SIGKILL after ``timeout`` seconds.

    True once it is gone; False when no ZooKeeper runs under that pid (it already stopped, and the pid may
    even belong to another program by now, which we must not signal).
    """
    if not _is_zookeeper(pid):
        return False
    for sig, grace in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        if _gone_within(pid, grace):
            return True
    return False


def _gone_within(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def stop_container(container_id: str, timeout: float = 10.0) -> None:
    """Stop and remove a (detached) Docker ZooKeeper by container id."""
    import docker

    client = docker.from_env()
    try:
        container = client.containers.get(container_id)
        container.stop(timeout=max(1, int(timeout)))
        container.remove(force=True)
    finally:
        client.close()


def _is_zookeeper(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False if Path("/proc/self").exists() else _alive(pid)
    return b"org.apache.zookeeper" in cmdline and _alive(pid)


def _alive(pid: int) -> bool:
    try:
        # Reap it if it is our own child (a detached server stopped from the same interpreter, as in tests).
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


# -- command line ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zkbroker.lab.zookeeper", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    ensure = commands.add_parser("ensure", help="find (or apt-get install) a ZooKeeper and say which")
    ensure.add_argument("--no-install", action="store_true", help="never run apt-get")
    run = commands.add_parser("run", help="run a standalone ZooKeeper in the foreground until Ctrl-C")
    run.add_argument("--port", type=int, help="client port (default: a free one)")
    run.add_argument("--data-dir", help="data dir (default: a temporary one, removed on exit)")
    run.add_argument("--tick-time", type=int, default=2000, metavar="MS", help="tickTime in ms (default 2000)")
    args = parser.parse_args(argv)

    try:
        install = find_zookeeper(install=args.command == "ensure" and not args.no_install)
    except ZooKeeperNotFound as error:
        print(error, file=sys.stderr)
        return 1
    if args.command == "ensure":
        print(install.describe())
        return 0

    server = ZooKeeperServer(install, port=args.port, data_dir=args.data_dir, tick_time_ms=args.tick_time)
    # A plain `kill` should clean up like Ctrl-C does, not orphan the JVM.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.start()
        where = f"data dir {server.data_dir}" if server.data_dir else f"container {server.container_id}"
        print(f"{install.describe()} serving on {server.connect_string} ({where}); Ctrl-C stops it", flush=True)
        while server.running:
            time.sleep(0.5)
        print("ZooKeeper exited", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except ZooKeeperStartError as error:
        print(error, file=sys.stderr)
        return 1
    finally:
        server.close()


if __name__ == "__main__":
    sys.exit(main())
