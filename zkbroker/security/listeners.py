"""Listeners as Kafka 2.x names them (KIP-103, DESIGN §19): `listeners`, `advertised.listeners`,
`listener.security.protocol.map` and `inter.broker.listener.name`.

A listener is a name, a host and a port (`SASL_SSL://:9093`); its security protocol is the map's entry for the
name, or the name itself when it is one of the four protocols (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) and the
map does not say otherwise -- Kafka's default map is each protocol to itself. Pure parsing: errors are
`ValueError`s whose message says what is wrong, which the config table turns into one naming the key.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class SecurityProtocol(enum.Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @classmethod
    def parse(cls, text: str) -> SecurityProtocol:
        try:
            return cls(text.strip().upper())
        except ValueError:
            raise ValueError(f"unknown security protocol {text!r} (known: "
                             f"{', '.join(p.value for p in cls)})") from None


DEFAULT_PROTOCOL_MAP = {p.value: p for p in SecurityProtocol}

_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/\[\]]*):(?P<port>[0-9]+)")


@dataclass(frozen=True)
class EndPoint:
    """One listener: Kafka's EndPoint (listener name, host, port, security protocol)."""

    listener_name: str
    host: str
    port: int
    security_protocol: SecurityProtocol

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


def parse_protocol_map(entries: Sequence[str]) -> dict[str, SecurityProtocol]:
    """`listener.security.protocol.map`: `NAME:PROTOCOL` pairs; empty means Kafka's default (each to itself)."""
    if not entries:
        return dict(DEFAULT_PROTOCOL_MAP)
    mapping: dict[str, SecurityProtocol] = {}
    for entry in entries:
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"{entry!r} is not of the form LISTENER_NAME:SECURITY_PROTOCOL")
        if name.strip().upper() in mapping:
            raise ValueError(f"listener name {name.strip()} is mapped twice")
        mapping[name.strip().upper()] = SecurityProtocol.parse(protocol)
    return mapping


def parse_endpoints(entries: Sequence[str], protocol_map: Mapping[str, SecurityProtocol]) -> list[EndPoint]:
    """`listeners` or `advertised.listeners`: NAME://host:port, each name once (Kafka refuses duplicates)."""
    endpoints: list[EndPoint] = []
    for entry in entries:
        m = _LISTENER.fullmatch(entry.strip())
        if not m:
            raise ValueError(f"{entry!r} is not of the form LISTENER_NAME://host:port")
        name = m["name"].upper()
        if name not in protocol_map:
            raise ValueError(f"listener {name} has no security protocol in listener.security.protocol.map")
        port = int(m["port"])
        if port > 65535:
            raise ValueError(f"port {port} of listener {name} is above 65535")
        if any(e.listener_name == name for e in endpoints):
            raise ValueError(f"listener name {name} appears twice")
        endpoints.append(EndPoint(name, m["host"].strip("[]"), port, protocol_map[name]))
    return endpoints


def inter_broker_listener(endpoints: Sequence[EndPoint], name: str | None) -> EndPoint:
    """The listener brokers use to reach each other: the one named, else PLAINTEXT (Kafka's default
    `security.inter.broker.protocol`), else the only one there is."""
    if name:
        for endpoint in endpoints:
            if endpoint.listener_name == name.strip().upper():
                return endpoint
        raise ValueError(f"{name} is not one of the listeners ({', '.join(e.listener_name for e in endpoints)})")
    for endpoint in endpoints:
        if endpoint.listener_name == "PLAINTEXT":
            return endpoint
    if len(endpoints) == 1:
        return endpoints[0]
    raise ValueError("with several listeners and none named PLAINTEXT, inter.broker.listener.name must say which "
                     "one brokers use")


def advertised_endpoints(listeners: Sequence[EndPoint], advertised: Sequence[EndPoint],
                         default_host: str) -> list[EndPoint]:
    """What the broker registers: each listener's advertised form if given, else the listener itself (with this
    machine's name for an empty host, as Kafka does). An advertised listener must be one the broker has."""
    by_name = {e.listener_name: e for e in advertised}
    for name in by_name:
        if not any(e.listener_name == name for e in listeners):
            raise ValueError(f"advertised listener {name} is not one of the listeners")
    result = []
    for endpoint in listeners:
        chosen = by_name.get(endpoint.listener_name, endpoint)
        result.append(chosen if chosen.host else EndPoint(chosen.listener_name, default_host, chosen.port,
                                                          chosen.security_protocol))
    return result
