"""read_committed in our own readers (DESIGN §18), against a partition a confluent-kafka transactional producer
wrote (committed, aborted and still open transactions beside plain records): the simple consumer and the 0.8.2
high-level consumer behind `zkbroker console-consumer --isolation-level` return the committed and plain records
only, stopping at the last stable offset; read_uncommitted (the default) returns every record; none returns a
transaction marker."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from consumer.simple import READ_COMMITTED, SimpleConsumer
from tests.integration.harness import create_topic
from tests.integration.transactional_data import COMMITTED, EVERYTHING, OPEN_AT, TIMEOUT_S, write_transactions

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"transaction_state_log_num_partitions": 1, "offsets_topic_num_partitions": 1}


def console_consumer(zk_connect: str, topic: str, *flags: str) -> list[bytes]:
    done = subprocess.run([sys.executable, "-m", "zkbroker", "console-consumer", "--zookeeper", zk_connect,
                           "--topic", topic, "--from-beginning", *flags], capture_output=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_our_consumers_read_committed_records_only_up_to_the_last_stable_offset(brokers, zk_connect):
    (broker,) = brokers(1, **SMALL)
    topic = f"isolation-{uuid.uuid4().hex[:6]}"
    create_topic(zk_connect, topic, 1, 1, [broker])
    txn = write_transactions(broker.bootstrap, topic)

    with SimpleConsumer(broker.bootstrap) as consumer:
        assert consumer.latest_offset(topic, 0, READ_COMMITTED) == OPEN_AT
        committed = list(consumer.iter_messages(topic, 0, 0, isolation_level=READ_COMMITTED))
        assert [m.value for m in committed] == COMMITTED
        assert [m.value for m in consumer.iter_messages(topic, 0, 0)] == EVERYTHING
        # one fetch from the aborted transaction's first offset: its records and marker are passed over
        result = consumer.fetch(topic, 0, 4, isolation_level=READ_COMMITTED)
        assert result.high_watermark == OPEN_AT and result.messages[0].value == b"p0"

    # the 0.8.2 consumer (console-consumer): until a 3 s silence, so that records past the LSO would show
    assert console_consumer(zk_connect, topic, "--isolation-level", "read_committed", "--timeout-ms", "3000") \
        == COMMITTED
    assert console_consumer(zk_connect, topic, "--max-messages", str(len(EVERYTHING))) == EVERYTHING
    txn.abort_transaction(TIMEOUT_S)
