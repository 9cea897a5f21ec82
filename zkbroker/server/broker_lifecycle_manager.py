"""BrokerLifecycleManager: a KRaft broker's registration and heartbeats on a thread of their own (Kafka's
BrokerLifecycleManager has its own event queue thread and its own channel to the controller).

Why a thread: the broker's event loop also replays the metadata log into its image and applies the image to its
ReplicaManager. At 10,000 partitions one such application held the loop for seconds at a time (opening and
leading thousands of partitions), no heartbeat went out for longer than `broker.session.timeout.ms`, and the
controller fenced the broker it had just registered, again and again; a controlled shutdown's heartbeats waited the
same way and the broker gave up on them. Heartbeats that depend on the loop yielding often enough make every slow
path a liveness bug; a thread makes them independent of it (CPython switches threads every few milliseconds
however busy the loop is).

The thread runs its own asyncio loop with its own ControllerChannel (connections are never shared across loops).
The state machine (broker_lifecycle.py) stays without I/O; every call into it, from this thread or the broker's
loop (begin_controlled_shutdown, set_ready_to_unfence), holds `lock`. What a heartbeat reports it reads through two
callables that only read attributes (the metadata offset the broker has applied; the quorum leader its Raft
observer knows).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from zkbroker.fault_points import FAULTS
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.raft.raft_manager import wall_clock_ms
from zkbroker.server.broker_lifecycle import BrokerLifecycle, BrokerState
from zkbroker.server.controller_channel import ControllerChannel

log = logging.getLogger("zkbroker.server.BrokerLifecycleManager")

TICK_S = 0.05


class BrokerLifecycleManager:
    def __init__(self, lifecycle: BrokerLifecycle, voters: dict[int, tuple[str, int]],
                 active_controller: Callable[[], int | None], metadata_offset: Callable[[], int],
                 on_event: Callable[[str], None], request_timeout_s: float, prefix: str = "") -> None:
        self.lifecycle = lifecycle
        self.voters = voters
        self.active_controller = active_controller
        self.metadata_offset = metadata_offset
        self.on_event = on_event
        self.request_timeout_s = request_timeout_s
        self.prefix = prefix
        self.lock = threading.Lock()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=f"{self.prefix.strip()} lifecycle", daemon=True)
        self._thread.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop sending (a request in flight is abandoned at the next tick) and wait for the thread."""
        self._closing.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    # ---- from the broker's loop --------------------------------------------------------------------------------

    def begin_controlled_shutdown(self) -> bool:
        with self.lock:
            return self.lifecycle.begin_controlled_shutdown(wall_clock_ms())

    def set_ready_to_unfence(self) -> None:
        with self.lock:
            self.lifecycle.set_ready_to_unfence(wall_clock_ms())
        self._report_events()

    def give_up_controlled_shutdown(self) -> None:
        with self.lock:
            self.lifecycle.state = BrokerState.SHUTTING_DOWN

    # ---- the thread --------------------------------------------------------------------------------------------

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except Exception:  # the broker's loop sees a stopped lifecycle as no heartbeats: the controller fences it
            log.exception("%sthe lifecycle thread failed", self.prefix)

    async def _run(self) -> None:
        channel = ControllerChannel(self.voters, self.active_controller, self.prefix.strip() or "broker-lifecycle")
        try:
            while not self._closing.is_set():
                with self.lock:
                    if self.lifecycle.state is BrokerState.SHUTTING_DOWN:
                        break
                    request = self.lifecycle.next_request() if self.lifecycle.due(wall_clock_ms()) else None
                if request is not None:
                    try:
                        await self._exchange(channel, *request)
                    except Exception:
                        log.exception("%sthe %s failed", self.prefix, request[0])
                        with self.lock:
                            self.lifecycle.on_no_answer(wall_clock_ms())
                    self._report_events()
                await asyncio.sleep(TICK_S)
        finally:
            channel.close()

    async def _exchange(self, channel: ControllerChannel, kind: str, body: dict) -> None:
        lifecycle = self.lifecycle
        await FAULTS.wait_while_heartbeats_held(kind)  # the lab's hold_heartbeats: a channel that is stuck
        if kind == "registration":
            response = await channel.send(ApiKey.BROKER_REGISTRATION, 0, body, self.request_timeout_s)
            with self.lock:
                if response is None:
                    lifecycle.on_no_answer(wall_clock_ms())
                    return
                if response.error_code != ErrorCode.NONE:
                    log.info("%sRegistration refused: %s", self.prefix, ErrorCode(response.error_code).name)
                lifecycle.on_registration(wall_clock_ms(), response.error_code, response.broker_epoch)
            return
        with self.lock:  # the state as it is now: a controlled shutdown may have begun since next_request
            body = lifecycle.heartbeat(self.metadata_offset())
        response = await channel.send(ApiKey.BROKER_HEARTBEAT, 0, body, self.request_timeout_s)
        with self.lock:
            if response is None:
                lifecycle.on_no_answer(wall_clock_ms())
                return
            lifecycle.on_heartbeat(wall_clock_ms(), response.error_code, response.is_caught_up, response.is_fenced,
                                   response.should_shut_down)

    def _report_events(self) -> None:
        with self.lock:
            events = self.lifecycle.take_events()
        for event in events:
            self.on_event(event)
