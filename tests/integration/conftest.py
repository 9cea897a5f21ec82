"""One real ZooKeeper server per test run and pytest-xdist worker (tickTime 200 ms, so 1-3 s sessions are
allowed), a fresh chroot per test, and broker processes that are always stopped when the test ends. A server
per worker rather than one shared: a worker's tests never wait behind another's, and no worker has to outlive
the others to stop it."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.harness import Broker, ZkView


@pytest.fixture(scope="session")
def zookeeper():
    from zkbroker.lab.zookeeper import ZooKeeperNotFound, ZooKeeperServer, find_zookeeper

    try:
        install = find_zookeeper()
    except ZooKeeperNotFound as e:
        pytest.skip(f"no ZooKeeper available: {e}")
    server = ZooKeeperServer(tick_time_ms=200, install=install)
    server.start(timeout=120)  # one per xdist worker: they all start at once, on a machine that may be loaded
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zookeeper) -> str:
    """A connect string with a chroot of this test's own (the brokers create it)."""
    return f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def zk(zk_connect):
    """A kazoo view of this test's chroot."""
    hosts, chroot = zk_connect.split("/", 1)
    root = ZkView(hosts)
    root.client.ensure_path("/" + chroot)
    root.close()
    view = ZkView(zk_connect)
    yield view
    view.close()


@pytest.fixture
def brokers(tmp_path, zk_connect):
    """A factory of broker processes on this test's chroot: brokers(1, 2, 3, **overrides)."""
    made: list[Broker] = []

    def make(*ids: int, start: bool = True, dir_name: str | None = None, control: bool = False,
             **overrides) -> list[Broker]:
        out = []
        for broker_id in ids:
            broker = Broker(tmp_path, broker_id, zk_connect, dir_name, control, **overrides)
            if start:
                broker.start()
            made.append(broker)
            out.append(broker)
        return out

    yield make
    for broker in made:
        broker.cleanup()


@pytest.fixture
def lab_dir(tmp_path):
    """A directory for a `zkbroker lab`; whatever lab runs there at the end is brought down."""
    from tests.integration.lab_support import lab

    yield tmp_path / "lab"
    if (tmp_path / "lab" / "cluster.json").exists():
        lab("down", "--dir", str(tmp_path / "lab"), timeout_s=240)  # a loaded machine stops slowly
