"""The lab's timeline: structured events appended to `DIR/timeline.jsonl` by every lab process (DESIGN §10).

One JSON object a line, `{"ts": <epoch ms>, "source": "broker:2", "kind": "leader_changed", ...fields}`.
Several processes append to the same file at once, so each event is one `write()` of one whole line to a
descriptor opened with O_APPEND: the kernel places each such write at the end of the file in one piece, and
lines never interleave.

A process outside a lab writes nothing. The lab starts its brokers with `ZKBROKER_TIMELINE` naming the file;
code anywhere in a broker or the controller records an event with one call that costs nothing outside a lab:

    from zkbroker import timeline
    timeline.emit("broker:2", "truncated", topic="t", partition=0, to=41, reason="high-watermark")

Hot paths (a produce, a HW move) ask `enabled()` once, when their object is made, and skip even the call
outside a lab. A long-lived process keeps its descriptor of the file open between events.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ENV_VAR = "ZKBROKER_TIMELINE"  # the timeline file of the lab this process belongs to
FILE_NAME = "timeline.jsonl"


def path_in(lab_dir: str | os.PathLike) -> Path:
    return Path(lab_dir) / FILE_NAME


def encode(source: str, kind: str, fields: dict[str, Any], ts_ms: float | None = None) -> bytes:
    """One event as its line: `ts`, `source` and `kind` first, then the fields in the order given."""
    for reserved in ("ts", "source", "kind"):
        if reserved in fields:
            raise ValueError(f"{reserved!r} is set by the timeline itself, not an event field")
    ts = round(time.time() * 1000, 1) if ts_ms is None else ts_ms
    event = {"ts": ts, "source": source, "kind": kind, **fields}
    return (json.dumps(event, separators=(", ", ": ")) + "\n").encode()


def append(path: str | os.PathLike, source: str, kind: str, **fields: Any) -> None:
    """Append one event to the timeline at `path` (created if missing)."""
    line = encode(source, kind, fields)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def enabled() -> bool:
    """Whether this process belongs to a lab (and so `emit` writes)."""
    return bool(os.environ.get(ENV_VAR))


_descriptors: dict[str, int] = {}  # path -> an O_APPEND descriptor this process keeps open


def emit(source: str, kind: str, **fields: Any) -> None:
    """Append an event to this process's lab timeline; nothing at all outside a lab."""
    path = os.environ.get(ENV_VAR)
    if not path:
        return
    line = encode(source, kind, fields)
    fd = _descriptors.get(path)
    if fd is None:
        fd = _descriptors[path] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    os.write(fd, line)


def read(path: str | os.PathLike) -> list[dict]:
    """Every whole event in the file, in the order appended (a line still being written is left out)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in data.split(b"\n")[:-1] if line.strip()]


def follow(path: str | os.PathLike, poll_s: float = 0.2) -> Iterator[dict]:
    """Every event in the file, then each new one as it is appended (forever; the caller stops)."""
    offset = 0
    pending = b""
    while True:
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
        except FileNotFoundError:
            chunk = b""
        offset += len(chunk)
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                yield json.loads(line)
        if not lines:
            time.sleep(poll_s)
