"""LogCleanerManager: where each compacted log's dirty section starts, and which log the cleaner takes next
(Kafka 0.8.2's kafka.log.LogCleanerManager).

Each log directory holds `cleaner-offset-checkpoint`, in the format of the other offset checkpoints: for
each compacted partition cleaned so far, its first dirty offset. A partition not in it, or one whose offset
lies below its log start, starts dirty at the log start. `grab_filthiest_log` picks the compacted log with
the highest cleanable ratio above its min.cleanable.dirty.ratio (see `compaction.LogToClean`), skipping logs
being cleaned, and marks it in progress; `done_cleaning` checkpoints the new first dirty offset.

A truncation below the active segment (a follower cutting back to its leader) or the deletion of the log
aborts a cleaning of it in progress, so its end offset is not checkpointed, and brings the checkpoint down
to the new active segment's base. Where we deviate from 0.8.2: the thread that aborts does not wait for the
cleaner to stop (0.8.2's abortAndPauseCleaning blocked it); `Log.replace_segments` refuses to swap segments
that changed meanwhile instead, so the request path never waits for the cleaner.

Locks: a log's lock may be held when this manager's is taken (a truncation calls in under it), never the
other way round.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence

from zkbroker.topic_partition import TopicPartition

from .checkpoint import OffsetCheckpoint
from .compaction import LogToClean, filthiest, first_uncleanable_offset
from .log import Log

logger = logging.getLogger(__name__)

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"

_IN_PROGRESS, _ABORTED = "in-progress", "aborted"


def data_dir_of(log: Log) -> str:
    return os.path.dirname(os.path.abspath(log.dir))


class LogCleanerManager:
    """The cleaner checkpoints of `log_dirs` and the state of the cleanings of `logs()` (every log of the broker)."""

    def __init__(self, log_dirs: Sequence[str], logs: Callable[[], Mapping[TopicPartition, Log]]) -> None:
        self._logs = logs
        self.checkpoints = {
            d: OffsetCheckpoint(os.path.join(d, CLEANER_CHECKPOINT_FILE)) for d in map(os.path.abspath, log_dirs)
        }
        self._lock = threading.Lock()
        self._in_progress: dict[TopicPartition, str] = {}

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        offsets: dict[TopicPartition, int] = {}
        for checkpoint in self.checkpoints.values():
            offsets |= checkpoint.read()
        return offsets

    def grab_filthiest_log(self) -> tuple[Log, LogToClean] | None:
        """The compacted log most in need of cleaning, now marked in progress; None if none needs it."""
        last_clean = self.all_cleaner_checkpoints()
        candidates: list[tuple[LogToClean, float]] = []
        logs = {}
        for topic_partition, log in self._logs().items():
            if not log.config.compact:
                continue
            with log.lock:
                segments = [(s.base_offset, s.size) for s in log.segments]
                if not segments:  # deleted since the logs were listed
                    continue
                # the dirty section ends at the active segment, or before an open transaction's first segment
                active_base = first_uncleanable_offset([base for base, _ in segments], log.active_segment.base_offset,
                                                       log.producer_state.earliest_unstable_offset())
            log_start = segments[0][0]
            first_dirty = last_clean.get(topic_partition, log_start)
            if first_dirty < log_start:
                logger.error(
                    "Resetting first dirty offset for %s to log start offset %d since the checkpointed offset %d "
                    "is invalid.", log.name, log_start, first_dirty,
                )
                first_dirty = log_start
            candidates.append((LogToClean.of(topic_partition, segments, first_dirty, active_base),
                               log.config.min_cleanable_dirty_ratio))
            logs[topic_partition] = log
        with self._lock:
            chosen = filthiest([c for c in candidates if c[0].topic_partition not in self._in_progress])
            if chosen is None:
                return None
            self._in_progress[chosen.topic_partition] = _IN_PROGRESS
            return logs[chosen.topic_partition], chosen

    def is_aborted(self, topic_partition: TopicPartition) -> bool:
        with self._lock:
            return self._in_progress.get(topic_partition) == _ABORTED

    def abort_cleaning(self, topic_partition: TopicPartition) -> None:
        """Make a cleaning of the partition in progress stop without checkpointing (the log is deleted)."""
        with self._lock:
            if topic_partition in self._in_progress:
                self._in_progress[topic_partition] = _ABORTED
                logger.info("The cleaning for partition %s is aborted", topic_partition)

    def done_cleaning(self, topic_partition: TopicPartition, data_dir: str, end_offset: int) -> None:
        """The cleaning of the partition ended: checkpoint `end_offset` as its first dirty offset, unless the
        cleaning was aborted."""
        with self._lock:
            state = self._in_progress.pop(topic_partition, None)
            if state == _IN_PROGRESS:
                self._update_checkpoints(data_dir, (topic_partition, end_offset))

    def update_checkpoints(self, data_dir: str, update: tuple[TopicPartition, int] | None = None) -> None:
        """Rewrite a directory's checkpoint: its entries for logs that still exist, with `update` applied."""
        with self._lock:
            self._update_checkpoints(data_dir, update)

    def _update_checkpoints(self, data_dir: str, update: tuple[TopicPartition, int] | None) -> None:
        checkpoint = self.checkpoints.get(os.path.abspath(data_dir))
        if checkpoint is None:
            return
        existing = self._logs()
        offsets = {tp: offset for tp, offset in checkpoint.read().items() if tp in existing}
        if update is not None:
            offsets[update[0]] = update[1]
        checkpoint.write(offsets)

    def maybe_truncate_checkpoint(self, log: Log) -> None:
        """After `log` was truncated below its active segment (called under the log's lock): abort a cleaning
        of it in progress, and bring its checkpoint down to the new active segment's base if it is above."""
        topic_partition = TopicPartition(log.topic, log.partition)
        offset = log.active_segment.base_offset
        with self._lock:
            if topic_partition in self._in_progress:
                self._in_progress[topic_partition] = _ABORTED
            checkpoint = self.checkpoints.get(data_dir_of(log))
            if checkpoint is None:
                return
            offsets = checkpoint.read()
            if offsets.get(topic_partition, -1) > offset:
                offsets[topic_partition] = offset
                checkpoint.write(offsets)
