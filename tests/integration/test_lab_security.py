"""`zkbroker lab up --security sasl_ssl` (DESIGN §19): two brokers on one SASL_SSL listener each, reaching each
other as the lab's broker user; cluster.json's "security" names the admin; a topic made with `zkbroker topics
--bootstrap-server ... --command-config DIR/client.properties` replicates, and confluent-kafka produces to it
as the admin over SASL_SSL with SCRAM-SHA-256, trusting the lab's CA. The console producer and consumer take the
lab's client.properties as `--producer.config` / `--consumer.config`, and a wrong password fails the producer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.lab_support import ok
from tests.real_tools import require

pytestmark = pytest.mark.integration


def test_a_sasl_ssl_lab_serves_tools_and_clients_with_the_admins_credentials(lab_dir):
    import confluent_kafka as ck

    require("openssl")
    out = ok("up", "--dir", str(lab_dir), "--brokers", "2", "--security", "sasl_ssl")
    cluster = json.loads((lab_dir / "cluster.json").read_text())
    security = cluster["security"]
    assert security["protocol"] == "SASL_SSL" and security["admin"]["username"] == "admin"
    assert f"--command-config {security['client_properties']}" in out
    env = ok("env", "--dir", str(lab_dir))
    assert f"COMMAND_CONFIG={security['client_properties']}" in env
    bootstrap = ",".join(f"{b['host']}:{b['port']}" for b in cluster["brokers"])
    done = subprocess.run([sys.executable, "-m", "zkbroker", "topics", "--bootstrap-server", bootstrap,
                           "--command-config", security["client_properties"], "--create", "--topic", "secured",
                           "--partitions", "1", "--replication-factor", "2"], capture_output=True, text=True,
                          timeout=90)
    assert done.returncode == 0, done.stderr
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "admin", "sasl.password": security["admin"]["password"],
            "ssl.ca.location": security["ca"]}
    producer = ck.Producer({**conf, "acks": "all"})
    failures = []
    for i in range(10):
        producer.produce("secured", b"v%d" % i, on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(60) == 0 and not failures, failures  # acks=all: both replicas fetched it over SASL_SSL
    del producer


def test_the_console_tools_the_dashboard_and_kafka_python_reach_a_sasl_ssl_lab_with_its_client_settings(lab_dir):
    """`console-producer --producer.config` and `console-consumer --consumer.config` with the lab's
    client.properties (Kafka's client properties), kafka-python with LabClients' settings, and the dashboard's
    ListOffsets over AsyncBrokerConnection with the admin's login; a wrong password fails the producer."""
    import asyncio

    from kafka import KafkaConsumer, TopicPartition

    from zkbroker.lab.cluster import LabCluster
    from zkbroker.lab.dashboard.server import _list_offsets

    require("openssl")
    ok("up", "--dir", str(lab_dir), "--brokers", "1", "--security", "sasl_ssl")
    cluster = LabCluster(lab_dir).load()
    clients = cluster.clients
    properties = clients.properties
    tool = [sys.executable, "-m", "zkbroker"]
    done = subprocess.run([*tool, "topics", "--bootstrap-server", cluster.bootstrap(), *clients.command_config(),
                           "--create", "--topic", "lines", "--partitions", "1", "--replication-factor", "1"],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*tool, "console-producer", "--broker-list", cluster.bootstrap(), "--topic", "lines",
                           "--producer.config", properties, "--request-required-acks", "-1", "--sync"],
                          input="one\ntwo\nthree\n", capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*tool, "console-consumer", "--zookeeper", cluster.zookeeper, "--topic", "lines",
                           "--consumer.config", properties, "--from-beginning", "--max-messages", "3"],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0 and done.stdout.splitlines() == ["one", "two", "three"], done.stderr
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap(), **clients.kafka_python(),
                             consumer_timeout_ms=20000)
    try:
        consumer.assign([TopicPartition("lines", 0)])
        consumer.seek_to_beginning()
        assert [m.value for m in consumer][:3] == [b"one", b"two", b"three"]
    finally:
        consumer.close()
    broker = cluster.brokers[0]
    offsets = asyncio.run(_list_offsets(broker.host, broker.port, [("lines", 0)], clients.security))
    assert tuple(offsets[("lines", 0)]) == (0, 3)
    wrong = lab_dir / "wrong.properties"
    wrong.write_text(Path(properties).read_text().replace(clients.security.password, "not-the-password"))
    done = subprocess.run([*tool, "console-producer", "--broker-list", cluster.bootstrap(), "--topic", "lines",
                           "--producer.config", str(wrong), "--metadata-fetch-timeout-ms", "3000", "--sync"],
                          input="x\n", capture_output=True, text=True, timeout=90)
    assert done.returncode != 0 and "Authentication failed" in done.stderr, done.stderr[-2000:]

