"""What the admin tools share: the ZooKeeper session, the topic filter, and Kafka's ways of printing."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from zkbroker.zk.client import ZkClient

# Kafka 0.8.2's tools open their ZkClient with 30 s session and connection timeouts.
TOOL_ZK_TIMEOUT_MS = 30000


class ToolError(Exception):
    """Bad input or a refused operation: the message is the one sentence the user sees."""


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
