"""SASL/PLAIN as Kafka's PlainSaslServer checks it, with users from a JAAS-style sasl.jaas.config."""

import pytest

from zkbroker.security.plain import authenticate_plain, plain_users
from zkbroker.security.scram import SaslAuthenticationError

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" '
        'user_admin="a" user_alice="alice-secret";')


def test_the_users_are_the_user_options_of_the_jaas_line():
    assert plain_users(JAAS) == {"admin": "a", "alice": "alice-secret"}


def test_a_valid_token_gives_the_users_principal():
    users = plain_users(JAAS)
    assert authenticate_plain(b"\0alice\0alice-secret", users) == "User:alice"
    assert authenticate_plain(b"alice\0alice\0alice-secret", users) == "User:alice"


@pytest.mark.parametrize(("token", "message"), [
    (b"\0alice\0wrong", "Invalid username or password"),
    (b"\0mallory\0alice-secret", "Invalid username or password"),
    (b"\0alice\0", "username or password not specified"),
    (b"alice-secret", "expected 3 tokens"),
    (b"admin\0alice\0alice-secret", "different from username"),
    (b"\0\xff\0x", "not UTF-8"),
])
def test_a_bad_token_is_refused_with_code_58(token, message):
    with pytest.raises(SaslAuthenticationError, match=message) as e:
        authenticate_plain(token, plain_users(JAAS))
    assert e.value.errno == 58
