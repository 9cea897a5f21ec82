"""The ZooKeeper launcher against a real server: start, sessions surviving a restart, stop, two servers side by
side, a detached server stopped by pid, start failures, and the command line. Self-contained: each test
starts its own servers (tickTime 200 ms) and does not use the suite's shared one."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from zkbroker.lab import zookeeper
from zkbroker.lab.zookeeper import (
    DOCKER_IMAGE,
    ZooKeeperInstall,
    ZooKeeperNotFound,
    ZooKeeperServer,
    ZooKeeperStartError,
    docker_daemon_answers,
    find_zookeeper,
    four_letter_word,
    stop_pid,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TICK_MS = 200


@pytest.fixture(scope="module")
def install() -> ZooKeeperInstall:
    """A ZooKeeper that runs as a local JVM (ZOOKEEPER_HOME or the Debian package)."""
    try:
        found = find_zookeeper(docker_ping=lambda: False)
    except ZooKeeperNotFound as error:
        pytest.skip(f"no local ZooKeeper: {error}")
    return found


@pytest.fixture
def server(install: ZooKeeperInstall):
    with ZooKeeperServer(install, tick_time_ms=TICK_MS) as zk:
        yield zk


@pytest.fixture
def client_of():
    """A factory of started kazoo clients, all stopped at the end of the test."""
    clients: list[KazooClient] = []

    def connect(connect_string: str, session_timeout_s: float = 10.0) -> KazooClient:
        # kazoo's default reconnect backoff doubles up to an hour: after a few refused attempts during a
        # restart it may sleep past the session timeout. Brokers cap it too.
        retry = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 0.5}
        client = KazooClient(connect_string, timeout=session_timeout_s, connection_retry=retry)
        clients.append(client)
        client.start(timeout=10)
        return client

    yield connect
    for client in clients:
        client.stop()
        client.close()


def port_closed(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def wait_for(condition, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.05)


@pytest.mark.alone  # it checks that the stopped server's port is closed: a test beside it could take the port
def test_session_and_ephemeral_node_survive_a_restart(server: ZooKeeperServer, client_of) -> None:
    client = client_of(server.connect_string, session_timeout_s=10.0)
    states: list[str] = []
    client.add_listener(states.append)
    client.create("/brokers/ids/1", b"broker 1", ephemeral=True, makepath=True)
    session_id = client.client_id[0]
    pid, port, data_dir = server.pid, server.port, server.data_dir
    reconnected = threading.Event()
    client.add_listener(lambda state: state == KazooState.CONNECTED and reconnected.set())

    server.restart(timeout=30)

    # A new JVM, but the same address and data: the snapshot and transaction log carry the session over.
    assert (server.port, server.data_dir) == (port, data_dir)
    assert server.pid != pid
    # kazoo retries every 0.5 s at most; on a loaded machine the new JVM can take seconds more to serve.
    assert reconnected.wait(30), f"kazoo did not reconnect; states seen: {states}"
    assert KazooState.LOST not in states
    assert client.client_id[0] == session_id
    stat = client.exists("/brokers/ids/1")
    assert stat is not None and stat.ephemeralOwner == session_id
    assert client.get("/brokers/ids/1")[0] == b"broker 1"

    server.stop(timeout=10)

    assert port_closed(port)
    assert not server.running


def test_two_servers_side_by_side(install: ZooKeeperInstall, client_of) -> None:
    with (
        ZooKeeperServer(install, tick_time_ms=TICK_MS) as first,
        ZooKeeperServer(install, tick_time_ms=TICK_MS) as second,
    ):
        assert first.port != second.port
        assert first.data_dir != second.data_dir
        client_of(first.connect_string).create("/only-in-first", b"")
        assert client_of(second.connect_string).exists("/only-in-first") is None
        first_data_dir = first.data_dir
        assert (first_data_dir / "zookeeper.log").stat().st_size > 0  # ZooKeeper logs to a file, not to us
    assert not first_data_dir.exists()  # temporary data dirs go with their server


def test_minimum_session_timeout_is_two_ticks(server: ZooKeeperServer) -> None:
    conf = four_letter_word("conf", server.port)

    assert f"minSessionTimeout={2 * TICK_MS}" in conf
    assert "maxSessionTimeout=60000" in conf
    assert four_letter_word("ruok", server.port) == "imok"


def test_the_log_tail_is_what_the_running_server_wrote(server: ZooKeeperServer) -> None:
    four_letter_word("conf", server.port)
    # ZooKeeper logs each four-letter word it answers (the launcher's readiness checks send some too).
    deadline = time.monotonic() + 10
    while "Processing conf command" not in (tail := server.log_tail(50)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "Processing conf command" in tail
    assert len(tail.splitlines()) <= 50


@pytest.mark.alone  # it checks that the stopped server's port is closed: a test beside it could take the port
def test_detached_server_outlives_its_owner_and_stops_by_pid(install: ZooKeeperInstall, tmp_path: Path) -> None:
    server = ZooKeeperServer(install, data_dir=tmp_path / "zk", tick_time_ms=TICK_MS).start(timeout=30)
    server.detach()
    pid, port = server.pid, server.port

    server.close()  # what the interpreter's exit does: nothing, once detached

    assert four_letter_word("ruok", port) == "imok"
    # Its own session and process group: the terminal's Ctrl-C to the lab command does not reach it.
    assert os.getsid(pid) == pid != os.getsid(0)
    assert stop_pid(pid, timeout=10)
    assert port_closed(port)
    assert not stop_pid(pid, timeout=1)  # nothing left under that pid


def test_stop_pid_refuses_a_process_that_is_not_zookeeper() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert not stop_pid(sleeper.pid, timeout=1)
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_lost_port_race_moves_to_another_port(install: ZooKeeperInstall, monkeypatch) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        ports = iter([taken])
        free_port = zookeeper.free_port
        monkeypatch.setattr(zookeeper, "free_port", lambda: next(ports, None) or free_port())

        with ZooKeeperServer(install, tick_time_ms=TICK_MS) as server:
            assert server.port != taken
            assert four_letter_word("ruok", server.port) == "imok"


def test_a_given_busy_port_fails_with_the_log_tail(install: ZooKeeperInstall) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        server = ZooKeeperServer(install, port=squatter.getsockname()[1], tick_time_ms=TICK_MS)
        try:
            # The JVM exits as soon as it fails to bind; the generous deadline only covers a loaded machine,
            # where it can take seconds to get that far.
            with pytest.raises(ZooKeeperStartError, match="(?s)could not bind.*Address already in use"):
                server.start(timeout=90)
        finally:
            server.close()


def test_ensure_names_the_zookeeper_it_found() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "zkbroker.lab.zookeeper", "ensure", "--no-install"],
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ZooKeeper: ")
    assert len(done.stdout.splitlines()) == 1


@pytest.mark.alone  # it checks that the stopped server's port is closed: a test beside it could take the port
def test_run_serves_until_interrupted(install: ZooKeeperInstall, tmp_path: Path) -> None:
    port = zookeeper.free_port()
    command = [sys.executable, "-m", "zkbroker.lab.zookeeper", "run", "--port", str(port)]
    command += ["--data-dir", str(tmp_path / "zk"), "--tick-time", str(TICK_MS)]
    runner = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = runner.stdout.readline()
        assert f"serving on 127.0.0.1:{port}" in banner, runner.stderr.read() if not banner else banner
        assert four_letter_word("ruok", port) == "imok"

        runner.send_signal(signal.SIGINT)

        assert runner.wait(timeout=20) == 0
        assert port_closed(port)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_docker_backend_restarts_with_its_sessions(client_of) -> None:
    if not docker_daemon_answers():
        reason = "no Docker daemon answers; the testcontainers backend cannot run here"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    docker = ZooKeeperInstall("docker", "3.8", DOCKER_IMAGE)
    with ZooKeeperServer(docker, tick_time_ms=TICK_MS) as server:
        assert server.container_id is not None and server.pid is None
        client = client_of(server.connect_string)
        client.create("/survivor", b"", ephemeral=True)
        session_id = client.client_id[0]

        server.restart(timeout=60)

        wait_for(lambda: client.connected, 20, "kazoo to reconnect")
        assert client.client_id[0] == session_id
        assert client.exists("/survivor") is not None
