"""What the delivery-semantics examples share, so that each of them shows only its order of work and commit:
the command line, Kafka-style logging, a clean stop on SIGTERM, and the message loop.

Each example is run as a script from this directory, so Python finds this module beside it.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from consumer.connector import ConsumerRebalanceFailed  # noqa: E402
from zkbroker import logconfig  # noqa: E402


def parse_args(description: str, sink: str, sink_help: str) -> tuple[argparse.Namespace, dict[str, str]]:
    """--zookeeper, --group, --topic, the example's sink option and repeatable --config key=value; returns the
    arguments and the consumer settings they make. Also starts Kafka-style log lines on stderr (rebalances,
    owners, offsets)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--zookeeper", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument(sink, required=True, help=sink_help)
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    config = dict(kv.split("=", 1) for kv in args.config)
    config.update({"zookeeper.connect": args.zookeeper, "group.id": args.group})
    logconfig.configure("INFO")
    return args, config


def stop_on_sigterm(stream) -> None:
    """SIGTERM ends the stream, so the loop finishes the message in hand, sees the end and shuts the connector
    down cleanly. Ending it from a thread: the handler runs on the main thread, wherever that is (perhaps inside
    the stream's own lock, or waiting for a ZooKeeper answer), and must not act there."""
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=stream.shut_down).start())


def messages(stream) -> Iterator:
    """The stream's messages until it is shut down. A rebalance that gave up leaves nothing owned until the
    group changes again: say so and keep waiting."""
    stop_on_sigterm(stream)
    while True:
        try:
            yield next(stream)
        except ConsumerRebalanceFailed as e:
            print(e, file=sys.stderr)
        except StopIteration:
            return
