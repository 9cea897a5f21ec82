"""At-most-once with the ZooKeeper consumer: commit a message's offset, *then* process it.

A crash between the two leaves the offset past work never done, so that message is never processed: nothing
is processed twice, a message may be lost (seed 000 §6.4, seed 003). Auto-commit stays on: it also commits,
at every rebalance and before the partitions are released, what was handed out, so a new owner never starts
before a message this consumer may already be processing.

One more case breaks 0.8.2's at-most-once: a consumer that stalls past its ZooKeeper session timeout (a GC
pause, an overloaded machine) has lost its partitions without knowing it, and a new owner starts from the
last committed offset while the stalled one goes on processing what it was handed. So the example turns on
`offsets.commit.owned.only` (beyond 0.8.2): the commit is written only while this session still owns the
partition, and a message whose commit was refused is not processed.

    python examples/at_most_once.py --zookeeper 127.0.0.1:2181/kafka --group g --topic t --out processed.txt

Each processed message is appended to --out as `topic partition offset value`; SIGTERM or Ctrl-C stops
cleanly. `--config key=value` passes consumer settings (repeatable).
"""

from __future__ import annotations

import sys

from example_consumer import messages, parse_args

from consumer.connector import ZookeeperConsumerConnector


def main() -> int:
    args, config = parse_args(__doc__.splitlines()[0], "--out", "file the processed messages are appended to")
    config.update({"auto.commit.enable": "true", "offsets.commit.owned.only": "true"})
    connector = ZookeeperConsumerConnector(config)
    try:
        stream = connector.create_message_streams({args.topic: 1})[args.topic][0]
        with open(args.out, "a", buffering=1) as out:
            for message in messages(stream):
                # Handing the message out marked it consumed: commit first. A partition whose commit was
                # refused has a new owner already, which starts at the last committed offset: leave it to it.
                if (message.topic, message.partition) in connector.commit_offsets():
                    continue
                out.write(f"{message.topic} {message.partition} {message.offset} {message.value.decode()}\n")
    finally:
        connector.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
