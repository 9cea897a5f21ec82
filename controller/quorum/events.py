"""The quorum controller's one event queue and its purgatory (Kafka's ControllerEventQueue and
DeferredEventQueue), without threads or I/O.

* ``EventQueue``: operations in arrival order; the driver runs them from its one loop (``QuorumController.poll``),
  so no two operations ever see each other half done.
* ``Pending``: what a caller holds for an answer; done when the answer is known.
* ``Purgatory``: answers held until the log commits an offset. A write's answer may go out only once its records
  are committed (a client told "created" must find the topic after any failover); a read's answer waits for the
  writes it has seen (read-your-writes across requests).
* ``ControllerResult``: a manager's answer to a request: the records to append (one batch, all or nothing) and
  the response to give once they commit; an operation too large for one batch (a broker fenced with tens of
  thousands of partitions) gives its first part and ``more``, the rest, run as a new event behind the ones that
  arrived meanwhile, so heartbeats are answered between its batches (``MAX_RECORDS_PER_BATCH``).
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zkbroker.metadata.records import MetadataRecord

#: The records one operation appends in one turn of the queue, at most (a part of a non-atomic operation; a
#: request's own records are bounded by zkbroker/admin_checks.py). Kafka's controller caps a batch at 10,000
#: records; a Python controller on a loaded 2-core machine takes over a second for that many (build, frame,
#: replay), a heartbeat's whole interval, hence a fifth of it.
MAX_RECORDS_PER_BATCH = 2000

#: The records the active controller lets wait for their commit before it runs the next event: a part of a large
#: operation (or any event) waits while a whole part is still uncommitted. Kafka's Raft client runs on a thread of
#: its own, so appends never hold up its answers to the followers' Fetches; here the Raft driver and the
#: controller share one loop, and parts appended back to back (each a loop turn of build, frame and replay) kept a
#: loaded leader from answering a Fetch for the fetch timeout: its follower stood for election with nothing of
#: the parts committed. Waiting for each part's commit lets the followers fetch it first.
MAX_UNCOMMITTED_RECORDS = MAX_RECORDS_PER_BATCH


@dataclass
class ControllerResult:
    records: list[MetadataRecord] = field(default_factory=list)
    response: Any = None
    #: The rest of a non-atomic operation, computed afresh from the state its first parts left: None when done.
    #: The answer goes out once the last part commits.
    more: Callable[[], ControllerResult] | None = None


class Pending:
    """A response to come: ``done`` once set; ``response`` is the answer (a dict shaped like the wire response),
    or ``error`` the error code when the controller could not answer at all (NOT_CONTROLLER)."""

    __slots__ = ("_callbacks", "done", "error", "name", "response")

    def __init__(self, name: str) -> None:
        self.name = name
        self.done = False
        self.response: Any = None
        self.error: int | None = None
        self._callbacks: list[Callable[[Pending], None]] = []

    def add_done_callback(self, callback: Callable[[Pending], None]) -> None:
        if self.done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def complete(self, response: Any) -> None:
        self._finish(response, None)

    def fail(self, error_code: int) -> None:
        self._finish(None, error_code)

    def _finish(self, response: Any, error: int | None) -> None:
        if self.done:
            return
        self.done, self.response, self.error = True, response, error
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def __repr__(self) -> str:
        state = "pending" if not self.done else (f"error {self.error}" if self.error is not None else "done")
        return f"<Pending {self.name} {state}>"


@dataclass(frozen=True)
class ControllerEvent:
    """One operation: `run()` gives a ControllerResult (a write) or None (a timer task that found nothing)."""

    name: str
    run: Callable[[], ControllerResult | None]
    pending: Pending


class EventQueue:
    def __init__(self) -> None:
        self._events: deque[ControllerEvent] = deque()

    def append(self, event: ControllerEvent) -> None:
        self._events.append(event)

    def push_front(self, event: ControllerEvent) -> None:
        self._events.appendleft(event)

    def pop(self) -> ControllerEvent | None:
        return self._events.popleft() if self._events else None

    def drain(self) -> list[ControllerEvent]:
        events = list(self._events)
        self._events.clear()
        return events

    def __len__(self) -> int:
        return len(self._events)


class Purgatory:
    """Answers keyed by the offset that must commit first, completed in offset order."""

    def __init__(self) -> None:
        self._offsets: list[int] = []
        self._waiting: list[tuple[Pending, Any]] = []

    def add(self, offset: int, pending: Pending, response: Any) -> None:
        i = bisect.bisect_right(self._offsets, offset)
        self._offsets.insert(i, offset)
        self._waiting.insert(i, (pending, response))

    def complete_up_to(self, offset: int) -> int:
        i = bisect.bisect_right(self._offsets, offset)
        done, self._waiting[:i] = self._waiting[:i], []
        del self._offsets[:i]
        for pending, response in done:
            pending.complete(response)
        return len(done)

    def fail_all(self, error_code: int) -> None:
        waiting, self._waiting, self._offsets = self._waiting, [], []
        for pending, _ in waiting:
            pending.fail(error_code)

    def __len__(self) -> int:
        return len(self._waiting)
