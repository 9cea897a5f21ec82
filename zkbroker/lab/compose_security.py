"""The `secured` profile of docker/compose.yaml (DESIGN §19): what its one-shot `secrets` service makes before
the secured brokers start, with the lab's own recipe (lab_security.py), so that a secured compose cluster is
configured as `lab up --security sasl_ssl` is:

    python -m zkbroker.lab.compose_security --dir /secured --zookeeper ZK/chroot --broker 1=secured-broker-1:29092 ...

- a CA and a broker certificate valid for the brokers' service names, in DIR/tls (`ca.pem` is the trust store);
- random passwords for the `admin` super user and the inter-broker user `broker`, their SCRAM-SHA-256/512
  credentials written to `/config/users` under the chroot (as `zkbroker configs` writes them), each only when
  absent: a second `up` keeps the cluster's users and passwords (their file, DIR/passwords, is reused);
- DIR/broker-N.properties, each broker's whole configuration (the broker loads it as its server.properties:
  one SASL_SSL listener bound to every address, advertised at its service name, also the inter-broker one);
- DIR/client.properties, the admin's client configuration for every tool's `--command-config`.
Everything is readable by its owner only. A run that finds DIR/tls keeps its certificates.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from zkbroker.config import ConfigError
from zkbroker.lab.lab_security import CLIENT_PROPERTIES, TLS_DIR, LabSecurity, write_lab_files
from zkbroker.security.listeners import SecurityProtocol
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import EntityConfig

PASSWORDS = "passwords"
DATA_DIR = "/var/lib/zkbroker"
CERTIFICATE_DAYS = 825  # a deployment's, not a lab's two days (the longest TLS clients accept)


def parse_broker(text: str) -> tuple[int, str, int]:
    """`ID=HOST:PORT` -> (id, host, port); ValueError naming what is wrong."""
    broker_id, sep, address = text.partition("=")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not broker_id.isdigit() or not port.isdigit() or not host:
        raise ValueError(f"--broker takes ID=HOST:PORT, not {text!r}")
    return int(broker_id), host, int(port)


def security_for(directory: Path) -> LabSecurity:
    """SASL_SSL with the passwords of an earlier run (DIR/passwords), else new ones, saved."""
    import secrets

    saved = directory / PASSWORDS
    if saved.exists():
        passwords = json.loads(saved.read_text())
    else:
        passwords = {"admin": secrets.token_urlsafe(12), "broker": secrets.token_urlsafe(12)}
        saved.write_text(json.dumps(passwords))
        saved.chmod(0o600)
    return LabSecurity(SecurityProtocol.SASL_SSL, directory, passwords["admin"], passwords["broker"])


def broker_properties(security: LabSecurity, broker_id: int, host: str, port: int, zookeeper: str) -> str:
    """A secured broker's whole server.properties: bound to every address, advertised at its service name."""
    props = {"broker.id": str(broker_id), "log.dirs": DATA_DIR, "zookeeper.connect": zookeeper,
             "zookeeper.session.timeout.ms": "6000", **security.broker_properties(host, port)}
    props["listeners"] = f"{security.protocol.value}://:{port}"
    return "".join(f"{key}={value}\n" for key, value in props.items())


def write_files(directory: Path, zookeeper: str, brokers: list[tuple[int, str, int]]) -> LabSecurity:
    """The certificates, each broker's server.properties and the admin's client.properties (no ZooKeeper)."""
    directory.mkdir(parents=True, exist_ok=True)
    security = security_for(directory)
    if not (directory / TLS_DIR / "ca.pem").exists():
        write_lab_files(security, [host for _, host, _ in brokers], days=CERTIFICATE_DAYS)
    else:  # the certificates stay; the admin's client configuration is written again all the same
        (directory / CLIENT_PROPERTIES).write_text(security.client_properties())
    for broker_id, host, port in brokers:
        path = directory / f"broker-{broker_id}.properties"
        path.write_text(broker_properties(security, broker_id, host, port, zookeeper))
        path.chmod(0o600)
    return security


def write_users(zookeeper: str, security: LabSecurity) -> None:
    """The admin's and the brokers' SCRAM credentials under the chroot, each only when absent."""
    hosts, chroot = paths.split_chroot(zookeeper)
    zk = ZkClient(hosts, 30000, 30000, name="compose-security")
    zk.start()
    try:
        for user, credentials in security.scram_users().items():
            path = chroot + paths.user_config_path(user)
            if not zk.kazoo.exists(path):
                zk.kazoo.create(path, EntityConfig(credentials).encode(), makepath=True)
    finally:
        zk.close()


def parser() -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(description="The secrets of docker/compose.yaml's secured profile")
    out.add_argument("--dir", required=True, metavar="DIR")
    out.add_argument("--zookeeper", required=True, metavar="ZK", help="the connect string, chroot included")
    out.add_argument("--broker", action="append", required=True, metavar="ID=HOST:PORT")
    return out


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        brokers = [parse_broker(b) for b in args.broker]
        write_users(args.zookeeper, write_files(Path(args.dir), args.zookeeper, brokers))
    except (ValueError, ConfigError, OSError, RuntimeError) as e:
        print(f"compose_security: {e}", file=sys.stderr)
        return 1
    print(f"Secured brokers configured in {args.dir}; the admin's --command-config is "
          f"{Path(args.dir) / CLIENT_PROPERTIES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
