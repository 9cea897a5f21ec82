"""LogManager: every partition log in the broker's `log.dirs` (Kafka's kafka.log.LogManager).

At start it locks each log directory (`.lock`), loads every `<topic>-<partition>` directory in it with its
recovery point from `recovery-point-offset-checkpoint` (logs recover unless the directory holds the
`.kafka_cleanshutdown` marker), then removes the marker while the broker runs. A new log goes to the
directory holding the fewest. At shutdown every log is flushed and closed, the recovery points are
checkpointed and the marker is written again.

It has no timers of its own: the broker's scheduler calls the periodic duties -- `cleanup_logs`
(retention, every log.retention.check.interval.ms, for logs that are not compacted),
`flush_dirty_logs` (every log.flush.scheduler.interval.ms) and `checkpoint_recovery_points` (every
log.flush.offset.checkpoint.interval.ms) -- and passes `schedule` for the one-off tasks of the logs. Its
one set of threads is the log cleaner's (`cleaner_config` with enable_cleaner, i.e. log.cleaner.enable),
started by `start_cleaner` and stopped first at shutdown; the LogManager tells it of deleted logs, and each
log tells it of truncations below its active segment.

Deviations from 0.8.2: a directory in a log dir whose name is not `<topic>-<partition>` is skipped with a
warning; 0.8.2 failed to start. A recovery point checkpointed above its log's end (a crash between a
truncation and the checkpoint after it) is checkpointed again at once at the log end, where the log caps it:
left in the file, it vouched for whatever the restarted broker appended below it until the next periodic
checkpoint (found by bench/crash_torture.py).
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import resource
from collections.abc import Mapping, Sequence
from typing import Any

from zkbroker.topic_partition import TopicPartition

from .checkpoint import LOG_START_OFFSET_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE, OffsetCheckpoint
from .cleaner import CleanerConfig, Phase
from .log import CLEAN_SHUTDOWN_FILE, Log, Schedule, parse_topic_partition_name, run_now, system_clock
from .log_cleaner import LogCleaner
from .log_config import LogConfig
from .open_files import is_too_many_open_files, shortfall
from .segment import Clock

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"
METADATA_LOG_DIR_NAME = "__cluster_metadata-0"  # KRaft mode (DESIGN §17), beside the topics' logs

ConfigLike = LogConfig | Mapping[str, Any]


class LogDirError(RuntimeError):
    """A log directory cannot be used: the message names it."""


class LogManager:
    """The logs of this broker, in `log_dirs`. `topic_configs` gives the settings of topics that differ from
    `default_config` (the broker's topic defaults), for logs loaded at start."""

    def __init__(
        self,
        log_dirs: Sequence[str],
        default_config: ConfigLike | None = None,
        topic_configs: Mapping[str, ConfigLike] | None = None,
        *,
        clock: Clock = system_clock,
        schedule: Schedule = run_now,
        rng: random.Random | None = None,
        cleaner_config: CleanerConfig | None = None,
        cleaner_phase: Phase | None = None,
    ) -> None:
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = LogConfig.of(default_config)
        self.topic_configs = {topic: LogConfig.of(c) for topic, c in (topic_configs or {}).items()}
        self._clock = clock
        self._schedule = schedule
        self._rng = rng
        self._logs: dict[TopicPartition, Log] = {}
        self.cleaner: LogCleaner | None = None
        self._create_and_validate_log_dirs()
        self._dir_locks = self._lock_log_dirs()
        self._recovery_point_checkpoints = {
            d: OffsetCheckpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT_FILE)) for d in self.log_dirs
        }
        self._log_start_offset_checkpoints = {
            d: OffsetCheckpoint(os.path.join(d, LOG_START_OFFSET_CHECKPOINT_FILE)) for d in self.log_dirs
        }
        try:
            self._load_logs()
            if cleaner_config is not None and cleaner_config.enable_cleaner:
                self.cleaner = LogCleaner(cleaner_config, self.log_dirs, self.logs_by_topic_partition, clock=clock,
                                          phase=cleaner_phase)
                for log in self._logs.values():
                    log.on_truncate = self.cleaner.maybe_truncate_checkpoint
        except BaseException:
            self._release_locks()
            raise

    # -- start --------------------------------------------------------------------------------------------

    def _create_and_validate_log_dirs(self) -> None:
        if len({os.path.realpath(d) for d in self.log_dirs}) < len(self.log_dirs):
            raise LogDirError(f"Duplicate log directory found: {', '.join(self.log_dirs)}")
        for d in self.log_dirs:
            if not os.path.exists(d):
                logger.info("Log directory '%s' not found, creating it.", d)
                try:
                    os.makedirs(d)
                except OSError as e:
                    raise LogDirError(f"Failed to create data directory {d}: {e.strerror}") from e
            if not os.path.isdir(d) or not os.access(d, os.R_OK):
                raise LogDirError(f"{d} is not a readable log directory.")

    def _lock_log_dirs(self) -> list[int]:
        locks: list[int] = []
        for d in self.log_dirs:
            fd = os.open(os.path.join(d, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                for held in locks:
                    os.close(held)
                raise LogDirError(
                    f"Failed to acquire lock on file .lock in {d}. A Kafka instance in another process or thread "
                    "is using this directory."
                ) from None
            locks.append(fd)
        return locks

    def _release_locks(self) -> None:
        for fd in self._dir_locks:
            os.close(fd)  # closing the descriptor releases its flock
        self._dir_locks = []

    def _load_logs(self) -> None:
        logger.info("Loading logs.")
        self._check_open_files_limit()
        for d in self.log_dirs:
            marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
            if os.path.exists(marker):
                logger.debug("Found clean shutdown file. Skipping recovery for all logs in data directory: %s", d)
            else:
                logger.info("No clean shutdown file in %s: recovering its logs from their recovery points.", d)
            recovery_points = self._recovery_point_checkpoints[d].read()
            log_starts = self._log_start_offset_checkpoints[d].read()
            loaded: dict[TopicPartition, Log] = {}
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                if not os.path.isdir(path) or name == METADATA_LOG_DIR_NAME:
                    continue  # a KRaft broker's metadata log is the Raft driver's (raft/metadata_log.py)
                try:
                    topic_partition = parse_topic_partition_name(name)
                except ValueError:
                    logger.warning("Skipping %s: not a <topic>-<partition> log directory.", path)
                    continue
                logger.debug("Loading log '%s'", name)
                try:
                    log = self._open_log(path, topic_partition, recovery_points.get(topic_partition, 0),
                                         log_starts.get(topic_partition, 0))
                except OSError as e:
                    if not is_too_many_open_files(e):
                        raise
                    raise LogDirError(f"Ran out of open files loading log {name} after {len(self._logs):,} "
                                      f"others: {self._limit_sentence(len(self._logs) + 1)}") from e
                previous = self._logs.setdefault(topic_partition, log)
                if previous is not log:
                    log.close()
                    raise LogDirError(f"Duplicate log directories found: {log.dir}, {previous.dir}!")
                loaded[topic_partition] = log
            if any(log.recovery_point < recovery_points.get(tp, 0) for tp, log in loaded.items()):
                self._recovery_point_checkpoints[d].write({tp: log.recovery_point for tp, log in loaded.items()})
            if os.path.exists(marker):
                os.remove(marker)
        logger.info("Logs loading complete.")

    def _check_open_files_limit(self) -> None:
        """Say, naming the limit, when the logs on disk need more descriptors than this process may open (Kafka
        would fail part-way through with "Too many open files")."""
        count = sum(1 for d in self.log_dirs for name in os.listdir(d)
                    if "-" in name and os.path.isdir(os.path.join(d, name)))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        sentence = shortfall(count, soft)
        if sentence is not None:
            logger.error("%s", sentence)

    @staticmethod
    def _limit_sentence(partitions: int) -> str:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return shortfall(partitions, soft) or f"the open-files limit (RLIMIT_NOFILE, `ulimit -n`) is {soft:,}"

    def _open_log(self, path: str, topic_partition: TopicPartition, recovery_point: int,
                  log_start_offset: int) -> Log:
        config = self.topic_configs.get(topic_partition.topic, self.default_config)
        return Log(path, config, recovery_point, clock=self._clock, schedule=self._schedule, rng=self._rng,
                   log_start_offset=log_start_offset)

    # -- the logs -----------------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: ConfigLike | None = None) -> Log:
        """The partition's log, created in the log directory with the fewest logs if it does not exist.
        `config` (default: the topic's settings given at start, else the defaults) applies to a new log."""
        log = self._logs.get((topic, partition))
        if log is not None:
            return log
        if config is None:
            config = self.topic_configs.get(topic, self.default_config)
        data_dir = self._next_log_dir()
        path = os.path.join(data_dir, f"{topic}-{partition}")
        try:
            log = Log(path, config, 0, clock=self._clock, schedule=self._schedule, rng=self._rng)
        except OSError as e:
            if is_too_many_open_files(e):
                logger.error("Ran out of open files creating the log of %s-%d with %d logs open: %s", topic,
                             partition, len(self._logs), self._limit_sentence(len(self._logs) + 1))
            raise
        if self.cleaner is not None:
            log.on_truncate = self.cleaner.maybe_truncate_checkpoint
        self._logs[(topic, partition)] = log
        props = ", ".join(f"{k} -> {v}" for k, v in log.config.to_props().items())
        logger.info("Created log for partition [%s,%d] in %s with properties {%s}.", topic, partition, data_dir, props)
        return log

    def update_configs(self, default_config: ConfigLike, topic_configs: Mapping[str, ConfigLike]) -> list[str]:
        """A dynamic config change (Kafka's DynamicConfigManager): new broker defaults and the settings of the
        topics given; every open log of those topics takes its topic's settings at once (the next append, roll
        and retention pass read them). Returns the topics that have a log here."""
        self.default_config = LogConfig.of(default_config)
        changed = {topic: LogConfig.of(c) for topic, c in topic_configs.items()}
        self.topic_configs.update(changed)
        touched = set()
        for (topic, _), log in list(self._logs.items()):
            config = changed.get(topic)
            if config is not None:
                log.config = config
                touched.add(topic)
        return sorted(touched)

    def _next_log_dir(self) -> str:
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]  # counting every log (below) made creating n logs O(n^2)
        counts = dict.fromkeys(self.log_dirs, 0)
        for log in self._logs.values():
            parent = os.path.dirname(os.path.abspath(log.dir))
            counts[parent] = counts.get(parent, 0) + 1
        return min(self.log_dirs, key=counts.__getitem__)  # ties: the first in log.dirs

    def delete_log(self, topic: str, partition: int) -> None:
        """Remove the partition's log and its directory at once (topic deletion, StopReplica delete=true)."""
        log = self._logs.pop((topic, partition), None)
        if log is not None:
            if self.cleaner is not None:
                self.cleaner.abort_cleaning(TopicPartition(topic, partition))
            log.delete()
            if self.cleaner is not None:
                self.cleaner.update_checkpoints(os.path.dirname(os.path.abspath(log.dir)))
            logger.info("Deleted log for partition [%s,%d] in %s.", topic, partition, os.path.abspath(log.dir))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def logs_by_topic_partition(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def logs_by_dir(self) -> dict[str, dict[TopicPartition, Log]]:
        """The logs of each log directory (every directory present, possibly empty)."""
        by_dir: dict[str, dict[TopicPartition, Log]] = {d: {} for d in self.log_dirs}
        for topic_partition, log in list(self._logs.items()):  # a copy: checkpoints may run off the loop
            by_dir.setdefault(os.path.dirname(os.path.abspath(log.dir)), {})[topic_partition] = log
        return by_dir

    # -- replication's truncations ------------------------------------------------------------------------

    def truncate_to(self, partition_offsets: Mapping[TopicPartition, int]) -> None:
        """Truncate each log to its offset (logs that do not exist are skipped), then checkpoint."""
        for topic_partition, offset in partition_offsets.items():
            log = self._logs.get(topic_partition)
            if log is not None:
                log.truncate_to(offset)
        self.checkpoint_recovery_points()

    def truncate_fully_and_start_at(self, topic: str, partition: int, new_offset: int) -> None:
        log = self._logs.get((topic, partition))
        if log is not None:
            log.truncate_fully_and_start_at(new_offset)
        self.checkpoint_recovery_points()

    # -- periodic duties ----------------------------------------------------------------------------------

    def cleanup_logs(self) -> int:
        """Retention over every log that is not compacted; returns the number of segments deleted."""
        logger.debug("Beginning log cleanup...")
        start = self._clock()
        total = sum(log.delete_old_segments() for log in self.all_logs())
        logger.debug("Log cleanup completed. %d files deleted in %d seconds", total, (self._clock() - start) // 1000)
        return total

    def remove_expired_producers(self, max_age_ms: int) -> int:
        """Forget the idempotent producers no log has heard from for `max_age_ms` (Kafka 0.11's
        transactional.id.expiration.ms); returns how many."""
        now = self._clock()
        return sum(log.producer_state.remove_expired(now, max_age_ms) for log in self.all_logs())

    def flush_dirty_logs(self) -> None:
        """Flush every log not flushed for flush.ms."""
        logger.debug("Checking for dirty logs to flush...")
        for (topic, _), log in list(self._logs.items()):
            try:
                if self._clock() - log.last_flush_time >= log.config.flush_ms:
                    log.flush()
            except OSError:
                logger.exception("Error flushing topic %s", topic)

    def checkpoint_recovery_points(self) -> None:
        """Write each log directory's recovery-point-offset-checkpoint (and its log-start-offset-checkpoint)."""
        for d, logs in self.logs_by_dir().items():
            if d in self._recovery_point_checkpoints:
                self._recovery_point_checkpoints[d].write({tp: log.recovery_point for tp, log in logs.items()})
                self._write_log_starts(d, logs)

    def checkpoint_log_start_offsets(self) -> None:
        """Write each log directory's log-start-offset-checkpoint: after DeleteRecords moved a start, so that a
        restart does not serve the deleted records again."""
        for d, logs in self.logs_by_dir().items():
            if d in self._log_start_offset_checkpoints:
                self._write_log_starts(d, logs)

    def _write_log_starts(self, d: str, logs: Mapping[TopicPartition, Log]) -> None:
        # as Kafka: only the logs whose start lies past their first segment's base
        self._log_start_offset_checkpoints[d].write({tp: log.log_start_offset for tp, log in logs.items()
                                                     if log.log_start_offset > log.segments[0].base_offset})

    def start_cleaner(self) -> None:
        """Start the log cleaner's threads, if it is enabled."""
        if self.cleaner is not None:
            self.cleaner.startup()

    # -- stop ---------------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop the log cleaner; flush and close every log, checkpoint the recovery points and mark each
        directory cleanly shut down."""
        logger.info("Shutting down.")
        try:
            if self.cleaner is not None:
                self.cleaner.shutdown()
            for d, logs in self.logs_by_dir().items():
                logger.debug("Flushing and closing logs at %s", d)
                for log in logs.values():
                    log.flush()
                    log.close()
                logger.debug("Updating recovery points at %s", d)
                self._recovery_point_checkpoints[d].write({tp: log.recovery_point for tp, log in logs.items()})
                self._write_log_starts(d, logs)
                logger.debug("Writing clean shutdown marker at %s", d)
                open(os.path.join(d, CLEAN_SHUTDOWN_FILE), "a").close()
        finally:
            self._release_locks()
        logger.info("Shutdown complete.")
