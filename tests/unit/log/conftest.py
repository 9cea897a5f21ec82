"""Fixtures for the log tests: a clock that moves only when told, a scheduler that runs tasks only when told,
and a factory for logs in a temporary directory."""

from __future__ import annotations

import os

import pytest

from zkbroker.log.log import Log
from zkbroker.log.log_config import LogConfig
from zkbroker.protocol.message_set import build_message_set

START_MS = 1_700_000_000_000


class FakeClock:
    def __init__(self, now: int = START_MS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


class ManualScheduler:
    """Collects (due time, name, task); `run_due` runs the tasks whose time has come."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.tasks: list[tuple[int, str, object]] = []

    def __call__(self, name, task, delay_ms) -> None:
        self.tasks.append((self.clock() + delay_ms, name, task))

    def names(self) -> list[str]:
        return [name for _, name, _ in self.tasks]

    def run_due(self) -> list[str]:
        due = [t for t in self.tasks if t[0] <= self.clock()]
        self.tasks = [t for t in self.tasks if t[0] > self.clock()]
        for _, _, task in due:
            task()
        return [name for _, name, _ in due]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def scheduler(clock) -> ManualScheduler:
    return ManualScheduler(clock)


@pytest.fixture
def make_log(tmp_path, clock):
    """make_log(name="t-0", recovery_point=0, schedule=None, **LogConfig fields) -> Log under tmp_path/logs."""
    opened: list[Log] = []

    def make(name: str = "t-0", recovery_point: int = 0, schedule=None, **config) -> Log:
        kwargs = {"clock": clock}
        if schedule is not None:
            kwargs["schedule"] = schedule
        log = Log(str(tmp_path / "logs" / name), LogConfig(**config), recovery_point, **kwargs)
        opened.append(log)
        return log

    yield make
    for log in opened:
        if os.path.isdir(log.dir):
            log.close()


def message_set(start: int, count: int, *, size: int = 10, key: bytes | None = None, **kwargs) -> bytearray:
    """`count` messages whose values are `value-<n>` padded to `size` bytes, n counting from `start`."""
    items = [(key, f"value-{start + i}".encode().ljust(size, b".")) for i in range(count)]
    return bytearray(build_message_set(items, **kwargs))


@pytest.fixture
def records():
    return message_set
