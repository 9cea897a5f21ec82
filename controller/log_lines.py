"""Log lines as data: the controller's decisions return them, their drivers emit them.

A decision says what Kafka would log (logger, level, message, arguments); only the driver that carries the
decision out writes it, so a decision can be tested by reading its lines.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import NamedTuple

STATE_CHANGE = "state.change.logger"
CONTROLLER = "controller.KafkaController"


class LogLine(NamedTuple):
    """One line, immutable; a tuple because decisions about 100,000 partitions make this many."""

    logger: str
    level: int
    msg: str
    args: tuple = ()

    def text(self) -> str:
        return self.msg % self.args


def controller_line(controller_id: int, level: int, msg: str, *args) -> LogLine:
    """A line of the controller's own log, prefixed as KafkaController's ("[Controller 1]: ...")."""
    return LogLine(CONTROLLER, level, "[Controller %d]: " + msg, (controller_id, *args))


_loggers: dict[str, logging.Logger] = {}


def _logger(name: str) -> logging.Logger:
    logger = _loggers.get(name)
    if logger is None:
        logger = _loggers[name] = logging.getLogger(name)
    return logger


def enabled(logger: str, level: int) -> bool:
    """Whether a line at `level` would be written: drivers ask before having thousands of lines made."""
    return _logger(logger).isEnabledFor(level)


def emit(lines: Iterable[LogLine]) -> None:
    for line in lines:
        _logger(line.logger).log(line.level, line.msg, *line.args)
