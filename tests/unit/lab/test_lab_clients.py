"""LabClients, the one home of how the lab's own clients reach a secured lab: derived from cluster.json's
"security" entry (the admin's client.properties), as librdkafka settings, kafka-python keyword arguments, our own
ClientSecurity and a `--command-config` for a client run as a process; a plaintext lab gives nothing to add."""

from zkbroker.client.security import ClientSecurity
from zkbroker.config import parse_properties
from zkbroker.lab.lab_security import LabClients, lab_security, write_lab_files


def clients_of(tmp_path, protocol: str) -> tuple[LabClients, object]:
    security = lab_security(protocol, tmp_path)
    path = tmp_path / "client.properties"
    path.write_text(security.client_properties())  # write_lab_files without the certificates
    return LabClients.of(security.cluster_entry()), security


def test_a_sasl_ssl_lab_gives_each_kind_of_client_the_admins_scram_login_and_the_lab_ca(tmp_path):
    clients, security = clients_of(tmp_path, "sasl_ssl")
    ca = str(tmp_path / "tls" / "ca.pem")
    assert clients.librdkafka() == {
        "security.protocol": "sasl_ssl", "ssl.endpoint.identification.algorithm": "https", "ssl.ca.location": ca,
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin", "sasl.password": security.admin_password}
    assert clients.kafka_python() == {
        "security_protocol": "SASL_SSL", "ssl_cafile": ca, "ssl_check_hostname": True,
        "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "admin",
        "sasl_plain_password": security.admin_password}
    assert clients.security == ClientSecurity.from_properties(parse_properties(security.client_properties()))
    assert clients.command_config() == ["--command-config", str(tmp_path / "client.properties")]


def test_an_ssl_lab_gives_the_admins_certificate_as_both_certificate_and_key(tmp_path):
    clients, _ = clients_of(tmp_path, "ssl")
    keystore = str(tmp_path / "tls" / "admin.pem")
    config = clients.librdkafka()
    assert config["security.protocol"] == "ssl" and "sasl.mechanism" not in config
    assert config["ssl.certificate.location"] == config["ssl.key.location"] == keystore
    assert clients.kafka_python()["ssl_certfile"] == keystore


def test_a_sasl_plaintext_lab_has_no_tls_settings(tmp_path):
    clients, _ = clients_of(tmp_path, "sasl_plaintext")
    assert not any(k.startswith("ssl.") for k in clients.librdkafka())
    assert clients.librdkafka()["security.protocol"] == "sasl_plaintext"


def test_a_plaintext_lab_adds_nothing():
    clients = LabClients.of(None)
    assert (clients.librdkafka(), clients.kafka_python(), clients.security, clients.command_config()) == (
        {}, {}, None, [])


def test_the_lab_writes_the_properties_clients_read(tmp_path):
    security = lab_security("sasl_plaintext", tmp_path)
    write_lab_files(security, ())
    assert LabClients.of(security.cluster_entry()).security.password == security.admin_password
    assert (tmp_path / "client.properties").stat().st_mode & 0o777 == 0o600
