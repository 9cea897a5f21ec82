"""At-least-once with the ZooKeeper consumer: process a message, *then* commit its offset.

A crash between the two leaves the offset behind the work done, so the next owner of the partition processes
that message again: nothing is lost, a message may be processed twice (seed 000 §6.4, seed 003).

    python examples/at_least_once.py --zookeeper 127.0.0.1:2181/kafka --group g --topic t --out processed.txt

Each processed message is appended to --out as `topic partition offset value`; SIGTERM or Ctrl-C stops
cleanly. `--config key=value` passes consumer settings (repeatable).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from consumer.connector import ConsumerRebalanceFailed, ZookeeperConsumerConnector  # noqa: E402
from zkbroker import logconfig  # noqa: E402


def stop_on_sigterm(stream) -> None:
    """SIGTERM ends the stream, so the loop finishes the message in hand, sees StopIteration and shuts the
    connector down cleanly. Ending it from a thread: the handler runs on the main thread, wherever that is
    (perhaps inside the stream's own lock, or waiting for a ZooKeeper answer), and must not act there."""
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=stream.shut_down).start())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zookeeper", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True, help="file the processed messages are appended to")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    config = dict(kv.split("=", 1) for kv in args.config)
    config.update({"zookeeper.connect": args.zookeeper, "group.id": args.group,
                   "auto.commit.enable": "false"})  # we commit, after processing
    logconfig.configure("INFO")  # Kafka-style log lines on stderr: rebalances, owners, offsets

    connector = ZookeeperConsumerConnector(config)
    try:
        stream = connector.create_message_streams({args.topic: 1})[args.topic][0]
        stop_on_sigterm(stream)
        with open(args.out, "a", buffering=1) as out:
            while True:
                try:
                    message = next(stream)
                except ConsumerRebalanceFailed as e:  # nothing owned until the group changes again
                    print(e, file=sys.stderr)
                    continue
                except StopIteration:
                    break
                out.write(f"{message.topic} {message.partition} {message.offset} {message.value.decode()}\n")
                connector.commit_offsets()  # after the work: a crash in between repeats it, never skips it
    finally:
        connector.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
