"""Crash torture of the log: SIGKILL at random points of its writes, then check what recovery makes of it
(issue 15 item 4; DESIGN §4 and §13).

How:

1. **A child process drives the real log code.** Each run forks a child that opens a log directory with the
   real `LogManager` (so with the real recovery path, the recovery-point checkpoint and the clean-shutdown
   marker), holding three logs with small settings -- two partitions of a topic with 24 KiB of retention and
   one of a compacted topic (`cleanup.policy=compact`, 64 keys) -- all with 6 KiB segments, a few index
   entries per segment (so indexes fill and force rolls), and per chain one of several flush settings
   (`flush.messages` 1 to never, `flush.ms`). Its workload, seeded: appends of message sets (1-10 messages,
   magic 0 and 1, a fifth gzip-compressed), retention, `flush_dirty_logs`, the recovery-point and
   high-watermark checkpoints, the leader-epoch checkpoint, a follower's truncation (to the start of a message
   set, as a follower's target is), a cleaning by the log cleaner (what its thread does when it wakes: the
   filthiest compacted log, its `.cleaned` segments, their `.swap` into the log, the cleaner checkpoint), the
   deferred flush after a roll and the delayed deletion of `.deleted` files (run a few steps later, as the
   broker's scheduler would), and now and then a clean shutdown and reopen. It keeps a journal beside the log
   (one `write` per line; SIGKILL leaves the page cache, so the journal survives whatever the log does): each
   append's intent before it and its offsets once acknowledged, each flush's recovery point (fsynced, as the
   brief asks), each retention, truncation and checkpoint write with its content.
2. **Kill points.** The child counts every call of the log code that changes the disk -- `os.write`,
   `ftruncate`, `rename`/`replace`, `remove`, `fsync`, file creation, the segment's `FileIO.write`, the
   text files' writes, and the offset index's stores through its memory map -- before it and after it, and a
   write also half-done (a random prefix written, then the kill: a torn write). Each point belongs to the
   phase it happens in, the innermost of the table `PHASES` (append, roll, index, retention, flush,
   checkpoint, truncate, recovery, shutdown, clean, swap): a phase is the set of product methods whose calls
   it covers. A *steered* run picks a phase and a point number in it (uniformly below the count a calibration
   lifetime of the same settings reached; for recovery, below the count the previous check's recovery of the
   same files reached) and the child SIGKILLs itself exactly there. A *timed* run (a fifth) is killed by the
   parent after a random delay, wherever the child is; the phase it was in is read from shared memory.
   The seams are all in this script: the child replaces `os` functions, the segment module's `io.FileIO`, the
   text modules' `open` and wraps the phase methods (the parent wraps them too, only to count its recovery's
   points); the product code holds no hook. A phase whose methods reach no kill point in a calibration is a
   violation: the seams no longer cover what the log does.
3. **Torn tails (a simulated power cut).** In a quarter of the runs, after the kill, the bytes not yet
   flushed under the settings in force are damaged as a power cut could leave them: for each .log file, the
   bytes after the last entry below the log's flushed offset are kept, cut at a random point, zeroed, or
   overwritten with random bytes to the end, and index entries pointing there are zeroed or garbled. (Only
   what was flushed is promised then; without a tear, SIGKILL keeps the page cache and every acknowledged
   record must survive.)
4. **The check, after every kill**, on a copy of the directory opened with the real recovery path:
   (a) a valid prefix -- every segment holds only whole, CRC-valid entries (recovery cut the rest), offsets
   increase across the log, every key and value is the one its identity says, and a read from every offset of
   the log returns the right first message (a read below the start or past the end is refused); (b) every
   record acknowledged is there with its bytes -- with a torn tail, every record acknowledged *and flushed*;
   in the compacted log, every record but those a later one of the same key replaced; after a truncation,
   every record below its target -- and nothing is there that was never sent; no gap in the offsets (but in
   the compacted log, and with a torn tail that cut a segment that is not the last at a message boundary,
   which recovery cannot see; Kafka's cannot either); the log start moved only through retention; (c) each
   index entry points at the first entry holding its offset, entries increase, and lookups of every offset
   land at or before its entry; (d) the checkpoints (recovery points, high watermarks, cleaner offsets,
   leader epochs) read, each holds either its last completed content or the one being written, and no
   recovery point is above the recovered log end (but after a truncation killed before its checkpoint, which
   the next start rewrites). The next run's child then recovers the original directory (and a
   recovery-phase kill lands in that recovery).

Runs come in chains of `--chain-length` on one directory, so a later run recovers from whatever the earlier
ones left; a chain starts afresh after a violation. Everything is seeded: `--seed S` replays the plan, and
`--chain C` replays one chain of it (steered runs are deterministic; a timed kill lands where the scheduler
puts it). `--phases swap,clean` steers the kills to those phases only; `--keep DIR` keeps the directory and
journal of each run with a violation. The directories live in /dev/shm when it exists (a SIGKILL does not
need a disk, and fsyncs there cost nothing on a shared machine).

Adding a phase is one entry of `PHASES`: the methods whose calls it covers and, if the workload must call
something to reach it, a `World` method.

Usage: python bench/crash_torture.py [--runs 200] [--seed 1] [--chain-length 10] [--chain C] [--phases P,..]
                                     [--keep DIR] [--dir D] [--progress]
Prints runs, kills per phase, what was checked and each violation; exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import hashlib
import importlib
import io
import json
import logging
import mmap
import os
import random
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
import types
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zkbroker.log.checkpoint import RECOVERY_POINT_CHECKPOINT_FILE, OffsetCheckpoint  # noqa: E402
from zkbroker.log.cleaner import CleanerConfig  # noqa: E402
from zkbroker.log.cleaner_manager import CLEANER_CHECKPOINT_FILE  # noqa: E402
from zkbroker.log.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCache  # noqa: E402
from zkbroker.log.log import Log  # noqa: E402
from zkbroker.log.log_config import LogConfig  # noqa: E402
from zkbroker.log.manager import LogManager  # noqa: E402
from zkbroker.log.offset_index import ENTRY_SIZE  # noqa: E402
from zkbroker.protocol import message_set  # noqa: E402
from zkbroker.protocol.compression import CODEC_GZIP, CODEC_NONE  # noqa: E402
from zkbroker.protocol.errors import OffsetOutOfRangeError  # noqa: E402
from zkbroker.topic_partition import TopicPartition  # noqa: E402

# The logs of the child's broker, by their number in the journal: two of a topic with retention, and one of a
# compacted topic, which the log cleaner rewrites (it keeps only the last message of each key).
COMPACTED = "compacted"
LOGS = (TopicPartition("torture", 0), TopicPartition("torture", 1), TopicPartition(COMPACTED, 0))
KEYS = 64
HW_CHECKPOINT_FILE = "replication-offset-checkpoint"  # the replica manager's file (zkbroker/server/)
CALIBRATION_STEPS = 300
TIMED_FRACTION = 0.2
TEAR_FRACTION = 0.25
STEP_MS = 10  # the child's clock moves this much per step
READ_BYTES = 16 * 1024  # more than any set the workload appends
CHILD_TIMEOUT_S = 60.0

# The log code's calls that change the disk, replaced in the child by versions with kill points around them.
_os_write, _os_open, _os_fsync, _os_close = os.write, os.open, os.fsync, os.close
_MUTATING_OS = ("write", "ftruncate", "rename", "replace", "remove", "unlink", "fsync", "open", "makedirs")
_CREATE_FLAGS = os.O_CREAT | os.O_TRUNC
_INDEX_ENTRY = struct.Struct(">ii")


# -- phases -------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Phase:
    """A phase of the log's work: the calls of `methods` ("module:Class.method"), each of them with every kill
    point inside it (the innermost phase wins, except inside a sticky one). `stores` are methods that change a
    file through a memory map, so the call itself is a kill point (before and after). `action` names the
    `World` method the workload calls for this phase, about once every `every` steps; `tasks` the deferred
    tasks (the log's `schedule` names) that run in this phase."""

    name: str
    methods: tuple[str, ...] = ()
    stores: tuple[str, ...] = ()
    action: str | None = None
    every: int = 1
    tasks: tuple[str, ...] = ()
    sticky: bool = False


PHASES = (
    Phase("append", methods=("zkbroker.log.log:Log.append",), action="append", every=1),
    Phase("roll", methods=("zkbroker.log.log:Log.roll",)),
    Phase(
        "index",
        methods=tuple(
            f"zkbroker.log.offset_index:OffsetIndex.{m}"
            for m in ("__init__", "resize", "flush", "close", "rename", "delete")
        ),
        stores=("zkbroker.log.offset_index:OffsetIndex.append",),
    ),
    Phase("retention", methods=("zkbroker.log.log:Log.delete_old_segments",), action="retention", every=12,
          tasks=("delete-file",)),
    Phase("flush", methods=("zkbroker.log.log:Log.flush",), action="flush", every=10, tasks=("flush-log",)),
    Phase("checkpoint", methods=("zkbroker.log.checkpoint:OffsetCheckpoint.write",
                                 "zkbroker.log.leader_epoch:LeaderEpochCache._write"), action="checkpoint", every=8),
    Phase("truncate", methods=("zkbroker.log.log:Log.truncate_to",), action="truncate", every=40),
    Phase("recovery", methods=("zkbroker.log.manager:LogManager.__init__",), sticky=True),
    Phase("shutdown", methods=("zkbroker.log.manager:LogManager.shutdown",), action="restart", every=80),
    # the log cleaner: reading the segments, writing the .cleaned ones, then swapping them in (.swap)
    Phase("clean", methods=("zkbroker.log.cleaner:Cleaner.clean",), action="clean", every=25),
    Phase("swap", methods=("zkbroker.log.log:Log.replace_segments",)),
)
PHASE_BY_NAME = {phase.name: phase for phase in PHASES}
TASK_PHASES = {task: phase.name for phase in PHASES for task in phase.tasks}


def resolve(spec: str) -> tuple[type, str]:
    module_name, _, qualified = spec.partition(":")
    class_name, _, method = qualified.rpartition(".")
    return getattr(importlib.import_module(module_name), class_name), method


# -- kill points --------------------------------------------------------------------------------------------


class Killed(BaseException):
    """Never raised: the process is gone. (Keeps the type checker honest about `die`.)"""


class Points:
    """Counts kill points per phase; in a steered child, SIGKILLs the process at its target point."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.counts: collections.Counter[str] = collections.Counter()
        self.target: tuple[str, int] | None = None
        self.shared: mmap.mmap | None = None
        self.rng = random.Random(0)

    @property
    def phase(self) -> str:
        return self.stack[-1] if self.stack else ""

    def enter(self, name: str) -> None:
        if self.stack and self.stack[-1] in PHASE_BY_NAME and PHASE_BY_NAME[self.stack[-1]].sticky:
            name = self.stack[-1]
        self.stack.append(name)
        self._show()

    def exit(self) -> None:
        self.stack.pop()
        self._show()

    def _show(self) -> None:
        if self.shared is not None:
            self.shared[0:32] = self.phase.encode().ljust(32, b"\0")

    def hit(self, kind: str) -> bool:
        """A kill point of `kind` (before, torn, after). True only for the target torn point: the caller writes
        part of its data, then calls `die`."""
        phase = self.phase
        if not phase:
            return False
        n = self.counts[phase]
        self.counts[phase] += 1
        if self.target == (phase, n):
            if kind == "torn":
                return True
            self.die(kind)
        return False

    def die(self, kind: str) -> None:
        if self.shared is not None:
            self.shared[32:96] = f"{self.phase or '-'} {kind}".encode().ljust(64, b"\0")
        os.kill(os.getpid(), signal.SIGKILL)
        raise Killed  # not reached


POINTS = Points()


def _around(func, torn_data_arg: int | None = None, counts=lambda *a, **k: True):
    """`func` with kill points before and after it (and, with `torn_data_arg`, a torn write between)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not counts(*args, **kwargs):
            return func(*args, **kwargs)
        POINTS.hit("before")
        if torn_data_arg is not None and POINTS.hit("torn"):
            data = memoryview(args[torn_data_arg]).cast("B")
            if data.nbytes > 1:
                cut = POINTS.rng.randrange(1, data.nbytes)
                func(*args[:torn_data_arg], data[:cut], *args[torn_data_arg + 1:])
            POINTS.die("torn")
        result = func(*args, **kwargs)
        POINTS.hit("after")
        return result

    return wrapper


class _HookedFileIO(io.FileIO):
    """The segment's .log file: its creation and its appends are kill points; an append may be torn."""

    def __init__(self, name, mode="r", *args, **kwargs) -> None:
        creating = any(c in mode for c in "wax") and not os.path.exists(name)
        if creating:
            POINTS.hit("before")
        super().__init__(name, mode, *args, **kwargs)
        if creating:
            POINTS.hit("after")

    def write(self, data) -> int:
        POINTS.hit("before")
        if POINTS.hit("torn"):
            view = memoryview(data).cast("B")
            if view.nbytes > 1:
                super().write(view[: POINTS.rng.randrange(1, view.nbytes)])
            POINTS.die("torn")
        written = super().write(data)
        POINTS.hit("after")
        return written


class _HookedText:
    """A text file opened for writing by the log code (the leader-epoch checkpoint, the clean-shutdown marker):
    its writes reach the disk at flush and close, the kill points."""

    def __init__(self, file) -> None:
        self._file = file

    def write(self, text):
        return self._file.write(text)

    def flush(self) -> None:
        POINTS.hit("before")
        self._file.flush()
        POINTS.hit("after")

    def fileno(self) -> int:
        return self._file.fileno()

    def close(self) -> None:
        POINTS.hit("before")
        self._file.close()
        POINTS.hit("after")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _hooked_open(file, mode="r", *args, **kwargs):
    if not any(c in mode for c in "wax+"):
        return open(file, mode, *args, **kwargs)
    POINTS.hit("before")
    f = open(file, mode, *args, **kwargs)
    POINTS.hit("after")
    return _HookedText(f)


def _in_phase(name: str, func, store: bool):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        POINTS.enter(name)
        try:
            if store:
                POINTS.hit("before")
            result = func(*args, **kwargs)
            if store:
                POINTS.hit("after")
            return result
        finally:
            POINTS.exit()

    return wrapper


def install_points() -> None:
    """Wrap every phase's methods and put kill points around the calls that change the disk (idle -- counting
    nothing -- outside the phases, as in the parent's own work)."""
    for phase in PHASES:
        for spec, store in [(s, False) for s in phase.methods] + [(s, True) for s in phase.stores]:
            cls, method = resolve(spec)
            setattr(cls, method, _in_phase(phase.name, getattr(cls, method), store))
    for name in _MUTATING_OS:
        func = getattr(os, name)
        if name == "open":
            hooked = _around(func, counts=lambda path, flags, *a, **k: bool(flags & _CREATE_FLAGS))
        elif name == "write":
            hooked = _around(func, torn_data_arg=1)
        else:
            hooked = _around(func)
        setattr(os, name, hooked)
    segment = importlib.import_module("zkbroker.log.segment")
    segment.io = types.SimpleNamespace(FileIO=_HookedFileIO)
    for module in ("zkbroker.log.leader_epoch", "zkbroker.log.manager", "zkbroker.log.checkpoint"):
        importlib.import_module(module).open = _hooked_open


# -- the records --------------------------------------------------------------------------------------------


def ident(partition: int, seq: int, i: int) -> bytes:
    return b"%d:%d:%d" % (partition, seq, i)


def record_value(identity: bytes) -> bytes:
    pad = hashlib.blake2b(identity, digest_size=64).digest() * 4
    return identity + b"|" + pad[: zlib.crc32(identity) % 200]


def key_of(identity: bytes) -> bytes:
    return b"k%d" % (int.from_bytes(hashlib.blake2b(identity, digest_size=4).digest(), "big") % KEYS)


def identity_of(value: bytes | None) -> bytes | None:
    """The identity a value carries, or None if the value is not one the workload wrote."""
    if value is None or b"|" not in value:
        return None
    identity = value.split(b"|", 1)[0]
    return identity if record_value(identity) == value else None


# -- the child: the workload --------------------------------------------------------------------------------


def chain_config(rng: random.Random) -> dict[str, Any]:
    return {
        "segment.bytes": 6 * 1024,
        "segment.index.bytes": rng.choice([4 * ENTRY_SIZE, 8 * ENTRY_SIZE, 10 * 1024 * 1024]),
        "index.interval.bytes": rng.choice([256, 1024, 4096]),
        "retention.bytes": 24 * 1024,
        "retention.ms": -1,
        "flush.messages": rng.choice([1, 5, 50, 2**63 - 1]),
        "flush.ms": rng.choice([30, 300, 2**63 - 1]),
        "file.delete.delay.ms": 60_000,
    }


CLEANER = CleanerConfig(enable_cleaner=True, dedupe_buffer_size=1024 * 1024, io_buffer_size=8 * 1024)


def open_log_dir(log_dir: str, config: dict[str, Any], **kwargs) -> tuple[LogManager, list[Log]]:
    """The broker's start, for this log directory: the LogManager (recovery), then the partitions' logs. The
    log cleaner's threads are not started: the workload runs its cleanings in its own thread."""
    compacted = {**config, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.3}
    manager = LogManager([log_dir], LogConfig.of(config), {COMPACTED: LogConfig.of(compacted)}, cleaner_config=CLEANER,
                         **kwargs)
    logs = [manager.get_or_create_log(*tp) for tp in LOGS]
    return manager, logs


def number(log: Log) -> int:
    """The log's number in the journal."""
    return LOGS.index((log.topic, log.partition))


class Journal:
    def __init__(self, path: str) -> None:
        self.fd = _os_open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, *fields: object, sync: bool = False) -> None:
        _os_write(self.fd, (" ".join(str(f) for f in fields) + "\n").encode())
        if sync:
            _os_fsync(self.fd)


def offsets_payload(offsets) -> str:
    return ",".join(f"{t}:{p}:{o}" for (t, p), o in sorted(offsets.items())) or "-"


def epochs_payload(entries) -> str:
    return ",".join(f"{e}:{o}" for e, o in entries) or "-"


def install_journal(journal: Journal) -> None:
    """Journal what the log did, from inside the calls the workload does not make itself."""

    def wrap(cls, name, before, after):
        func = getattr(cls, name)

        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            if before:
                before(self, *args)
            result = func(self, *args, **kwargs)
            after(self, *args)
            return result

        setattr(cls, name, wrapper)

    wrap(Log, "flush", None, lambda log, *a: journal.write("F", number(log), log.recovery_point, sync=True))
    # a truncation is under way until the recovery points are checkpointed after it (LogManager.truncate_to)
    def truncations(manager, offsets, journal_kind):
        for topic_partition, target in offsets.items():
            journal.write(journal_kind, LOGS.index(topic_partition), target)

    wrap(LogManager, "truncate_to", lambda m, offsets: truncations(m, offsets, "T"),
         lambda m, offsets: truncations(m, offsets, "t"))
    wrap(Log, "delete_old_segments", lambda log: journal.write("R", number(log)),
         lambda log: journal.write("r", number(log), log.log_start_offset))
    wrap(OffsetCheckpoint, "write",
         lambda c, offsets: journal.write("K", os.path.basename(c.path), offsets_payload(offsets)),
         lambda c, offsets: journal.write("k", os.path.basename(c.path)))

    def epoch_name(cache: LeaderEpochCache) -> str:
        return os.path.relpath(cache.path, os.path.dirname(os.path.dirname(cache.path)))

    wrap(LeaderEpochCache, "_write", lambda c: journal.write("K", epoch_name(c), epochs_payload(c.entries)),
         lambda c: journal.write("k", epoch_name(c)))


class World:
    """The child's broker-to-be: a LogManager over one directory, and the workload the phases call."""

    def __init__(self, log_dir: str, config: dict[str, Any], journal: Journal, rng: random.Random,
                 lifetime: int) -> None:
        self.log_dir = log_dir
        self.config = config
        self.journal = journal
        self.rng = rng
        self.lifetime = lifetime
        self.seq = lifetime * 1_000_000
        self.now = 1_700_000_000_000 + lifetime * 10_000_000
        self.step_no = 0
        self.deferred: list[tuple[int, str, Any]] = []
        self.manager: LogManager
        self.logs: list[Log] = []

    def clock(self) -> int:
        return self.now

    def schedule(self, name: str, task, delay_ms: int) -> None:
        """The broker's scheduler runs these on another thread; here they run a few steps later."""
        later = self.rng.randint(0, 3) if name == "flush-log" else self.rng.randint(1, 8)
        self.deferred.append((self.step_no + later, name, task))

    def open(self) -> None:
        self.deferred.clear()
        self.manager, self.logs = open_log_dir(self.log_dir, self.config, clock=self.clock, schedule=self.schedule,
                                               rng=random.Random(self.rng.getrandbits(32)))
        self.hw = OffsetCheckpoint(os.path.join(self.log_dir, HW_CHECKPOINT_FILE))
        for log in self.logs:
            self.journal.write("O", number(log), log.log_start_offset, log.log_end_offset)
        for log in self.logs:
            LeaderEpochCache(log.dir).assign(self.lifetime, log.log_end_offset)

    def step(self) -> None:
        self.step_no += 1
        self.now += STEP_MS
        due = [t for t in self.deferred if t[0] <= self.step_no]
        self.deferred = [t for t in self.deferred if t[0] > self.step_no]
        for _, name, task in due:
            POINTS.enter(TASK_PHASES.get(name, ""))
            try:
                task()
            finally:
                POINTS.exit()
        for phase in PHASES:
            if phase.action and self.rng.random() * phase.every < 1:
                getattr(self, phase.action)()

    # the phases' actions

    def append(self) -> None:
        rng = self.rng
        log = self.logs[rng.randrange(len(LOGS))]
        p, seq = number(log), self.seq
        self.seq += 1
        n = rng.randint(1, 10)
        magic = rng.choice([0, 1])
        codec = CODEC_GZIP if rng.random() < 0.2 else CODEC_NONE
        identities = [ident(p, seq, i) for i in range(n)]
        items = [(key_of(identity), record_value(identity), self.now) for identity in identities]
        records = bytearray(message_set.build_message_set(items, magic=magic, codec=codec))
        self.journal.write("I", p, seq, n)
        info = log.append(records)
        self.journal.write("A", p, seq, info.first_offset, info.last_offset)

    def retention(self) -> None:
        self.manager.cleanup_logs()

    def flush(self) -> None:
        self.manager.flush_dirty_logs()

    def checkpoint(self) -> None:
        self.manager.checkpoint_recovery_points()
        self.hw.write({tp: log.log_end_offset for tp, log in zip(LOGS, self.logs)})

    def truncate(self) -> None:
        """A follower cutting its log back (to its high watermark, or where its leader's epoch ends): at the
        start of a message set, since it copied its leader's sets as they were. (A target inside a compressed
        set takes the whole set and leaves the log end at the target, a hole kept from 0.8.2; see
        tests/unit/log/test_log.py.)"""
        log = self.logs[self.rng.randrange(len(LOGS))]
        target = max(log.log_start_offset, log.log_end_offset - self.rng.randint(0, 40))
        if target < log.log_end_offset:
            first = next(message_set.iter_messages(log.read(target, READ_BYTES).read_bytes()))
            target = min(target, first.offset)  # a compressed set's first inner offset, where it starts
        self.manager.truncate_to({LOGS[number(log)]: target})
        LeaderEpochCache(log.dir).truncate_from_end(target)

    def clean(self) -> None:
        """What a log cleaner thread does when it wakes: clean the filthiest compacted log, if one needs it."""
        cleaner = self.manager.cleaner
        cleaner.clean_or_sleep(cleaner.cleaners[0])

    def restart(self) -> None:
        """A clean shutdown (flush, close, checkpoint, marker), and the next start on the marker."""
        self.manager.shutdown()
        self.open()


@dataclasses.dataclass
class Plan:
    """One run: how the child is killed, and the seeds that make it reproducible."""

    run: int
    chain: int
    lifetime: int
    mode: str  # steered, timed or calibrate
    phase: str = ""
    point: int = -1
    delay_s: float = 0.0
    tear: bool = False
    seed: int = 0
    max_steps: int = CALIBRATION_STEPS

    def describe(self) -> str:
        how = {"steered": f"steered to point {self.point} of {self.phase}",
               "timed": f"timed, {self.delay_s * 1000:.0f} ms"}.get(self.mode, "the calibration lifetime")
        tail = ", torn tail" if self.tear else ""
        return f"chain {self.chain} run {self.run} (lifetime {self.lifetime}, {how}{tail})"


def child(plan: Plan, log_dir: str, journal_path: str, config: dict[str, Any], shared: mmap.mmap) -> None:
    """The forked child: the workload until the kill (steered: its own), or CALIBRATION_STEPS to count."""
    try:
        POINTS.shared = shared
        logging.getLogger("zkbroker.log").setLevel(logging.WARNING)
        POINTS.counts.clear()
        POINTS.rng = random.Random(plan.seed ^ 0x5EED)
        POINTS.target = (plan.phase, plan.point) if plan.mode == "steered" else None
        journal = Journal(journal_path)
        install_journal(journal)
        journal.write("L", plan.lifetime)
        world = World(log_dir, config, journal, random.Random(plan.seed), plan.lifetime)
        world.open()
        for _ in range(plan.max_steps):
            world.step()
        if plan.mode == "calibrate":
            for phase in PHASES:  # every action at least once, so that each phase's count says its seams work
                if phase.action:
                    getattr(world, phase.action)()
            shared[96:] = json.dumps(dict(POINTS.counts)).encode().ljust(len(shared) - 96, b"\0")
            os._exit(0)
        POINTS.stack.clear()
        POINTS.die("end")  # a steered target never reached, or a timed kill that came too late
    except BaseException:
        shared[96:] = ("error " + traceback.format_exc()).encode()[: len(shared) - 96].ljust(len(shared) - 96, b"\0")
        os._exit(3)


def shared_text(shared: mmap.mmap, start: int, end: int) -> str:
    return bytes(shared[start:end]).rstrip(b"\0").decode(errors="replace")


def run_child(plan: Plan, log_dir: str, journal_path: str, config: dict[str, Any]) -> tuple[str, str, float, str]:
    """Fork the child, kill it as planned, and return (phase, kind, seconds alive, what it left in the shared
    memory); kind is 'error ...' if the child failed, 'exit' for a calibration's normal end."""
    shared = mmap.mmap(-1, 64 * 1024)
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(plan, log_dir, journal_path, config, shared)
        os._exit(4)  # not reached
    if plan.mode == "timed":
        deadline = start + plan.delay_s
        while time.monotonic() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(min(0.005, max(0.0, deadline - time.monotonic())))
        else:
            os.kill(pid, signal.SIGKILL)
    deadline = start + CHILD_TIMEOUT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "", f"error the child did not finish within {CHILD_TIMEOUT_S:.0f} s", CHILD_TIMEOUT_S, ""
        time.sleep(0.002)
    alive = time.monotonic() - start
    message = shared_text(shared, 96, len(shared))
    try:
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            if plan.mode == "timed" and not shared_text(shared, 32, 96):
                return shared_text(shared, 0, 32) or "-", "timed", alive, message
            phase, kind = shared_text(shared, 32, 96).split(" ", 1)
            return phase, kind, alive, message
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and plan.mode == "calibrate":
            return "", "exit", alive, message
        failure = message if message.startswith("error") else f"error the child ended with status {status}"
        return "", failure, alive, message
    finally:
        shared.close()


# -- the parent: the model of what must be there -------------------------------------------------------------


@dataclasses.dataclass
class CheckpointState:
    done: str = "-"
    pending: str | None = None

    def allowed(self) -> set[str]:
        return {self.done} | ({self.pending} if self.pending is not None else set())


class Model:
    """What the journal says the log must hold, updated from the journal after each kill and from what the
    check found (which is what the next child recovers)."""

    def __init__(self) -> None:
        self.expect: dict[int, dict[int, bytes]] = {p: {} for p in range(len(LOGS))}  # offset -> identity
        self.inflight: dict[int, tuple[int, int] | None] = dict.fromkeys(range(len(LOGS)))
        self.flushed: dict[int, int] = dict.fromkeys(range(len(LOGS)), 0)
        self.start: dict[int, int] = dict.fromkeys(range(len(LOGS)), 0)
        self.retention_pending: dict[int, bool] = dict.fromkeys(range(len(LOGS)), False)
        self.truncating: dict[int, int | None] = dict.fromkeys(range(len(LOGS)))  # target of one under way
        # a truncation killed before its checkpoint leaves the recovery point above the end until the next write
        self.stale_recovery_point: dict[int, bool] = dict.fromkeys(range(len(LOGS)), False)
        self.gaps: dict[int, set[tuple[int, int]]] = {p: set() for p in range(len(LOGS))}  # lost to a power cut
        # key -> the last offset a message of it was ever acknowledged at: the cleaner may have dropped any
        # earlier message of the key, even if a truncation took that later one away since
        self.superseding: dict[int, dict[bytes, int]] = {p: {} for p in range(len(LOGS))}
        self.checkpoints: dict[str, CheckpointState] = collections.defaultdict(CheckpointState)
        self.verified: dict[int, tuple[int, int]] | None = None  # (start, end) the last check recovered
        self.first_open: set[int] = set()  # partitions whose first open of this lifetime is still to come
        self.journal_position = 0
        self.acked = 0

    def read_journal(self, path: str, violations: list[str]) -> None:
        with open(path, "rb") as f:
            f.seek(self.journal_position)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.journal_position += len(complete)
        for line in complete.decode().splitlines():
            kind, *fields = line.split(" ")
            if kind == "I":
                p, seq, n = map(int, fields)
                self.inflight[p] = (seq, n)
            elif kind == "A":
                p, seq, first, last = map(int, fields)
                n = self.inflight[p][1] if self.inflight[p] else last - first + 1
                if last - first + 1 != n:
                    violations.append(f"append of {n} messages to {LOGS[p]} acknowledged offsets {first}-{last}")
                for i, offset in enumerate(range(first, last + 1)):
                    self.expect[p][offset] = identity = ident(p, seq, i)
                    key = key_of(identity)
                    self.superseding[p][key] = max(self.superseding[p].get(key, -1), offset)
                self.inflight[p] = None
                self.acked += last - first + 1
            elif kind == "F":
                p, offset = map(int, fields)
                self.flushed[p] = max(self.flushed[p], offset)
            elif kind == "T":
                self.truncating[int(fields[0])] = int(fields[1])
            elif kind == "t":
                p, target = map(int, fields)
                self.expect[p] = {o: identity for o, identity in self.expect[p].items() if o < target}
                self.flushed[p] = min(self.flushed[p], target)
                self.truncating[p] = None
            elif kind == "R":
                self.retention_pending[int(fields[0])] = True
            elif kind == "r":
                p, start = map(int, fields)
                self.start[p], self.retention_pending[p] = start, False
            elif kind == "L":
                self.first_open = set(range(len(LOGS))) if self.verified is not None else set()
            elif kind == "O":
                p, start, end = map(int, fields)
                if p in self.first_open and self.verified[p] != (start, end):
                    violations.append(
                        f"{LOGS[p]}: the child recovered offsets {start}-{end}, the previous check "
                        f"{self.verified[p][0]}-{self.verified[p][1]} from the same files")
                self.first_open.discard(p)
                self.start[p] = start
            elif kind == "K":
                self.checkpoints[fields[0]].pending = fields[1]
            elif kind == "k":
                if fields[0] == RECOVERY_POINT_CHECKPOINT_FILE:
                    self.stale_recovery_point = dict.fromkeys(range(len(LOGS)), False)
                state = self.checkpoints[fields[0]]
                state.done, state.pending = state.pending or "-", None


# -- the parent: the check -----------------------------------------------------------------------------------


class RecoveryLog(logging.Handler):
    """Counts what recovery reported (torn tails cut, indexes rebuilt), for the summary."""

    PATTERNS = {
        "Found invalid messages": "tails cut by recovery",
        "rebuilding index": "indexes rebuilt",
        "interrupted swap": "swaps completed",
        "orphaned index": "orphaned indexes removed",
    }

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.counts: collections.Counter[str] = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        for pattern, what in self.PATTERNS.items():
            if pattern in str(record.msg):
                self.counts[what] += 1


@dataclasses.dataclass
class SegmentEntry:
    position: int
    end: int
    first: int
    last: int


def walk_segment(path: str) -> tuple[list[SegmentEntry], list[message_set.Message], int, str | None]:
    """The whole entries of a .log file: (entries, their messages, bytes covered, problem)."""
    with open(path, "rb") as f:
        data = f.read()
    entries: list[SegmentEntry] = []
    messages: list[message_set.Message] = []
    try:
        for entry in message_set.iter_entries(data):
            end = entry.position + message_set.LOG_OVERHEAD + entry.size
            if not entry.valid:
                return entries, messages, entry.position, f"entry at byte {entry.position} fails its CRC"
            inner = list(message_set.iter_messages(data[entry.position:end]))
            if not inner:
                return entries, messages, entry.position, f"entry at byte {entry.position} holds no message"
            if inner[-1].offset != entry.offset:
                return entries, messages, entry.position, (f"entry at byte {entry.position} has offset "
                                                           f"{entry.offset}, its last message {inner[-1].offset}")
            entries.append(SegmentEntry(entry.position, end, inner[0].offset, inner[-1].offset))
            messages += inner
    except Exception as e:  # InvalidMessageError, or anything a damaged wrapper makes a decompressor raise
        covered = entries[-1].end if entries else 0
        return entries, messages, covered, f"invalid entry after byte {covered}: {type(e).__name__}: {e}"
    covered = entries[-1].end if entries else 0
    problem = None if covered == len(data) else f"{len(data) - covered} bytes after the last entry"
    return entries, messages, covered, problem


class Checker:
    def __init__(self, root: str, report: Report) -> None:
        self.root = root
        self.report = report

    def check(self, log_dir: str, config: dict[str, Any], model: Model, tear: bool, rng: random.Random
              ) -> tuple[list[str], int]:
        """Check the directory left by a kill; returns the violations and the number of kill points its
        recovery passes (for a later recovery-phase kill)."""
        violations: list[str] = []
        invisible: set[int] = set()
        if tear:
            damaged, invisible = tear_unflushed(log_dir, model.flushed, rng)
            self.report.tears += damaged
        copy = os.path.join(self.root, "check")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(log_dir, copy)
        try:
            checkpoints = self.read_checkpoints(copy, model, violations)
            before = POINTS.counts["recovery"]
            try:
                manager, logs = open_log_dir(copy, config)
            except Exception as e:
                violations.append(f"recovery failed: {type(e).__name__}: {e}")
                return violations, 0
            recovery_points = POINTS.counts["recovery"] - before
            try:
                verified = {}
                for log in logs:
                    try:
                        self.check_log(log, model, tear, number(log) in invisible, checkpoints, violations)
                    except Exception:
                        violations.append(f"{log.name}: the check raised {traceback.format_exc()}")
                    verified[number(log)] = (log.log_start_offset, log.log_end_offset)
                model.verified = verified
            finally:
                manager.shutdown()
        finally:
            shutil.rmtree(copy, ignore_errors=True)
        return violations, recovery_points

    def read_checkpoints(self, copy: str, model: Model, violations: list[str]) -> dict[str, dict]:
        """(d): every checkpoint reads, and holds its last completed content or the one being written."""
        found: dict[str, dict] = {}
        for name in (RECOVERY_POINT_CHECKPOINT_FILE, HW_CHECKPOINT_FILE, CLEANER_CHECKPOINT_FILE):
            path = os.path.join(copy, name)
            if not os.path.exists(path):
                continue
            try:
                offsets = OffsetCheckpoint(path).read()
            except Exception as e:
                violations.append(f"checkpoint {name} unreadable: {e}")
                continue
            found[name] = offsets
            self.compare(name, offsets_payload(offsets), model, violations)
        for topic, partition in LOGS:
            name = f"{topic}-{partition}/{LEADER_EPOCH_CHECKPOINT_FILE}"
            if not os.path.exists(os.path.join(copy, name)):
                continue
            try:
                entries = LeaderEpochCache(os.path.dirname(os.path.join(copy, name))).entries
            except Exception as e:
                violations.append(f"checkpoint {name} unreadable: {e}")
                continue
            self.compare(name, epochs_payload(entries), model, violations)
        self.report.checkpoints_read += len(found) + len(LOGS)
        return found

    @staticmethod
    def compare(name: str, payload: str, model: Model, violations: list[str]) -> None:
        state = model.checkpoints[name]
        if payload not in state.allowed():
            violations.append(f"checkpoint {name} holds {payload!r}, neither its last write {state.done!r} nor the "
                              f"one under way {state.pending!r}")
        model.checkpoints[name] = CheckpointState(payload)

    def check_log(self, log: Log, model: Model, tear: bool, invisible_loss: bool, checkpoints: dict[str, dict],
                  violations: list[str]) -> None:
        """`invisible_loss`: the torn tail cut a segment that is not the last at a message boundary, which
        recovery cannot tell from a segment that ended there (0.8.2 cannot either): a gap is allowed."""
        p = number(log)
        start, end = log.log_start_offset, log.log_end_offset
        where = log.name
        compacted = log.config.compact  # the cleaner leaves gaps in the offsets
        actual: dict[int, bytes] = {}
        previous = start - 1
        gaps = 0
        segments = log.segments
        for k, segment in enumerate(segments):
            entries, messages, covered, problem = walk_segment(segment.log_path)
            if problem:
                violations.append(f"{where}: segment {segment.base_offset} after recovery: {problem}")
            if covered != segment.size:
                violations.append(f"{where}: segment {segment.base_offset} is {segment.size} bytes to the log, "
                                  f"{covered} in whole entries")
            if k + 1 < len(segments) and messages and messages[-1].offset >= segments[k + 1].base_offset:
                violations.append(f"{where}: segment {segment.base_offset} holds offset {messages[-1].offset}, at "
                                  f"or above the next segment's base {segments[k + 1].base_offset}")
            for offset, key, value, *_ in messages:
                if offset <= previous:
                    violations.append(f"{where}: offset {offset} follows {previous}")
                elif offset != previous + 1 and not compacted and (previous, offset) not in model.gaps[p]:
                    if invisible_loss:
                        gaps += 1
                        model.gaps[p].add((previous, offset))
                    else:
                        violations.append(f"{where}: offsets {previous + 1}-{offset - 1} are missing")
                if offset < segment.base_offset:
                    violations.append(f"{where}: offset {offset} below its segment's base {segment.base_offset}")
                identity = identity_of(value)
                if identity is None or key != key_of(identity):
                    violations.append(f"{where}: offset {offset} holds a message the workload never wrote: "
                                      f"{key!r:.20} {value!r:.80}")
                actual[offset] = identity or b"?"
                previous = max(previous, offset)
            self.check_index(where, segment, entries, violations)
        if previous + 1 != end:
            violations.append(f"{where}: the log end offset is {end}, the last message {previous}")
        self.report.gaps += gaps
        self.check_reads(where, log, actual, violations)
        truncating = model.truncating[p]
        self.check_model(where, p, start, end, actual, model, tear, compacted, violations)
        rp = checkpoints.get(RECOVERY_POINT_CHECKPOINT_FILE, {}).get(LOGS[p])
        # (a truncation checkpoints the recovery points after it: until then the file may be above the end, and
        # the log caps it at load)
        if rp is not None and rp > end and truncating is not None:
            model.stale_recovery_point[p] = True
        elif rp is not None and rp > end and not model.stale_recovery_point[p]:
            violations.append(f"{where}: the recovery point checkpoint says {rp}, above the recovered end {end}")
        self.report.records += len(actual)

    def check_index(self, where: str, segment, entries: list[SegmentEntry], violations: list[str]) -> None:
        """(c): each index entry points at the first entry holding its offset; lookups land at or before."""
        index = segment.index
        at = {e.position: i for i, e in enumerate(entries)}
        last_offset = last_position = -1
        for n in range(index.entries):
            relative, position = index.entry(n)
            offset = segment.base_offset + relative
            i = at.get(position)
            what = f"{where}: index entry {n} of segment {segment.base_offset} ({offset} -> byte {position})"
            if offset <= last_offset or position <= last_position:
                violations.append(f"{what} does not follow the previous ({last_offset} -> byte {last_position})")
            last_offset, last_position = offset, position
            if i is None:
                violations.append(f"{what} points at no entry")
            elif entries[i].last < offset or (i > 0 and entries[i - 1].last >= offset):
                violations.append(f"{what} points at the entry of offsets {entries[i].first}-{entries[i].last}")
        for entry in entries:
            for offset in (entry.first, entry.last):
                found, position = index.lookup(offset)
                if found > offset or position > entry.position or (position not in at and position != 0):
                    violations.append(f"{where}: index lookup of {offset} in segment {segment.base_offset} gives "
                                      f"{found} -> byte {position}; its entry is at byte {entry.position}")
        self.report.index_entries += index.entries

    def check_reads(self, where: str, log: Log, actual: dict[int, bytes], violations: list[str]) -> None:
        """(a): a read from every offset of the log returns the right first message; outside it, none."""
        start, end = log.log_start_offset, log.log_end_offset
        offsets = sorted(actual)
        k = 0
        wrong: list[str] = []
        for offset in range(start, end):
            while k < len(offsets) and offsets[k] < offset:
                k += 1
            expected = offsets[k] if k < len(offsets) else None
            try:
                data = log.read(offset, READ_BYTES).read_bytes()
                got = next((m for m in message_set.iter_messages(data) if m.offset >= offset), None)
            except Exception as e:
                wrong.append(f"a read from offset {offset} fails: {type(e).__name__}: {e}")
                continue
            if got is None or got.offset != expected or identity_of(got.value) != actual.get(expected):
                wrong.append(f"a read from offset {offset} returns {'nothing' if got is None else got.offset}, "
                             f"not {expected}")
            self.report.reads += 1
        if wrong:
            violations.append(f"{where}: {len(wrong)} reads wrong, the first: {wrong[0]}")
        if log.read(end, READ_BYTES).records.size != 0:
            violations.append(f"{where}: a read at the log end {end} returns bytes")
        for outside in (start - 1, end + 1):
            if outside < 0:
                continue
            try:
                log.read(outside, READ_BYTES)
                violations.append(f"{where}: a read from offset {outside}, outside {start}-{end}, is not refused")
            except OffsetOutOfRangeError:
                pass

    def check_model(self, where: str, p: int, start: int, end: int, actual: dict[int, bytes], model: Model,
                    tear: bool, compacted: bool, violations: list[str]) -> None:
        """(b): acknowledged records (with a torn tail: acknowledged and flushed) are there, except, in a
        compacted log, those a later message of the same key replaced; nothing else is there but what was being
        appended; and the log start moved only through retention."""
        expect = model.expect[p]
        flushed = model.flushed[p]
        truncating = model.truncating[p]
        if truncating is not None:
            flushed = min(flushed, truncating)

        latest = model.superseding[p]  # key -> its last offset acknowledged or present
        if compacted:
            for o, identity in actual.items():
                key = key_of(identity)
                latest[key] = max(latest.get(key, -1), o)

        def may_be_missing(o: int) -> bool:
            if compacted and latest[key_of(expect[o])] > o:
                return True
            return (truncating is not None and o >= truncating) or (tear and o >= flushed)

        lost = [o for o, identity in expect.items()
                if o >= start and actual.get(o) != identity and (o in actual or not may_be_missing(o))]
        if lost:
            o = lost[0]
            violations.append(f"{where}: {len(lost)} acknowledged records lost or changed, the first at offset {o}: "
                              f"{expect[o]!r} acknowledged, {actual.get(o)!r} found"
                              f"{f' (flushed below {flushed})' if tear else ''}")
        inflight = model.inflight[p]
        for o, identity in actual.items():
            if o in expect:
                continue
            fields = identity.split(b":")
            if not (inflight and len(fields) == 3 and fields[2].isdigit() and int(fields[0]) == p
                    and int(fields[1]) == inflight[0] and int(fields[2]) < inflight[1]):
                violations.append(f"{where}: offset {o} holds {identity!r}, never acknowledged nor being appended")
                break
            self.report.unacked_survivors += 1
        if model.retention_pending[p]:
            if start < model.start[p]:
                violations.append(f"{where}: log start {start} is below {model.start[p]}, where retention left it")
        elif start != model.start[p]:
            violations.append(f"{where}: log start {start}, but retention left it at {model.start[p]}")
        if tear and end < flushed and not compacted:  # (a compacted log may end before a message it dropped)
            violations.append(f"{where}: the log ends at {end}, below the flushed offset {flushed}")
        # what the next child recovers
        model.expect[p] = dict(actual)
        model.inflight[p] = None
        model.truncating[p] = None
        model.flushed[p] = flushed
        model.start[p] = start
        model.retention_pending[p] = False


def tear_unflushed(log_dir: str, flushed: dict[int, int], rng: random.Random) -> tuple[int, set[int]]:
    """A power cut on top of the kill: in each .log file, the bytes after the last entry below the flushed
    offset may be cut, zeroed or garbled, and the index entries pointing there zeroed or garbled. Returns how
    many files were damaged, and the partitions where a segment that is not the last was cut at a message
    boundary (a loss recovery cannot see)."""
    damaged = 0
    invisible = set()
    for p, (topic, partition) in enumerate(LOGS):
        partition_dir = os.path.join(log_dir, f"{topic}-{partition}")
        if not os.path.isdir(partition_dir):
            continue
        names = sorted(name for name in os.listdir(partition_dir) if name.endswith(".log"))
        for k, name in enumerate(names):
            path = os.path.join(partition_dir, name)
            with open(path, "rb") as f:
                data = f.read()
            durable = 0
            starts = message_set.entry_starts(data)
            for pos in starts:
                offset, size = struct.unpack_from(">qi", data, pos)
                if offset >= flushed[p]:
                    break
                durable = pos + message_set.LOG_OVERHEAD + size
            if durable >= len(data):
                continue
            how = rng.choice(["keep", "cut", "zero", "garble"])
            at = rng.randrange(durable, len(data) + 1)
            if how == "cut" and k + 1 < len(names) and (at in starts or at == len(data)) and at < len(data):
                invisible.add(p)
            with open(path, "r+b") as f:
                if how == "cut":
                    f.truncate(at)
                elif how == "zero":
                    f.seek(at)
                    f.write(bytes(len(data) - at))
                elif how == "garble":  # to the end: garbage that only hit an offset field would go unseen
                    f.seek(at)
                    f.write(rng.randbytes(len(data) - at))
            damaged += how != "keep"
            index_path = path[: -len(".log")] + ".index"
            if os.path.exists(index_path):
                damaged += tear_index(index_path, durable, rng)
    return damaged, invisible


def tear_index(path: str, durable: int, rng: random.Random) -> int:
    how = rng.choice(["keep", "zero", "garble"])
    if how == "keep":
        return 0
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        for at in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
            relative, position = _INDEX_ENTRY.unpack_from(data, at)
            if (relative, position) != (0, 0) and position >= durable:
                data[at: at + ENTRY_SIZE] = bytes(ENTRY_SIZE) if how == "zero" else rng.randbytes(ENTRY_SIZE)
        f.seek(0)
        f.write(data)
    return 1


# -- the runs ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Report:
    runs: int = 0
    kills: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # (phase, how) -> n
    kinds: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    missed: int = 0
    torn_runs: int = 0
    tears: int = 0
    records: int = 0
    reads: int = 0
    index_entries: int = 0
    checkpoints_read: int = 0
    unacked_survivors: int = 0
    gaps: int = 0
    acked: int = 0
    violations: list[tuple[Plan, str]] = dataclasses.field(default_factory=list)


def run_chain(chain: int, runs: range, args: argparse.Namespace, root: str, report: Report) -> None:
    seed, progress = args.seed, args.progress
    rng = random.Random(f"{seed}:{chain}")
    config = chain_config(rng)
    # calibration: how many kill points of each phase one lifetime of these settings reaches
    scratch = os.path.join(root, f"calibrate-{chain}")
    os.makedirs(scratch)
    calibration = Plan(run=-1, chain=chain, lifetime=0, mode="calibrate", seed=rng.getrandbits(32))
    _, kind, seconds, message = run_child(calibration, scratch, os.path.join(scratch, "journal"), config)
    shutil.rmtree(scratch)
    if kind != "exit":
        raise SystemExit(f"calibration of chain {chain} failed: {kind}")
    counts = json.loads(message)
    unreached = [phase.name for phase in PHASES if not counts.get(phase.name)]
    if unreached:  # the log code no longer goes through the methods or calls a phase names
        report.violations.append((calibration, f"no kill point reached in phase {', '.join(unreached)}: "
                                               "its methods in PHASES no longer cover the log's writes"))
    if progress:
        print(f"chain {chain}: {config}, {seconds:.2f} s per calibration lifetime, kill points {counts}")
    log_dir = os.path.join(root, f"chain-{chain}")
    journal_path = os.path.join(root, f"chain-{chain}.journal")
    model = Model()
    os.makedirs(log_dir)
    recovery_points = 0
    for lifetime, run in enumerate(runs, start=1):
        rng = random.Random(f"{seed}:{chain}:{run}")  # each run's plan its own, whatever came before
        plan = Plan(run=run, chain=chain, lifetime=lifetime, mode="steered", seed=rng.getrandbits(32),
                    tear=rng.random() < TEAR_FRACTION)
        if rng.random() < TIMED_FRACTION:
            plan.mode, plan.delay_s, plan.max_steps = "timed", rng.uniform(0, seconds), 20 * CALIBRATION_STEPS
        else:
            choices = {name: n for name, n in counts.items() if n > 0 and name != "recovery"}
            if recovery_points:
                choices["recovery"] = recovery_points
            if args.phases:
                choices = {name: n for name, n in choices.items() if name in args.phases} or choices
            plan.phase = rng.choice(sorted(choices))
            plan.point = rng.randrange(choices[plan.phase])
            plan.max_steps = 4 * CALIBRATION_STEPS
        phase, kind, _, _ = run_child(plan, log_dir, journal_path, config)
        report.runs += 1
        violations: list[str] = []
        if kind.startswith("error"):
            violations.append(f"the child failed: {kind.removeprefix('error ')}")
        else:
            how = "timed" if plan.mode == "timed" else "steered"
            if kind == "end":
                report.missed += 1
                phase = "(none: target not reached)" if plan.mode == "steered" else "(none)"
            report.kills[(phase if phase != "-" else "(between phases)", how)] += 1
            if plan.mode == "steered" and kind != "end":
                report.kinds[kind] += 1
        report.torn_runs += plan.tear
        model.read_journal(journal_path, violations)
        if args.keep:
            before = os.path.join(root, "before-check")
            shutil.rmtree(before, ignore_errors=True)
            shutil.copytree(log_dir, before)
        checked, recovery_points = Checker(root, report).check(log_dir, config, model, plan.tear, rng)
        violations += checked
        if args.keep and violations:
            kept = os.path.join(args.keep, f"seed-{seed}-chain-{chain}-run-{run}")
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(before, kept)
            shutil.copy(journal_path, kept + ".journal")
        for v in violations:
            report.violations.append((plan, v))
        if progress:
            print(f"  {plan.describe()}: killed in {phase or '-'} ({kind.split(chr(10))[0][:60]})"
                  f"{': ' + str(len(violations)) + ' violations' if violations else ''}", flush=True)
        if violations:  # start afresh, so one fault is reported once
            report.acked += model.acked
            shutil.rmtree(log_dir)
            os.remove(journal_path)
            os.makedirs(log_dir)
            model = Model()
            recovery_points = 0
    report.acked += model.acked


def print_report(report: Report, args, seconds: float, recovery_log: RecoveryLog) -> None:
    steered = sum(n for (_, how), n in report.kills.items() if how == "steered")
    timed = sum(n for (_, how), n in report.kills.items() if how == "timed")
    print(f"crash torture of the log: {report.runs} runs in {seconds:.0f} s (seed {args.seed}, chains of "
          f"{args.chain_length}), {steered} steered kills, {timed} timed, {report.torn_runs} with torn unflushed "
          f"tails")
    print("kills per phase (steered / timed):")
    phases = sorted({phase for phase, _ in report.kills}, key=lambda n: (n not in PHASE_BY_NAME, n))
    for phase in phases:
        print(f"  {phase:28} {report.kills[(phase, 'steered')]:5} / {report.kills[(phase, 'timed')]}")
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(report.kinds.items()))
    print(f"steered kill points: {kinds}; targets not reached (killed at the end): {report.missed}")
    recovered = ", ".join(f"{what} {n}" for what, n in sorted(recovery_log.counts.items())) or "nothing to repair"
    print(f"recoveries checked: {report.runs} ({recovered}); files damaged by torn tails: {report.tears}; gaps after "
          f"torn tails: {report.gaps}")
    print(f"checked: {report.records} records found in the recovered logs, summed over the checks ({report.acked} "
          f"records acknowledged in all), "
          f"{report.unacked_survivors} unacknowledged survivors of a killed append, {report.reads} reads from every "
          f"offset, {report.index_entries} index entries, {report.checkpoints_read} checkpoint files")
    print(f"violations: {len(report.violations)} (0 expected)")
    for plan, violation in report.violations:
        print(f"  seed {args.seed} {plan.describe()}: {violation}")
        print(f"    replay: python bench/crash_torture.py --seed {args.seed} --runs {args.runs} "
              f"--chain-length {args.chain_length} --chain {plan.chain} --progress")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="kills (runs) in all (default 200)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chain-length", type=int, default=10, help="runs on one directory before a fresh one")
    parser.add_argument("--chain", type=int, default=None, help="replay only this chain of the plan")
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                        help="where the directories go (default /dev/shm)")
    parser.add_argument("--progress", action="store_true", help="a line per run")
    parser.add_argument("--keep", help="copy each directory and journal with a violation here, before the check")
    parser.add_argument("--phases", type=lambda text: text.split(","), default=None,
                        help="steer the kills only to these phases (comma-separated), e.g. swap,clean")
    args = parser.parse_args(argv)
    logging.getLogger().addHandler(logging.NullHandler())
    recovery_log = RecoveryLog()
    log_logger = logging.getLogger("zkbroker.log")
    log_logger.addHandler(recovery_log)
    log_logger.setLevel(logging.INFO)  # the child sets WARNING: only the checks' recoveries are counted
    log_logger.propagate = False
    install_points()
    root = tempfile.mkdtemp(prefix="crash-torture-", dir=args.dir)
    report = Report()
    start = time.monotonic()
    try:
        chains = (args.runs + args.chain_length - 1) // args.chain_length
        selected = [args.chain] if args.chain is not None else range(chains)
        for chain in selected:
            first = chain * args.chain_length
            runs = range(first, min(first + args.chain_length, args.runs))
            run_chain(chain, runs, args, root, report)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_report(report, args, time.monotonic() - start, recovery_log)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
