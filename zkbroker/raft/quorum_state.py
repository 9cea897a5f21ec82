"""What a node persists about elections (Kafka's ElectionState) and the `quorum-state` file that holds it.

The file is one line of JSON as Kafka 3.7's FileQuorumStateStore writes it: QuorumStateData version 0 in
field order, then `data_version`, no spaces, no newline:

    {"clusterId":"","leaderId":3001,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":3001},{"voterId":3002},{"voterId":3003}],"data_version":0}

(one line in the file). Kafka 3.7 leaves clusterId empty and appliedOffset 0; -1 means "none" for the ids.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from zkbroker.fsync import fsync_path

FILE_NAME = "quorum-state"
DATA_VERSION = 0


@dataclass(frozen=True)
class ElectionState:
    epoch: int
    leader_id: int | None = None
    voted_id: int | None = None
    voters: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if self.leader_id is not None and self.voted_id is not None and self.leader_id != self.voted_id:
            # Kafka allows both only when they agree; a leader elected in an epoch ends the voting in it.
            raise ValueError(f"epoch {self.epoch}: leader {self.leader_id} but voted for {self.voted_id}")


class QuorumStateError(ValueError):
    """The quorum-state file does not hold what Kafka 3.7 writes."""


def encode(state: ElectionState) -> str:
    data = {
        "clusterId": "",
        "leaderId": -1 if state.leader_id is None else state.leader_id,
        "leaderEpoch": state.epoch,
        "votedId": -1 if state.voted_id is None else state.voted_id,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": v} for v in sorted(state.voters)],
        "data_version": DATA_VERSION,
    }
    return json.dumps(data, separators=(",", ":"))


def decode(text: str) -> ElectionState:
    try:
        data = json.loads(text.splitlines()[0] if text else "")
    except (json.JSONDecodeError, IndexError) as exc:
        raise QuorumStateError(f"quorum-state is not one line of JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("data_version") != DATA_VERSION:
        raise QuorumStateError(f"quorum-state has no data_version {DATA_VERSION}: {text[:200]!r}")
    try:
        leader, voted = int(data["leaderId"]), int(data["votedId"])
        voters = data.get("currentVoters") or []
        return ElectionState(
            epoch=int(data["leaderEpoch"]),
            leader_id=None if leader < 0 else leader,
            voted_id=None if voted < 0 else voted,
            voters=frozenset(int(v["voterId"]) for v in voters),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise QuorumStateError(f"quorum-state field missing or malformed ({exc}): {text[:200]!r}") from None


def write_file(directory: str | os.PathLike[str], state: ElectionState) -> None:
    """Replaces DIR/quorum-state durably, as Kafka does: a fsynced `quorum-state.tmp` renamed over it."""
    path = Path(directory) / FILE_NAME
    temp = path.with_name(FILE_NAME + ".tmp")
    with open(temp, "w", encoding="utf-8") as f:
        f.write(encode(state))
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)
    fsync_path(directory)


def read_file(directory: str | os.PathLike[str]) -> ElectionState | None:
    """None when the directory has no quorum-state yet (a freshly formatted node)."""
    path = Path(directory) / FILE_NAME
    try:
        return decode(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
