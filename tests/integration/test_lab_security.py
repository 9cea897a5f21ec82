"""`zkbroker lab up --security sasl_ssl` (DESIGN §19): two brokers on one SASL_SSL listener each, reaching each
other as the lab's broker user; cluster.json's "security" names the admin; a topic made with `zkbroker topics
--bootstrap-server ... --command-config DIR/client.properties` replicates, and confluent-kafka produces to it
as the admin over SASL_SSL with SCRAM-SHA-256, trusting the lab's CA."""

from __future__ import annotations

import json
import subprocess
import sys

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
