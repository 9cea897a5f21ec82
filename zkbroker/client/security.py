"""A client's side of a secured listener (DESIGN §19): the `--command-config` properties every tool takes
(`security.protocol`, `sasl.mechanism`, `sasl.jaas.config` or `sasl.username`/`sasl.password`,
`ssl.truststore.location`, `ssl.keystore.location`, `ssl.endpoint.identification.algorithm`), and the
handshake a BrokerConnection runs once connected: TLS, then SaslHandshake v1 and SaslAuthenticate v1 with
PLAIN or SCRAM-SHA-256/512 (scramp's client, as the broker uses scramp's server); and `inter_broker_security`,
the same client side for a broker reaching the others' inter-broker listener (the controller's channel, replica
fetchers, transaction markers, controlled shutdown).
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zkbroker.config import ConfigError, KafkaConfig, parse_properties
from zkbroker.protocol.api import ApiKey
from zkbroker.security.listeners import SecurityProtocol

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


def jaas_options(jaas: str) -> dict[str, str]:
    """The `name="value"` options of a JAAS login module line (`username`, `password`, `user_<name>`)."""
    return dict(_JAAS_OPTION.findall(jaas))


class AuthenticationError(ConnectionError):
    """The broker refused our credentials (SaslHandshake or SaslAuthenticate answered an error)."""


@dataclass(frozen=True)
class ClientSecurity:
    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    mechanism: str = "PLAIN"
    username: str = ""
    password: str = ""
    cafile: str | None = None
    certfile: str | None = None  # a PEM file with the client certificate and key (ssl.keystore.location)
    check_hostname: bool = True
    key_password: str = ""  # ssl.key.password: the key in certfile is encrypted

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        try:
            protocol = SecurityProtocol.parse(props.get("security.protocol", "PLAINTEXT"))
        except ValueError as e:
            raise ConfigError(f"Invalid value for configuration security.protocol: {e}") from None
        jaas = jaas_options(props.get("sasl.jaas.config", ""))
        mechanism = props.get("sasl.mechanism", "GSSAPI" if protocol.uses_sasl else "PLAIN").upper()
        if protocol.uses_sasl and mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ConfigError(f"Invalid value '{mechanism}' for configuration sasl.mechanism: PLAIN, SCRAM-SHA-256 "
                              "or SCRAM-SHA-512")
        return cls(protocol, mechanism, props.get("sasl.username", jaas.get("username", "")),
                   props.get("sasl.password", jaas.get("password", "")),
                   props.get("ssl.truststore.location") or None, props.get("ssl.keystore.location") or None,
                   props.get("ssl.endpoint.identification.algorithm", "https").lower() == "https",
                   props.get("ssl.key.password", ""))

    @classmethod
    def from_file(cls, path: str | None) -> ClientSecurity | None:
        """The `--command-config` file's security (None without a file)."""
        if not path:
            return None
        try:
            return cls.from_properties(parse_properties(Path(path).read_text(encoding="utf-8")))
        except OSError as e:
            raise ConfigError(f"Cannot read --command-config {path}: {e.strerror or e}.") from None

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.cafile)
        context.check_hostname = self.check_hostname
        if self.certfile:
            context.load_cert_chain(self.certfile, password=self.key_password or None)
        return context

    def secure(self, sock: socket.socket, host: str,
               exchange: Callable[[socket.socket, int, int, Any], Any]) -> socket.socket:
        """TLS then SASL on a connected blocking socket; `exchange(sock, api_key, version, body)` sends one
        request and returns its answer."""
        if self.protocol.uses_tls:
            sock = self.ssl_context().wrap_socket(sock, server_hostname=host)
        if self.protocol.uses_sasl:
            steps = self.sasl_exchange()
            request = next(steps)
            try:
                while True:
                    request = steps.send(exchange(sock, *request))
            except StopIteration:
                pass
        return sock

    def sasl_exchange(self) -> Generator[tuple[int, int, dict], Any, None]:
        """The SASL exchange, sans I/O: yields each request (api key, version, body) and is sent its answer;
        AuthenticationError when the broker refuses. The blocking and the asyncio connections both drive it."""
        answer = yield ApiKey.SASL_HANDSHAKE, 1, {"mechanism": self.mechanism}
        if answer.error_code:
            raise AuthenticationError(f"SASL mechanism {self.mechanism} refused (error {answer.error_code}); the "
                                      f"broker offers {', '.join(answer.mechanisms)}")
        if self.mechanism == "PLAIN":
            yield from self._token(f"\0{self.username}\0{self.password}".encode())
            return
        import scramp  # only here: a Spark executor ships zkbroker's client without it (consumer/spark)

        client = scramp.ScramClient([self.mechanism], self.username, self.password)
        first = yield from self._token(client.get_client_first().encode())
        client.set_server_first(first.decode())
        final = yield from self._token(client.get_client_final().encode())
        try:
            client.set_server_final(final.decode())
        except scramp.ScramException as e:
            raise AuthenticationError(f"the broker's SCRAM signature is wrong: {e}") from None

    @staticmethod
    def _token(token: bytes) -> Generator[tuple[int, int, dict], Any, bytes]:
        response = yield ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token}
        if response.error_code:
            raise AuthenticationError(response.error_message or f"SASL error {response.error_code}")
        return response.auth_bytes


def inter_broker_security(config: KafkaConfig) -> ClientSecurity | None:
    """How this broker reaches the others' inter-broker listener; None when it is PLAINTEXT. TLS with the
    broker's own key store as its client certificate and its trust store; SASL with
    `sasl.mechanism.inter.broker.protocol` and the username and password of that mechanism's JAAS config (the
    listener's override, else `sasl.jaas.config`), as Kafka's brokers log in."""
    endpoint = config.inter_broker_endpoint
    protocol = endpoint.security_protocol
    if not protocol.uses_tls and not protocol.uses_sasl:
        return None
    mechanism = config["sasl.mechanism.inter.broker.protocol"].upper()
    username = password = ""
    if protocol.uses_sasl:
        key = f"listener.name.{endpoint.listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config"
        options = jaas_options(config.listener_jaas_config(endpoint.listener_name, mechanism))
        username, password = options.get("username", ""), options.get("password", "")
        if not username:
            raise ConfigError(f"Invalid value for configuration {key} (or sasl.jaas.config): a SASL inter-broker "
                              f"listener needs the broker's username=\"...\" password=\"...\" for {mechanism}")
    return ClientSecurity(protocol, mechanism, username, password, config["ssl.truststore.location"] or None,
                          config["ssl.keystore.location"] or None,
                          config["ssl.endpoint.identification.algorithm"].lower() == "https",
                          config["ssl.key.password"])
