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
from typing import TYPE_CHECKING, Any

from zkbroker.config import ConfigError, ConfigKey, ConfigType, KafkaConfig, parse_properties
from zkbroker.protocol.api import ApiKey
from zkbroker.security.listeners import SecurityProtocol

# The client properties of a secured listener, as keys of a client's config table (the producer's, the 0.8.2
# consumer's): what `--producer.config`, `--consumer.config` and `--command-config` files carry. Their values are
# read by ClientSecurity.from_properties.
CLIENT_SECURITY_CONFIGS = tuple(ConfigKey(name, ConfigType.STRING, default, doc) for name, default, doc in (
    ("security.protocol", "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL: how to reach the brokers."),
    ("sasl.mechanism", None, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."),
    ("sasl.jaas.config", None, 'The login: ... required username="u" password="p";'),
    ("sasl.username", None, "The SASL user (instead of sasl.jaas.config)."),
    ("sasl.password", None, "The SASL password (instead of sasl.jaas.config)."),
    ("ssl.truststore.location", None, "A PEM file of the CAs the brokers' certificates must chain to."),
    ("ssl.truststore.type", "PEM", "PEM only."),
    ("ssl.keystore.location", None, "A PEM file with this client's certificate and key."),
    ("ssl.keystore.type", "PEM", "PEM only."),
    ("ssl.key.password", None, "The password of an encrypted key in ssl.keystore.location."),
    ("ssl.endpoint.identification.algorithm", "https", "https: the certificate must name the broker; empty: not "
                                                       "checked."),
))

if TYPE_CHECKING:
    from zkbroker.client.config import ClientConfig

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
    def from_config(cls, config: ClientConfig) -> ClientSecurity | None:
        """A client config's security (its CLIENT_SECURITY_CONFIGS keys); None for PLAINTEXT."""
        props = {key.name: config[key.name] for key in CLIENT_SECURITY_CONFIGS if config[key.name] is not None}
        security = cls.from_properties(props)
        return None if security.protocol is SecurityProtocol.PLAINTEXT else security

    @classmethod
    def from_file(cls, path: str | None) -> ClientSecurity | None:
        """The `--command-config` file's security (None without a file)."""
        if not path:
            return None
        try:
            return cls.from_properties(parse_properties(Path(path).read_text(encoding="utf-8")))
        except OSError as e:
            raise ConfigError(f"Cannot read --command-config {path}: {e.strerror or e}.") from None

    def librdkafka_config(self) -> dict[str, str]:
        """The same security as librdkafka's properties (confluent-kafka, kcat). A PEM key store holding the
        certificate and the key is given as both locations: OpenSSL reads each from the one file."""
        out = {"security.protocol": self.protocol.value.lower()}
        if self.protocol.uses_tls:
            out["ssl.endpoint.identification.algorithm"] = "https" if self.check_hostname else "none"
            if self.cafile:
                out["ssl.ca.location"] = self.cafile
            if self.certfile:
                out.update({"ssl.certificate.location": self.certfile, "ssl.key.location": self.certfile})
                if self.key_password:
                    out["ssl.key.password"] = self.key_password
        if self.protocol.uses_sasl:
            out.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                        "sasl.password": self.password})
        return out

    def kafka_python_config(self) -> dict[str, Any]:
        """The same security as kafka-python's (and aiokafka's) keyword arguments."""
        out: dict[str, Any] = {"security_protocol": self.protocol.value}
        if self.protocol.uses_tls:
            out.update(ssl_cafile=self.cafile, ssl_check_hostname=self.check_hostname)
            if self.certfile:
                out.update(ssl_certfile=self.certfile, ssl_password=self.key_password or None)
        if self.protocol.uses_sasl:
            out.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                       sasl_plain_password=self.password)
        return out

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
