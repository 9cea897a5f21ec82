"""What the admin tools share: the ZooKeeper session, the topic filter, Kafka's ways of printing, and reading
listed znodes that may hold strangers (another client's foreign znode, unreadable data): each is skipped with
one line on stderr naming it, and the tool shows everything else."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import socket
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from zkbroker import admin
from zkbroker.client.security import ClientSecurity
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import TopicAssignment, ZnodeFormatError

# Kafka 0.8.2's tools open their ZkClient with 30 s session and connection timeouts.
TOOL_ZK_TIMEOUT_MS = 30000


class ToolError(Exception):
    """Bad input or a refused operation: the message is the one sentence the user sees."""


PROBE_TIMEOUT_S = 2.0


def _answers_as_zookeeper(host: str, port: int) -> bool:
    """Whether the server answers ZooKeeper's `srvr` four-letter word (allowed by default since ZooKeeper 3.5; a
    server that does not allow it still answers, saying so). A Kafka listener reads the four letters as a
    request size far above its limit and closes the connection without a word."""
    try:
        with socket.create_connection((host, port), PROBE_TIMEOUT_S) as sock:
            sock.settimeout(PROBE_TIMEOUT_S)
            sock.sendall(b"srvr")
            return bool(sock.recv(64))
    except OSError:
        return False


def refuse_kafka_node(connect: str) -> None:
    """ToolError when the first host of a ZooKeeper connect string is not ZooKeeper but answers Kafka's
    ApiVersions: a KRaft node (a broker without LeaderAndIsr, or a controller) or a ZooKeeper-mode broker."""
    from zkbroker.client.connection import BrokerConnection
    from zkbroker.protocol.api import ApiKey
    from zkbroker.protocol.errors import ProtocolError

    first = connect.split("/", 1)[0].split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit() or _answers_as_zookeeper(host.strip("[]"), int(port)):
        return
    try:
        with BrokerConnection(host.strip("[]"), int(port), "admin-tool", timeout_s=2.0).connect() as conn:
            keys = {k.api_key for k in conn.send(ApiKey.API_VERSIONS, 0, {}).api_keys}
    except (OSError, ProtocolError):
        return  # not a Kafka node either: the ZooKeeper error stands
    if ApiKey.LEADER_AND_ISR not in keys:
        raise ToolError(f"{first} is a node of a KRaft cluster, which has no ZooKeeper: use --bootstrap-server "
                        f"with one of its brokers instead of --zookeeper.")
    raise ToolError(f"{first} is a Kafka broker, not ZooKeeper: give --zookeeper the cluster's zookeeper.connect, "
                    f"or use --bootstrap-server {first}.")


def add_command_config(p: argparse.ArgumentParser) -> None:
    """`--command-config FILE`, for every tool that reaches brokers with --bootstrap-server (DESIGN §19)."""
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties for a secured --bootstrap-server, as Kafka's tools take them "
                        "(security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)")


def command_config(args: argparse.Namespace) -> ClientSecurity | None:
    """The security of the `--command-config` file (None without one: PLAINTEXT)."""
    return ClientSecurity.from_file(getattr(args, "command_config", None))


def integer(args: argparse.Namespace, name: str, flag: str | None = None) -> int | None:
    """The integer option `name` (its argparse dest), None if not given; Kafka's message, naming `flag` (the dest
    with dashes unless given), if not a number."""
    value = getattr(args, name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        flag = flag or name.replace("_", "-")
        raise ToolError(f'Option "[{flag}]" needs an integer, not "{value}"') from None


@contextlib.contextmanager
def zookeeper(connect: str) -> Iterator[ZkClient]:
    """The tool's ZooKeeper session. A connect string that names a node of a KRaft cluster (which has no
    ZooKeeper, DESIGN §17) is refused with one sentence at once, instead of 30 s of retries."""
    refuse_kafka_node(connect)
    zk = ZkClient(connect, TOOL_ZK_TIMEOUT_MS, TOOL_ZK_TIMEOUT_MS, name="admin-tool")
    zk.start()
    try:
        yield zk
    finally:
        zk.close()


def topic_filter(raw: str):
    """0.8.2's Whitelist: commas mean "or", spaces and surrounding quotes are dropped, the whole name must
    match. Returns a predicate on topic names."""
    regex = re.sub(r"""["']+$""", "", re.sub(r"""^["']+""", "", raw.strip().replace(",", "|").replace(" ", "")))
    try:
        pattern = re.compile(regex)
    except re.error:
        raise ToolError(f"{regex} is an invalid regex.") from None
    return lambda topic: pattern.fullmatch(topic) is not None


def tp_string(topic: str, partition: int) -> str:
    """TopicAndPartition.toString: [topic,partition]."""
    return f"[{topic},{partition}]"


def scala_set(partitions: Iterable[tuple[str, int]]) -> str:
    """A Scala Set of TopicAndPartition as 0.8.2 prints it (in sorted order, for a stable output)."""
    return "Set(" + ", ".join(tp_string(t, p) for t, p in sorted(partitions)) + ")"


def read_json_file(path: str) -> object:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ToolError(f"Cannot read {path}: {e.strerror or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ToolError(f"{path} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None


# ---- strangers among the listed znodes --------------------------------------------------------------------------

def skip_znode(path: str, why: str) -> None:
    """Say, in one line on stderr, that the znode at `path` is left out and why."""
    print(f"WARNING: skipping znode {path}: {why}", file=sys.stderr)


def topic_names(zk: ZkClient, parent: str = paths.BROKER_TOPICS) -> list[str]:
    """The children of `parent` (every topic, or a group's owners or offsets) that are legal topic names,
    sorted; another (a foreign znode, such as one named `b'peers'`) is skipped with a warning."""
    names = []
    for name in zk.get_children(parent):
        try:
            admin.validate_topic_name(name)
        except admin.AdminError as e:
            skip_znode(f"{parent}/{name}", str(e))
            continue
        names.append(name)
    return sorted(names)


def read_partitions(zk: ZkClient, topic: str) -> dict[int, tuple[int, ...]] | None:
    """The topic's partition -> replicas, None when it does not exist or is unreadable (warned). A partition
    entry we cannot read (a non-integer id, replicas that are not broker ids) is skipped with a warning, and
    the topic's other partitions are kept."""
    path = paths.topic_path(topic)
    data, stat = zk.get(path)
    if stat is None:
        return None
    try:
        return TopicAssignment.decode(data, path).partitions
    except ZnodeFormatError as e:
        error = e
    try:
        entries = json.loads(data or b"").get("partitions")
    except (ValueError, AttributeError):
        entries = None
    if not isinstance(entries, dict):
        skip_znode(path, str(error))
        return None
    partitions: dict[int, tuple[int, ...]] = {}
    for key, replicas in entries.items():
        # One entry at a time through the one decoder of the znode, so each is judged as the broker judges it.
        try:
            one = json.dumps({"partitions": {key: replicas}}).encode()
            partitions.update(TopicAssignment.decode(one, path).partitions)
        except ZnodeFormatError as e:
            skip_znode(path, f"{e}; the topic's other partitions are shown")
    return partitions


#: Kafka's own message for an error code that came without one (the client's Errors table), for the codes the
#: `--bootstrap-server` tools print per partition
_DEFAULT_MESSAGES = {
    "OFFSET_OUT_OF_RANGE": "The requested offset is not within the range of offsets maintained by the server.",
    "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
    "NOT_LEADER_FOR_PARTITION": "This server is not the leader for that topic-partition.",
    "LEADER_NOT_AVAILABLE": "There is no leader for this topic-partition as we are in the middle of a leadership "
                            "election.",
    "REQUEST_TIMED_OUT": "The request timed out.",
    "POLICY_VIOLATION": "Request parameters do not satisfy the configured policy.",
    "ELECTION_NOT_NEEDED": "Leader election not needed for topic partition.",
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": "Eligible topic partition leaders are not available.",
    "PREFERRED_LEADER_NOT_AVAILABLE": "The preferred leader was not available.",
    "NO_REASSIGNMENT_IN_PROGRESS": "No partition reassignment is in progress.",
    "GROUP_SUBSCRIBED_TO_TOPIC": "Deleting offsets of a topic is forbidden while the consumer group is actively "
                                 "subscribed to it.",
}


def default_message(code: int) -> str:
    """Kafka's message for an error code (its name when zkbroker's tools do not print it)."""
    from zkbroker.protocol.errors import ErrorCode

    try:
        name = ErrorCode(code).name
    except ValueError:
        return f"error code {code}"
    return _DEFAULT_MESSAGES.get(name, name)


def java_exception(code: int, message: str | None = None) -> str:
    """How a Kafka 2.x tool prints a failed future: the exception's class and its message (NOT_CONTROLLER ->
    `org.apache.kafka.common.errors.NotControllerException: ...`)."""
    from zkbroker.protocol.errors import ErrorCode

    try:
        name = ErrorCode(code).name
    except ValueError:
        name = "UNKNOWN_SERVER_ERROR"
    if name == "REQUEST_TIMED_OUT":
        java = "TimeoutException"
    else:
        java = "".join(word.title() for word in name.split("_")) + "Exception"
    return f"org.apache.kafka.common.errors.{java}: {message or _DEFAULT_MESSAGES.get(name, name)}"
