"""Client quotas with a real client (issue 28): a user's producer_byte_rate, set with `zkbroker configs` while the
broker runs, holds librdkafka near the quota by KIP-219's throttling (throttle_time_ms, then the connection muted);
a client id's request_percentage (KIP-124) throttles a librdkafka producer that keeps the broker busy.
The bound checked is loose -- a loaded machine only makes the client slower; bench/security.py measures the rate
against the 5% Kafka's own quota test allows."""

from __future__ import annotations

import time

import pytest

from tests.integration.harness import create_topic, wait_for
from tests.integration.security_support import ALICE, SecureBroker
from tests.real_tools import require
from zkbroker.lab.tls import make_certificates

pytestmark = pytest.mark.integration

QUOTA = 200_000  # bytes per second
RECORD = b"q" * 10_000


def test_a_users_producer_byte_rate_throttles_librdkafka_without_a_restart(tmp_path, zk_connect):
    import subprocess
    import sys

    import confluent_kafka as ck

    require("openssl")
    sb = SecureBroker(tmp_path, 1, zk_connect, make_certificates(tmp_path / "tls"),
                      **{"quota.window.num": 3, "quota.window.size.seconds": 1})
    sb.broker.start()
    try:
        create_topic(zk_connect, "metered", 1, 1, [sb.broker])
        subprocess.run([sys.executable, "-m", "zkbroker", "configs", "--zookeeper", zk_connect, "--alter",
                        "--entity-type", "users", "--entity-name", ALICE[0], "--add-config",
                        f"producer_byte_rate={QUOTA}"], check=True, capture_output=True, timeout=60)
        wait_for(lambda: sb.broker.log_lines("Processed quota config change for users/alice"), 30, "the quota")
        throttles = []
        producer = ck.Producer({"bootstrap.servers": sb.bootstrap("SASL_PLAINTEXT"),
                                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                "sasl.username": ALICE[0], "sasl.password": ALICE[1], "linger.ms": 5,
                                # a short queue, so that what is left at the end drains in a few seconds
                                "queue.buffering.max.kbytes": 300,
                                "throttle_cb": lambda event: throttles.append(event.throttle_time)})
        acked = []
        start = time.monotonic()
        while time.monotonic() - start < 8:
            try:
                producer.produce("metered", RECORD, on_delivery=lambda err, msg: acked.append(err is None))
            except BufferError:
                pass
            producer.poll(0.01)
        assert producer.flush(30) == 0
        elapsed = time.monotonic() - start
        rate = sum(acked) * len(RECORD) / elapsed
        assert throttles and max(throttles) > 0, "the broker never answered a throttle time"
        print(f"produced {rate:.0f} B/s against a quota of {QUOTA} B/s; throttled up to {max(throttles)} s")
        assert rate < 3 * QUOTA, f"{rate:.0f} B/s against a quota of {QUOTA} B/s"
        del producer  # before the broker stops: it would only complain that it is gone
        # the same quotas through the Admin API (DescribeClientQuotas, AlterClientQuotas), as Kafka 2.6's tool
        def configs(*args: str) -> str:
            done = subprocess.run([sys.executable, "-m", "zkbroker", "configs", "--bootstrap-server",
                                   sb.bootstrap("PLAINTEXT"), *args], capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            return done.stdout

        assert configs("--describe", "--entity-type", "users", "--entity-name", ALICE[0]) == (
            f"Quota configs for user-principal 'alice' are producer_byte_rate={float(QUOTA)}\n")
        assert configs("--alter", "--entity-type", "clients", "--entity-default", "--add-config",
                       "consumer_byte_rate=1000") == "Completed updating config for default client-id.\n"
        assert configs("--describe", "--entity-type", "clients") == (
            "Quota configs for default client-id are consumer_byte_rate=1000.0\n")
        wait_for(lambda: sb.broker.log_lines("Processed quota config change for clients/<default>"), 30, "the change")
        # a request-time quota (KIP-124): 0.01% of a handler thread, which a client sending one Produce after
        # another soon exceeds; librdkafka hears throttle_time_ms in its answers
        assert configs("--alter", "--entity-type", "clients", "--entity-name", "busy", "--add-config",
                       "request_percentage=0.01") == "Completed updating config for client-id 'busy'.\n"
        wait_for(lambda: sb.broker.log_lines("Processed quota config change for clients/busy"), 30, "the change")
        request_throttles = []
        busy = ck.Producer({"bootstrap.servers": sb.bootstrap("PLAINTEXT"), "client.id": "busy", "linger.ms": 0,
                            "throttle_cb": lambda event: request_throttles.append(event.throttle_time)})
        deadline = time.monotonic() + 30
        while not request_throttles and time.monotonic() < deadline:
            busy.produce("metered", b"small")
            busy.flush(10)
        assert request_throttles and max(request_throttles) > 0, "no request-time throttle"
        assert max(request_throttles) <= 1.0  # capped at one quota window
        del busy
    finally:
        sb.broker.cleanup()
