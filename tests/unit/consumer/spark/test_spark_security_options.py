"""The zkkafka source's security options: Kafka's client security properties, `kafka.`-prefixed as Spark's Kafka
source takes them, or in a `kafka.consumer.config` file, mapped to the ClientSecurity our clients log in with."""

from __future__ import annotations

import pickle
import re

import pytest

from consumer.spark import ZkKafkaOptionError, parse_options
from consumer.spark.options import parse_stream_options
from zkbroker.security.listeners import SecurityProtocol

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="s3cret";'


def options(**extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t", **extra}


def test_no_security_options_is_plaintext():
    assert parse_options(options()).security is None
    assert parse_options(options(**{"kafka.security.protocol": "PLAINTEXT"})).security is None


def test_prefixed_options_map_to_the_clients_security(tmp_path):
    security = parse_options(options(**{
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": JAAS,
        "kafka.ssl.truststore.location": str(tmp_path / "ca.pem"),
        "kafka.ssl.endpoint.identification.algorithm": ""})).security
    assert security.protocol is SecurityProtocol.SASL_SSL
    assert (security.mechanism, security.username, security.password) == ("SCRAM-SHA-512", "admin", "s3cret")
    assert security.cafile == str(tmp_path / "ca.pem")
    assert security.check_hostname is False


def test_option_keys_are_case_insensitive_as_sparks():
    security = parse_options(options(**{"KAFKA.Security.Protocol": "sasl_plaintext", "kafka.SASL.mechanism": "PLAIN",
                                        "Kafka.Sasl.Jaas.Config": JAAS})).security
    assert (security.protocol, security.mechanism, security.username) == (SecurityProtocol.SASL_PLAINTEXT, "PLAIN",
                                                                          "admin")


def test_a_consumer_config_file_gives_the_settings_and_options_override_it(tmp_path):
    config = tmp_path / "client.properties"
    config.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={JAAS}\n"
                      f"ssl.truststore.location={tmp_path / 'ca.pem'}\ngroup.id=ignored\n")
    security = parse_stream_options(options(**{"kafka.consumer.config": str(config)})).security
    assert (security.protocol, security.username, security.password) == (SecurityProtocol.SASL_SSL, "admin", "s3cret")
    assert security.cafile == str(tmp_path / "ca.pem")
    overridden = parse_options(options(**{"kafka.consumer.config": str(config),
                                          "kafka.ssl.truststore.location": "/other/ca.pem"})).security
    assert (overridden.cafile, overridden.username) == ("/other/ca.pem", "admin")


def test_ssl_with_a_client_certificate(tmp_path):
    security = parse_options(options(**{"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "ca.pem",
                                        "kafka.ssl.keystore.location": "me.pem"})).security
    assert (security.protocol, security.cafile, security.certfile) == (SecurityProtocol.SSL, "ca.pem", "me.pem")


@pytest.mark.parametrize("given, message", [
    ({"kafka.security.protocol": "TLS"}, "Invalid Kafka security option: Invalid value for configuration "
                                         "security.protocol"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI", "kafka.sasl.jaas.config": JAAS},
     "Invalid Kafka security option: Invalid value 'GSSAPI' for configuration sasl.mechanism"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN"},
     "A SASL security.protocol needs a login"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "JKS"},
     "Option 'kafka.ssl.truststore.type' must be PEM"),
    ({"kafka.consumer.config": "/nonexistent/client.properties"},
     "Cannot read the option 'kafka.consumer.config' /nonexistent/client.properties"),
])
def test_bad_security_options_name_the_option(given, message):
    with pytest.raises(ZkKafkaOptionError, match="^" + re.escape(message)):
        parse_options(options(**given))


def test_the_password_stays_out_of_reprs_and_messages_but_travels_to_the_executors():
    parsed = parse_options(options(**{"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
                                      "kafka.sasl.jaas.config": JAAS}))
    assert "s3cret" not in repr(parsed)
    assert pickle.loads(pickle.dumps(parsed)).security.password == "s3cret"  # what Spark ships to its tasks
    with pytest.raises(ZkKafkaOptionError) as bad:
        parse_options(options(**{"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "KERBEROS",
                                 "kafka.sasl.jaas.config": JAAS}))
    assert "s3cret" not in str(bad.value)


# ---- spark-ingest --command-config ----------------------------------------------------------------------------


def test_spark_ingest_takes_the_security_keys_of_its_command_config(tmp_path):
    from consumer.spark.ingest import IngestConfig, IngestError

    config = tmp_path / "client.properties"
    config.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={JAAS}\n"
                      "ssl.truststore.location=/lab/tls/ca.pem\nacks=all\n")
    ingest = IngestConfig(zookeeper="zk:2181", group="g", output=tmp_path / "out", topic="t",
                          command_config=str(config))
    assert ingest.security_properties() == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                            "sasl.jaas.config": JAAS, "ssl.truststore.location": "/lab/tls/ca.pem"}
    assert IngestConfig(zookeeper="zk:2181", group="g", output=tmp_path).security_properties() == {}
    with pytest.raises(IngestError, match="Cannot read --command-config /nonexistent"):
        IngestConfig(zookeeper="zk:2181", group="g", output=tmp_path,
                     command_config="/nonexistent/client.properties").security_properties()


def test_the_0_8_2_consumers_config_accepts_those_keys(tmp_path):
    """The group membership's connector gets them in its config: its fetchers log in with them."""
    from consumer.config import ConsumerConfig

    config = ConsumerConfig({"zookeeper.connect": "zk:2181", "group.id": "g", "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": JAAS})
    assert (config.security.protocol, config.security.username) == (SecurityProtocol.SASL_SSL, "admin")
