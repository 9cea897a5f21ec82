"""OffsetCheckpoint: a text file of one offset per partition (Kafka's kafka.server.OffsetCheckpoint).

Each log directory holds two: `recovery-point-offset-checkpoint` (the offset below which each log is on
disk) and `replication-offset-checkpoint` (each partition's high watermark). The format, as 0.8.2 writes it:

    0                 <- version
    2                 <- number of entries
    my-topic 0 1234   <- topic partition offset
    my-topic 1 99

A write goes to `<file>.tmp`, is fsynced, and is renamed over the file, so a crash leaves the old or the
new checkpoint, never half of one. (We also fsync the directory, so that the rename itself is durable.)
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping

from zkbroker.fsync import fsync_path
from zkbroker.topic_partition import TopicPartition

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT_FILE = "replication-offset-checkpoint"
#: Kafka 0.11's third file (KIP-107): each log's start offset where DeleteRecords moved it past its first segment
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
CURRENT_VERSION = 0

_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Java's parseInt takes: no blanks, no underscores


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read: the message names the file and what is wrong."""


class OffsetCheckpoint:
    """The checkpoint file at `path`; created empty if absent, and a leftover `.tmp` is removed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            os.remove(path + ".tmp")
        except FileNotFoundError:
            pass
        if not os.path.exists(path):
            open(path, "a").close()

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        lines = [str(CURRENT_VERSION), str(len(offsets))]
        lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
        data = ("\n".join(lines) + "\n").encode()
        temp = self.path + ".tmp"
        with self._lock:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, self.path)
            fsync_path(os.path.dirname(os.path.abspath(self.path)))

    def read(self) -> dict[TopicPartition, int]:
        """The offsets in the file; an empty file, or one with only a version line, holds none."""
        with self._lock:
            try:
                with open(self.path, encoding="utf-8") as f:
                    lines = f.read().splitlines()
            except (OSError, UnicodeDecodeError) as e:
                raise CheckpointError(f"Cannot read offset checkpoint file {self.path}: {e}") from e
        if not lines:
            return {}
        version = self._int(lines[0], "version")
        if version != CURRENT_VERSION:
            raise CheckpointError(f"Unrecognized version of the offset checkpoint file {self.path}: {version}")
        if len(lines) == 1:
            return {}
        expected = self._int(lines[1], "entry count")
        offsets = {}
        for line in lines[2:]:
            pieces = line.split()
            if len(pieces) != 3:
                raise CheckpointError(f"Malformed line in offset checkpoint file {self.path}: '{line}'.")
            topic, partition, offset = pieces
            offsets[TopicPartition(topic, self._int(partition, "partition"))] = self._int(offset, "offset")
        if len(offsets) != expected:
            raise CheckpointError(
                f"Expected {expected} entries but found only {len(offsets)} in offset checkpoint file {self.path}."
            )
        return offsets

    def _int(self, text: str, what: str) -> int:
        if not _INTEGER.fullmatch(text):
            raise CheckpointError(f"Malformed {what} '{text}' in offset checkpoint file {self.path}.")
        return int(text)

