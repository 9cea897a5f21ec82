"""What a step of the Raft node asks its driver to do, in the order it must be done.

A driver performs a step's effects first to last. `PersistQuorumState` and `FlushLog` must be durable
before any effect after them is performed: a vote may leave the node only once the vote is on disk, and a
Fetch acknowledges only what has been flushed. The last effect of every step is a `Timer`.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkbroker.raft.messages import Message
from zkbroker.raft.quorum_state import ElectionState


@dataclass(frozen=True)
class PersistQuorumState:
    """Write `quorum-state` (quorum_state.write_file) before performing what follows."""

    state: ElectionState


@dataclass(frozen=True)
class FlushLog:
    """Make the log durable up to `end_offset` before performing what follows."""

    end_offset: int


@dataclass(frozen=True)
class Send:
    """A request (a fresh `correlation_id`) or the response to one (the request's `correlation_id`)."""

    destination: int
    correlation_id: int
    message: Message


@dataclass(frozen=True)
class Timer:
    """Call the node's `poll` at `deadline_ms` unless another step comes first (it replaces this timer)."""

    deadline_ms: int


Effect = PersistQuorumState | FlushLog | Send | Timer
