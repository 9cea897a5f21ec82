"""`zkbroker leader-election`: Kafka 2.x's kafka-leader-election.sh (kafka.admin.LeaderElectionCommand, as of 2.6)
through the Admin API's ElectLeaders (KIP-460): `--election-type preferred|unclean` for `--topic T --partition P`,
the partitions of `--path-to-json-file` (`{"partitions": [{"topic": "foo", "partition": 1}]}`) or
`--all-topic-partitions`. Prints, as Kafka:

    Successfully completed leader election (PREFERRED) for partitions foo-0, foo-1
    Valid replica already elected for partitions foo-2
    Error completing leader election (UNCLEAN) for partition: foo-3: org.apache.kafka.common.errors....

and fails (exit 1) with `N replica(s) could not be elected` when any partition did.
"""

from __future__ import annotations

import argparse

from zkbroker.client.admin_client import AdminClient, AdminError
from zkbroker.protocol.errors import ErrorCode
from zkbroker.protocol.schemas import elect_leaders as elect
from zkbroker.tools.common import ToolError, add_command_config, command_config, java_exception, read_json_file

ELECTION_TYPES = {"preferred": elect.PREFERRED, "unclean": elect.UNCLEAN}


def add_command(commands) -> None:
    p = commands.add_parser("leader-election", help="elect preferred or unclean leaders (kafka-leader-election.sh)",
                            description="This tool attempts to elect a new leader from a set of topic partitions. "
                                        "The type of elections supported are preferred replicas and unclean replicas.")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   help="A hostname and port for the broker to connect to, in the form host:port. REQUIRED.")
    add_command_config(p)
    p.add_argument("--election-type", metavar="TYPE",
                   help='Type of election to attempt: "preferred" or "unclean". REQUIRED.')
    p.add_argument("--topic", metavar="TOPIC", help="Name of topic for which to perform an election.")
    p.add_argument("--partition", metavar="ID", help="Partition id for which to perform an election. REQUIRED if "
                                                     "--topic is specified.")
    p.add_argument("--path-to-json-file", metavar="FILE",
                   help='The partitions to elect for, as {"partitions": [{"topic": "foo", "partition": 1}]}.')
    p.add_argument("--all-topic-partitions", action="store_true",
                   help="Perform election on all of the topic partitions.")
    p.set_defaults(run=run)


def _partitions(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    """The partitions asked for (None: all), after Kafka's checks of which options go together."""
    chosen = [flag for flag, given in (("path-to-json-file", args.path_to_json_file), ("topic", args.topic),
                                       ("all-topic-partitions", args.all_topic_partitions)) if given]
    if len(chosen) > 1:
        raise ToolError(f'Option "[{chosen[1]}]" can\'t be used with option "[{chosen[0]}]"')
    if not chosen:
        raise ToolError('One of the options "[all-topic-partitions]", "[path-to-json-file]" or "[topic]" is required')
    if args.all_topic_partitions:
        return None
    if args.topic:
        if args.partition is None:
            raise ToolError('Option "[partition]" is required when option "[topic]" is given')
        try:
            return [(args.topic, int(args.partition))]
        except ValueError:
            raise ToolError(f'Option "[partition]" needs an integer, not "{args.partition}"') from None
    data = read_json_file(args.path_to_json_file)
    if not data:
        raise ToolError("Replica election data is empty")
    if not isinstance(data, dict) or "partitions" not in data:
        raise ToolError('Replica election data is missing "partitions" field')
    out = []
    for entry in data["partitions"] if isinstance(data["partitions"], list) else [None]:
        if (not isinstance(entry, dict) or not isinstance(entry.get("topic"), str)
                or not isinstance(entry.get("partition"), int) or isinstance(entry.get("partition"), bool)):
            raise ToolError(f"Invalid replica election data in {args.path_to_json_file}: each partition needs a "
                            '"topic" string and a "partition" number')
        out.append((entry["topic"], entry["partition"]))
    duplicates = list(dict.fromkeys(tp for tp in out if out.count(tp) > 1))
    if duplicates:
        raise ToolError("Replica election data contains duplicate partitions: "
                        + ",".join(f"{t}-{p}" for t, p in duplicates))
    return out


def run(args: argparse.Namespace) -> int:
    if not args.bootstrap_server:
        raise ToolError('Missing required option(s) [bootstrap-server]')
    if args.election_type is None:
        raise ToolError('Missing required option(s) [election-type]')
    if args.election_type.lower() not in ELECTION_TYPES:
        raise ToolError(f"{args.election_type} is not a valid election type: use preferred or unclean")
    name = args.election_type.upper()
    partitions = _partitions(args)
    try:
        with AdminClient(args.bootstrap_server, client_id="zkbroker-leader-election",
                         security=command_config(args)) as client:
            results = client.elect_leaders(ELECTION_TYPES[args.election_type.lower()], partitions)
    except AdminError as e:
        raise ToolError(f"Error while making request: {e}") from None
    except (OSError, ConnectionError) as e:
        raise ToolError(f"Cannot reach the cluster at {args.bootstrap_server}: {e}") from None
    done = sorted(tp for tp, (code, _) in results.items() if code == ErrorCode.NONE)
    noop = sorted(tp for tp, (code, _) in results.items() if code == ErrorCode.ELECTION_NOT_NEEDED)
    failed = sorted((tp, r) for tp, r in results.items() if r[0] not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED))
    if done:
        print(f"Successfully completed leader election ({name}) for partitions "
              + ", ".join(f"{t}-{p}" for t, p in done))
    if noop:
        print("Valid replica already elected for partitions " + ", ".join(f"{t}-{p}" for t, p in noop))
    if failed:
        for (topic, partition), (code, message) in failed:
            print(f"Error completing leader election ({name}) for partition: {topic}-{partition}: "
                  f"{java_exception(code, message)}")
        raise ToolError(f"{len(failed)} replica(s) could not be elected")
    return 0
