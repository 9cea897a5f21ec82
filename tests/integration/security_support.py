"""Security fixtures for integration tests: a throwaway CA and certificates made with the openssl CLI under a
test's tmp_path, a broker with PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners side by side on free
ports, SCRAM users written to ZooKeeper as `zkbroker configs` writes them, and ACLs written as kafka-acls does."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from kazoo.client import KazooClient

from tests.integration.harness import Broker, free_port
from zkbroker.security import acl_znodes
from zkbroker.security.acl import AclEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType
from zkbroker.security.scram import make_credential
from zkbroker.zk import paths
from zkbroker.zk.znodes import EntityConfig

ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")
BOB = ("bob", "bob-secret")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class Certificates:
    dir: Path
    ca: Path  # the CA certificate (clients' trust store)
    broker: Path  # the broker's certificate chain and key, one PEM file (ssl.keystore.location)
    client_cert: Path
    client_key: Path
    client_dn: str  # the principal's name a client certificate gives, RFC 2253


def make_certificates(directory: Path) -> Certificates:
    """A CA, a broker certificate for localhost and 127.0.0.1, and a client certificate (CN=client,O=zkbroker)."""
    directory.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=zkbroker test CA",
             cwd=directory)
    (directory / "broker.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    (directory / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subject in (("broker", "/CN=localhost"), ("client", "/O=zkbroker/CN=client")):
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=directory)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=directory)
    keystore = directory / "broker.pem"
    keystore.write_text((directory / "broker.crt").read_text() + (directory / "broker.key").read_text())
    return Certificates(directory, directory / "ca.pem", keystore, directory / "client.crt", directory / "client.key",
                        "CN=client,O=zkbroker")


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
