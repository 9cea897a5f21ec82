"""The time a request's handler holds the broker's event loop: Kafka's request handler thread time, which a
request-time quota (`request_percentage`, KIP-124) is measured on.

Our handlers are coroutines on one event loop, so "thread time" is the time the coroutine runs between its
suspensions: `timed(coro, clock)` drives the coroutine itself and adds up each step. Waiting (a fetch's long
poll, acks=all, ZooKeeper) costs nothing, as it costs a Kafka handler thread nothing; work handed to an
executor is not counted (Kafka's equivalent, its purgatories and other threads, is not counted either).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any


class RequestTime:
    """One request's loop time so far (`seconds()` also counts the step running now)."""

    __slots__ = ("busy_s", "_step_started", "_clock")

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.busy_s = 0.0
        self._step_started: float | None = None
        self._clock = clock

    def seconds(self) -> float:
        running = 0.0 if self._step_started is None else self._clock() - self._step_started
        return self.busy_s + running

    def timed(self, coro: Coroutine[Any, Any, Any]) -> _Timed:
        """An awaitable that runs `coro` and counts its steps into this RequestTime."""
        return _Timed(coro, self)


class _Timed:
    __slots__ = ("coro", "time")

    def __init__(self, coro: Coroutine[Any, Any, Any], request_time: RequestTime) -> None:
        self.coro = coro
        self.time = request_time

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, rt, clock = self.coro, self.time, self.time._clock
        send, error = None, None
        while True:
            rt._step_started = started = clock()
            try:
                yielded = coro.send(send) if error is None else coro.throw(error)
            except StopIteration as done:
                return done.value
            finally:
                rt.busy_s += clock() - started
                rt._step_started = None
            try:
                send, error = (yield yielded), None
            except BaseException as e:  # cancelled while suspended: into the coroutine, which may handle it
                send, error = None, e
