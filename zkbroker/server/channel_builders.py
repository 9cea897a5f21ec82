"""ChannelBuilders: each configured listener as the socket server serves it (Kafka's ChannelBuilders) -- the
TLS context of SSL and SASL_SSL listeners (PEM key and trust stores, KIP-651; `ssl.client.auth`), and the SASL
authenticator of SASL_PLAINTEXT and SASL_SSL ones (`sasl.enabled.mechanisms`; PLAIN's users from
`sasl.jaas.config`, SCRAM's credentials from `/config/users/<user>` through the CredentialCache). The
client side a broker uses on the inter-broker listener is client/security.py's `inter_broker_security`."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable

from kazoo.exceptions import NoNodeError

from zkbroker.config import KafkaConfig
from zkbroker.protocol.headers import RequestHeader
from zkbroker.security.listeners import EndPoint
from zkbroker.security.plain import plain_users
from zkbroker.security.scram import ScramCredential, ScramError, scram_credentials
from zkbroker.server.bridge import LoopBridge
from zkbroker.server.network import Listener
from zkbroker.server.sasl_authenticator import SaslServerAuthenticator
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import EntityConfig, ZnodeFormatError

log = logging.getLogger("zkbroker.server.ChannelBuilders")

_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


def ssl_server_context(config: KafkaConfig) -> ssl.SSLContext:
    """The broker's TLS context: its certificate chain and key from ssl.keystore.location, the CAs client
    certificates must chain to from ssl.truststore.location (else the system's)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config["ssl.keystore.location"], password=config["ssl.key.password"] or None)
    except (OSError, ssl.SSLError) as e:
        raise OSError(f"ssl.keystore.location {config['ssl.keystore.location']}: cannot load a PEM certificate "
                      f"chain and key: {e}") from e
    truststore = config["ssl.truststore.location"]
    try:
        if truststore:
            context.load_verify_locations(truststore)
        else:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except (OSError, ssl.SSLError) as e:
        raise OSError(f"ssl.truststore.location {truststore}: cannot load PEM certificates: {e}") from e
    context.verify_mode = _CLIENT_AUTH[config["ssl.client.auth"]]
    return context


class CredentialCache:
    """SCRAM credentials by user (Kafka's CredentialCache): read from `/config/users/<user>` the first time a
    user authenticates, then served from memory until a `/config/changes` notification for users clears it
    (`clear`, from the dynamic config manager's thread). A user nobody has asked for yet is read at once, so a
    user added with `zkbroker configs` connects without waiting for the notification; a flood of attempts for
    one user costs one ZooKeeper read, not one each."""

    def __init__(self, zk: ZkClient, bridge: LoopBridge) -> None:
        self.zk = zk
        self.bridge = bridge
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._generation = 0  # bumped by clear: a read that started before it is not cached

    def clear(self) -> None:
        self._generation += 1
        self._users = {}

    async def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        if not user or "/" in user or user in (".", ".."):
            return None
        credentials = self._users.get(user)
        if credentials is None:
            generation = self._generation
            credentials = await self._read(user)
            if generation == self._generation:
                self._users[user] = credentials
        return credentials.get(mechanism)

    async def _read(self, user: str) -> dict[str, ScramCredential]:
        path = paths.user_config_path(user)
        try:
            data, _ = await self.bridge.wait_for(self.zk.kazoo.get_async(path))
        except NoNodeError:
            return {}
        try:
            return scram_credentials(EntityConfig.decode(data, path).config)
        except (ZnodeFormatError, ScramError) as e:
            log.warning("Ignoring the unreadable SCRAM credentials of user %r: %s", user, e)
            return {}


def build_listeners(config: KafkaConfig, credentials: CredentialCache,
                    api_versions: Callable[[RequestHeader, bytearray, int], bytes]) -> list[Listener]:
    context = None
    if any(e.security_protocol.uses_tls for e in config.endpoints):
        context = ssl_server_context(config)
    return [_listener(config, endpoint, context, credentials.lookup, api_versions) for endpoint in config.endpoints]


def _listener(config: KafkaConfig, endpoint: EndPoint, context: ssl.SSLContext | None, lookup: Callable,
              api_versions: Callable) -> Listener:
    protocol = endpoint.security_protocol
    authenticator = None
    if protocol.uses_sasl:
        mechanisms = tuple(config["sasl.enabled.mechanisms"])
        users = {}
        if "PLAIN" in mechanisms:
            users = plain_users(config.listener_jaas_config(endpoint.listener_name, "PLAIN"))

        def authenticator() -> SaslServerAuthenticator:
            return SaslServerAuthenticator(mechanisms, users, lookup, api_versions)
    return Listener(endpoint.listener_name, endpoint.host, endpoint.port, protocol,
                    context if protocol.uses_tls else None, authenticator,
                    config["connection.failed.authentication.delay.ms"], config["sasl.server.max.receive.size"])
