"""SCRAM as Kafka uses it: the credential string, making a credential, and the server's side of an exchange
driven by kafka-python's own SCRAM client (an implementation independent of ours and of scramp's server)."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient

from zkbroker.security.scram import (
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
    SaslAuthenticationError,
    ScramCredential,
    ScramError,
    ScramServer,
    ScramState,
    make_credential,
    scram_credentials,
)
from zkbroker.zk.znodes import EntityConfig

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def lookup(users: dict[str, ScramCredential]):
    return users.get


def run_exchange(server: ScramServer, client: ScramClient) -> None:
    server_first = server.evaluate_response(client.first_message())
    client.process_server_first_message(server_first)
    server_final = server.evaluate_response(client.final_message())
    client.process_server_final_message(server_final)  # raises if the server's signature is wrong


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_exchange_with_kafka_pythons_client_succeeds_and_names_the_principal(mechanism):
    server = ScramServer(mechanism, lookup({"alice": make_credential(mechanism, "alice-secret")}))
    run_exchange(server, ScramClient("alice", "alice-secret", mechanism))
    assert server.complete
    assert server.principal == "User:alice"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_fails_with_kafkas_message(mechanism):
    server = ScramServer(mechanism, lookup({"alice": make_credential(mechanism, "alice-secret")}))
    client = ScramClient("alice", "wrong", mechanism)
    client.process_server_first_message(server.evaluate_response(client.first_message()))
    with pytest.raises(SaslAuthenticationError) as failed:
        server.evaluate_response(client.final_message())
    assert failed.value.errno == SASL_AUTHENTICATION_FAILED
    assert failed.value.message == ("Authentication failed during authentication due to invalid credentials "
                                    f"with SASL mechanism {mechanism}")
    assert server.state is ScramState.FAILED
    assert "keys don't match" in server.failure_reason


def test_unknown_user_is_told_the_same_as_a_wrong_password():
    server = ScramServer("SCRAM-SHA-256", lookup({}))
    with pytest.raises(SaslAuthenticationError) as failed:
        server.evaluate_response(ScramClient("mallory", "x", "SCRAM-SHA-256").first_message())
    assert failed.value.message == ("Authentication failed during authentication due to invalid credentials "
                                    "with SASL mechanism SCRAM-SHA-256")
    assert server.failure_reason == "unknown user 'mallory'"
    with pytest.raises(SaslAuthenticationError) as again:
        server.evaluate_response(b"c=biws,r=x,p=eA==")
    assert again.value.errno == ILLEGAL_SASL_STATE


def test_a_credential_for_the_other_mechanism_does_not_authenticate():
    credential = make_credential("SCRAM-SHA-512", "pw")
    server = ScramServer("SCRAM-SHA-256", lookup({"alice": credential}))
    client = ScramClient("alice", "pw", "SCRAM-SHA-256")
    client.process_server_first_message(server.evaluate_response(client.first_message()))
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(client.final_message())


def test_unsupported_mechanism_is_refused_with_code_33():
    with pytest.raises(SaslAuthenticationError) as failed:
        ScramServer("SCRAM-MD5", lookup({}))
    assert failed.value.errno == UNSUPPORTED_SASL_MECHANISM
    assert failed.value.message == "Unsupported SASL mechanism SCRAM-MD5"


def test_rfc7677_test_vector():
    # RFC 7677 section 3: user "user", password "pencil".
    credential = make_credential("SCRAM-SHA-256", "pencil", 4096, base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    server = ScramServer("SCRAM-SHA-256", lookup({"user": credential}),
                         server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server_first = server.evaluate_response(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert server_first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    server_final = server.evaluate_response(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.principal == "User:user"


def test_a_final_message_with_another_nonce_fails():
    server = ScramServer("SCRAM-SHA-256", lookup({"alice": make_credential("SCRAM-SHA-256", "pw")}))
    server.evaluate_response(b"n,,n=alice,r=abc")
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(b"c=biws,r=abcdef-not-the-servers,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")


def test_escaped_user_names():
    server = ScramServer("SCRAM-SHA-256", lookup({"a,b=c": make_credential("SCRAM-SHA-256", "pw")}))
    server.evaluate_response(b"n,,n=a=2Cb=3Dc,r=abc")
    assert server.username == "a,b=c"


def test_an_authorization_id_is_refused():
    server = ScramServer("SCRAM-SHA-256", lookup({"alice": make_credential("SCRAM-SHA-256", "pw")}))
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(b"n,a=bob,n=alice,r=abc")
    assert "authzid" in server.failure_reason


@pytest.mark.parametrize("token", [b"y,,n=alice,r=abc", b"p=tls-unique,,n=alice,r=abc", b"garbage",
                                   b"n,,n=alice", b"\xff\xfe", b""])
def test_malformed_client_first_messages_fail_the_exchange(token):
    server = ScramServer("SCRAM-SHA-256", lookup({"alice": make_credential("SCRAM-SHA-256", "pw")}))
    with pytest.raises(SaslAuthenticationError) as failed:
        server.evaluate_response(token)
    assert failed.value.errno == SASL_AUTHENTICATION_FAILED
    assert server.state is ScramState.FAILED


def test_a_stored_credential_with_too_few_iterations_is_refused():
    weak = ScramCredential(b"salt", b"k" * 32, b"s" * 32, 1024)
    server = ScramServer("SCRAM-SHA-256", lookup({"alice": weak}))
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(b"n,,n=alice,r=abc")
    assert "less than the minimum 4096" in server.failure_reason


def test_credential_string_round_trip_and_kafkas_format():
    credential = make_credential("SCRAM-SHA-512", "pw", 8192, b"0123456789")
    text = str(credential)
    assert text.startswith("salt=MDEyMzQ1Njc4OQ==,stored_key=")
    assert ",server_key=" in text and text.endswith(",iterations=8192")
    assert ScramCredential.parse(text) == credential


def test_user_config_znode_holds_credentials_beside_quotas():
    credential = make_credential("SCRAM-SHA-256", "pw", salt=b"salt")
    data = EntityConfig({"SCRAM-SHA-256": str(credential), "producer_byte_rate": "1024"}).encode()
    assert data.startswith(b'{"version":1,"config":{"SCRAM-SHA-256":"salt=c2FsdA==,stored_key=')
    assert scram_credentials(EntityConfig.decode(data, "user config").config) == {"SCRAM-SHA-256": credential}


@pytest.mark.parametrize("text", ["salt=c2FsdA==,stored_key=AA==,server_key=AA==", "salt=!!,stored_key=AA==,"
                                  "server_key=AA==,iterations=4096", "nonsense",
                                  "salt=c2FsdA==,stored_key=AA==,server_key=AA==,iterations=many"])
def test_malformed_credentials_are_refused(text):
    with pytest.raises(ScramError):
        ScramCredential.parse(text)


def test_iterations_outside_kafkas_bounds_and_unknown_mechanisms_are_refused():
    with pytest.raises(ScramError, match="between 4096 and 16384"):
        make_credential("SCRAM-SHA-256", "pw", 4095)
    with pytest.raises(ScramError, match="between 4096 and 16384"):
        make_credential("SCRAM-SHA-256", "pw", 16385)
    with pytest.raises(ScramError, match="unknown SCRAM mechanism"):
        make_credential("SCRAM-SHA-1", "pw")
