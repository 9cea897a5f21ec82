"""A secured lab (`zkbroker lab up --security ssl|sasl_plaintext|sasl_ssl`, DESIGN §19): what the lab makes for it
and writes into each broker's server.properties.

- TLS (ssl, sasl_ssl): a CA and a broker certificate valid for the lab's hosts (zkbroker/lab/tls.py) in DIR/tls;
  `ca.pem` is everyone's trust store.
- SASL (sasl_plaintext, sasl_ssl): PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 enabled; an `admin` super user with a
  PLAIN password and credentials for each SCRAM mechanism, and the inter-broker user `broker`, who logs in with
  SCRAM-SHA-512 (its credentials are written to ZooKeeper before any broker starts, as Kafka needs them).
- SSL alone: clients authenticate with a certificate; the lab's client certificate (`User:CN=client,O=zkbroker`)
  is the admin, and each broker presents its own (`User:CN=localhost`) to the others.

Each broker has one listener, of that protocol, which is also the inter-broker listener: the lab's brokers' host
and port in cluster.json are that listener's. `super.users` holds the admin and the brokers' principals; no
authorizer is configured unless `--config authorizer.class.name=...` asks for one (with it,
`allow.everyone.if.no.acl.found` keeps Kafka's default, false). DIR/client.properties is the admin's client
configuration, for every tool's `--command-config`.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from zkbroker.client.security import ClientSecurity
from zkbroker.lab.tls import make_certificates
from zkbroker.security.listeners import SecurityProtocol
from zkbroker.security.scram import make_credential

PROTOCOLS = tuple(p.value.lower() for p in SecurityProtocol)  # plaintext, ssl, sasl_plaintext, sasl_ssl
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
INTER_BROKER_MECHANISM = "SCRAM-SHA-512"
ADMIN, BROKER = "admin", "broker"
CLIENT_PROPERTIES = "client.properties"  # the admin's --command-config, in the lab's directory
TLS_DIR = "tls"
BROKER_DN, CLIENT_DN = "CN=localhost", "CN=client,O=zkbroker"  # the subjects zkbroker/lab/tls.py writes


@dataclass(frozen=True)
class LabSecurity:
    protocol: SecurityProtocol
    directory: Path  # the lab's
    admin_password: str = ""
    broker_password: str = ""

    @property
    def ca(self) -> Path:
        return self.directory / TLS_DIR / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        return self.directory / TLS_DIR / "broker.pem"

    @property
    def admin_keystore(self) -> Path:
        """The lab's client certificate and key in one PEM file: the admin of an SSL lab."""
        return self.directory / TLS_DIR / "admin.pem"

    @property
    def super_users(self) -> str:
        if self.protocol.uses_sasl:
            return f"User:{ADMIN};User:{BROKER}"
        return f"User:{CLIENT_DN};User:{BROKER_DN}"

    def broker_properties(self, host: str, port: int) -> dict[str, str]:
        name = self.protocol.value
        props = {"listeners": f"{name}://{host}:{port}", "advertised.listeners": f"{name}://{host}:{port}",
                 "inter.broker.listener.name": name, "super.users": self.super_users}
        if self.protocol.uses_tls:
            props.update({"ssl.keystore.location": str(self.broker_keystore),
                          "ssl.truststore.location": str(self.ca),
                          "ssl.client.auth": "requested" if self.protocol.uses_sasl else "required"})
        if self.protocol.uses_sasl:
            props.update({
                "sasl.enabled.mechanisms": ",".join(MECHANISMS),
                "sasl.mechanism.inter.broker.protocol": INTER_BROKER_MECHANISM,
                "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                                    f'user_{ADMIN}="{self.admin_password}" user_{BROKER}="{self.broker_password}";',
                f"listener.name.{name.lower()}.{INTER_BROKER_MECHANISM.lower()}.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{BROKER}" password="{self.broker_password}";'})
        return props

    def scram_users(self) -> dict[str, dict[str, str]]:
        """The SCRAM credentials to write under /config/users before the brokers start (SASL labs)."""
        if not self.protocol.uses_sasl:
            return {}
        return {user: {m: str(make_credential(m, password)) for m in SCRAM_MECHANISMS}
                for user, password in ((ADMIN, self.admin_password), (BROKER, self.broker_password))}

    def client_properties(self) -> str:
        """The admin's client configuration (Kafka's client properties, every tool's --command-config)."""
        lines = [f"security.protocol={self.protocol.value}"]
        if self.protocol.uses_tls:
            lines.append(f"ssl.truststore.location={self.ca}")
        if self.protocol.uses_sasl:
            lines += [f"sasl.mechanism={INTER_BROKER_MECHANISM}",
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      f'username="{ADMIN}" password="{self.admin_password}";']
        else:
            lines.append(f"ssl.keystore.location={self.admin_keystore}")
        return "\n".join(lines) + "\n"

    def cluster_entry(self) -> dict:
        """cluster.json's "security" (DESIGN §19)."""
        entry: dict = {"protocol": self.protocol.value, "ca": str(self.ca) if self.protocol.uses_tls else None,
                       "client_properties": str(self.directory / CLIENT_PROPERTIES)}
        if self.protocol.uses_sasl:
            entry.update(mechanisms=list(MECHANISMS), admin={"username": ADMIN, "password": self.admin_password})
        else:
            entry.update(mechanisms=[], admin={"principal": f"User:{CLIENT_DN}",
                                               "keystore": str(self.admin_keystore)})
        return entry


@dataclass(frozen=True)
class LabClients:
    """How the lab's own clients reach its brokers: the one home for the scenario runner's producers, reads and
    consumers, torture, the observer, the demo and the dashboard. Derived from cluster.json's "security" (the
    admin's client.properties), so a secured lab's clients log in as its admin, over TLS where it has TLS; a
    plaintext lab gives empty settings and None, and every client connects as before."""

    properties: str | None = None  # DIR/client.properties, for a subprocess's --command-config
    security: ClientSecurity | None = None  # for our own connections (BrokerConnection, SimpleConsumer)

    @classmethod
    def of(cls, entry: Mapping | None) -> LabClients:
        """From cluster.json's "security" entry (None or absent: a plaintext lab)."""
        if not entry:
            return cls()
        properties = entry["client_properties"]
        return cls(properties, ClientSecurity.from_file(properties))

    def librdkafka(self) -> dict[str, str]:
        """confluent-kafka's (librdkafka's) settings: merge them into a Producer's, Consumer's or AdminClient's."""
        return self.security.librdkafka_config() if self.security is not None else {}

    def kafka_python(self) -> dict:
        """kafka-python's keyword arguments."""
        return self.security.kafka_python_config() if self.security is not None else {}

    def command_config(self) -> list[str]:
        """`--command-config FILE` for a tool or a lab client run as a process of its own (nothing when plaintext)."""
        return ["--command-config", self.properties] if self.properties else []


def lab_security(protocol: str, directory: Path) -> LabSecurity | None:
    """The security of `lab up --security PROTOCOL` (None for plaintext); ValueError for an unknown one."""
    chosen = SecurityProtocol.parse(protocol)
    if chosen is SecurityProtocol.PLAINTEXT:
        return None
    passwords = (secrets.token_urlsafe(12), secrets.token_urlsafe(12)) if chosen.uses_sasl else ("", "")
    return LabSecurity(chosen, directory, *passwords)


def write_lab_files(security: LabSecurity, hosts: Sequence[str], days: int = 2) -> None:
    """The certificates (TLS labs; valid for `days`) and DIR/client.properties, readable by their owner only."""
    if security.protocol.uses_tls:
        certs = make_certificates(security.directory / TLS_DIR, ("localhost", "127.0.0.1", *hosts), days)
        security.admin_keystore.write_text(certs.client_cert.read_text() + certs.client_key.read_text())
        security.admin_keystore.chmod(0o600)
    path = security.directory / CLIENT_PROPERTIES
    path.write_text(security.client_properties())
    path.chmod(0o600)
