"""At-least-once with the ZooKeeper consumer: process a message, *then* commit its offset.

A crash between the two leaves the offset behind the work done, so the next owner of the partition processes
that message again: nothing is lost, a message may be processed twice (seed 000 §6.4, seed 003).

    python examples/at_least_once.py --zookeeper 127.0.0.1:2181/kafka --group g --topic t --out processed.txt

Each processed message is appended to --out as `topic partition offset value`; SIGTERM or Ctrl-C stops
cleanly. `--config key=value` passes consumer settings (repeatable).
"""

from __future__ import annotations

import sys

from example_consumer import messages, parse_args

from consumer.connector import ZookeeperConsumerConnector


def main() -> int:
    args, config = parse_args(__doc__.splitlines()[0], "--out", "file the processed messages are appended to")
    config["auto.commit.enable"] = "false"  # we commit, after processing
    connector = ZookeeperConsumerConnector(config)
    try:
        stream = connector.create_message_streams({args.topic: 1})[args.topic][0]
        with open(args.out, "a", buffering=1) as out:
            for message in messages(stream):
                out.write(f"{message.topic} {message.partition} {message.offset} {message.value.decode()}\n")
                connector.commit_offsets()  # after the work: a crash in between repeats it, never skips it
    finally:
        connector.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
