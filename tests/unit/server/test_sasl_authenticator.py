"""SaslServerAuthenticator's KIP-152 flow, driven with request frames and kafka-python's SCRAM client: what is
allowed before authentication, Kafka's codes for an unknown mechanism and a failed exchange, bare v0 tokens."""

import asyncio
import struct

import pytest
from kafka.net.sasl.scram import ScramClient

from zkbroker.protocol.api import ApiKey, decode_response, encode_request
from zkbroker.security.scram import make_credential
from zkbroker.server.network import distinguished_name
from zkbroker.server.sasl_authenticator import AuthenticationFailed, IllegalSaslState, SaslServerAuthenticator

CREDENTIALS = {("SCRAM-SHA-256", "alice"): make_credential("SCRAM-SHA-256", "alice-secret")}


async def lookup(mechanism, user):
    return CREDENTIALS.get((mechanism, user))


def authenticator():
    return SaslServerAuthenticator(["PLAIN", "SCRAM-SHA-256"], {"bob": "bob-secret"}, lookup,
                                   lambda header, frame, offset: b"api-versions")


def frame(api_key, version, body):
    return bytearray(encode_request(api_key, version, 7, "test", body)[4:])


def answer(auth, api_key, version, body):
    response = asyncio.run(auth.receive(frame(api_key, version, body)))
    return decode_response(api_key, version, response[4:])[1]


def test_scram_over_sasl_authenticate_completes_with_the_users_principal():
    auth = authenticator()
    assert asyncio.run(auth.receive(frame(ApiKey.API_VERSIONS, 0, {}))) == b"api-versions"
    handshake = answer(auth, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
    assert (handshake.error_code, handshake.mechanisms) == (0, ["PLAIN", "SCRAM-SHA-256"])
    client = ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
    first = answer(auth, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": client.first_message()})
    client.process_server_first_message(first.auth_bytes)
    final = answer(auth, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": client.final_message()})
    client.process_server_final_message(final.auth_bytes)
    assert auth.complete and auth.principal == "User:alice"


def test_a_wrong_password_answers_code_58_then_the_connection_closes():
    auth = authenticator()
    answer(auth, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    with pytest.raises(AuthenticationFailed) as e:
        asyncio.run(auth.receive(frame(ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": b"\0bob\0nope"})))
    body = decode_response(ApiKey.SASL_AUTHENTICATE, 0, e.value.response[4:])[1]
    assert body.error_code == 58 and "Invalid username or password" in body.error_message
    assert not auth.complete


def test_an_unknown_mechanism_answers_code_33_with_the_enabled_ones():
    with pytest.raises(AuthenticationFailed) as e:
        asyncio.run(authenticator().receive(frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})))
    body = decode_response(ApiKey.SASL_HANDSHAKE, 1, e.value.response[4:])[1]
    assert (body.error_code, body.mechanisms) == (33, ["PLAIN", "SCRAM-SHA-256"])


def test_any_other_request_before_authentication_closes_the_connection_unanswered():
    with pytest.raises(IllegalSaslState, match="METADATA"):
        asyncio.run(authenticator().receive(frame(ApiKey.METADATA, 1, {"topics": None})))


def test_after_a_v0_handshake_tokens_travel_as_bare_frames():
    auth = authenticator()
    answer(auth, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
    assert asyncio.run(auth.receive(bytearray(b"\0bob\0bob-secret"))) == struct.pack(">i", 0)
    assert auth.principal == "User:bob"


def test_a_client_certificate_subject_becomes_an_rfc_2253_name():
    subject = ((("countryName", "FR"),), (("organizationName", "Acme, Inc"),), (("commonName", "alice"),))
    assert distinguished_name(subject) == "CN=alice,O=Acme\\, Inc,C=FR"
