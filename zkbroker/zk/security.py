"""ZooKeeper security as Kafka 0.9 added it (`zookeeper.set.acl`, beyond 0.8.2): SASL DIGEST-MD5 logins and
Kafka's ACLs on the znodes.

Credentials come the way Kafka's do, from a JAAS file: Kafka reads it through the JVM's
`-Djava.security.auth.login.config`; we read the file named by the environment variable
`ZKBROKER_JAAS_CONFIG` (every zkbroker command: broker, tools, consumers). Its `Client` section holds the
login to ZooKeeper; a ZooKeeper server's file has a `Server` section listing the logins it accepts:

    Client { org.apache.zookeeper.server.auth.DigestLoginModule required username="kafka" password="..."; };
    Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_kafka="..."; };

ACLs (Kafka's ZkUtils.DefaultAcls): with security on, a znode gives everything to its creator (the
authenticated identity, `sasl:kafka`) and read to the world, so anyone can read what a 0.8.2 tool needs but
only the brokers' login can create, change or delete; `/consumers` and everything under it stays
world-writable, since 0.8.2's consumers (and other clients) write their registrations and offsets there
without logging in. Without security every znode is world-writable, as in 0.8.2.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from zkbroker.zk import paths

JAAS_CONFIG_ENV = "ZKBROKER_JAAS_CONFIG"
CLIENT_SECTION = "Client"  # ZooKeeper's default zookeeper.sasl.clientconfig
SERVER_SECTION = "Server"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
SASL_AUTH_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"

SECURE_ACL: list[ACL] = list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)
OPEN_ACL: list[ACL] = list(OPEN_ACL_UNSAFE)

_SECTION = re.compile(r"(\w+)\s*\{(.*?)\}\s*;", re.S)
_OPTION = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


class JaasError(ValueError):
    """The JAAS file is missing, unreadable or has no usable login; the message names the file."""


def acl_for(path: str, secure: bool) -> list[ACL]:
    """The ACL Kafka gives a znode at `path` (relative to the chroot)."""
    if not secure or path == paths.CONSUMERS or path.startswith(paths.CONSUMERS + "/"):
        return OPEN_ACL
    return SECURE_ACL


def jaas_section(name: str, options: Mapping[str, str]) -> str:
    for key, value in options.items():
        if '"' in value or "\\" in value:
            raise JaasError(f"The JAAS option {key} cannot hold a quote or a backslash")
    body = "".join(f'\n    {key}="{value}"' for key, value in options.items())
    return f"{name} {{\n  {DIGEST_LOGIN_MODULE} required{body};\n}};\n"


def client_jaas(username: str, password: str) -> str:
    """A JAAS file's Client section: the login a broker or tool uses to authenticate to ZooKeeper."""
    return jaas_section(CLIENT_SECTION, {"username": username, "password": password})


def server_jaas(users: Mapping[str, str]) -> str:
    """A ZooKeeper server's Server section: the DIGEST-MD5 logins it accepts (user -> password)."""
    return jaas_section(SERVER_SECTION, {f"user_{user}": password for user, password in users.items()})


def read_client_login(path: str | os.PathLike) -> tuple[str, str]:
    """(username, password) of the Client section of a JAAS file."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise JaasError(f"Cannot read the JAAS file {path} (from ${JAAS_CONFIG_ENV}): {e.strerror}") from None
    for name, body in _SECTION.findall(text):
        if name == CLIENT_SECTION:
            options = dict(_OPTION.findall(body))
            if "username" in options and "password" in options:
                return options["username"], options["password"]
            raise JaasError(f"The {CLIENT_SECTION} section of the JAAS file {path} needs username and password")
    raise JaasError(f"The JAAS file {path} has no {CLIENT_SECTION} section")


def sasl_options(environ: Mapping[str, str] = os.environ) -> dict | None:
    """kazoo's sasl_options for the login named by $ZKBROKER_JAAS_CONFIG; None when it is not set."""
    path = environ.get(JAAS_CONFIG_ENV)
    if not path:
        return None
    username, password = read_client_login(path)
    return {"mechanism": "DIGEST-MD5", "username": username, "password": password}


class AclKazooClient(KazooClient):
    """kazoo that gives every znode it creates without an explicit ACL Kafka's ACL for its path (acl_for):
    creates, ensure_path (each missing parent too) and creates inside transactions."""

    def __init__(self, secure: bool, **kazoo_args: Any) -> None:
        super().__init__(**kazoo_args)
        self.secure_acls = secure

    def create_async(self, path: str, value: bytes = b"", acl: list[ACL] | None = None, **options: Any):
        return super().create_async(path, value, acl=acl or acl_for(path, self.secure_acls), **options)

    def ensure_path_async(self, path: str, acl: list[ACL] | None = None):
        return super().ensure_path_async(path, acl=acl or acl_for(path, self.secure_acls))

    def transaction(self) -> TransactionRequest:
        return _AclTransaction(self)


class _AclTransaction(TransactionRequest):
    def create(self, path: str, value: bytes = b"", acl: list[ACL] | None = None, ephemeral: bool = False,
               sequence: bool = False) -> None:
        super().create(path, value, acl or acl_for(path, self.client.secure_acls), ephemeral, sequence)
