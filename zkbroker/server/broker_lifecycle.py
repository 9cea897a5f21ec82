"""A KRaft broker's lifecycle as the quorum controller sees it (Kafka's BrokerLifecycleManager), as a state
machine without I/O: it says which request to send next (BrokerRegistration, BrokerHeartbeat) and when, and
moves on each answer. The broker server (server/broker_server.py) sends them to the active controller.

    STARTING --registered--> RECOVERY (fenced: catching up to its own registration)
    RECOVERY --heartbeat answers caught up, not fenced--> RUNNING
    RUNNING --heartbeat answers fenced (a session that expired: the broker was silent too long)--> RECOVERY
    RECOVERY | RUNNING --begin_controlled_shutdown--> PENDING_CONTROLLED_SHUTDOWN (heartbeats want_shut_down)
    PENDING_CONTROLLED_SHUTDOWN --heartbeat answers should_shut_down--> SHUTTING_DOWN
    any --STALE_BROKER_EPOCH or an unknown broker--> STARTING (register again)

The broker epoch is the controller's answer to the registration; every heartbeat names it, and the metadata
offset the broker has applied, which is how the controller knows it caught up (the offset reaches its own
RegisterBrokerRecord's). Until the broker says it is ready to unfence (`set_ready_to_unfence`: its logs loaded and
the metadata it has read applied to its replicas), its heartbeats carry want_fence, and the controller keeps it
fenced however far its offset reached (Kafka's readyToUnfence).

No I/O and no lock here: the broker drives this from one thread of its own (broker_lifecycle_manager.py), the
bench's stand-ins from their loop.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from zkbroker.protocol.errors import ErrorCode

#: What a broker of this version supports, named in its registration (the controller refuses a broker that
#: cannot run the finalized metadata.version: Kafka 3.7-IV4 is 19).
SUPPORTED_FEATURES = (("metadata.version", 1, 19),)


class BrokerState(enum.Enum):
    STARTING = "starting"
    RECOVERY = "recovery"
    RUNNING = "running"
    PENDING_CONTROLLED_SHUTDOWN = "pending_controlled_shutdown"
    SHUTTING_DOWN = "shutting_down"


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: int = 0  # PLAINTEXT


@dataclass
class BrokerLifecycle:
    broker_id: int
    cluster_id: str
    listeners: tuple[Listener, ...]
    heartbeat_interval_ms: int = 2000
    retry_backoff_ms: int = 500
    rack: str | None = None
    incarnation_id: bytes = field(default_factory=lambda: uuid.uuid4().bytes)
    state: BrokerState = BrokerState.STARTING
    broker_epoch: int = -1
    fenced: bool = True
    next_send_ms: int = 0
    # False for a broker with recovery of its own to do before it may serve (BrokerServer: True once its replicas
    # reflect the metadata it read); a broker that applies nothing (the bench's stand-ins) is ready at once.
    ready_to_unfence: bool = True
    events: list[str] = field(default_factory=list)  # what changed ("registered", "unfenced", "fenced", ...)

    # ---- what to send, and when ----------------------------------------------------------------------------

    def due(self, now_ms: int) -> bool:
        return self.state is not BrokerState.SHUTTING_DOWN and now_ms >= self.next_send_ms

    def next_request(self) -> tuple[str, dict]:
        """("registration" | "heartbeat", the request body) for the current state."""
        if self.state is BrokerState.STARTING:
            return "registration", {
                "broker_id": self.broker_id, "cluster_id": self.cluster_id, "incarnation_id": self.incarnation_id,
                "listeners": [{"name": x.name, "host": x.host, "port": x.port,
                               "security_protocol": x.security_protocol} for x in self.listeners],
                "features": [{"name": n, "min_supported_version": lo, "max_supported_version": hi}
                             for n, lo, hi in SUPPORTED_FEATURES],
                "rack": self.rack}
        return "heartbeat", {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch,
                             "current_metadata_offset": -1, "want_fence": not self.ready_to_unfence,
                             "want_shut_down": self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN}

    def heartbeat(self, metadata_offset: int) -> dict:
        _, body = self.next_request()
        body["current_metadata_offset"] = metadata_offset
        return body

    # ---- answers --------------------------------------------------------------------------------------------

    def on_no_answer(self, now_ms: int) -> None:
        """No active controller answered (none known, a lost connection, NOT_CONTROLLER): try again soon."""
        self.next_send_ms = now_ms + self.retry_backoff_ms

    def on_registration(self, now_ms: int, error_code: int, broker_epoch: int) -> None:
        if self.state is not BrokerState.STARTING:
            return
        if error_code != ErrorCode.NONE:
            # e.g. DUPLICATE_BROKER_REGISTRATION while our previous incarnation's session lasts
            self.next_send_ms = now_ms + self.retry_backoff_ms
            return
        self.broker_epoch = broker_epoch
        self.state = BrokerState.RECOVERY
        self.fenced = True
        self.events.append("registered")
        self.next_send_ms = now_ms  # the first heartbeat at once: we may be caught up already

    def on_heartbeat(self, now_ms: int, error_code: int, is_caught_up: bool, is_fenced: bool,
                     should_shut_down: bool) -> None:
        if self.state in (BrokerState.STARTING, BrokerState.SHUTTING_DOWN):
            return
        if error_code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            self.state, self.broker_epoch, self.fenced = BrokerState.STARTING, -1, True
            self.events.append("registering again")
            self.next_send_ms = now_ms
            return
        if error_code != ErrorCode.NONE:
            self.next_send_ms = now_ms + self.retry_backoff_ms
            return
        if self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            self.fenced = is_fenced
            if should_shut_down:
                self.state = BrokerState.SHUTTING_DOWN
                self.events.append("controlled shutdown done")
                return
            self.next_send_ms = now_ms + min(self.heartbeat_interval_ms, self.retry_backoff_ms)
            return
        if is_fenced != self.fenced:
            self.fenced = is_fenced
            self.events.append("fenced" if is_fenced else "unfenced")
        if not is_fenced:
            self.state = BrokerState.RUNNING
        elif self.state is BrokerState.RUNNING:
            self.state = BrokerState.RECOVERY
        # fenced and not caught up: ask again soon, so the unfencing follows the catching up closely
        catching_up = self.state is BrokerState.RECOVERY
        self.next_send_ms = now_ms + (min(self.heartbeat_interval_ms, self.retry_backoff_ms) if catching_up
                                      else self.heartbeat_interval_ms)
        del is_caught_up  # the controller unfences a caught-up broker itself; fencing is what we track

    def begin_controlled_shutdown(self, now_ms: int) -> bool:
        """True if the controller must be asked (a registered broker); False: nothing to wait for."""
        if self.state in (BrokerState.RECOVERY, BrokerState.RUNNING):
            self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
            self.next_send_ms = now_ms
            return True
        self.state = BrokerState.SHUTTING_DOWN
        return False

    def set_ready_to_unfence(self, now_ms: int) -> None:
        """The broker has recovered: heartbeats stop asking to stay fenced; the next goes out at once."""
        if self.ready_to_unfence:
            return
        self.ready_to_unfence = True
        self.events.append("ready to unfence")
        if self.state in (BrokerState.RECOVERY, BrokerState.RUNNING):
            self.next_send_ms = now_ms

    def take_events(self) -> list[str]:
        events, self.events = self.events, []
        return events
