"""The dashboard of a secured lab (issue 28, DESIGN §19) in a real headless Chromium (Debian's, driven by
Playwright): on a `lab up --security sasl_ssl` lab, a user added with `zkbroker configs` (SCRAM credentials and a
producer_byte_rate quota, no restart) produces with confluent-kafka; the Security tab shows its connection as
User:alice on the SASL_SSL listener and its quota with the broker's last throttle. The screenshot goes to the
test's tmp dir."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.integration.dashboard_support import Dashboard, browser_page, screenshot
from tests.integration.lab_support import ok
from tests.real_tools import require

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WAIT_MS = 60_000
PASSWORD = "alice-secret"
QUOTA = 4096  # bytes per second: ten records of 2 KB are throttled


def zkbroker(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "zkbroker", *args], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_security_tab_shows_who_is_connected_as_whom_and_the_throttled_quota(lab_dir, tmp_path):
    import confluent_kafka as ck

    require("openssl")
    ok("up", "--dir", str(lab_dir), "--brokers", "1", "--security", "sasl_ssl")
    cluster = json.loads((lab_dir / "cluster.json").read_text())
    security, bootstrap = cluster["security"], f"{cluster['brokers'][0]['host']}:{cluster['brokers'][0]['port']}"
    users = ["--zookeeper", cluster["zookeeper"], "--alter", "--entity-type", "users", "--entity-name", "alice"]
    zkbroker("configs", *users, "--add-config", f"SCRAM-SHA-256=[iterations=4096,password={PASSWORD}]")
    zkbroker("configs", *users, "--add-config", f"producer_byte_rate={QUOTA}")
    zkbroker("topics", "--bootstrap-server", bootstrap, "--command-config", security["client_properties"],
             "--create", "--topic", "metered", "--partitions", "1", "--replication-factor", "1")
    throttles: list[float] = []
    producer = ck.Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
                            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": PASSWORD,
                            "ssl.ca.location": security["ca"], "client.id": "alice-producer",
                            "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    dashboard = Dashboard(lab_dir)
    try:
        deadline = time.monotonic() + 60
        while not throttles and time.monotonic() < deadline:  # a user added without a restart: wait for it
            for _ in range(10):
                producer.produce("metered", b"m" * 2048)
            producer.flush(30)
        assert throttles, "the broker never throttled alice"
        shown = dashboard.get("/api/security")
        assert shown["protocol"] == "SASL_SSL" and "SCRAM-SHA-256" in shown["mechanisms"]
        assert "password" not in json.dumps(shown)
        with browser_page() as page:
            page.goto(dashboard.url)
            page.wait_for_selector("#live.on")
            page.locator('.tabs button[data-view="security"]').click()
            alice = page.locator('#connections tr[data-principal="User:alice"][data-listener="SASL_SSL"]')
            alice.first.wait_for(timeout=WAIT_MS)
            assert "alice-producer" in alice.first.inner_text()
            quota = page.locator('#quotas tr[data-user="alice"][data-quota="producer_byte_rate"]')
            quota.wait_for(timeout=WAIT_MS)
            cells = quota.locator("td").all_inner_texts()
            assert cells[4] == f"{QUOTA:,} B/s" and cells[6] != "never" and cells[6].endswith("s ago")
            assert "User:alice × " in page.locator("#security-summary").inner_text()
            screenshot(page, tmp_path, "security")
    finally:
        dashboard.close()
        del producer
    assert (tmp_path / "security.png").stat().st_size > 0
