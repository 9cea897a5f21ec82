"""Small builders for the Raft rule tests: a node with a fixed random source, logs from epoch lists, and a
pump that carries a step's messages between nodes in the order they were sent."""

from __future__ import annotations

import random

from zkbroker.raft.config import QuorumConfig
from zkbroker.raft.effects import Effect, PersistQuorumState, Send
from zkbroker.raft.log import InMemoryLog
from zkbroker.raft.messages import LogEntry
from zkbroker.raft.node import RaftNode
from zkbroker.raft.quorum_state import ElectionState

VOTERS = frozenset({1, 2, 3})


def make_node(node_id: int = 1, voters: frozenset[int] = VOTERS, log: InMemoryLog | None = None,
              stored: ElectionState | None = None, now: int = 0, seed: int = 7, polled: bool = True,
              **config) -> RaftNode:
    """A node started at `now`; with `polled`, its first poll (its startup effects) is done and dropped."""
    node = RaftNode(QuorumConfig(node_id=node_id, voters=voters, **config),
                    log if log is not None else InMemoryLog(), stored, random.Random(seed), now)
    if polled:
        node.poll(now)
    return node


def log_of(*epochs: int) -> InMemoryLog:
    """A log whose entry at offset i has epoch epochs[i] (data records naming their offset and epoch)."""
    return InMemoryLog([LogEntry(i, e, f"{i}@{e}".encode()) for i, e in enumerate(epochs)])


def sends(effects: list[Effect], kind: type | None = None) -> list[Send]:
    return [e for e in effects if isinstance(e, Send) and (kind is None or isinstance(e.message, kind))]


def persisted(effects: list[Effect]) -> list[ElectionState]:
    return [e.state for e in effects if isinstance(e, PersistQuorumState)]


def stand(node: RaftNode) -> list[Effect]:
    """Lets the node's election timer run out: it becomes a candidate and asks for votes."""
    return node.poll(node.state.election_deadline)


def pump(nodes: dict[int, RaftNode], sender: int, effects: list[Effect], now: int, rounds: int = 50) -> None:
    """Delivers messages breadth-first until none is left (or `rounds` hops), all at time `now`."""
    queue = [(sender, s) for s in sends(effects)]
    for _ in range(rounds):
        if not queue:
            return
        batch, queue = queue, []
        for src, send in batch:
            if send.destination in nodes:
                out = nodes[send.destination].handle(now, src, send.correlation_id, send.message)
                queue += [(send.destination, s) for s in sends(out)]
