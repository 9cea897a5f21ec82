"""`lab up --security`'s configuration, without processes: each protocol's broker properties are a valid
KafkaConfig whose inter-broker login is the lab's broker user, the admin's client properties parse as every
tool's --command-config does, and cluster.json's "security" entry has DESIGN §19's shape."""

import pytest

from zkbroker.client.security import ClientSecurity, inter_broker_security
from zkbroker.config import KafkaConfig, parse_properties
from zkbroker.lab.lab_security import ADMIN, BROKER, lab_security
from zkbroker.security.scram import ScramCredential


def broker_config(security) -> KafkaConfig:
    return KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "zk:2181",
                                   **security.broker_properties("127.0.0.1", 19092)})


@pytest.mark.parametrize("protocol", ["sasl_ssl", "sasl_plaintext"])
def test_a_sasl_lab_logs_brokers_in_as_its_broker_user_and_tools_as_admin(tmp_path, protocol):
    security = lab_security(protocol, tmp_path)
    config = broker_config(security)
    assert config.inter_broker_listener_name == protocol.upper() and config.port == 19092
    login = inter_broker_security(config)
    assert (login.username, login.password, login.mechanism) == (BROKER, security.broker_password, "SCRAM-SHA-512")
    assert config["super.users"] == "User:admin;User:broker"
    admin = ClientSecurity.from_properties(parse_properties(security.client_properties()))
    assert (admin.protocol.value, admin.username, admin.password) == (protocol.upper(), ADMIN,
                                                                     security.admin_password)
    assert admin.cafile == (str(tmp_path / "tls" / "ca.pem") if protocol == "sasl_ssl" else None)
    users = security.scram_users()
    assert set(users) == {ADMIN, BROKER} and all(
        ScramCredential.parse(c) for creds in users.values() for c in creds.values())
    entry = security.cluster_entry()
    assert entry["protocol"] == protocol.upper() and entry["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert entry["admin"] == {"username": "admin", "password": security.admin_password}


def test_an_ssl_lab_authenticates_by_certificate(tmp_path):
    security = lab_security("ssl", tmp_path)
    config = broker_config(security)
    assert config["ssl.client.auth"] == "required"
    assert config["super.users"] == "User:CN=client,O=zkbroker;User:CN=localhost"
    login = inter_broker_security(config)
    assert (login.protocol.value, login.certfile) == ("SSL", str(tmp_path / "tls" / "broker.pem"))
    admin = ClientSecurity.from_properties(parse_properties(security.client_properties()))
    assert admin.certfile == str(tmp_path / "tls" / "admin.pem") and security.scram_users() == {}


def test_plaintext_is_no_security_and_an_unknown_protocol_is_refused(tmp_path):
    assert lab_security("plaintext", tmp_path) is None
    with pytest.raises(ValueError, match="unknown security protocol 'tls'"):
        lab_security("tls", tmp_path)
