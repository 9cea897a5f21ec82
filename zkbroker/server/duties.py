"""A broker's periodic duties (0.8.2 ran them on its KafkaScheduler thread), in one place for both modes
(server/kafka_server.py in ZooKeeper mode, server/broker_server.py in KRaft mode): log retention, flushes and
checkpoints, the replicas' high watermark checkpoint and ISR shrinking, offset expiry, and the transaction
coordinator's clean-ups; and the logs' one-off tasks (flush after a roll, deleting old segment files), run later
and off the loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from zkbroker.config import KafkaConfig
from zkbroker.server.bridge import LoopBridge

log = logging.getLogger("zkbroker.server.KafkaServer")

HW_REPORT_INTERVAL_MS = 200  # in a lab: how often the HW moves go to the timeline (ReplicaManager.report_...)


def log_scheduler(bridge: LoopBridge) -> Callable[[str, Callable[[], object], int], None]:
    """The logs' one-off tasks (flush after a roll, deleting old segment files) run later, off the loop."""
    def schedule(name: str, task: Callable[[], object], delay_ms: int) -> None:
        def start() -> None:
            bridge.loop.run_in_executor(None, task)
        bridge.call_soon(lambda: bridge.loop.call_later(max(delay_ms, 0) / 1000.0, start))
    return schedule


class Duties:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.tasks: list[asyncio.Task] = []

    def every(self, interval_ms: int, duty: Callable[[], object], off_loop: bool) -> None:
        if interval_ms >= 2**62:
            return  # 0.8.2's "never" (Long.MaxValue), e.g. log.flush.scheduler.interval.ms by default

        async def repeat() -> None:
            loop = asyncio.get_running_loop()
            while True:
                await asyncio.sleep(interval_ms / 1000.0)
                try:
                    if off_loop:
                        await loop.run_in_executor(None, duty)
                    else:
                        duty()
                except Exception:
                    log.exception("%s%s failed", self.prefix, getattr(duty, "__name__", duty))
        self.tasks.append(asyncio.get_running_loop().create_task(repeat()))

    def every_async(self, interval_ms: int, duty: Callable[[], Awaitable[object]]) -> None:
        async def repeat() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000.0)
                try:
                    await duty()
                except Exception:
                    log.exception("%s%s failed", self.prefix, getattr(duty, "__name__", duty))
        self.tasks.append(asyncio.get_running_loop().create_task(repeat()))

    def start(self, config: KafkaConfig, log_manager, replica_manager, group_coordinator,
              transaction_coordinator) -> None:
        """Every duty of a broker, and the log cleaner's threads."""
        lm, rm = log_manager, replica_manager
        lm.start_cleaner()
        self.every(config["log.retention.check.interval.ms"], lm.cleanup_logs, off_loop=False)
        # Kafka 0.11's producer id expiration check, every 10 minutes (producer.id.expiration.check.interval.ms)
        self.every(600_000, lambda: lm.remove_expired_producers(config["transactional.id.expiration.ms"]),
                   off_loop=False)
        self.every(config["log.flush.scheduler.interval.ms"], lm.flush_dirty_logs, off_loop=True)
        self.every(config["log.flush.offset.checkpoint.interval.ms"], lm.checkpoint_recovery_points, off_loop=True)

        async def checkpoint_high_watermarks() -> None:
            # The HWs are read on the loop; the file is written (and fsynced) off it.
            write = rm.high_watermarks_writer()
            await asyncio.get_running_loop().run_in_executor(None, write)

        self.every_async(config["replica.high.watermark.checkpoint.interval.ms"], checkpoint_high_watermarks)
        self.every_async(config["replica.lag.check.interval.ms"], rm.maybe_shrink_isr)
        self.every_async(config["offsets.retention.check.interval.ms"], group_coordinator.expire_offsets)
        self.every_async(config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                         transaction_coordinator.abort_timed_out_transactions)
        self.every_async(config["transaction.remove.expired.transaction.cleanup.interval.ms"],
                         transaction_coordinator.remove_expired_transactional_ids)
        if rm.timeline_source is not None:
            self.every(HW_REPORT_INTERVAL_MS, rm.report_high_watermarks, off_loop=False)

    def cancel(self) -> None:
        for task in self.tasks:
            task.cancel()
