"""BrokerServer: a KRaft node with process.roles=broker (Kafka 3.7's BrokerServer), no ZooKeeper anywhere.

startup: check the log directories were formatted for this node (meta.properties); open the logs; start the
Raft driver as an *observer* of the metadata quorum (the same RaftManager and RaftNode as a controller's, with a
node id that is not a voter: it fetches `__cluster_metadata` from the leader and keeps it, with its snapshots, in
its metadata log dir, so a restart starts from the local snapshot and log); replay the committed records into the
metadata image (metadata_publisher.py), which fills the MetadataCache and makes the ReplicaManager leader or
follower through the methods LeaderAndIsr uses in ZooKeeper mode; bind the listener; register with the active
controller and heartbeat (broker_lifecycle.py). The broker is fenced until its heartbeats report a metadata offset
at or past its own registration; the controller unfences it then.

shutdown: a controlled shutdown through heartbeats (want_shut_down; the controller moves our leaderships and
answers should_shut_down), then the listener closes, the logs close cleanly, and the Raft observer stops.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time

from zkbroker import control_protocol as control
from zkbroker import timeline
from zkbroker.config import KafkaConfig
from zkbroker.fault_points import FAULTS
from zkbroker.log.cleaner import CleanerConfig
from zkbroker.log.log_config import topic_log_config
from zkbroker.log.manager import LogManager
from zkbroker.metadata.delta import MetadataDelta
from zkbroker.metadata.image import MetadataImage
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode
from zkbroker.raft.config import QuorumConfig
from zkbroker.raft.metadata_log import MetadataLog
from zkbroker.raft.raft_manager import RaftManager, wall_clock_ms
from zkbroker.raft.snapshot_policy import SnapshotPolicy
from zkbroker.server import meta_properties
from zkbroker.server.admin_manager import AdminManager
from zkbroker.server.bridge import LoopBridge
from zkbroker.server.broker_lifecycle import BrokerLifecycle, BrokerState, Listener
from zkbroker.server.broker_lifecycle_manager import BrokerLifecycleManager
from zkbroker.server.controller_channel import ControllerChannel
from zkbroker.server.duties import Duties, log_scheduler
from zkbroker.server.dynamic_config import DynamicBrokerConfig
from zkbroker.server.group_coordinator import GroupCoordinatorDriver
from zkbroker.server.kraft_apis import KRaftApis
from zkbroker.server.lab_control import KRaftBrokerState, LabControlServer
from zkbroker.server.metadata_cache import MetadataCache
from zkbroker.server.metadata_publisher import (
    BrokerMetadataListener,
    BrokerSnapshotWriter,
    cluster_snapshot,
    leader_and_isr,
    stop_replica,
)
from zkbroker.server.network import ConnectionLimits, SocketServer
from zkbroker.server.partition import Partition
from zkbroker.server.producer_id_manager import ControllerProducerIdManager
from zkbroker.server.replica_manager import ReplicaManager
from zkbroker.server.topic_creation import ControllerTopicCreator
from zkbroker.server.transaction_coordinator import TransactionCoordinatorDriver
from zkbroker.zk.znodes import EntityConfig

log = logging.getLogger("zkbroker.server.BrokerServer")

FETCH_MAX_BYTES = 64 * 1024  # as a controller's follower asks (controller_server.py)
LIFECYCLE_TICK_S = 0.05
ALTER_PARTITION_VERSION = 1  # topics by name (v2 names them by id)


class BrokerServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.broker_id = config.node_id
        self.prefix = f"[BrokerServer id={self.broker_id}] "
        self.raft: RaftManager | None = None
        self.listener: BrokerMetadataListener | None = None
        self.metadata_cache = MetadataCache(None)
        self.lifecycle: BrokerLifecycle | None = None
        self.lifecycle_manager: BrokerLifecycleManager | None = None
        self.applied_offset = -1  # the image offset the ReplicaManager has applied (what heartbeats report)
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.group_coordinator: GroupCoordinatorDriver | None = None
        self.transaction_coordinator: TransactionCoordinatorDriver | None = None
        self.socket_server: SocketServer | None = None
        self.lab_control: LabControlServer | None = None
        self.forwarding_channel: ControllerChannel | None = None
        self._changes: asyncio.Queue | None = None
        self._tasks: list[asyncio.Task] = []
        self.duties = Duties(self.prefix)
        self._stop = asyncio.Event()
        self._failure: BaseException | None = None
        self._own_raft = True
        self._timeline_source = f"broker:{self.broker_id}" if timeline.enabled() else None

    # ---- start and stop -----------------------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        await self.start()
        await self._stop.wait()
        await self._shutdown()
        if self._failure is not None:
            raise self._failure

    async def start(self, raft: RaftManager | None = None) -> None:
        """Everything but waiting. `raft`: a combined node's controller's Raft manager (a voter), whose log this
        broker reads instead of running an observer of its own (the controller writes the snapshots then)."""
        loop = asyncio.get_running_loop()
        config = self.config
        directories = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
        cluster_id = meta_properties.check(directories, self.broker_id)
        self.metadata_cache.cluster_id = cluster_id
        log.info("%sstarting in cluster %s", self.prefix, cluster_id)
        for warning in config.warnings:
            log.warning("%s", warning)
        voters = config.quorum_voters
        try:
            bridge = self.bridge = LoopBridge(loop)
            self.log_manager = await loop.run_in_executor(None, self._open_logs)
            self.forwarding_channel = ControllerChannel(voters, self._active_controller,
                                                        f"broker-{self.broker_id}-forwarding")
            self.replica_manager = ReplicaManager(config, self.log_manager, None, bridge,
                                                  topic_overrides=self._topic_overrides,
                                                  alter_partition=self._alter_partition)
            topic_creator = ControllerTopicCreator(config, self.forwarding_channel,
                                                   lambda: len(self.metadata_cache.snapshot.brokers))
            self.group_coordinator = GroupCoordinatorDriver(config, self.metadata_cache, self.replica_manager,
                                                            topic_creator)
            producer_ids = ControllerProducerIdManager(self.broker_id, self.forwarding_channel,
                                                       lambda: self.lifecycle.broker_epoch)
            self.transaction_coordinator = TransactionCoordinatorDriver(
                config, self.metadata_cache, self.replica_manager, topic_creator, producer_ids)
            admin_manager = AdminManager(DynamicBrokerConfig(config), self.metadata_cache, None, lambda: False,
                                         topic_overrides=self._described_topic)
            apis = KRaftApis(config, self.metadata_cache, self.replica_manager, bridge, topic_creator,
                             self.forwarding_channel, self.group_coordinator, self.transaction_coordinator,
                             producer_ids, admin_manager)
            self.socket_server = SocketServer(config.host or "0.0.0.0", config.port, apis,
                                              config["socket.request.max.bytes"], ConnectionLimits.from_config(config))
            if raft is None:  # a combined node's control socket is its controller's
                self.lab_control = self._lab_control()
                if self.lab_control is not None:
                    await self.lab_control.start()
            self._changes = asyncio.Queue()
            self._spawn(self._apply_changes())
            quorum = QuorumConfig(
                node_id=self.broker_id, voters=frozenset(voters), cluster_id=cluster_id,
                election_timeout_ms=config["controller.quorum.election.timeout.ms"],
                election_backoff_max_ms=config["controller.quorum.election.backoff.max.ms"],
                fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
                request_timeout_ms=config["controller.quorum.request.timeout.ms"],
                retry_backoff_ms=config["controller.quorum.retry.backoff.ms"], fetch_max_bytes=FETCH_MAX_BYTES)
            self._own_raft = raft is None
            if raft is None:
                metadata_log = MetadataLog(config.metadata_log_dir,
                                           segment_bytes=config["metadata.log.segment.bytes"])
                raft = RaftManager(quorum, voters, metadata_log, on_fatal=self._fatal)
                raft.start()
            self.raft = raft
            self.listener = BrokerMetadataListener(self._publish)
            self.raft.register(self.listener)
            if self._own_raft:
                policy = SnapshotPolicy(config["metadata.log.max.record.bytes.between.snapshots"],
                                        config["metadata.log.max.snapshot.interval.ms"])
                self.raft.register(BrokerSnapshotWriter(self.listener, policy, self._write_snapshot, wall_clock_ms))
            await self.socket_server.start()
            self.duties.start(config, self.log_manager, self.replica_manager, self.group_coordinator,
                              self.transaction_coordinator)
            self.lifecycle = BrokerLifecycle(
                self.broker_id, cluster_id, (Listener("PLAINTEXT", config.host or "localhost", config.port),),
                heartbeat_interval_ms=config["broker.heartbeat.interval.ms"], ready_to_unfence=False)
            self.lifecycle_manager = BrokerLifecycleManager(
                self.lifecycle, voters, self._active_controller, self.metadata_offset, self._lifecycle_event,
                config["broker.heartbeat.interval.ms"] / 1000, self.prefix)
            self.lifecycle_manager.start()
        except BaseException:
            await self._shutdown()
            raise
        log.info("%sstarted (registering with the quorum %s)", self.prefix,
                 ",".join(f"{n}@{h}:{p}" for n, (h, p) in sorted(voters.items())))

    def stop(self) -> None:
        self._stop.set()

    def _lab_control(self) -> LabControlServer | None:
        """In a lab (ZKBROKER_LAB_CONTROL set), the control socket answering `state` (KRaftBrokerState) and the
        fault points the lab wants in force from the first instant (ZKBROKER_LAB_FAULTS); outside one, nothing."""
        path = os.environ.get(control.ENV_VAR)
        if not path:
            return None
        FAULTS.source = f"broker:{self.broker_id}"
        handler = control.ControlHandler(FAULTS, KRaftBrokerState(self, FAULTS))
        for request in control.initial_faults(os.environ.get(control.FAULTS_ENV_VAR)):
            answer = handler.handle(request)
            if not answer["ok"]:
                raise control.ControlError(f"{control.FAULTS_ENV_VAR}: {answer['error']}")
        return LabControlServer(path, handler)

    def _fatal(self, exc: BaseException) -> None:
        self._failure = exc
        self.stop()

    def _spawn(self, coroutine) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(coroutine))

    def _open_logs(self) -> LogManager:
        """Every log, with the broker's defaults; a topic's overrides reach its logs once the image names them."""
        return LogManager(self.config.log_dirs, self.config.topic_config({}), {}, schedule=log_scheduler(self.bridge),
                          cleaner_config=CleanerConfig.from_broker(self.config))

    async def _shutdown(self) -> None:
        log.info("%sshutting down", self.prefix)
        if self.lifecycle_manager is not None:
            if self.lifecycle_manager.begin_controlled_shutdown():
                await self._controlled_shutdown()
            await asyncio.get_running_loop().run_in_executor(None, self.lifecycle_manager.close)
        self.duties.cancel()
        for task in self._tasks:
            task.cancel()
        if self.socket_server is not None:
            await self.socket_server.stop()
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()
        if self.transaction_coordinator is not None:
            self.transaction_coordinator.shutdown()
        if self.replica_manager is not None:
            await self.replica_manager.shutdown()
        loop = asyncio.get_running_loop()
        if self.log_manager is not None:
            await loop.run_in_executor(None, self.log_manager.shutdown)
        if self.raft is not None and self.raft.node is not None and self._own_raft:
            await self.raft.shutdown()
        if self.forwarding_channel is not None:
            self.forwarding_channel.close()
        if self.lab_control is not None:
            await self.lab_control.stop()
        log.info("%sshut down completed", self.prefix)

    async def _controlled_shutdown(self) -> None:
        """Heartbeats with want_shut_down until the controller says should_shut_down (it has moved our
        leaderships and fenced us), for at most the session timeout: without a controller we stop anyway."""
        log.info("%sStarting controlled shutdown", self.prefix)
        deadline = time.monotonic() + self.config["broker.session.timeout.ms"] / 1000
        while self.lifecycle.state is not BrokerState.SHUTTING_DOWN and time.monotonic() < deadline:
            await asyncio.sleep(LIFECYCLE_TICK_S)
        if self.lifecycle.state is BrokerState.SHUTTING_DOWN:
            log.info("%sControlled shutdown succeeded", self.prefix)
        else:
            log.warning("%sProceeding without a controlled shutdown: no controller answered in time", self.prefix)
            self.lifecycle_manager.give_up_controlled_shutdown()

    # ---- the lifecycle: registration and heartbeats ----------------------------------------------------------

    def _active_controller(self) -> int | None:
        if self.raft is None or self.raft.node is None:
            return None
        return self.raft.leader_and_epoch()[0]

    def metadata_offset(self) -> int:
        """What heartbeats report: the offset of the last image the ReplicaManager applied (not merely read), so
        that "caught up" means serving what the metadata says. Read from the lifecycle thread: one attribute."""
        return self.applied_offset

    def _lifecycle_event(self, event: str) -> None:
        """On the lifecycle thread (or the loop, for "ready to unfence"): log and timeline writes only."""
        lifecycle = self.lifecycle
        log.info("%s%s (broker epoch %d, metadata offset %d, state %s)", self.prefix,
                 {"registered": "Registered with the controller", "unfenced": "Unfenced: serving",
                  "ready to unfence": "Recovered: ready to be unfenced",
                  "fenced": "Fenced by the controller", "registering again": "Registering again",
                  "controlled shutdown done": "The controller completed our controlled shutdown"}.get(event, event),
                 lifecycle.broker_epoch, self.metadata_offset(), lifecycle.state.value)
        if self._timeline_source is not None and event in ("fenced", "unfenced"):
            timeline.emit(self._timeline_source, f"broker_{event}", broker=self.broker_id,
                          epoch=lifecycle.broker_epoch)

    # ---- the metadata image ----------------------------------------------------------------------------------

    def _publish(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """On the loop, after each committed run of records: the cache at once, the replicas in order."""
        self.metadata_cache.publish(cluster_snapshot(image, self.broker_id))
        changed = delta.changed_topic_configs
        if changed and self.log_manager is not None:  # the logs already open take a topic's new overrides
            self.log_manager.update_configs(self.config.topic_config({}), {
                topic: topic_log_config(self.config, topic, self._topic_znode(image, topic)) for topic in changed})
        self._changes.put_nowait((image, delta.local_changes(self.broker_id)))

    async def _apply_changes(self) -> None:
        while True:
            image, changes = await self._changes.get()
            try:
                await self._apply(image, changes)
            except Exception:
                log.exception("%sapplying the metadata image at offset %d failed", self.prefix, image.offset)
            self.applied_offset = image.offset
            if self._changes.empty() and self.lifecycle_manager is not None:
                # Kafka's setReadyToUnfence: the logs are loaded and what the observer has read is applied; the
                # controller still unfences only once the applied offset reaches our registration's.
                self.lifecycle_manager.set_ready_to_unfence()

    async def _apply(self, image: MetadataImage, changes) -> None:
        rm = self.replica_manager
        controller = self._active_controller()
        controller = -1 if controller is None else controller
        touched = False
        if changes.deletes:
            rm.stop_replicas(stop_replica(changes.deletes, image, controller))
            touched = True
        epochs = {tp: p.leader_epoch for tp, p in rm.partitions.items()}
        request, updates = leader_and_isr(changes, image, epochs, controller_id=controller)
        if updates:
            rm.update_partition_epochs(updates)
        if request.partition_states:
            await rm.become_leader_or_follower(request)
            touched = True
        if touched:
            self.group_coordinator.on_leadership_change()
            self.transaction_coordinator.on_leadership_change()
        if self._timeline_source is not None:
            timeline.emit(self._timeline_source, "metadata_applied", broker=self.broker_id, offset=image.offset)

    def _write_snapshot(self, end_offset: int, epoch: int, records: list) -> None:
        started = time.monotonic()
        self.raft.create_snapshot(end_offset, epoch, records)
        log.info("%sTaking a snapshot of the metadata image ending at offset %d (%d ms on the loop; written on a "
                 "thread of its own)", self.prefix, end_offset, (time.monotonic() - started) * 1000)

    def _described_topic(self, topic: str) -> dict[str, str] | None:
        image = self.listener.image if self.listener is not None else MetadataImage()
        return None if image.topic(topic) is None else image.topic_config(topic)

    @staticmethod
    def _topic_znode(image: MetadataImage, topic: str) -> bytes | None:
        """A topic's overrides as topic_log_config reads them (its checks, one home with ZooKeeper mode)."""
        overrides = image.topic_config(topic)
        return EntityConfig(overrides).encode() if overrides else None

    def _topic_overrides(self, topic: str) -> dict[str, str]:
        image = self.listener.image if self.listener is not None else MetadataImage()
        return image.topic_config(topic)

    async def _alter_partition(self, p: Partition, new_isr: tuple[int, ...]) -> int | None:
        """AlterPartition (56) for one partition we lead; the new partition epoch if the controller accepted."""
        request = {"broker_id": self.broker_id, "broker_epoch": self.lifecycle.broker_epoch, "topics": [
            {"topic_name": p.topic, "partitions": [
                {"partition_index": p.partition, "leader_epoch": p.leader_epoch, "new_isr": list(new_isr),
                 "leader_recovery_state": 0, "partition_epoch": p.zk_version}]}]}
        response = await self.forwarding_channel.send(ApiKey.ALTER_PARTITION, ALTER_PARTITION_VERSION, request, 10.0)
        if response is None:
            log.info("%sAlterPartition of [%s,%d]: no active controller answered", self.prefix, p.topic,
                     p.partition)
            return None
        error = response.error_code
        result = None
        if error == ErrorCode.NONE and response.topics and response.topics[0].partitions:
            result = response.topics[0].partitions[0]
            error = result.error_code
        if error != ErrorCode.NONE or result is None:
            log.info("%sAlterPartition of [%s,%d] to ISR %s refused: %s", self.prefix, p.topic, p.partition,
                     ",".join(map(str, new_isr)), ErrorCode(error).name)
            return None
        return result.partition_epoch
