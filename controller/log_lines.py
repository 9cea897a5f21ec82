"""Log lines as data: the controller's decisions return them, their drivers emit them.

A decision says what Kafka would log (logger, level, message, arguments); only the driver that carries the
decision out writes it, so a decision can be tested by reading its lines.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

STATE_CHANGE = "state.change.logger"
CONTROLLER = "controller.KafkaController"


@dataclass(frozen=True, slots=True)
class LogLine:
    logger: str
    level: int
    msg: str
    args: tuple = ()

    def text(self) -> str:
        return self.msg % self.args


def controller_line(controller_id: int, level: int, msg: str, *args) -> LogLine:
    """A line of the controller's own log, prefixed as KafkaController's ("[Controller 1]: ...")."""
    return LogLine(CONTROLLER, level, "[Controller %d]: " + msg, (controller_id, *args))


def emit(lines: Iterable[LogLine]) -> None:
    for line in lines:
        logging.getLogger(line.logger).log(line.level, line.msg, *line.args)
