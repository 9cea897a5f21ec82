"""Logging that reads like Kafka's log4j output: `[2026-11-22 12:00:00,123] INFO [Controller 1]: ... (logger)`."""

from __future__ import annotations

import logging
import sys

FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


def configure(level: str = "INFO", stream=None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # kazoo logs every dropped connection at WARNING with a traceback; our ZkClient reports those itself.
    logging.getLogger("kazoo").setLevel(logging.ERROR)


#: A decision or request about at most this many partitions logs each partition's state change at INFO (a lab,
#: a test: every line matters); a larger one logs them at DEBUG, as 0.8.2 logged them at TRACE, and counts them
#: in one INFO line. Python's logging costs ~20 us a line: at 10,000 partitions the lines alone took a
#: controller ~0.3 s, and most of the time a broker took to apply a LeaderAndIsr.
PER_PARTITION_INFO_LIMIT = 100


def per_partition_level(count: int) -> int:
    """The level of the per-partition lines of a decision or request about `count` partitions."""
    return logging.INFO if count <= PER_PARTITION_INFO_LIMIT else logging.DEBUG
