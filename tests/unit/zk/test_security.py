"""zkbroker.zk.security without a ZooKeeper: JAAS files, Kafka's ACL for each path, kazoo's SASL options."""

import pytest

from zkbroker.zk.security import (
    JAAS_CONFIG_ENV,
    OPEN_ACL,
    SECURE_ACL,
    JaasError,
    acl_for,
    client_jaas,
    read_client_login,
    sasl_options,
    server_jaas,
)


def test_client_jaas_round_trips_its_login(tmp_path):
    path = tmp_path / "jaas.conf"
    path.write_text(client_jaas("kafka", "s3cret"))
    assert read_client_login(path) == ("kafka", "s3cret")
    assert sasl_options({JAAS_CONFIG_ENV: str(path)}) == {"mechanism": "DIGEST-MD5", "username": "kafka",
                                                          "password": "s3cret"}


def test_a_kafka_style_jaas_file_with_both_sections_gives_the_client_login(tmp_path):
    path = tmp_path / "kafka_server_jaas.conf"
    path.write_text(server_jaas({"admin": "a", "kafka": "k"}) + "\n// the brokers' login\n"
                    'Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n'
                    '  username = "kafka"\n  password = "k";\n};\n')
    assert read_client_login(path) == ("kafka", "k")


def test_server_jaas_lists_each_user():
    text = server_jaas({"kafka": "k", "admin": "a"})
    assert text.startswith("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required")
    assert 'user_kafka="k"' in text and 'user_admin="a"' in text


def test_no_environment_variable_means_no_login():
    assert sasl_options({}) is None


@pytest.mark.parametrize(("text", "message"), [
    ("Server { x required user_kafka=\"k\"; };", "has no Client section"),
    ("Client { x required username=\"kafka\"; };", "needs username and password"),
])
def test_a_jaas_file_without_a_usable_login_is_named_in_the_error(tmp_path, text, message):
    path = tmp_path / "jaas.conf"
    path.write_text(text)
    with pytest.raises(JaasError, match=message) as e:
        read_client_login(path)
    assert str(path) in str(e.value)


def test_a_missing_jaas_file_names_the_variable(tmp_path):
    with pytest.raises(JaasError, match=f"Cannot read the JAAS file .*missing.conf \\(from \\${JAAS_CONFIG_ENV}\\)"):
        sasl_options({JAAS_CONFIG_ENV: str(tmp_path / "missing.conf")})


def test_a_password_with_a_quote_is_refused():
    with pytest.raises(JaasError, match="cannot hold a quote"):
        client_jaas("kafka", 'a"b')


@pytest.mark.parametrize("path", ["/", "/controller", "/controller_epoch", "/brokers/ids/1", "/admin/delete_topics",
                                  "/brokers/topics/t/partitions/0/state", "/config/topics/t", "/consumersX"])
def test_kafka_znodes_get_the_secure_acl(path):
    assert acl_for(path, secure=True) == SECURE_ACL


@pytest.mark.parametrize("path", ["/consumers", "/consumers/g/offsets/t/0", "/consumers/g/ids/c"])
def test_consumers_stay_world_writable(path):
    assert acl_for(path, secure=True) == OPEN_ACL


def test_without_security_every_znode_is_world_writable():
    assert acl_for("/controller", secure=False) == OPEN_ACL
