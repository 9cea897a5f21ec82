"""`meta.properties`: what a KRaft node's log directory says about whose it is (Kafka 3.7's MetaProperties),
written by `zkbroker storage format` and checked before a node opens anything in the directory.

As Kafka 3.7 writes it (java.util.Properties' format: a `#` line, a date comment, then key=value lines):

    #
    #Sat Nov 28 11:47:19 UTC 2026
    cluster.id=fMCL8kv1SWm87L_Md-I2hg
    directory.id=ow3OYVr-S6SkqG7ZBe6wOQ
    node.id=3001
    version=1

`version=1` is the KRaft layout (version 0 is ZooKeeper mode's, with broker.id); `directory.id` (KIP-858) names
each log directory.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from dataclasses import dataclass

from zkbroker.config import parse_properties
from zkbroker.fsync import fsync_path

FILE_NAME = "meta.properties"
KRAFT_VERSION = 1
# Kafka's Uuid.ZERO_UUID and METADATA_TOPIC_ID are reserved, never handed out.
_RESERVED = {bytes(16), bytes(15) + b"\x01"}


class MetaPropertiesError(Exception):
    """A log directory that is not this node's, or not formatted: the message is one sentence saying which."""


def random_uuid() -> str:
    """Kafka's Uuid.randomUuid().toString(): 16 random bytes in base64url without padding (22 characters), never a
    reserved id and never starting with '-' (which a command line would take for an option)."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if raw not in _RESERVED and not text.startswith("-"):
            return text


def parse_uuid(text: str) -> bytes:
    """The 16 bytes of a Kafka Uuid string; ValueError if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError):
        raw = b""
    if len(text) != 22 or len(raw) != 16:
        raise ValueError(f"{text!r} is not a Kafka Uuid (22 characters of base64url, from storage random-uuid)")
    return raw


@dataclass(frozen=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str

    def text(self, now: float | None = None) -> str:
        stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(now))
        return (f"#\n#{stamp}\ncluster.id={self.cluster_id}\ndirectory.id={self.directory_id}\n"
                f"node.id={self.node_id}\nversion={KRAFT_VERSION}\n")


def read(directory: str) -> MetaProperties | None:
    """The directory's meta.properties, None if it has none; MetaPropertiesError if it is not a KRaft one."""
    path = os.path.join(directory, FILE_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except FileNotFoundError:
        return None
    if props.get("version") != str(KRAFT_VERSION):
        raise MetaPropertiesError(f"{path} has version {props.get('version')!r}, not the KRaft layout's "
                                  f"version={KRAFT_VERSION} (is it a ZooKeeper-mode broker's directory?)")
    try:
        return MetaProperties(props["cluster.id"], int(props["node.id"]), props.get("directory.id", ""))
    except (KeyError, ValueError) as exc:
        raise MetaPropertiesError(f"{path} lacks a valid {exc}") from None


def write(directory: str, meta: MetaProperties) -> None:
    """Writes DIR/meta.properties durably (a fsynced temporary file renamed over it)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, FILE_NAME)
    temp = path + ".tmp"
    with open(temp, "w", encoding="utf-8") as f:
        f.write(meta.text())
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)
    fsync_path(directory)


def check(directories: list[str], node_id: int) -> str:
    """The cluster id every directory agrees on, for a node about to start; MetaPropertiesError, one sentence,
    for an unformatted directory, another node's or another cluster's."""
    cluster_id = None
    for directory in directories:
        meta = read(directory)
        if meta is None:
            raise MetaPropertiesError(f"No {FILE_NAME} found in {directory}: format it first with "
                                      f"`zkbroker storage format --cluster-id ID --config FILE`.")
        if meta.node_id != node_id:
            raise MetaPropertiesError(f"{directory} belongs to node {meta.node_id}, not to node.id {node_id}: "
                                      f"format a directory of its own for this node.")
        if cluster_id is not None and meta.cluster_id != cluster_id:
            raise MetaPropertiesError(f"{directory} belongs to cluster {meta.cluster_id}, another directory of "
                                      f"this node to cluster {cluster_id}: a node's directories are one cluster's.")
        cluster_id = meta.cluster_id
    assert cluster_id is not None
    return cluster_id
