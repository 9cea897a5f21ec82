"""The `zkbroker` console script: Kafka 0.8.2's broker and tools under one command (README: Command line).

Every failure ends in one clear sentence on stderr and a non-zero exit; `--verbose` adds the traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable

from zkbroker import logconfig


def _server(args: argparse.Namespace) -> int:
    from zkbroker.config import KafkaConfig
    from zkbroker.server.kafka_server import KafkaServer

    config = KafkaConfig.load(args.config, args.override or ())
    logconfig.configure("DEBUG" if args.verbose else "INFO")
    from zkbroker.log.open_files import raise_soft_limit
    raise_soft_limit()  # every partition holds files open (log/open_files.py): as many as the hard limit allows
    if config.is_kraft_broker and config.is_kraft_controller:
        from zkbroker.server.kraft_server import KafkaRaftServer
        _event_loop_runner()(KafkaRaftServer(config).run())
    elif config.is_kraft_broker:
        from zkbroker.server.broker_server import BrokerServer
        _event_loop_runner()(BrokerServer(config).run())
    elif config.is_kraft:
        from zkbroker.server.controller_server import ControllerServer
        _event_loop_runner()(ControllerServer(config).run())
    else:
        _event_loop_runner()(KafkaServer(config).run())
    return 0


def _event_loop_runner() -> Callable[..., object]:
    """uvloop's run where uvloop is installed (a dependency: its loop spends less CPU per request than
    asyncio's own), asyncio's otherwise. The broker needs nothing uvloop lacks: its sockets go
    through add_reader/add_writer, and sendfile through os.sendfile."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run


def _dump_log(args: argparse.Namespace) -> int:
    from zkbroker.log.dump import dump_log_segments

    dump_log_segments(args.files.split(","), print_data_log=args.print_data_log,
                      verify_index_only=args.verify_index_only, deep_iteration=args.deep_iteration,
                      max_message_size=args.max_message_size,
                      cluster_metadata_decoder=args.cluster_metadata_decoder)
    return 0


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; with `only` set to "server", just the built-in commands: a broker process then
    imports none of the tools (a third of a broker's start-up CPU, and tests and labs start many brokers)."""
    parser = argparse.ArgumentParser(prog="zkbroker", description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="show tracebacks and debug logs")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    server = commands.add_parser("server", help="run a broker, or a KRaft controller with process.roles=controller "
                                                "(Kafka's kafka-server-start.sh)")
    server.add_argument("config", metavar="CONFIG", help="server.properties")
    server.add_argument("--override", action="append", metavar="KEY=VALUE",
                        help="set a property, overriding the file (repeatable)")
    server.set_defaults(run=_server)

    dump_log = commands.add_parser("dump-log", help="print log segments and indexes (Kafka's DumpLogSegments)")
    dump_log.add_argument("--files", required=True, metavar="F[,F]",
                          help="comma-separated .log, .index, .timeindex and .checkpoint files to dump")
    dump_log.add_argument("--print-data-log", action="store_true", help="also print each message's key and payload")
    dump_log.add_argument("--verify-index-only", action="store_true",
                          help="check the index against the log without printing its entries")
    dump_log.add_argument("--deep-iteration", action="store_true", help="print the messages inside compressed ones")
    dump_log.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024, metavar="SIZE",
                          help="size of the largest message (default 5242880)")
    dump_log.add_argument("--cluster-metadata-decoder", action="store_true",
                          help="decode __cluster_metadata records and snapshots (Kafka 3.7's layout; implies "
                               "--print-data-log)")
    dump_log.set_defaults(run=_dump_log)
    if only == "server":
        return parser

    from zkbroker.tools import (
        acls,
        configs,
        delete_records,
        leader_election,
        preferred_replica_election,
        reassign_partitions,
        topics,
    )
    topics.add_command(commands)
    configs.add_command(commands)
    acls.add_command(commands)
    delete_records.add_command(commands)
    leader_election.add_command(commands)
    preferred_replica_election.add_command(commands)
    reassign_partitions.add_command(commands)

    from zkbroker.tools import console_consumer, console_producer, consumer_groups, consumer_offset_checker
    console_producer.add_command(commands)
    console_consumer.add_command(commands)
    consumer_offset_checker.add_command(commands)
    consumer_groups.add_command(commands)

    from zkbroker.tools import transactions
    transactions.add_command(commands)

    from zkbroker.tools import zookeeper_security_migration
    zookeeper_security_migration.add_command(commands)

    from zkbroker.tools import metadata_quorum, storage
    storage.add_command(commands)
    metadata_quorum.add_command(commands)

    from consumer.spark import ingest
    ingest.add_command(commands)

    from zkbroker.lab.cli import add_lab_commands
    add_lab_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only="server" if command == "server" else None)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # the one place that turns failures into a sentence
        if args.verbose:
            logging.getLogger("zkbroker").exception("%s failed", args.command)
        print(f"zkbroker {args.command}: {_sentence(e)}", file=sys.stderr)
        return 1


def _sentence(e: BaseException) -> str:
    from kazoo.exceptions import NoAuthError

    if isinstance(e, NoAuthError):  # kazoo's says nothing more
        from zkbroker.zk.security import JAAS_CONFIG_ENV
        return (f"ZooKeeper refused the change: this cluster's znodes have secure ACLs; log in by setting "
                f"{JAAS_CONFIG_ENV} to its JAAS file.")
    text = str(e).strip() or type(e).__name__
    return text if text.endswith((".", "!", "?")) else text + "."


if __name__ == "__main__":
    sys.exit(main())
