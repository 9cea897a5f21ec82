"""The lab's own clients on a secured lab (DESIGN §19, issue 28): a scenario and a torture run with
`--security sasl_ssl`, so that every client the runner starts logs in as the lab's admin over SASL_SSL — the
confluent-kafka producers, a coordinator group member (confluent-kafka subscribe()), a 0.8.2 ZooKeeper consumer
(zkbroker console-consumer, its fetchers over SASL_SSL), the `read` step (the simple consumer), and the observer's
own requests (DescribeGroups for the group's owners, the leaders' high watermarks when the run settles)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.real_tools import require

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

SCENARIO = """\
name = "secured-clients"
source = "issue 28"
summary = "Every kind of lab client on a SASL_SSL lab, across a leader's kill"
why_one_mode = "What is tested is the clients' login, not a difference between modes."

[cluster]
brokers = 3
config = { "zookeeper.session.timeout.ms" = 3000, "offsets.topic.num.partitions" = "1" }
settle_ms = 15000

[modes.fixed]
expect = "ok"
why = "RF 3, acks=all: nothing acknowledged is lost across one kill."

[[steps]]
action = "create_topic"
topic = "t"
partitions = 2
replication_factor = 3

[[steps]]
action = "consumer"
coordinator = true
name = "member"
group = "g"
topic = "t"

[[steps]]
action = "consumer"
name = "old"
group = "z"
topic = "t"

[[steps]]
action = "wait"
condition = "owns"
consumer = "member"
group = "g"
topic = "t"
size = 2
timeout_ms = 60000

[[steps]]
action = "wait"
condition = "owns"
consumer = "old"
group = "z"
topic = "t"
size = 2
timeout_ms = 60000

[[steps]]
action = "sleep"
ms = 2000
narrate = "The 0.8.2 consumer starts at the log end (the console consumer's largest): its fetchers find it first."

[[steps]]
action = "produce"
topic = "t"
count = 40
as = "first"

[[steps]]
action = "wait"
condition = "log_contains"
consumer = "old"
pattern = "/first/39$"
timeout_ms = 60000

[[steps]]
action = "choose"
broker = "leader:t-0"
as = "lead"

[[steps]]
action = "kill"
broker = "lead"

[[steps]]
action = "produce"
topic = "t"
count = 40
timeout_ms = 30000
as = "second"

[[steps]]
action = "start"
broker = "lead"

[[steps]]
action = "wait"
condition = "isr_size"
topic = "t"
partition = 0
size = 3
timeout_ms = 60000

[[steps]]
action = "read"
topic = "t"
partition = 0
isolation_level = "read_uncommitted"
as = "all"
"""


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zkbroker", "lab", *args, "--security", "sasl_ssl", "--json"],
                          capture_output=True, text=True, timeout=timeout)


def test_a_scenario_on_a_sasl_ssl_lab_runs_every_kind_of_client_as_the_admin(tmp_path):
    require("openssl")
    scenario = tmp_path / "secured.toml"
    scenario.write_text(SCENARIO)
    done = _run("scenario", "run", "--file", str(scenario), "--mode", "fixed", "--dir", str(tmp_path / "lab"),
                timeout=360)
    assert done.returncode == 0, done.stderr[-4000:]
    (run,) = json.loads(done.stdout)["runs"]
    assert run["verdict"] == "ok" and run["expected"] and run["lost"] == 0, run
    assert run["acknowledged"] >= 40, run  # at least the first produce step's, over SASL_SSL
    read = re.search(r"all read (\d+) records of t-0", done.stderr)  # the simple consumer, over SASL_SSL
    assert read and int(read.group(1)) > 0, done.stderr[-3000:]
    assert "security.protocol=SASL_SSL" in (tmp_path / "lab" / "client.properties").read_text()  # the lab's admin
    consumer_log = (tmp_path / "lab" / "consumer-old.log").read_text()
    assert "secured-clients/fixed/seed0/first/39" in consumer_log  # the 0.8.2 consumer fetched over SASL_SSL


SPARK_SCENARIO = """\
name = "secured-spark"
source = "issue 28"
summary = "A scenario's Spark read on a SASL_SSL lab"
faithful = "The zkkafka source in a Spark process of its own, as every spark_read step runs."
why_one_mode = "What is tested is the read's login, not a difference between modes."

[cluster]
brokers = 1

[modes.fixed]
expect = "ok"
why = "The read logs in as the lab's admin and returns what was produced."

[[steps]]
action = "create_topic"
topic = "t"
replicas = [1]

[[steps]]
action = "produce"
topic = "t"
count = 20
as = "first"

[[steps]]
action = "spark_read"
topic = "t"
start = 0
end = 20
master = "local[1]"
as = "r"
"""


@pytest.mark.xdist_group("spark-processes")  # its Spark JVM takes turns with the others' (tests/side_by_side.py)
def test_a_scenarios_spark_read_on_a_sasl_ssl_lab_logs_in_without_the_password_on_its_command_line(tmp_path):
    """The runner gives the read the lab's client.properties as its kafka.consumer.config option: a path."""
    require("openssl")
    scenario = tmp_path / "secured-spark.toml"
    scenario.write_text(SPARK_SCENARIO)
    done = _run("scenario", "run", "--file", str(scenario), "--mode", "fixed", "--dir", str(tmp_path / "lab"),
                timeout=360)
    assert done.returncode == 0, done.stderr[-4000:]
    (run,) = json.loads(done.stdout)["runs"]
    assert run["verdict"] == "ok" and run["lost"] == 0, run
    assert "r read 20 rows of t-0 offsets [0, 20)" in done.stderr, done.stderr[-3000:]
    properties = (tmp_path / "lab" / "client.properties").read_text()
    password = re.search(r'password="([^"]+)"', properties).group(1)
    assert "security.protocol=SASL_SSL" in properties
    assert password not in (tmp_path / "lab" / "spark-read-r.log").read_text()
    assert password not in done.stderr


@pytest.mark.alone  # a lab killed and paused on a clock of its own: CPU-heavy
def test_a_short_torture_on_a_sasl_ssl_lab_keeps_every_acknowledged_record():
    require("openssl")
    done = _run("torture", "--runs", "1", "--seed", "5", "--faults", "kill", "--mode", "fixed", timeout=360)
    assert done.returncode == 0, done.stderr[-4000:]
    (totals,) = json.loads(done.stdout)["modes"]
    assert totals["mode"] == "fixed" and totals["runs"] == 1 and totals["expected"], totals
    assert totals["acknowledged"] > 0 and totals["lost"] == totals["divergent"] == 0, totals
