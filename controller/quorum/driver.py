"""QuorumControllerDriver: runs a QuorumController on a controller process (Kafka's ControllerApis handing
requests to the QuorumController, and its event loop), on the process's asyncio loop.

* Requests from the controller listener (BrokerRegistration, BrokerHeartbeat, UnregisterBroker, AlterPartition,
  AllocateProducerIds, and the admin requests brokers forward: CreateTopics, DeleteTopics, CreatePartitions,
  AlterConfigs, IncrementalAlterConfigs, ElectLeaders) become the controller's events; the answer goes out once the
  controller completes it (after its records commit), shaped as the wire response of the request's version. A
  standby, or a controller that loses the leadership meanwhile, answers NOT_CONTROLLER, and the sender finds the
  active controller.
* A timer polls the controller (session expiry, and the events queued while it catches up to lead); each request
  polls it at once, so its records are appended without waiting for the timer; the later parts of a large
  operation are polled for as soon as the loop has run what was ready meanwhile.
* Snapshots: after each commit the SnapshotPolicy (metadata.log.max.record.bytes.between.snapshots, and time)
  says whether to write the controller's state as a snapshot through the log (its records gathered here, encoded
  and written by the raft manager on a thread of its own).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.metadata_records import encode_frame
from zkbroker.raft.listener import MetadataRecord
from zkbroker.raft.snapshot_policy import SnapshotPolicy

from .controller import QuorumController
from .events import Pending

log = logging.getLogger("controller.quorum.QuorumControllerDriver")

#: What the controller listener answers for the quorum controller, at the versions the schemas hold.
QUORUM_CONTROLLER_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.CREATE_TOPICS: (0, 6),
    ApiKey.DELETE_TOPICS: (0, 5),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION: (0, 3),
    ApiKey.BROKER_REGISTRATION: (0, 0),
    ApiKey.BROKER_HEARTBEAT: (0, 0),
    ApiKey.UNREGISTER_BROKER: (0, 0),
    ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0),
}


class SnapshotTrigger:
    """A second listener of the log, after the controller: counts committed bytes and writes the controller's
    snapshot when the policy says so (and the controller's state is all committed)."""

    def __init__(self, controller: QuorumController, policy: SnapshotPolicy, clock: Callable[[], int]) -> None:
        self.controller, self.policy, self.clock = controller, policy, clock
        self._due = False

    def handle_commit(self, base_offset: int, last_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        nbytes = sum(len(encode_frame(*item)) for item in records)
        self._due = self.policy.committed(nbytes, self.clock()) or self._due
        if not self._due:
            return
        started = time.monotonic()
        end = self.controller.write_snapshot()
        if end is None:  # state not all committed yet: at a later commit
            return
        self._due = False
        self.policy.taken(self.clock())
        # The time it held the loop (gathering the records; the raft manager encodes and writes them on a thread of
        # its own): fetches wait behind it
        log.info("[QuorumController id=%d] Taking a snapshot ending at offset %d (its records gathered in %d ms)",
                 self.controller.config.node_id, end, (time.monotonic() - started) * 1000)

    def handle_load_snapshot(self, end_offset: int, epoch: int, records: list[MetadataRecord]) -> None:
        self.policy.taken(self.clock())

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        pass


class QuorumControllerDriver:
    def __init__(self, controller: QuorumController, clock: Callable[[], int], tick_ms: int = 100) -> None:
        self.controller = controller
        self.clock = clock
        self.tick_ms = tick_ms
        self._task: asyncio.Task | None = None
        self._again = False
        controller.wake = self._wake

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._ticks())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _ticks(self) -> None:
        while True:
            self.poll()
            await asyncio.sleep(self.tick_ms / 1000)

    def poll(self) -> None:
        try:
            self.controller.poll(self.clock())
        except Exception:  # a bug must not stop the timer: the next tick tries again
            log.exception("[QuorumController id=%d] poll failed", self.controller.config.node_id)
        if self.controller.has_work and not self._again:
            # the next part of a large operation: after what the loop has ready (requests, the log's traffic)
            self._again = True
            asyncio.get_running_loop().call_soon(self._poll_again)

    def _wake(self) -> None:
        """A commit freed the events held behind it: poll once the log's callback has returned."""
        if not self._again:
            self._again = True
            asyncio.get_running_loop().call_soon(self._poll_again)

    def _poll_again(self) -> None:
        self._again = False
        self.poll()

    async def handle(self, api_key: int, version: int, request: Any) -> dict:
        """The wire response body to one request of the controller listener."""
        c = self.controller
        if api_key == ApiKey.BROKER_REGISTRATION:
            pending = c.register_broker(request)
        elif api_key == ApiKey.BROKER_HEARTBEAT:
            pending = c.broker_heartbeat(request, self.clock())
        elif api_key == ApiKey.UNREGISTER_BROKER:
            pending = c.unregister_broker(request.broker_id)
        elif api_key == ApiKey.ALTER_PARTITION:
            pending = c.alter_partition(request, version)
        elif api_key == ApiKey.ALLOCATE_PRODUCER_IDS:
            pending = c.allocate_producer_ids(request)
        elif api_key == ApiKey.CREATE_TOPICS:
            pending = c.create_topics(_with_validate_only(request))
        elif api_key == ApiKey.DELETE_TOPICS:
            pending = c.delete_topics(list(request.topic_names))
        elif api_key == ApiKey.CREATE_PARTITIONS:
            pending = c.create_partitions(request)
        elif api_key == ApiKey.ALTER_CONFIGS:
            pending = c.alter_configs(request)
        elif api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS:
            pending = c.incremental_alter_configs(request)
        elif api_key == ApiKey.ELECT_LEADERS:
            pending = c.elect_leaders(request)
        else:
            raise ValueError(f"api key {api_key} is not the quorum controller's")
        self.poll()
        await _wait(pending)
        return _response(api_key, request, pending)


async def _wait(pending: Pending) -> None:
    if pending.done:
        return
    future = asyncio.get_running_loop().create_future()
    pending.add_done_callback(lambda p: future.done() or future.set_result(None))
    await future


class _WithValidateOnly:
    """CreateTopics before v1 has no validate_only."""

    def __init__(self, request: Any) -> None:
        self.topics = request.topics
        self.validate_only = getattr(request, "validate_only", False)


def _with_validate_only(request: Any) -> Any:
    return request if hasattr(request, "validate_only") else _WithValidateOnly(request)


def _response(api_key: int, request: Any, pending: Pending) -> dict:
    """The answer as the version's response schema names its fields (extra keys are ignored by the encoder);
    a controller that could not answer at all puts its error (NOT_CONTROLLER) where the request's errors go."""
    error = pending.error
    body = pending.response
    if api_key == ApiKey.CREATE_TOPICS:
        topics = body if error is None else [{"name": t.name, "error_code": error, "error_message": None,
                                              "num_partitions": -1, "replication_factor": -1} for t in request.topics]
        return {"throttle_time_ms": 0, "topics": [{**t, "configs": None} for t in topics]}
    if api_key == ApiKey.DELETE_TOPICS:
        results = body if error is None else [{"name": n, "error_code": error, "error_message": None}
                                              for n in request.topic_names]
        return {"throttle_time_ms": 0, "responses": results}
    if api_key == ApiKey.CREATE_PARTITIONS:
        results = body if error is None else [{"name": t.name, "error_code": error, "error_message": None}
                                              for t in request.topics]
        return {"throttle_time_ms": 0, "results": results}
    if api_key in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        results = body if error is None else [
            {"error_code": error, "error_message": None, "resource_type": r.resource_type,
             "resource_name": r.resource_name} for r in request.resources]
        return {"throttle_time_ms": 0, "responses": results}
    if api_key == ApiKey.ELECT_LEADERS:
        if error is not None:
            body = {"error_code": error, "replica_election_results": []}
        return {"throttle_time_ms": 0, **body}
    if error is not None:
        body = {ApiKey.BROKER_REGISTRATION: {"broker_epoch": -1},
                ApiKey.BROKER_HEARTBEAT: {"is_caught_up": False, "is_fenced": True, "should_shut_down": False},
                ApiKey.UNREGISTER_BROKER: {"error_message": None},
                ApiKey.ALTER_PARTITION: {"topics": []},
                ApiKey.ALLOCATE_PRODUCER_IDS: {"producer_id_start": -1, "producer_id_len": 0}}[api_key]
        body = {**body, "error_code": error}
    return {"throttle_time_ms": 0, **body}


__all__ = ["QUORUM_CONTROLLER_VERSIONS", "QuorumControllerDriver", "SnapshotTrigger"]
