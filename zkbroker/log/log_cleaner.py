"""LogCleaner: the background threads that compact `cleanup.policy=compact` logs (Kafka 0.8.2's
kafka.log.LogCleaner).

Started by the LogManager when `log.cleaner.enable` is true (false by default, as in 0.8.2), it runs
`log.cleaner.threads` threads, `kafka-log-cleaner-thread-<n>`, each with its own Cleaner and an offset map
of log.cleaner.dedupe.buffer.size / threads bytes. A thread takes the filthiest log (LogCleanerManager),
cleans it (Cleaner) and checkpoints where its dirty section now starts; when no log needs cleaning it
sleeps log.cleaner.backoff.ms. Its reads and writes together are throttled to
log.cleaner.io.max.bytes.per.second. It works off the request path: appends and fetches only meet it in
the few renames of a swap, under the log's lock.

As in 0.8.2, an error ends the thread that met it ("Error due to"), and with it that thread's cleaning of
every log: a message without a key in a compacted log does (KAFKA-1755). `log.cleaner.keyless.messages=
discard` is 0.9's fix on the cleaner's side: such messages are dropped.

`phase` (see cleaner.py and Log.replace_segments; the LogCleaner adds "checkpointed" after the checkpoint) is
called by a thread at each phase of a cleaning; a broker passes its lab fault point `hold_cleaner_at`
(zkbroker/fault_points.py), which stops the thread at the named phase so that a test can look, or kill the
broker there. (The phases of the swap run under the log's lock: a broker held there blocks at its next append
to that partition.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from zkbroker.topic_partition import TopicPartition

from .cleaner import Cleaner, CleanerConfig, CleaningAbortedError, Phase, Throttler
from .cleaner_manager import LogCleanerManager, data_dir_of
from .log import Log
from .segment import Clock

logger = logging.getLogger(__name__)


def _no_phase(name: str) -> None:
    """Phases are reported to nobody."""


class LogCleaner:
    """The cleaner threads over the logs `logs()` returns, with checkpoints in `log_dirs`."""

    def __init__(
        self,
        config: CleanerConfig,
        log_dirs: Sequence[str],
        logs: Callable[[], Mapping[TopicPartition, Log]],
        *,
        clock: Clock,
        phase: Phase | None = None,
    ) -> None:
        self.config = config
        self.manager = LogCleanerManager(log_dirs, logs)
        self._stopped = threading.Event()
        self._phase = phase or _no_phase
        # one throttler for every thread, as in Kafka: the rate is the cleaner's, not each thread's
        throttler = Throttler(config.max_io_bytes_per_second, sleep=self._stopped.wait)
        self.cleaners = [
            Cleaner(i, config, clock=clock, check_done=self._check_done, throttler=throttler, phase=self._phase)
            for i in range(config.num_threads)
        ]
        self._threads = [
            threading.Thread(target=self._run, args=(cleaner,), name=f"kafka-log-cleaner-thread-{cleaner.id}",
                             daemon=True)
            for cleaner in self.cleaners
        ]

    def startup(self) -> None:
        logger.info("Starting the log cleaner")
        for thread in self._threads:
            thread.start()

    def shutdown(self) -> None:
        """Stop the threads: a cleaning under way stops at its next chunk, its `.cleaned` files deleted."""
        logger.info("Shutting down the log cleaner.")
        self._stopped.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join()

    @property
    def alive_threads(self) -> int:
        return sum(thread.is_alive() for thread in self._threads)

    # -- what the LogManager tells it ---------------------------------------------------------------------

    def abort_cleaning(self, topic_partition: TopicPartition) -> None:
        self.manager.abort_cleaning(topic_partition)

    def update_checkpoints(self, data_dir: str) -> None:
        self.manager.update_checkpoints(data_dir)

    def maybe_truncate_checkpoint(self, log: Log) -> None:
        self.manager.maybe_truncate_checkpoint(log)

    # -- the threads --------------------------------------------------------------------------------------

    def _check_done(self, log: Log) -> None:
        if self._stopped.is_set():
            raise CleaningAbortedError("The log cleaner is shutting down.")
        if self.manager.is_aborted(TopicPartition(log.topic, log.partition)):
            raise CleaningAbortedError(f"The cleaning of log {log.name} was aborted.")

    def _run(self, cleaner: Cleaner) -> None:
        name = threading.current_thread().name
        logger.info("[%s], Starting ", name)
        try:
            while not self._stopped.is_set():
                if not self.clean_or_sleep(cleaner):
                    self._stopped.wait(self.config.backoff_ms / 1000.0)
        except Exception:
            if not self._stopped.is_set():
                logger.exception("[%s], Error due to ", name)
        logger.info("[%s], Stopped ", name)

    def clean_or_sleep(self, cleaner: Cleaner) -> bool:
        """Clean the filthiest log, if one needs it; False when none does."""
        grabbed = self.manager.grab_filthiest_log()
        if grabbed is None:
            return False
        log, to_clean = grabbed
        end_offset = to_clean.first_dirty_offset
        try:
            end_offset = cleaner.clean(log, to_clean.first_dirty_offset)
        except CleaningAbortedError as e:
            logger.info("Cleaning of log %s stopped: %s", log.name, e)
        finally:
            self.manager.done_cleaning(to_clean.topic_partition, data_dir_of(log), end_offset)
        self._phase("checkpointed")
        return True
