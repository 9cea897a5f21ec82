"""ControllerServer: a KRaft node with process.roles=controller (Kafka 3.7's KafkaRaftServer with the controller
role), no ZooKeeper anywhere: it checks that its log directories were formatted for it (meta.properties), opens
the metadata log, serves the controller listener (ControllerApis) and runs the Raft manager, whose records the
quorum controller (controller/quorum/) replays, answers requests with, and snapshots.

Shutdown (SIGTERM, SIGINT): a leader resigns first (EndQuorumEpoch), so the others elect at once instead of
waiting for their fetch timeout; then the listener closes and the log is flushed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from controller.quorum.controller import QuorumController, QuorumControllerConfig
from controller.quorum.driver import QuorumControllerDriver, SnapshotTrigger
from zkbroker import control_protocol as control
from zkbroker import timeline
from zkbroker.config import KafkaConfig
from zkbroker.fault_points import FAULTS
from zkbroker.raft.config import QuorumConfig
from zkbroker.raft.metadata_log import MetadataLog
from zkbroker.raft.node import NotLeaderError
from zkbroker.raft.raft_manager import RaftManager, wall_clock_ms
from zkbroker.raft.snapshot_policy import SnapshotPolicy
from zkbroker.server import meta_properties
from zkbroker.server.controller_apis import ControllerApis
from zkbroker.server.fencing_events import FencingTimeline
from zkbroker.server.lab_control import LabControlServer
from zkbroker.server.network import ConnectionLimits, SocketServer

log = logging.getLogger("zkbroker.server.ControllerServer")

#: The bytes a follower asks for in one Fetch. Kafka's raft client asks for 8 MiB; here every record of a Fetch
#: is decoded and encoded again in Python on both ends, and a step that long keeps a node from its timers (a
#: follower busy for seconds with one answer stands for election), so a Fetch carries at most this much.
FETCH_MAX_BYTES = 64 * 1024
NO_OP_RECORD = 20  # NoOpRecord (api key 20, version 0): what the lab's append writes


class ControllerServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.prefix = f"[ControllerServer id={self.node_id}] "
        self.raft: RaftManager | None = None
        self.quorum: QuorumControllerDriver | None = None
        self.socket_server: SocketServer | None = None
        self.lab_control: LabControlServer | None = None
        self._stop = asyncio.Event()
        self._failure: BaseException | None = None

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        await self.start()
        await self._stop.wait()
        await self._shutdown()
        if self._failure is not None:
            raise self._failure

    async def start(self) -> None:
        """Everything but waiting: a combined node (server/kraft_server.py) starts its broker on our Raft manager
        next."""
        config = self.config
        directories = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
        cluster_id = meta_properties.check(directories, self.node_id)
        log.info("%sstarting in cluster %s", self.prefix, cluster_id)
        for warning in config.warnings:
            log.warning("%s", warning)
        voters = config.quorum_voters
        voter_directories = config.quorum_voter_directories  # KIP-853's directory ids, when the voters name them
        own = meta_properties.read(config.metadata_log_dir)
        quorum = QuorumConfig(
            node_id=self.node_id, voters=frozenset(voters), cluster_id=cluster_id,
            election_timeout_ms=config["controller.quorum.election.timeout.ms"],
            election_backoff_max_ms=config["controller.quorum.election.backoff.max.ms"],
            fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
            request_timeout_ms=config["controller.quorum.request.timeout.ms"],
            retry_backoff_ms=config["controller.quorum.retry.backoff.ms"], fetch_max_bytes=FETCH_MAX_BYTES,
            pre_vote=config["controller.quorum.pre.vote.enable"], voter_directories=voter_directories,
            directory_id=own.directory_id if voter_directories is not None and own is not None else None)
        metadata_log = MetadataLog(config.metadata_log_dir, segment_bytes=config["metadata.log.segment.bytes"])
        self.raft = RaftManager(quorum, voters, metadata_log, on_fatal=self._fatal)
        unclean = config["unclean.leader.election.enable"]  # KRaft mode's default, false (config.KRAFT_DEFAULTS)
        controller_config = QuorumControllerConfig(
            node_id=self.node_id, cluster_id=cluster_id, session_timeout_ms=config["broker.session.timeout.ms"],
            default_partitions=config["num.partitions"],
            default_replication_factor=config["default.replication.factor"], unclean_leader_election_enable=unclean)
        self.quorum = QuorumControllerDriver(QuorumController(controller_config, self.raft), wall_clock_ms)
        apis = ControllerApis(self.node_id, cluster_id, voters, self.raft, self.quorum)
        host, port = config.controller_endpoint
        self.socket_server = SocketServer(host or "0.0.0.0", port, apis, config["socket.request.max.bytes"],
                                          ConnectionLimits.from_config(config))
        try:
            self.lab_control = self._lab_control()
            if self.lab_control is not None:
                await self.lab_control.start()
            await self.socket_server.start()
            self.raft.start()
            policy = SnapshotPolicy(config["metadata.log.max.record.bytes.between.snapshots"],
                                    config["metadata.log.max.snapshot.interval.ms"])
            self.raft.register(self.quorum.controller)
            self.raft.register(SnapshotTrigger(self.quorum.controller, policy, wall_clock_ms))
            if timeline.enabled():
                self.raft.register(FencingTimeline(self.node_id))
            self.quorum.start()
        except BaseException:
            await self._shutdown()
            raise
        log.info("%sstarted (voters %s)", self.prefix, ",".join(str(v) for v in sorted(voters)))

    def stop(self) -> None:
        self._stop.set()

    def _fatal(self, exc: BaseException) -> None:
        """The Raft node met what Raft rules out (raft/node.py's RaftStateError): stop, and exit with it."""
        self._failure = exc
        self.stop()

    async def _shutdown(self) -> None:
        log.info("%sshutting down", self.prefix)
        if self.quorum is not None:
            await self.quorum.stop()
        if self.raft is not None and self.raft.node is not None:
            await self.raft.shutdown()
        if self.socket_server is not None:
            await self.socket_server.stop()
        if self.lab_control is not None:
            await self.lab_control.stop()
        log.info("%sshut down completed", self.prefix)

    # --- the lab control interface ---------------------------------------------------------------------------

    def _lab_control(self) -> LabControlServer | None:
        path = os.environ.get(control.ENV_VAR)
        if not path:
            return None
        FAULTS.source = f"controller:{self.node_id}"
        handler = control.ControlHandler(FAULTS, self.lab_state, self.lab_append)
        return LabControlServer(path, handler)

    def lab_state(self) -> dict:
        raft = self.raft
        state: dict = {"node": self.node_id, "pid": os.getpid(), "role": "controller",
                       "faults": FAULTS.in_force(), "raft": None}
        if raft is not None and raft.node is not None:
            node, metadata_log = raft.node, raft.log
            snapshot = metadata_log.latest_snapshot
            state["raft"] = {
                "state": node.state.name, "epoch": node.epoch, "leader": node.leader_id, "voted_for": node.voted_id,
                "log_start_offset": metadata_log.start_offset, "log_end_offset": metadata_log.end_offset,
                "high_watermark": node.high_watermark,
                "snapshot": None if snapshot is None else {"end_offset": snapshot.end_offset, "epoch": snapshot.epoch},
                "voters": sorted(raft.config.voters),
                # False for a node named a voter whose log dir is not the voter's (KIP-853's directory ids): it
                # follows as an observer
                "voter": raft.config.is_voter}
        if self.quorum is not None:
            state["quorum_controller"] = self.quorum.controller.describe()
        return state

    def lab_append(self, count: int) -> dict:
        if self.raft is None or self.raft.node is None:
            raise control.ControlError("the Raft manager is not started")
        leader, epoch = self.raft.leader_and_epoch()
        try:
            last = self.raft.schedule_append(epoch, [(NO_OP_RECORD, 0, {})] * count)
        except NotLeaderError as exc:
            raise control.ControlError(f"controller {self.node_id} is not the leader (leader: {exc.leader_id}, "
                                       f"epoch {exc.epoch})") from None
        return {"last_offset": last, "epoch": epoch}
