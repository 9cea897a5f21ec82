"""`zkbroker console-producer`: Kafka 0.8.2's kafka-console-producer.sh (kafka.tools.ConsoleProducer).

Reads standard input and sends each line as one message to `--topic`, through our producer
(`zkbroker.client.producer`). The flags are 0.8.2's, mapped onto the one producer we have as 0.8.2 mapped
them onto its new producer: `--request-required-acks` (default 0, as 0.8.2) is acks, `--timeout` (1000 ms) is
linger.ms, `--max-partition-memory-bytes` is batch.size, `--message-send-max-retries` is retries,
`--request-timeout-ms` is the broker's ack timeout. `--sync` waits for each message's answer before reading the
next line. With `--property parse.key=true` each line is `key<key.separator>value` (separator a tab by
default); a line without the separator stops the tool (`No key found on line N: ...`) unless
`--property ignore.error=true`. `--batch-size`, `--queue-size` and `--queue-enqueuetimeout-ms` (0.8.2's old
producer) are accepted and have no effect: batching is by bytes. A message that could not be sent is reported
on stderr and makes the exit status 1 (0.8.2 exited 0). `--producer.config FILE` (Kafka 0.9+'s) gives producer
properties, among them a secured listener's (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`,
`ssl.truststore.location`, as every tool's `--command-config`); the flags above override the keys they set.
"""

from __future__ import annotations

import argparse
import sys

from zkbroker.client.producer import Producer
from zkbroker.config import ConfigError
from zkbroker.tools.common import ToolError, integer
from zkbroker.tools.console_common import flag_true, key_values, properties_file

DEFAULT_ENCODER = "kafka.serializer.DefaultEncoder"
DEFAULT_READER = "kafka.tools.ConsoleProducer$LineMessageReader"


def add_command(commands) -> None:
    p = commands.add_parser("console-producer", help="send lines of standard input to a topic "
                            "(kafka-console-producer.sh)",
                            description="Read data from standard input and publish it to Kafka.")
    p.add_argument("--broker-list", metavar="HOST1:PORT1,HOST2:PORT2",
                   help="REQUIRED: The broker list string in the form HOST1:PORT1,HOST2:PORT2.")
    p.add_argument("--topic", help="REQUIRED: The topic id to produce messages to.")
    p.add_argument("--sync", action="store_true",
                   help="If set message send requests to the brokers are synchronously, one at a time as they "
                        "arrive.")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default="none", metavar="CODEC",
                   help="The compression codec: either 'none', 'gzip', 'snappy', or 'lz4'. If specified without "
                        "value, then it defaults to 'gzip'")
    p.add_argument("--batch-size", metavar="SIZE", help="Accepted (0.8.2's old producer); batching is by bytes.")
    p.add_argument("--message-send-max-retries", default="3", metavar="N",
                   help="Times a message is retried before the producer gives up on it (default 3).")
    p.add_argument("--retry-backoff-ms", default="100", metavar="MS",
                   help="Pause before each retry, after which the metadata is refreshed (default 100).")
    p.add_argument("--timeout", default="1000", metavar="TIMEOUT_MS",
                   help="Longest a message waits to fill a batch when not --sync, in ms (default 1000).")
    p.add_argument("--queue-size", metavar="N", help="Accepted (0.8.2's old producer); no effect.")
    p.add_argument("--queue-enqueuetimeout-ms", metavar="MS", help="Accepted (0.8.2's old producer); no effect.")
    p.add_argument("--request-required-acks", default="0", metavar="ACKS",
                   help="The required acks of the producer requests (default 0).")
    p.add_argument("--request-timeout-ms", default="1500", metavar="MS",
                   help="The ack timeout of the producer requests. Value must be non-negative and non-zero "
                        "(default 1500).")
    p.add_argument("--metadata-expiry-ms", default="300000", metavar="MS",
                   help="Metadata older than this is refreshed (default 300000).")
    p.add_argument("--metadata-fetch-timeout-ms", default="60000", metavar="MS",
                   help="How long to wait for a topic's metadata the first time (default 60000).")
    p.add_argument("--max-memory-bytes", default=str(32 * 1024 * 1024), metavar="BYTES",
                   help="The total memory used by the producer to buffer records (default 33554432).")
    p.add_argument("--max-partition-memory-bytes", default="16384", metavar="BYTES",
                   help="Bytes gathered per partition before a batch is sent (default 16384).")
    p.add_argument("--socket-buffer-size", default=str(100 * 1024), metavar="SIZE",
                   help="The size of the tcp send buffer (default 102400).")
    p.add_argument("--value-serializer", default=DEFAULT_ENCODER, metavar="CLASS",
                   help="Only the default, kafka.serializer.DefaultEncoder (bytes as read), is supported.")
    p.add_argument("--key-serializer", default=DEFAULT_ENCODER, metavar="CLASS",
                   help="Only the default, kafka.serializer.DefaultEncoder (bytes as read), is supported.")
    p.add_argument("--line-reader", default=DEFAULT_READER, metavar="CLASS",
                   help="Only the default line reader is supported.")
    p.add_argument("--property", action="append", metavar="PROP",
                   help="parse.key=true, key.separator=<sep> (a tab by default), ignore.error=true")
    p.add_argument("--new-producer", action="store_true", help="Accepted; there is one producer.")
    p.add_argument("--producer.config", dest="producer_config", metavar="CONFIG_FILE",
                   help="Producer config properties file (Kafka 0.9+'s), e.g. security.protocol, sasl.mechanism, "
                        "sasl.jaas.config, ssl.truststore.location for a secured listener. The options above "
                        "override the keys they set.")
    p.set_defaults(run=run)


def _config(args: argparse.Namespace) -> dict[str, object]:
    for name, flag in (("broker_list", "broker-list"), ("topic", "topic")):
        if not getattr(args, name):
            raise ToolError(f'Missing required argument "[{flag}]"')
    for name, flag in (("value_serializer", "value-serializer"), ("key_serializer", "key-serializer")):
        if getattr(args, name) != DEFAULT_ENCODER:
            raise ToolError(f"Only {DEFAULT_ENCODER} is supported for --{flag}")
    if args.line_reader != DEFAULT_READER:
        raise ToolError(f"Only {DEFAULT_READER} is supported for --line-reader")
    acks = integer(args, "request_required_acks", "request-required-acks")
    if acks not in (-1, 0, 1):
        raise ToolError(f"--request-required-acks must be -1, 0 or 1, not {acks}")
    request_timeout = integer(args, "request_timeout_ms", "request-timeout-ms")
    if request_timeout <= 0:
        raise ToolError("--request-timeout-ms must be non-negative and non-zero")
    return {
        **properties_file(args.producer_config),
        "bootstrap.servers": args.broker_list,
        "client.id": "console-producer",
        "acks": str(acks),
        "compression.type": args.compression_codec,
        "retries": integer(args, "message_send_max_retries", "message-send-max-retries"),
        "retry.backoff.ms": integer(args, "retry_backoff_ms", "retry-backoff-ms"),
        "linger.ms": 0 if args.sync else integer(args, "timeout", "timeout"),
        "timeout.ms": request_timeout,
        "metadata.max.age.ms": integer(args, "metadata_expiry_ms", "metadata-expiry-ms"),
        "metadata.fetch.timeout.ms": integer(args, "metadata_fetch_timeout_ms", "metadata-fetch-timeout-ms"),
        "buffer.memory": integer(args, "max_memory_bytes", "max-memory-bytes"),
        "batch.size": integer(args, "max_partition_memory_bytes", "max-partition-memory-bytes"),
        "send.buffer.bytes": integer(args, "socket_buffer_size", "socket-buffer-size"),
    }


def read_messages(stream, parse_key: bool, key_separator: bytes, ignore_error: bool):
    """(key, value) per line of a binary stream, as 0.8.2's LineMessageReader."""
    for number, raw in enumerate(stream, start=1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        line = line[:-1] if line.endswith(b"\r") else line
        if not parse_key:
            yield None, line
            continue
        at = line.find(key_separator)
        if at < 0:
            if ignore_error:
                yield None, line
                continue
            raise ToolError(f"No key found on line {number}: {line.decode(errors='replace')}")
        yield line[:at], line[at + len(key_separator):]


def run(args: argparse.Namespace) -> int:
    config = _config(args)
    props = key_values(args.property)
    parse_key = flag_true(props, "parse.key")
    key_separator = props.get("key.separator", "\t").encode("utf-8")
    ignore_error = flag_true(props, "ignore.error")
    try:
        producer = Producer(config)
    except (ConfigError, ValueError) as e:
        raise ToolError(str(e)) from None
    failures = []

    def report(metadata, error) -> None:
        if error is not None:
            failures.append(error)
            print(f"Error when sending message to topic {args.topic}: {error}", file=sys.stderr)

    try:
        for key, value in read_messages(sys.stdin.buffer, parse_key, key_separator, ignore_error):
            future = producer.send(args.topic, value, key=key)
            if args.sync:
                try:
                    future.get()
                except Exception as e:
                    report(None, e)
            else:
                future.add_callback(report)
    finally:
        producer.close()
    return 1 if failures else 0
