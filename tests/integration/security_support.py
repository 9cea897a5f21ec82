"""Security fixtures for integration tests (certificates come from zkbroker/lab/tls.py, made under tmp_path): a
broker with PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners side by side on free ports, SCRAM users written
to ZooKeeper as `zkbroker configs` writes them, and ACLs written as kafka-acls does."""

from __future__ import annotations

from pathlib import Path

from kazoo.client import KazooClient

from tests.integration.harness import Broker, free_port
from zkbroker.lab.tls import Certificates
from zkbroker.security import acl_znodes
from zkbroker.security.acl import AclEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType
from zkbroker.security.scram import make_credential
from zkbroker.zk import paths
from zkbroker.zk.znodes import EntityConfig

ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")
BOB = ("bob", "bob-secret")


def plain_jaas(users: dict[str, str]) -> str:
    options = " ".join(f'user_{user}="{password}"' for user, password in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {options};"


class SecureBroker:
    """A broker with four listeners; `ports[name]` and `bootstrap(name)` for each."""

    LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

    def __init__(self, root: Path, broker_id: int, zk_connect: str, certs: Certificates, **overrides: object):
        self.ports = {name: free_port() for name in self.LISTENERS}
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items())
        props = {"listeners": listeners, "advertised.listeners": listeners,
                 "ssl.keystore.location": certs.broker, "ssl.truststore.location": certs.ca,
                 "ssl.client.auth": "requested",
                 "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                 "sasl.jaas.config": plain_jaas(dict([ADMIN, ALICE, BOB])),
                 "connection.failed.authentication.delay.ms": 50, **overrides}
        self.broker = Broker(root, broker_id, zk_connect, port=self.ports["PLAINTEXT"], **props)
        self.certs = certs

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def add_scram_user(zk_connect: str, user: str, password: str, mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512")) -> None:
    """What `zkbroker configs --alter --add-config SCRAM-SHA-256=[password=...]` writes (and its notification)."""
    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=15)
    try:
        config = {m: str(make_credential(m, password)) for m in mechanisms}
        path = paths.user_config_path(user)
        data = EntityConfig(config).encode()
        if zk.exists(path):
            zk.set(path, data)
        else:
            zk.create(path, data, makepath=True)
    finally:
        zk.stop()
        zk.close()


def add_acl(zk_connect: str, resource_type: ResourceType, name: str, principal: str, *operations: str,
            permission: str = "Allow", pattern_type: PatternType = PatternType.LITERAL, host: str = "*") -> None:
    """Add ACLs to a pattern's znode and announce the change, as kafka-acls --authorizer-properties does."""
    pattern = ResourcePattern(resource_type, name, pattern_type)
    entries = {AclEntry(principal, AclPermissionType.parse(permission), AclOperation.parse(op), host)
               for op in operations}
    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=15)
    try:
        path = acl_znodes.acl_znode_path(pattern)
        if zk.exists(path):
            data, stat = zk.get(path)
            zk.set(path, acl_znodes.encode_acls(acl_znodes.decode_acls(data) | entries), version=stat.version)
        else:
            zk.create(path, acl_znodes.encode_acls(entries), makepath=True)
        zk.create(acl_znodes.acl_change_prefix(pattern), acl_znodes.encode_acl_change(pattern), sequence=True,
                  makepath=True)
    finally:
        zk.stop()
        zk.close()
