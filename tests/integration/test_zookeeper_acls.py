"""ZooKeeper ACLs (issue 15, item 5; Kafka 0.9's zookeeper.set.acl) against a real ZooKeeper that authenticates
SASL DIGEST-MD5 logins: secure brokers' znodes, what an unauthenticated client may and may not do, the
zookeeper-security-migration tool, and `lab up --secure`."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from tests.integration.clients import ZOOKEEPER_OFFSETS_CLIENT
from tests.integration.harness import create_topic, wait_for
from zkbroker.zk.security import JAAS_CONFIG_ENV, client_jaas

pytestmark = pytest.mark.integration

PASSWORD = uuid.uuid4().hex


@pytest.fixture(scope="module")
def secure_zookeeper():
    from zkbroker.lab.zookeeper import ZooKeeperServer

    server = ZooKeeperServer(tick_time_ms=200, sasl_users={"kafka": PASSWORD})
    server.start()
    yield server
    server.close()


@pytest.fixture
def jaas(tmp_path) -> str:
    path = tmp_path / "kafka_client_jaas.conf"
    path.write_text(client_jaas("kafka", PASSWORD))
    return str(path)


@pytest.fixture
def zk_connect(secure_zookeeper) -> str:
    """Overrides conftest's: this module's brokers use the ZooKeeper that authenticates logins."""
    return f"{secure_zookeeper.connect_string}/acl-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def chroot_connect(zk_connect) -> str:
    return zk_connect


@pytest.fixture
def anonymous(chroot_connect):
    """A client that never logs in, on the cluster's chroot."""
    client = KazooClient(hosts=chroot_connect, timeout=10)
    client.start(10)
    yield client
    client.stop()
    client.close()


def zkbroker(*args: str, jaas: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != JAAS_CONFIG_ENV}
    if jaas:
        env[JAAS_CONFIG_ENV] = jaas
    return subprocess.run([sys.executable, "-m", "zkbroker", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def denied(operation) -> bool:
    try:
        operation()
    except NoAuthError:
        return True
    return False


def kafka_znodes(client: KazooClient, topic: str) -> list[str]:
    return ["/brokers/ids/1", "/brokers/ids/2", f"/brokers/topics/{topic}",
            f"/brokers/topics/{topic}/partitions/0/state", "/controller", "/controller_epoch",
            "/admin/delete_topics", f"/config/topics/{topic}"]


def assert_unauthenticated_cannot_change_kafka_znodes(anonymous: KazooClient, topic: str) -> int:
    """Every change an unauthenticated client tries is refused; returns how many refusals were seen."""
    state = f"/brokers/topics/{topic}/partitions/0/state"
    attempts = {
        "create /controller": lambda: anonymous.create("/controller", b'{"brokerid":99}', ephemeral=True),
        "change /controller": lambda: anonymous.set("/controller", b'{"brokerid":99}'),
        "delete /controller": lambda: anonymous.delete("/controller"),
        "change /controller_epoch": lambda: anonymous.set("/controller_epoch", b"99"),
        "delete /controller_epoch": lambda: anonymous.delete("/controller_epoch"),
        "create a broker": lambda: anonymous.create("/brokers/ids/99", b"{}", ephemeral=True),
        "change a broker": lambda: anonymous.set("/brokers/ids/1", b"{}"),
        "delete a broker": lambda: anonymous.delete("/brokers/ids/1"),
        "create a topic": lambda: anonymous.create("/brokers/topics/evil", b"{}"),
        "change a topic": lambda: anonymous.set(f"/brokers/topics/{topic}", b"{}"),
        "change a state": lambda: anonymous.set(state, b"{}"),
        "delete a state": lambda: anonymous.delete(state),
        "create a reassignment": lambda: anonymous.create("/admin/reassign_partitions", b"{}"),
        "create an election": lambda: anonymous.create("/admin/preferred_replica_election", b"{}"),
        "delete a topic": lambda: anonymous.create(f"/admin/delete_topics/{topic}", b""),
        "create under the chroot": lambda: anonymous.create("/evil", b""),
    }
    allowed = [what for what, attempt in attempts.items() if not denied(attempt)]
    assert allowed == []
    return len(attempts)


# As ZooKeeper stores Kafka's ACLs: the creator's ("auth") entry becomes the login's identity.
SECURE_ACL = [("sasl", "kafka", ["ALL"]), ("world", "anyone", ["READ"])]
OPEN_ACL = [("world", "anyone", ["ALL"])]


def acl_of(client: KazooClient, path: str) -> list:
    return [(acl.id.scheme, acl.id.id, acl.acl_list) for acl in client.get_acls(path)[0]]


def test_secure_brokers_znodes_are_readable_by_everyone_and_changeable_only_by_their_login(
        brokers, chroot_connect, anonymous, jaas, monkeypatch):
    monkeypatch.setenv(JAAS_CONFIG_ENV, jaas)  # the brokers (and this test's admin client) log in
    b1, b2 = brokers(1, 2, zookeeper_set_acl="true")
    create_topic(chroot_connect, "secured", 2, 2, [b1, b2])
    ZOOKEEPER_OFFSETS_CLIENT.commit(b1.bootstrap, "g1", "secured", {0: 5})  # v0: the broker writes /consumers

    for path in ["/", *kafka_znodes(anonymous, "secured")]:
        anonymous.get(path)  # readable without a login
        assert acl_of(anonymous, path) == SECURE_ACL, path
    wait_for(lambda: anonymous.exists("/consumers/g1/offsets/secured/0"), 10, "the committed offset")
    assert acl_of(anonymous, "/consumers") == OPEN_ACL
    assert acl_of(anonymous, "/consumers/g1/offsets/secured/0") == OPEN_ACL
    anonymous.create("/consumers/g1/ids/stranger", b"{}", ephemeral=True, makepath=True)  # world-writable

    denials = assert_unauthenticated_cannot_change_kafka_znodes(anonymous, "secured")
    print(f"ACL denials observed: {denials} of {denials} changes tried without a login")

    described = zkbroker("topics", "--describe", "--zookeeper", chroot_connect, jaas=None)  # a 0.8.2 tool, no login
    assert described.returncode == 0, described.stderr
    assert "Topic:secured\tPartitionCount:2\tReplicationFactor:2" in described.stdout
    refused = zkbroker("topics", "--create", "--zookeeper", chroot_connect, "--topic", "other", "--partitions", "1",
                       "--replication-factor", "1", jaas=None)
    assert refused.returncode == 1
    assert "secure ACLs; log in by setting ZKBROKER_JAAS_CONFIG" in refused.stderr


def test_a_broker_with_zookeeper_set_acl_and_no_login_refuses_to_start(brokers, chroot_connect, monkeypatch):
    monkeypatch.delenv(JAAS_CONFIG_ENV, raising=False)
    (broker,) = brokers(1, zookeeper_set_acl="true")
    assert broker.wait_exit(60) != 0
    assert broker.log_lines("zookeeper.set.acl is true, but there is no ZooKeeper login: set ZKBROKER_JAAS_CONFIG")


def test_security_migration_secures_an_open_tree_and_opens_it_again(brokers, chroot_connect, anonymous, jaas,
                                                                     monkeypatch):
    monkeypatch.delenv(JAAS_CONFIG_ENV, raising=False)  # an 0.8.2-style cluster: no login, open znodes
    b1, b2 = brokers(1, 2)
    create_topic(chroot_connect, "migrated", 2, 2, [b1, b2])
    assert acl_of(anonymous, "/brokers/ids/1") == OPEN_ACL

    no_login = zkbroker("zookeeper-security-migration", "--zookeeper.connect", chroot_connect,
                        "--zookeeper.acl", "secure", jaas=None)
    assert no_login.returncode == 1
    assert "No JAAS configuration file has been specified: set ZKBROKER_JAAS_CONFIG" in no_login.stderr

    secured = zkbroker("zookeeper-security-migration", "--zookeeper.connect", chroot_connect,
                       "--zookeeper.acl", "secure", jaas=jaas)
    assert secured.returncode == 0, secured.stderr
    assert secured.stdout.startswith("Set secure ACLs on ")
    for path in ["/", *kafka_znodes(anonymous, "migrated")]:
        assert acl_of(anonymous, path) == SECURE_ACL, path
    assert acl_of(anonymous, "/consumers") == OPEN_ACL
    assert_unauthenticated_cannot_change_kafka_znodes(anonymous, "migrated")

    opened = zkbroker("zookeeper-security-migration", "--zookeeper.connect", chroot_connect,
                      "--zookeeper.acl", "unsecure", jaas=jaas)
    assert opened.returncode == 0, opened.stderr
    for path in ["/", *kafka_znodes(anonymous, "migrated")]:
        assert acl_of(anonymous, path) == OPEN_ACL, path
    anonymous.create("/admin/open-again", b"")  # the world may write again
    anonymous.delete("/admin/open-again")


def test_lab_up_secure_starts_a_secured_cluster_and_writes_the_tools_login(tmp_path):
    lab_dir = tmp_path / "lab"
    up = zkbroker("lab", "up", "--dir", str(lab_dir), "--brokers", "2", "--secure", jaas=None)
    try:
        assert up.returncode == 0, up.stderr
        login = lab_dir / "jaas.conf"
        assert f"ZooKeeper login for tools: export ZKBROKER_JAAS_CONFIG={login}" in up.stdout
        assert stat.S_IMODE(login.stat().st_mode) == 0o600
        assert "zookeeper.set.acl=true" in (lab_dir / "broker-1" / "server.properties").read_text()
        connect = json.loads((lab_dir / "cluster.json").read_text())["zookeeper"]
        anonymous = KazooClient(hosts=connect, timeout=10)
        anonymous.start(10)
        try:
            assert acl_of(anonymous, "/") == SECURE_ACL  # the chroot the lab created
            assert acl_of(anonymous, "/brokers/ids/1") == SECURE_ACL
            assert denied(lambda: anonymous.create("/brokers/topics/evil", b"{}"))
        finally:
            anonymous.stop()
            anonymous.close()
        created = zkbroker("topics", "--create", "--zookeeper", connect, "--topic", "labtopic", "--partitions", "2",
                           "--replication-factor", "2", jaas=str(login))
        assert created.returncode == 0, created.stderr
        refused = zkbroker("topics", "--create", "--zookeeper", connect, "--topic", "other", "--partitions", "1",
                           "--replication-factor", "1", jaas=None)
        assert refused.returncode == 1 and "secure ACLs" in refused.stderr
    finally:
        down = zkbroker("lab", "down", "--dir", str(lab_dir), jaas=None)
        assert down.returncode == 0, down.stderr
