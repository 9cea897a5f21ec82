"""`zkbroker console-consumer`: Kafka 0.8.2's kafka-console-consumer.sh (kafka.tools.ConsoleConsumer).

A ZooKeeper high-level consumer (`consumer.connector`) with one stream over `--topic` (which 0.8.2 treats as
a whitelist regex too), `--whitelist` or `--blacklist`; it prints each message's value and a newline to
standard output (`--property print.key=true` puts the key and `key.separator`, a tab, in front; a null key or
value prints `null`), and at the end `Consumed N messages` on standard error.

As 0.8.2: without a group.id (`--group`, or `--consumer.config FILE` holding one) the group is
`console-consumer-<random>` and its znodes are deleted on exit; `--from-beginning` sets auto.offset.reset to
smallest (otherwise largest), and refuses to run for a group that already has offsets unless
`--delete-consumer-offsets` deletes the group's znodes first. `--max-messages N` stops after N messages.
`--timeout-ms` (0.9's flag) stops after that long without a message. SIGTERM and Ctrl-C shut the consumer
down cleanly (offsets committed with auto-commit, the group left at once). `--isolation-level read_committed`
(Kafka 0.11's flag; isolation.level in the consumer config too) prints only what committed transactions and
plain producers wrote, up to the last stable offset. On a secured listener `--consumer.config` carries Kafka's
client properties too (`security.protocol`, `sasl.*`, `ssl.*`): the fetchers log in with them.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys

from kazoo.exceptions import NoNodeError

from consumer.config import ConsumerConfig
from consumer.connector import ConsumerRebalanceFailed, ZookeeperConsumerConnector
from consumer.stream import ConsumerTimeout
from consumer.subscription import Blacklist, Whitelist
from zkbroker.config import ConfigError
from zkbroker.tools.common import ToolError, integer, zookeeper
from zkbroker.tools.console_common import flag_true, key_values, properties_file, separator
from zkbroker.zk import paths

DEFAULT_FORMATTER = "kafka.tools.DefaultMessageFormatter"


def add_command(commands) -> None:
    p = commands.add_parser("console-consumer", help="print a topic's messages (kafka-console-consumer.sh)",
                            description="The console consumer is a tool that reads data from Kafka and outputs it "
                                        "to standard output.")
    p.add_argument("--zookeeper", metavar="URLS",
                   help="REQUIRED: The connection string for the zookeeper connection in the form host:port. "
                        "Multiple URLS can be given to allow fail-over.")
    p.add_argument("--topic", help="The topic id to consume on.")
    p.add_argument("--whitelist", help="Whitelist of topics to include for consumption.")
    p.add_argument("--blacklist", help="Blacklist of topics to exclude from consumption.")
    p.add_argument("--group", help="The consumer group (else the group.id of --consumer.config, else "
                                   "console-consumer-<random>).")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="CONFIG_FILE",
                   help="Consumer config properties file.")
    p.add_argument("--from-beginning", action="store_true",
                   help="If the consumer does not already have an established offset to consume from, start with "
                        "the earliest message present in the log rather than the latest message.")
    p.add_argument("--max-messages", metavar="NUM_MESSAGES",
                   help="The maximum number of messages to consume before exiting. If not set, consumption is "
                        "continual.")
    p.add_argument("--timeout-ms", metavar="MS",
                   help="If specified, exit if no message is available for consumption for the specified interval.")
    p.add_argument("--property", action="append", metavar="PROP",
                   help="print.key=true, key.separator=<sep> (a tab), line.separator=<sep> (a newline)")
    p.add_argument("--delete-consumer-offsets", action="store_true",
                   help="If specified, the consumer path in zookeeper is deleted when starting up")
    p.add_argument("--skip-message-on-error", action="store_true",
                   help="If there is an error when processing a message, skip it instead of halt.")
    p.add_argument("--isolation-level", metavar="LEVEL",
                   help="Set to read_committed in order to filter out transactional messages which are not "
                        "committed. Set to read_uncommitted to read all messages. (default: read_uncommitted)")
    p.add_argument("--formatter", default=DEFAULT_FORMATTER, metavar="CLASS",
                   help="Only the default, kafka.tools.DefaultMessageFormatter, is supported.")
    p.set_defaults(run=run)


class _Stop(Exception):
    pass


def _raise_stop(signum, frame) -> None:
    raise _Stop()


def run(args: argparse.Namespace) -> int:
    if not args.zookeeper:
        raise ToolError('Missing required argument "[zookeeper]"')
    chosen = [(name, getattr(args, name)) for name in ("topic", "whitelist", "blacklist") if getattr(args, name)]
    if len(chosen) != 1:
        raise ToolError("Exactly one of whitelist/blacklist/topic is required.")
    if args.formatter != DEFAULT_FORMATTER:
        raise ToolError(f"Only {DEFAULT_FORMATTER} is supported for --formatter")
    try:
        topic_filter = (Blacklist if chosen[0][0] == "blacklist" else Whitelist)(chosen[0][1])
    except ValueError as e:
        raise ToolError(str(e)) from None
    max_messages = integer(args, "max_messages", "max-messages")
    timeout_ms = integer(args, "timeout_ms", "timeout-ms")
    props = key_values(args.property)
    print_key = flag_true(props, "print.key")
    key_sep = separator(props, "key.separator", "\t")
    line_sep = separator(props, "line.separator", "\n")

    config: dict[str, object] = properties_file(args.consumer_config)
    if args.group:
        config["group.id"] = args.group
    group_given = "group.id" in config
    if not group_given:
        config["group.id"] = f"console-consumer-{random.randrange(100000)}"
    group = str(config["group.id"])
    config["auto.offset.reset"] = "smallest" if args.from_beginning else "largest"
    config["zookeeper.connect"] = args.zookeeper
    if timeout_ms is not None:
        config["consumer.timeout.ms"] = timeout_ms
    if args.isolation_level is not None:
        config["isolation.level"] = args.isolation_level

    try:
        consumer_config = ConsumerConfig(config)  # bad values fail here, before ZooKeeper is contacted
    except ConfigError as e:
        raise ToolError(str(e)) from None

    with zookeeper(args.zookeeper) as zk:
        if args.delete_consumer_offsets:
            zk.kazoo.delete(paths.consumer_group_path(group), recursive=True) \
                if zk.kazoo.exists(paths.consumer_group_path(group)) else None
        elif args.from_beginning and zk.kazoo.exists(paths.consumer_group_path(group) + "/offsets"):
            raise ToolError(f"Found previous offset information for this group {group}. Please use "
                            "--delete-consumer-offsets to delete previous offsets metadata")

    connector = ZookeeperConsumerConnector(consumer_config)
    previous = signal.signal(signal.SIGTERM, _raise_stop)
    out = sys.stdout.buffer
    consumed = 0
    try:
        try:
            stream = connector.create_message_streams_by_filter(topic_filter, 1)[0]
            while max_messages is None or consumed < max_messages:
                try:
                    message = next(stream)
                except (StopIteration, ConsumerTimeout):
                    break
                except ConsumerRebalanceFailed as e:
                    print(f"zkbroker console-consumer: {e}", file=sys.stderr)
                    continue
                try:
                    if print_key:
                        out.write(b"null" if message.key is None else message.key)
                        out.write(key_sep)
                    out.write(b"null" if message.value is None else message.value)
                    out.write(line_sep)
                    out.flush()
                    consumed += 1
                except BrokenPipeError:
                    print("Unable to write to standard out, closing consumer.", file=sys.stderr)
                    break
                except Exception as e:
                    if not args.skip_message_on_error:
                        raise
                    print(f"Error processing message, skipping this message: {e}", file=sys.stderr)
        except (_Stop, KeyboardInterrupt):
            pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        print(f"Consumed {consumed} messages", file=sys.stderr)
        sys.stderr.flush()
        connector.shutdown()
        if not group_given:
            _delete_group(args.zookeeper, group)
    return 0


def _delete_group(zk_connect: str, group: str) -> None:
    """0.8.2 deletes a generated group's znodes at exit "to avoid polluting zookeeper"."""
    with zookeeper(zk_connect) as zk:
        try:
            zk.kazoo.delete(paths.consumer_group_path(group), recursive=True)
        except NoNodeError:
            pass
