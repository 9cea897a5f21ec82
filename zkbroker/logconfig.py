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
