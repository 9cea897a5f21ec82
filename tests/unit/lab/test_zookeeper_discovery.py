"""Where the lab's ZooKeeper comes from, with a fake machine: temporary directories stand in for
ZOOKEEPER_HOME, /usr/share/java and the PATH; no JVM, no ZooKeeper, no Docker, no apt-get."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from zkbroker.lab.zookeeper import (
    DOCKER_IMAGE,
    JVM_FLAGS,
    MAIN_CLASS,
    QUORUM_MAIN_CLASS,
    QuorumPeer,
    ZooKeeperInstall,
    ZooKeeperNotFound,
    find_java,
    find_zookeeper,
    java_command,
    parse_srvr_mode,
    read_peers,
    zoo_cfg,
)

pytestmark = pytest.mark.timeout(10)


def make_jar(path: Path, version: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as jar:
        if version is not None:
            pom = f"groupId=org.apache.zookeeper\nartifactId=zookeeper\nversion={version}\n"
            jar.writestr("META-INF/maven/org.apache.zookeeper/zookeeper/pom.properties", pom)
        jar.writestr("org/apache/zookeeper/Version.class", b"")
    return path


def make_java(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    java = bin_dir / "java"
    java.write_text("#!/bin/sh\nexit 0\n")
    java.chmod(0o755)
    return java


class Machine:
    """A fake machine: an environment, a Debian jar path, a Docker daemon that answers or not, apt-get."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.environ: dict[str, str] = {"PATH": str(root / "empty-path")}
        self.debian_jar = root / "usr/share/java/zookeeper.jar"
        self.docker = False
        self.apt_calls = 0
        self.apt_allowed = True

    def with_java(self) -> Machine:
        self.environ["PATH"] = str(make_java(self.root / "bin").parent)
        return self

    def with_debian_package(self) -> Machine:
        make_jar(self.debian_jar, "3.8.0")
        for name in ("slf4j-log4j12.jar", "log4j-1.2.jar"):
            (self.debian_jar.parent / name).write_bytes(b"")
        return self

    def apt_install(self) -> bool:
        self.apt_calls += 1
        if self.apt_allowed:
            self.with_debian_package()
        return self.apt_allowed

    def find(self, install: bool = False) -> ZooKeeperInstall:
        return find_zookeeper(
            self.environ,
            install,
            debian_jar=self.debian_jar,
            docker_ping=lambda: self.docker,
            apt_install=self.apt_install,
        )


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


def tarball(root: Path, version: str = "3.8.4") -> Path:
    """The layout of apache-zookeeper-X.Y.Z-bin: the server jar and its dependencies in lib/, plus conf/."""
    home = root / f"apache-zookeeper-{version}-bin"
    (home / "conf").mkdir(parents=True)
    make_jar(home / "lib" / f"zookeeper-{version}.jar", version)
    make_jar(home / "lib" / f"zookeeper-jute-{version}.jar")
    make_jar(home / "lib" / f"zookeeper-{version}-tests.jar")  # sorts before the server jar
    make_jar(home / "lib" / "logback-classic-1.2.13.jar")
    return home


def test_zookeeper_home_comes_first(machine: Machine) -> None:
    machine.with_java().with_debian_package()
    machine.docker = True
    home = tarball(machine.root)
    machine.environ["ZOOKEEPER_HOME"] = str(home)

    found = machine.find()

    assert found.kind == "home"
    assert found.version == "3.8.4"
    assert found.location == str(home / "lib" / "zookeeper-3.8.4.jar")
    assert found.classpath[0] == str(home / "conf")
    assert set(found.classpath[1:]) == {str(jar) for jar in (home / "lib").glob("*.jar")}
    assert found.java == str(machine.root / "bin" / "java")
    assert found.describe() == f"ZooKeeper: Apache ZooKeeper 3.8.4 from ZOOKEEPER_HOME ({found.location})"


def test_zookeeper_home_with_the_jar_at_its_top_like_3_4(machine: Machine) -> None:
    machine.with_java()
    home = machine.root / "zookeeper-3.4.14"
    jar = make_jar(home / "zookeeper-3.4.14.jar")  # 3.4 jars carry no pom.properties: the name tells
    make_jar(home / "lib" / "log4j-1.2.17.jar")
    machine.environ["ZOOKEEPER_HOME"] = str(home)

    found = machine.find()

    assert (found.kind, found.version, found.location) == ("home", "3.4.14", str(jar))
    assert found.classpath == (str(jar), str(home / "lib" / "log4j-1.2.17.jar"))


def test_zookeeper_home_without_a_jar_is_reported_not_skipped(machine: Machine) -> None:
    machine.with_java().with_debian_package()
    machine.environ["ZOOKEEPER_HOME"] = str(machine.root / "nothing-here")

    with pytest.raises(ZooKeeperNotFound, match="ZOOKEEPER_HOME=.*nothing-here holds no zookeeper jar"):
        machine.find()


def test_debian_package_when_no_zookeeper_home(machine: Machine) -> None:
    machine.with_java().with_debian_package()
    machine.docker = True

    found = machine.find()

    assert (found.kind, found.version, found.location) == ("debian", "3.8.0", str(machine.debian_jar))
    java_dir = machine.debian_jar.parent
    # Debian's jar names no SLF4J binding in its manifest: without these two ZooKeeper logs nothing.
    assert found.classpath[-3:] == (
        str(machine.debian_jar),
        str(java_dir / "slf4j-log4j12.jar"),
        str(java_dir / "log4j-1.2.jar"),
    )
    assert found.describe() == f"ZooKeeper: Debian package zookeeper 3.8.0 ({machine.debian_jar})"


def test_apt_get_runs_only_when_asked_and_the_package_is_missing(machine: Machine) -> None:
    machine.with_java()

    with pytest.raises(ZooKeeperNotFound):
        machine.find(install=False)
    assert machine.apt_calls == 0

    assert machine.find(install=True).kind == "debian"
    assert machine.apt_calls == 1

    assert machine.find(install=True).kind == "debian"
    assert machine.apt_calls == 1  # already there: no second install


def test_apt_get_not_allowed_falls_through_to_docker(machine: Machine) -> None:
    machine.with_java()
    machine.apt_allowed = False
    machine.docker = True

    found = machine.find(install=True)

    assert machine.apt_calls == 1
    assert (found.kind, found.location, found.classpath) == ("docker", DOCKER_IMAGE, ())
    assert found.describe() == f"ZooKeeper: Docker image {DOCKER_IMAGE} through testcontainers"


def test_docker_when_there_is_no_java(machine: Machine) -> None:
    machine.with_debian_package()
    machine.docker = True

    assert machine.find().kind == "docker"


def assert_one_sentence(message: str) -> None:
    assert "\n" not in message
    assert message.endswith(".")
    assert ". " not in message, message


def test_not_found_is_one_sentence_saying_how_to_get_one(machine: Machine) -> None:
    machine.with_java()

    with pytest.raises(ZooKeeperNotFound) as raised:
        machine.find()

    message = str(raised.value)
    assert_one_sentence(message)
    assert "ZOOKEEPER_HOME" in message
    assert "apt-get install zookeeper" in message
    assert "Docker daemon" in message


def test_missing_java_is_named_in_the_sentence(machine: Machine) -> None:
    machine.with_debian_package()

    with pytest.raises(ZooKeeperNotFound) as raised:
        machine.find()

    message = str(raised.value)
    assert_one_sentence(message)
    assert "no `java`" in message
    assert str(machine.debian_jar) in message


def test_java_home_wins_over_path(tmp_path: Path) -> None:
    on_path = make_java(tmp_path / "path-bin")
    in_home = make_java(tmp_path / "jdk" / "bin")

    assert find_java({"PATH": str(on_path.parent)}) == str(on_path)
    assert find_java({"PATH": str(on_path.parent), "JAVA_HOME": str(tmp_path / "jdk")}) == str(in_home)
    assert find_java({"PATH": str(tmp_path / "nowhere")}) is None


def test_zoo_cfg_for_a_lab_server(tmp_path: Path) -> None:
    cfg = zoo_cfg(21810, tmp_path, tick_time_ms=200)

    entries = dict(line.split("=", 1) for line in cfg.splitlines())
    assert entries == {
        "tickTime": "200",
        "dataDir": str(tmp_path),
        "clientPort": "21810",
        "clientPortAddress": "127.0.0.1",
        "minSessionTimeout": "400",
        "maxSessionTimeout": "60000",
        "maxClientCnxns": "0",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "*",
    }
    assert "maxSessionTimeout=30000" in zoo_cfg(21810, tmp_path, 2000, max_session_timeout_ms=30000)


def test_java_command_logs_to_the_data_dir(tmp_path: Path) -> None:
    install = ZooKeeperInstall("debian", "3.8.0", "/j/zookeeper.jar", ("/etc/zk", "/j/zookeeper.jar"), "/usr/bin/java")

    command = java_command(install, tmp_path)

    assert command[0] == "/usr/bin/java"
    assert command[1 : 1 + len(JVM_FLAGS)] == list(JVM_FLAGS)
    assert f"-Dlog4j.configuration=file:{tmp_path / 'log4j.properties'}" in command
    assert f"-Dlogback.configurationFile={tmp_path / 'logback.xml'}" in command
    assert command[-4:] == ["-cp", "/etc/zk:/j/zookeeper.jar", MAIN_CLASS, str(tmp_path / "zoo.cfg")]


def test_zoo_cfg_for_an_ensemble_member_names_every_peer(tmp_path: Path) -> None:
    peers = (QuorumPeer(1, "10.0.0.2", 2181, 2888, 3888), QuorumPeer(2, "10.0.0.3", 2181, 2888, 3888))

    cfg = zoo_cfg(2181, tmp_path, 500, host="10.0.0.2", peers=peers)

    assert "clientPortAddress=10.0.0.2" in cfg.splitlines()
    assert "server.1=10.0.0.2:2888:3888" in cfg.splitlines() and "server.2=10.0.0.3:2888:3888" in cfg.splitlines()
    assert read_peers(cfg, {1: 2181, 2: 2182}) == (peers[0], QuorumPeer(2, "10.0.0.3", 2182, 2888, 3888))
    assert read_peers(zoo_cfg(2181, tmp_path), {}) == ()


def test_an_ensemble_member_runs_quorum_peer_main(tmp_path: Path) -> None:
    install = ZooKeeperInstall("debian", "3.8.0", "/j/zookeeper.jar", ("/j/zookeeper.jar",), "/usr/bin/java")

    assert java_command(install, tmp_path, ensemble=True)[-2] == QUORUM_MAIN_CLASS


def test_srvr_mode_is_the_role() -> None:
    assert parse_srvr_mode("Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: leader\nNode count: 5\n") \
        == "leader"
    assert parse_srvr_mode("Mode: standalone\n") == "standalone"
    assert parse_srvr_mode("This ZooKeeper instance is not currently serving requests\n") == "looking"
