"""`zkkafka` on a secured cluster (DESIGN §19): a `lab up --security sasl_ssl` lab read by PySpark local[2] as the
lab's admin, with the lab's client.properties as `kafka.consumer.config` through `kafka.bootstrap.servers`, and
with Spark's own option names (`kafka.security.protocol`, `kafka.sasl.mechanism`, `kafka.sasl.jaas.config`,
`kafka.ssl.truststore.location` naming the lab's PEM CA) through `zookeeper.connect`; the password stays out of
the plan Spark prints, and a wrong password fails the read with an authentication error."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.lab_support import ok
from tests.integration.spark.support import rows
from tests.real_tools import require

pytestmark = pytest.mark.integration

RECORDS = 20


def zkkafka(spark, **options: str):
    reader = spark.read.format("zkkafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.mark.timeout(300)
def test_zkkafka_reads_a_sasl_ssl_lab_as_its_admin_and_a_wrong_password_fails(spark, lab_dir):
    import confluent_kafka as ck

    require("openssl")
    ok("up", "--dir", str(lab_dir), "--brokers", "1", "--security", "sasl_ssl")
    cluster = json.loads((lab_dir / "cluster.json").read_text())
    security = cluster["security"]
    bootstrap = ",".join(f"{b['host']}:{b['port']}" for b in cluster["brokers"])
    done = subprocess.run([sys.executable, "-m", "zkbroker", "topics", "--bootstrap-server", bootstrap,
                           "--command-config", security["client_properties"], "--create", "--topic", "secured",
                           "--partitions", "1", "--replication-factor", "1"], capture_output=True, text=True,
                          timeout=90)
    assert done.returncode == 0, done.stderr
    password = security["admin"]["password"]
    producer = ck.Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
                            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin", "sasl.password": password,
                            "ssl.ca.location": security["ca"], "acks": "all"})
    for i in range(RECORDS):
        producer.produce("secured", b"v%d" % i, key=b"k%d" % i)
    assert producer.flush(60) == 0
    expected = [("secured", 0, i, b"k%d" % i, b"v%d" % i) for i in range(RECORDS)]

    via_file = zkkafka(spark, **{"kafka.bootstrap.servers": bootstrap, "subscribe": "secured",
                                 "kafka.consumer.config": security["client_properties"]})
    assert rows(via_file) == expected

    def sparks_names(pw: str) -> dict[str, str]:
        return {"zookeeper.connect": cluster["zookeeper"], "subscribe": "secured",
                "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
                "kafka.ssl.truststore.location": security["ca"],
                "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                          f'username="admin" password="{pw}";'}

    df = zkkafka(spark, **sparks_names(password))
    assert rows(df) == expected
    plan = df._jdf.queryExecution().toString()  # what explain() and Spark's logs print
    assert password not in plan

    with pytest.raises(Exception) as failed:
        rows(zkkafka(spark, **sparks_names("not-" + password)))
    assert "AuthenticationError" in str(failed.value) or "uthentication failed" in str(failed.value), \
        str(failed.value)[-2000:]
    assert "not-" + password not in str(failed.value)
