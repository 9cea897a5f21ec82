"""Our client's side of a secured listener, without a network: ClientSecurity's sans-I/O SASL exchange driven
against the broker's SaslServerAuthenticator (both ends ours, but SCRAM's proofs are checked by scramp on each
side), and the inter-broker client security a broker derives from its config (DESIGN §19)."""

import asyncio

import pytest

from zkbroker.client.security import AuthenticationError, ClientSecurity, inter_broker_security
from zkbroker.config import ConfigError, KafkaConfig
from zkbroker.protocol.api import decode_response, encode_request
from zkbroker.security.listeners import SecurityProtocol
from zkbroker.security.scram import make_credential
from zkbroker.server.sasl_authenticator import AuthenticationFailed, SaslServerAuthenticator

CREDENTIALS = {("SCRAM-SHA-512", "broker"): make_credential("SCRAM-SHA-512", "broker-secret")}


async def lookup(mechanism, user):
    return CREDENTIALS.get((mechanism, user))


def run_exchange(security: ClientSecurity) -> SaslServerAuthenticator:
    """Drive the client's steps against a broker's authenticator until one side is done."""
    server = SaslServerAuthenticator(["PLAIN", "SCRAM-SHA-512"], {"admin": "admin-secret"}, lookup,
                                     lambda header, frame, offset: b"")
    steps = security.sasl_exchange()
    request = next(steps)
    try:
        while True:
            api_key, version, body = request
            frame = bytearray(encode_request(api_key, version, 1, "test", body)[4:])
            try:
                response = asyncio.run(server.receive(frame))
            except AuthenticationFailed as e:
                response = e.response
            request = steps.send(decode_response(api_key, version, response[4:])[1])
    except StopIteration:
        return server


@pytest.mark.parametrize(("mechanism", "user", "password", "principal"), [
    ("SCRAM-SHA-512", "broker", "broker-secret", "User:broker"),
    ("PLAIN", "admin", "admin-secret", "User:admin"),
])
def test_the_sasl_exchange_authenticates_against_the_brokers_authenticator(mechanism, user, password, principal):
    server = run_exchange(ClientSecurity(SecurityProtocol.SASL_SSL, mechanism, user, password))
    assert server.complete and server.principal == principal


def test_a_refused_password_ends_the_exchange_with_an_authentication_error():
    with pytest.raises(AuthenticationError, match="invalid credentials with SASL mechanism SCRAM-SHA-512"):
        run_exchange(ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, "SCRAM-SHA-512", "broker", "wrong"))


def test_a_mechanism_the_broker_does_not_offer_is_an_authentication_error_naming_the_offered_ones():
    with pytest.raises(AuthenticationError, match="SCRAM-SHA-256 refused .*offers PLAIN, SCRAM-SHA-512"):
        run_exchange(ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, "SCRAM-SHA-256", "broker", "x"))


BASE = {"broker.id": "1", "zookeeper.connect": "zk:2181", "listeners": "PLAINTEXT://:9092,SASL_SSL://:9093",
        "ssl.keystore.location": "/tls/broker.pem", "ssl.truststore.location": "/tls/ca.pem",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "inter.broker.listener.name": "SASL_SSL"}


def test_a_plaintext_inter_broker_listener_needs_no_client_security():
    assert inter_broker_security(KafkaConfig.from_props({**BASE, "inter.broker.listener.name": "PLAINTEXT"})) is None


def test_a_brokers_inter_broker_login_comes_from_the_listeners_jaas_config_and_its_own_stores():
    config = KafkaConfig.from_props({
        **BASE, "sasl.jaas.config": 'x required username="other" password="other";',
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
            'password="broker-secret";'})
    security = inter_broker_security(config)
    assert security == ClientSecurity(SecurityProtocol.SASL_SSL, "SCRAM-SHA-512", "broker", "broker-secret",
                                      "/tls/ca.pem", "/tls/broker.pem", True, "")
    no_check = inter_broker_security(KafkaConfig.from_props({
        **BASE, "ssl.endpoint.identification.algorithm": "",
        "sasl.jaas.config": 'x required username="broker" password="broker-secret" user_broker="broker-secret";'}))
    assert no_check.username == "broker" and not no_check.check_hostname


def test_a_sasl_inter_broker_listener_without_the_brokers_username_names_the_key():
    config = KafkaConfig.from_props({**BASE, "sasl.jaas.config": 'x required user_admin="admin-secret";'})
    with pytest.raises(ConfigError, match="listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"):
        inter_broker_security(config)
