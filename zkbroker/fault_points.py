"""Fault points inside a lab process: the steps that chance decides in production, made to happen on demand
(DESIGN §10; docs/lab.md, "Fault points").

A broker of a lab applies them when told through its control socket (zkbroker/control_protocol.py); outside a lab
nothing ever sets one, and each check below is one attribute read. The points, by name:

- `hold_fetchers` / `release_fetchers`: this broker's replica fetchers fetch nothing (they still do a leader
  epoch truncation first), as if the follower were slow or cut off from its leaders; on a KRaft controller, its
  Raft node's Fetch requests wait unsent (a follower cut off from the quorum's leader: it stands once its fetch
  timeout passes, while its other requests still go out);
- `drop_next_vote_response`, `drop_next_begin_quorum_epoch_response`, `drop_next_fetch_response` (`count`),
  `delay_next_...` (`count`, `ms`), on a KRaft controller: the next answers of that kind it receives are lost on
  the way (or held), so its Raft node sees no answer and retries after its request timeout;
- `hold_offset_out_of_range` / `release_offset_out_of_range` (`ms`, optional): a replica fetcher that gets an
  OFFSET_OUT_OF_RANGE answer waits right there, before it asks the leader for its log end and start, until
  released (or `ms` milliseconds each time), so that writes can reach the leader in between (KAFKA-2143's race);
- `drop_next_leader_and_isr`, `drop_next_update_metadata` (`count`, default 1): the next `count` such requests from a
  controller are read and thrown away unanswered, and the connection they came on is closed, as a request
  lost with its connection would be (the controller's channel sends it again on a new connection, which the
  next drop takes too, until the count is spent);
- `delay_next_leader_and_isr`, `delay_next_update_metadata` (`count`, default 1; `ms`): the next `count` requests
  are held `ms` milliseconds before they apply (the requests after them on that connection wait too);
- `hold_controller_queue` / `release_controller_queue`: this broker's controller takes no event from its
  queue (ZooKeeper watches, broker answers and ControlledShutdown requests pile up); it still answers `state`;
- `hold_heartbeats` / `release_heartbeats`, on a KRaft broker: its lifecycle requests to the active controller
  (BrokerHeartbeat, and BrokerRegistration when it registers) wait unsent, as if its channel to the controller
  were stuck; the active controller fences it once `broker.session.timeout.ms` passes without one. Released, the
  next one goes out at once (naming the metadata offset the broker has then);
- `hold_metadata` / `release_metadata`, on a KRaft broker: the Fetch requests with which it follows the
  metadata log (as the quorum's observer) wait unsent, so it applies nothing new: its image, its leaderships
  and the metadata it answers clients with stay as they were, whatever the controller decides meanwhile;
- `stop_before_zookeeper_write` / `stop_after_zookeeper_write` (`write`, `action`): right before (or right
  after) the named ZooKeeper write, the process stops itself -- SIGKILL (`action` "kill", the default) or SIGSTOP
  ("pause": `lab resume` lets it go on from that very point). One-shot: it fires once, then is gone;
- `hold_cleaner_at` (`phase`) / `release_cleaner`: a log cleaner thread that reaches the named phase of a
  cleaning (CLEANER_PHASES) stops right there until released, the files left as a crash there would leave them
  (a test may kill the broker while it is held). The swap's phases hold the log's lock: an append to that
  partition waits too, and with it the broker's loop (and this control socket), so release before producing to
  it, or kill the broker. `in_force` says how many cleaner threads wait there (`held`);
- `hold_group_loading` / `release_group_loading`: the loading of each offsets partition this broker comes to
  lead waits before it reads the log, so its groups answer COORDINATOR_LOAD_IN_PROGRESS until released;
  `in_force` says how many loads wait (`held`);
- `stop_before_txn_markers` (`action`): this broker's transaction coordinator, right after it has written a
  PrepareCommit to `__transaction_state` and before it sends the commit's markers, stops the process -- SIGKILL
  (the default) or SIGSTOP. One-shot. The leader of that `__transaction_state` partition after it finds the
  PrepareCommit in its log and completes the commit;
- `hold_transactional_produce` (`count`, default 1) / `release_transactional_produce`: the next `count` Produce
  requests that carry a transactional id stop on arrival, unanswered, until released -- a request delayed in the
  network (KAFKA-12671's hanging transaction). Only that connection waits behind it; a client that gives up and
  closes it leaves the request held all the same, and once released it is handled as if it had just arrived
  (verification included), its answer going nowhere. `in_force` says how many wait (`held`).

Each point is in force until healed (`heal`); counted ones also end when their count is spent.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from zkbroker import timeline

log = logging.getLogger("zkbroker.FaultPoints")

# The named ZooKeeper writes a stop can be put before or after.
ZOOKEEPER_WRITES = {
    "registration": "a broker's /brokers/ids/<id> (at startup, and again after a session expiry)",
    "controller_election": "the /controller node a broker creates when it wins the controller election",
    "controller_epoch": "the /controller_epoch increment of a newly elected controller",
    "isr_update": "a partition leader's own ISR change (shrink or expand) of the partition's state znode",
    "state_write": "the controller's writes of partitions' state znodes (new partitions, elections, ISR removals)",
}
STOP_ACTIONS = ("kill", "pause")
# The phases of a log cleaning a cleaner thread can be held at (zkbroker/log/cleaner.py calls them, in order).
CLEANER_PHASES = {
    "offset-map-built": "the offset map of the dirty section built, nothing written yet",
    "cleaned-partial": "the first chunk of a group of segments appended to its .cleaned files",
    "cleaned-written": "a group's .cleaned files complete and flushed",
    "swap-renamed": "the .cleaned files renamed to .swap (the swap committed; under the log's lock)",
    "old-segments-renamed": "the replaced segments renamed to .deleted (under the log's lock)",
    "swapped": "the .swap files renamed to the segments they replace (under the log's lock)",
    "checkpointed": "the new first dirty offset written to cleaner-offset-checkpoint",
}
# The controller requests a drop or delay applies to, by the name in the point.
REQUESTS = {"leader_and_isr": "LeaderAndIsr", "update_metadata": "UpdateMetadata"}
# The quorum's answers a KRaft controller can lose or hold (raft/raft_manager.py), by the name in the point.
RESPONSES = {"vote_response": "Vote response", "begin_quorum_epoch_response": "BeginQuorumEpoch response",
             "fetch_response": "Fetch response"}

POINTS = ("hold_fetchers", "release_fetchers", "hold_offset_out_of_range", "release_offset_out_of_range",
          "drop_next_leader_and_isr", "delay_next_leader_and_isr",
          "drop_next_update_metadata", "delay_next_update_metadata",
          "hold_controller_queue", "release_controller_queue",
          "hold_heartbeats", "release_heartbeats", "hold_metadata", "release_metadata",
          "stop_before_zookeeper_write", "stop_after_zookeeper_write",
          "hold_cleaner_at", "release_cleaner", "hold_group_loading", "release_group_loading",
          "stop_before_txn_markers", "hold_transactional_produce", "release_transactional_produce",
          *(f"{kind}_next_{response}" for response in RESPONSES for kind in ("drop", "delay")))
# Which parameters each point takes (required, unless DEFAULTS has one).
PARAMETERS: dict[str, tuple[str, ...]] = {
    "drop_next_leader_and_isr": ("count",), "drop_next_update_metadata": ("count",),
    "delay_next_leader_and_isr": ("count", "ms"), "delay_next_update_metadata": ("count", "ms"),
    "stop_before_zookeeper_write": ("write", "action"), "stop_after_zookeeper_write": ("write", "action"),
    "hold_offset_out_of_range": ("ms",), "hold_cleaner_at": ("phase",), "stop_before_txn_markers": ("action",),
    "hold_transactional_produce": ("count",),
    **{f"drop_next_{response}": ("count",) for response in RESPONSES},
    **{f"delay_next_{response}": ("count", "ms") for response in RESPONSES},
}
# Parameters a point may go without, with no default: hold_offset_out_of_range without ms holds until released.
OPTIONAL: dict[str, tuple[str, ...]] = {"hold_offset_out_of_range": ("ms",)}
# What a parameter left out means: the next one request; a SIGKILL.
DEFAULTS = {"count": 1, "action": "kill"}
# The points that undo another one rather than apply a fault.
RELEASES = {"release_fetchers": "hold_fetchers", "release_controller_queue": "hold_controller_queue",
            "release_heartbeats": "hold_heartbeats", "release_metadata": "hold_metadata",
            "release_offset_out_of_range": "hold_offset_out_of_range", "release_cleaner": "hold_cleaner_at",
            "release_group_loading": "hold_group_loading",
            "release_transactional_produce": "hold_transactional_produce"}


class FaultPointError(ValueError):
    """A fault point that does not exist, or parameters it does not take; the message says which are allowed."""


class DroppedByFaultPoint(ConnectionAbortedError):
    """A controller request thrown away by a drop point: the connection it came on closes unanswered."""


@dataclass
class RequestFault:
    """A drop (ms None) or delay of the next `remaining` requests of one kind."""

    remaining: int
    ms: int | None = None


class FaultPoints:
    """The fault points in force in this process. The network thread, the fetchers (both on the asyncio loop),
    the controller's event thread and ZooKeeper's threads consult it; the control socket changes it."""

    def __init__(self, stop_self: Callable[[signal.Signals], None] | None = None) -> None:
        self.source = "process"  # the timeline source of this process, e.g. "broker:2" (set at startup)
        self.fetchers_held = False
        self.out_of_range_held = False
        self.out_of_range_ms: int | None = None  # how long each hold lasts (None: until released)
        self._controller_open = threading.Event()
        self._controller_open.set()
        self.heartbeats_held = False  # a KRaft broker's BrokerHeartbeat / BrokerRegistration wait unsent
        self.metadata_held = False  # a KRaft broker's Fetch requests of the metadata log wait unsent
        self._metadata_fetches_waiting = 0  # how many wait now (counted on the broker's loop)
        self.requests: dict[str, RequestFault] = {}
        self.zookeeper_stops: dict[tuple[str, str], str] = {}  # (write, "before"|"after") -> action
        self.cleaner_hold: str | None = None  # the cleaning phase cleaner threads stop at (None: no hold)
        self._cleaner_changed = threading.Condition()  # guards the two below; notified when cleaner_hold changes
        self._cleaners_waiting: dict[str, int] = {}  # phase -> cleaner threads waiting there now
        self.group_loading_held = False
        self.group_loads_held = 0  # offsets partitions whose loading waits now (counted on the broker's loop)
        self.txn_markers_stop: str | None = None  # the action of stop_before_txn_markers (None: not in force)
        self.produce_holds_left = 0  # transactional Produce requests still to hold (hold_transactional_produce)
        self._produce_releases = 0  # bumped by each release: a held request goes on when it changes
        self._produces_waiting: dict[int, int] = {}  # release count at the hold -> requests held then (the loop's)
        self._lock = threading.Lock()
        self._stop_self = stop_self or _signal_self

    # ---- applying and healing -------------------------------------------------------------------------------

    def apply(self, point: str, **params: object) -> None:
        """Put a point in force (or, for release_*, heal what it releases). Raises FaultPointError."""
        check(point, params)
        params = {**{k: v for k, v in DEFAULTS.items() if k in PARAMETERS.get(point, ())},
                  **{k: v for k, v in params.items() if v is not None}}
        if point in RELEASES:
            self.heal(RELEASES[point])
        elif point == "hold_fetchers":
            self.fetchers_held = True
        elif point == "hold_offset_out_of_range":
            self.out_of_range_ms = int(params["ms"]) if "ms" in params else None
            self.out_of_range_held = True
        elif point == "hold_controller_queue":
            self._controller_open.clear()
        elif point == "hold_heartbeats":
            self.heartbeats_held = True
        elif point == "hold_metadata":
            self.metadata_held = True
        elif point == "hold_cleaner_at":
            with self._cleaner_changed:  # a hold at another phase replaces it (its waiters go on)
                self.cleaner_hold = str(params["phase"])
                self._cleaner_changed.notify_all()
        elif point == "hold_group_loading":
            self.group_loading_held = True
        elif point == "stop_before_txn_markers":
            self.txn_markers_stop = str(params["action"])
        elif point == "hold_transactional_produce":
            with self._lock:
                self.produce_holds_left = int(params["count"])
        elif point.startswith(("drop_next_", "delay_next_")):
            kind, request = point.split("_next_", 1)
            with self._lock:
                self.requests[request] = RequestFault(int(params["count"]),
                                                      int(params["ms"]) if kind == "delay" else None)
        else:  # stop_before_zookeeper_write / stop_after_zookeeper_write
            when = "before" if point.startswith("stop_before") else "after"
            with self._lock:
                self.zookeeper_stops[(str(params["write"]), when)] = str(params["action"])

    def heal(self, point: str | None = None) -> None:
        """End one point (every entry of it) or, with None, every point in force."""
        if point is not None and point not in POINTS:
            raise FaultPointError(f"unknown fault point {point!r}; allowed: {', '.join(POINTS)}")
        point = RELEASES.get(point, point) if point is not None else None
        if point in (None, "hold_fetchers"):
            self.fetchers_held = False
        if point in (None, "hold_offset_out_of_range"):
            self.out_of_range_held = False
            self.out_of_range_ms = None
        if point in (None, "hold_controller_queue"):
            self._controller_open.set()
        if point in (None, "hold_heartbeats"):
            self.heartbeats_held = False
        if point in (None, "hold_metadata"):
            self.metadata_held = False
        if point in (None, "hold_cleaner_at"):
            with self._cleaner_changed:
                self.cleaner_hold = None
                self._cleaner_changed.notify_all()
        if point in (None, "hold_group_loading"):
            self.group_loading_held = False
        if point in (None, "stop_before_txn_markers"):
            self.txn_markers_stop = None
        if point in (None, "hold_transactional_produce"):
            with self._lock:  # those not yet taken are not held; those held go on
                self.produce_holds_left = 0
                self._produce_releases += 1
        with self._lock:
            for request in list(self.requests):
                if point is None or point.endswith("_next_" + request):
                    del self.requests[request]
            for write, when in list(self.zookeeper_stops):
                if point is None or point == f"stop_{when}_zookeeper_write":
                    del self.zookeeper_stops[(write, when)]

    def in_force(self) -> list[dict]:
        """Each point in force with its parameters, e.g. {"point": "drop_next_leader_and_isr", "count": 2}
        (the count still to come)."""
        out: list[dict] = []
        if self.fetchers_held:
            out.append({"point": "hold_fetchers"})
        if self.out_of_range_held:
            out.append({"point": "hold_offset_out_of_range",
                        **({} if self.out_of_range_ms is None else {"ms": self.out_of_range_ms})})
        if self.controller_held:
            out.append({"point": "hold_controller_queue"})
        if self.heartbeats_held:
            out.append({"point": "hold_heartbeats"})
        if self.metadata_held:
            out.append({"point": "hold_metadata"})
        with self._cleaner_changed:
            if self.cleaner_hold is not None:
                out.append({"point": "hold_cleaner_at", "phase": self.cleaner_hold, "held": self.cleaners_held})
        if self.group_loading_held:
            out.append({"point": "hold_group_loading", "held": self.group_loads_held})
        if self.txn_markers_stop is not None:
            out.append({"point": "stop_before_txn_markers", "action": self.txn_markers_stop})
        if self.produce_holds_left or self.produces_held:
            out.append({"point": "hold_transactional_produce", "count": self.produce_holds_left,
                        "held": self.produces_held})
        with self._lock:
            for request, fault in sorted(self.requests.items()):
                if fault.ms is None:
                    out.append({"point": f"drop_next_{request}", "count": fault.remaining})
                else:
                    out.append({"point": f"delay_next_{request}", "count": fault.remaining, "ms": fault.ms})
            for (write, when), action in sorted(self.zookeeper_stops.items()):
                out.append({"point": f"stop_{when}_zookeeper_write", "write": write, "action": action})
        return out

    # ---- where the processes consult them -----------------------------------------------------------------

    def take_request_fault(self, request: str) -> RequestFault | None:
        """For a controller request of kind `request` ("leader_and_isr", "update_metadata") that just arrived:
        the drop or delay to apply to it (counting it), or None."""
        if not self.requests:
            return None
        with self._lock:
            fault = self.requests.get(request)
            if fault is None:
                return None
            fault.remaining -= 1
            if fault.remaining <= 0:
                del self.requests[request]
        timeline.emit(self.source, "fault_fired", point=("drop_next_" if fault.ms is None else "delay_next_") + request,
                      remaining=max(fault.remaining, 0), **({} if fault.ms is None else {"ms": fault.ms}))
        return fault

    def out_of_range_fired(self, topic: str, partition: int, offset: int, leader: int) -> None:
        """A replica fetcher has stopped on an OFFSET_OUT_OF_RANGE answer, held by hold_offset_out_of_range."""
        held = {} if self.out_of_range_ms is None else {"ms": self.out_of_range_ms}
        timeline.emit(self.source, "fault_fired", point="hold_offset_out_of_range", topic=topic, partition=partition,
                      offset=offset, leader=leader, **held)

    @property
    def controller_held(self) -> bool:
        return not self._controller_open.is_set()

    def wait_while_controller_held(self, closing: threading.Event) -> None:
        """Block the controller's event thread while its queue is held (until released, or `closing` is set)."""
        while not self._controller_open.is_set() and not closing.is_set():
            self._controller_open.wait(0.1)

    async def wait_while_heartbeats_held(self, request: str) -> None:
        """On a KRaft broker's loop, before a lifecycle request (`request`: "heartbeat" or "registration") goes to
        the active controller: wait while hold_heartbeats is in force (the lifecycle sends one at a time)."""
        if not self.heartbeats_held:
            return
        log.warning("BrokerHeartbeat held (lab fault point hold_heartbeats): the %s waits unsent", request)
        timeline.emit(self.source, "fault_fired", point="hold_heartbeats", request=request)
        began = time.monotonic()
        while self.heartbeats_held:
            await asyncio.sleep(0.05)
        log.warning("Held %s goes out after %.0f ms", request, (time.monotonic() - began) * 1000)

    async def wait_while_metadata_held(self, stopped: Callable[[], bool]) -> None:
        """On a KRaft broker's loop, before a Fetch of the metadata log goes to the quorum: wait while
        hold_metadata is in force (or until `stopped`). The Raft client sends another when one times out; the
        timeline hears of the first held one only."""
        if not self.metadata_held:
            return
        if not self._metadata_fetches_waiting:
            log.warning("Metadata log fetches held (lab fault point hold_metadata): nothing new is applied")
            timeline.emit(self.source, "fault_fired", point="hold_metadata")
        self._metadata_fetches_waiting += 1
        try:
            while self.metadata_held and not stopped():
                await asyncio.sleep(0.05)
        finally:
            self._metadata_fetches_waiting -= 1

    def at_cleaner_phase(self, phase: str) -> None:
        """Called by a log cleaner thread at each phase of a cleaning (CLEANER_PHASES): waits there while
        hold_cleaner_at names that phase (until released or healed)."""
        if self.cleaner_hold != phase:
            return
        with self._cleaner_changed:
            if self.cleaner_hold != phase:
                return
            self._cleaners_waiting[phase] = self._cleaners_waiting.get(phase, 0) + 1
            try:
                log.warning("Log cleaner thread %s held at phase %s (lab fault point hold_cleaner_at)",
                            threading.current_thread().name, phase)
                timeline.emit(self.source, "fault_fired", point="hold_cleaner_at", phase=phase)
                while self.cleaner_hold == phase:
                    self._cleaner_changed.wait()
            finally:
                self._cleaners_waiting[phase] -= 1

    @property
    def cleaners_held(self) -> int:
        """How many cleaner threads wait at the phase held now (those let go by a move of the hold are not
        counted, even before they run again)."""
        return self._cleaners_waiting.get(self.cleaner_hold, 0) if self.cleaner_hold is not None else 0

    async def wait_while_group_loading_held(self, topic: str, partition: int) -> None:
        """On the broker's loop, before the loading of an offsets partition reads its log: wait while
        hold_group_loading is in force."""
        if not self.group_loading_held:
            return
        self.group_loads_held += 1
        try:
            log.warning("Loading of [%s,%d] held (lab fault point hold_group_loading)", topic, partition)
            timeline.emit(self.source, "fault_fired", point="hold_group_loading", topic=topic, partition=partition)
            while self.group_loading_held:
                await asyncio.sleep(0.05)
        finally:
            self.group_loads_held -= 1

    def at_zookeeper_write(self, write: str, when: str) -> None:
        """Called right before ("before") and right after ("after") the named ZooKeeper write: stops this
        process there when a stop is in force for it (once)."""
        if not self.zookeeper_stops:
            return
        with self._lock:
            action = self.zookeeper_stops.pop((write, when), None)
        if action is None:
            return
        timeline.emit(self.source, "fault_fired", point=f"stop_{when}_zookeeper_write", write=write, action=action)
        self._stop_self(signal.SIGKILL if action == "kill" else signal.SIGSTOP)

    def before_txn_markers(self, transactional_id: str, commit: bool) -> None:
        """Called by the transaction coordinator once a PrepareCommit or PrepareAbort is written, before its
        markers go out: stops this process there for a commit when stop_before_txn_markers is in force (once)."""
        if self.txn_markers_stop is None or not commit:
            return
        action, self.txn_markers_stop = self.txn_markers_stop, None
        log.warning("Stopping (%s) between the PrepareCommit of %s and its markers (lab fault point "
                    "stop_before_txn_markers)", action, transactional_id)
        timeline.emit(self.source, "fault_fired", point="stop_before_txn_markers", transactional_id=transactional_id,
                      action=action)
        self._stop_self(signal.SIGKILL if action == "kill" else signal.SIGSTOP)

    async def hold_transactional_produce(self, transactional_id: str, partitions: list[str]) -> bool:
        """On the broker's loop, as a Produce request carrying a transactional id arrives: while
        hold_transactional_produce has requests left to hold, this one waits here until released. True when it
        was held (it then goes on as if it had just arrived)."""
        if not self.produce_holds_left:
            return False
        with self._lock:
            if not self.produce_holds_left:
                return False
            self.produce_holds_left -= 1
            releases = self._produce_releases
        self._produces_waiting[releases] = self._produces_waiting.get(releases, 0) + 1
        try:
            log.warning("Produce request of transactional id %s for %s held (lab fault point "
                        "hold_transactional_produce)", transactional_id, ", ".join(partitions))
            timeline.emit(self.source, "fault_fired", point="hold_transactional_produce",
                          transactional_id=transactional_id, partitions=partitions)
            began = time.monotonic()
            while self._produce_releases == releases:
                await asyncio.sleep(0.05)
            log.warning("Held Produce request of transactional id %s goes on after %.0f ms", transactional_id,
                        (time.monotonic() - began) * 1000)
        finally:
            self._produces_waiting[releases] -= 1
            if not self._produces_waiting[releases]:
                del self._produces_waiting[releases]
        return True

    @property
    def produces_held(self) -> int:
        """How many transactional Produce requests wait now (those released and about to go on are not counted)."""
        return self._produces_waiting.get(self._produce_releases, 0)


def check(point: str, params: dict) -> None:
    """Raise FaultPointError unless `point` exists and `params` are exactly the ones it takes, well formed."""
    if point not in POINTS:
        raise FaultPointError(f"unknown fault point {point!r}; allowed: {', '.join(POINTS)}")
    wanted = PARAMETERS.get(point, ())
    unknown = [k for k in params if k not in wanted]
    if unknown:
        takes = f"it takes {', '.join(wanted)}" if wanted else "it takes none"
        raise FaultPointError(f"fault point {point} has no parameter {unknown[0]!r}; {takes}")
    missing = [k for k in wanted if params.get(k) is None and k not in DEFAULTS and k not in OPTIONAL.get(point, ())]
    if missing:
        raise FaultPointError(f"fault point {point} needs {', '.join(missing)}")
    for key in ("count", "ms"):
        if key in params and (isinstance(params[key], bool) or not isinstance(params[key], int)
                              or params[key] < (1 if key == "count" else 0)):
            least = "1" if key == "count" else "0"
            raise FaultPointError(f"{key} of fault point {point} must be an integer of at least {least}, "
                                  f"not {params[key]!r}")
    if "write" in params and params["write"] not in ZOOKEEPER_WRITES:
        raise FaultPointError(f"unknown ZooKeeper write {params['write']!r}; allowed: {', '.join(ZOOKEEPER_WRITES)}")
    if "phase" in params and (not isinstance(params["phase"], str) or params["phase"] not in CLEANER_PHASES):
        raise FaultPointError(f"unknown log cleaner phase {params['phase']!r}; allowed: {', '.join(CLEANER_PHASES)}")
    if "action" in params and params["action"] not in STOP_ACTIONS:
        raise FaultPointError(f"unknown stop action {params['action']!r}; allowed: {', '.join(STOP_ACTIONS)}")


def describe(fault: dict) -> str:
    """A fault point in force (an `in_force` entry) in words, e.g. "the next 2 LeaderAndIsr requests dropped"."""
    point = fault.get("point", "?")
    if point == "hold_fetchers":
        return "replica fetchers held"
    if point == "hold_offset_out_of_range":
        how = f"{fault['ms']} ms each time" if fault.get("ms") is not None else "until released"
        return f"replica fetchers held after an OFFSET_OUT_OF_RANGE answer, {how}"
    if point == "hold_controller_queue":
        return "controller event queue held"
    if point == "hold_heartbeats":
        return "heartbeats to the active controller held"
    if point == "hold_metadata":
        return "metadata log fetches held (the broker applies nothing new)"
    if point == "hold_cleaner_at":
        held = fault.get("held")
        waiting = f" ({held} cleaner thread{'s' if held != 1 else ''} waiting there)" if held else ""
        return f"log cleaner held at phase {fault.get('phase')}{waiting}"
    if point == "hold_group_loading":
        held = fault.get("held")
        waiting = f" ({held} offsets partition{'s' if held != 1 else ''} waiting)" if held else ""
        return f"loading of offsets partitions held{waiting}"
    if point.startswith(("drop_next_", "delay_next_")):
        kind, request = point.split("_next_", 1)
        count = fault.get("count", DEFAULTS["count"])
        name = REQUESTS[request] + " request" if request in REQUESTS else RESPONSES.get(request, request)
        what = f"the next {count} {name}{'s' if count != 1 else ''}"
        return f"{what} dropped" if kind == "drop" else f"{what} delayed {fault.get('ms')} ms"
    if point == "stop_before_txn_markers":
        how = "SIGKILL" if fault.get("action", DEFAULTS["action"]) == "kill" else "SIGSTOP"
        return f"{how} between a PrepareCommit and its markers"
    if point == "hold_transactional_produce":
        count, held = fault.get("count", DEFAULTS["count"]), fault.get("held")
        waiting = f" ({held} held now)" if held else ""
        if not count:
            return f"transactional Produce requests held until released{waiting}"
        return (f"the next {count} transactional Produce request{'s' if count != 1 else ''} held until "
                f"released{waiting}")
    if point.startswith("stop_"):
        when = "before" if point.startswith("stop_before") else "after"
        how = "SIGKILL" if fault.get("action", DEFAULTS["action"]) == "kill" else "SIGSTOP"
        return f"{how} {when} the ZooKeeper write {fault.get('write')}"
    return point


def _signal_self(sig: signal.Signals) -> None:
    os.kill(os.getpid(), sig)
    if sig == signal.SIGKILL:  # never returns; the signal may take a moment to land
        time.sleep(60)


FAULTS = FaultPoints()  # this process's fault points
