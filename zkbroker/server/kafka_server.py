"""KafkaServer: one broker process, started and stopped in Kafka 0.8.2's order.

startup: connect to ZooKeeper (creating the chroot) and create the common paths; open the logs (recovering
them after a crash); bind the socket server; start the controller (its election) *before* registering,
as 0.8.2 does; start the metadata cache; then register `/brokers/ids/<id>`.
shutdown: first a controlled shutdown (`controlled.shutdown.enable`): ask the controller, with a
ControlledShutdown request, to move our leaderships to other ISR members, retrying
`controlled.shutdown.max.retries` times; then stop accepting requests, release waiting requests, close the
logs cleanly (flush, checkpoint, clean-shutdown marker), stop the controller, close the session (which
removes our ephemeral nodes at once, so the cluster learns without waiting for a timeout).

The broker's threads: the asyncio loop (network, request handling, log appends and reads), kazoo's
threads, the ZkClient event thread, the controller's event thread, the log cleaner's threads (when
log.cleaner.enable), and the default executor for blocking work (ZooKeeper calls at startup, fsync).
Blocking ZooKeeper calls never run on the asyncio loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time

from kazoo.exceptions import NodeExistsError

from controller.controller import KafkaController
from zkbroker import control_protocol as control
from zkbroker import timeline
from zkbroker.client.connection import BrokerConnection
from zkbroker.client.security import inter_broker_security
from zkbroker.config import KafkaConfig
from zkbroker.fault_points import FAULTS
from zkbroker.log.cleaner import CleanerConfig
from zkbroker.log.log_config import topic_log_config
from zkbroker.log.manager import LogManager
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode, ProtocolError
from zkbroker.security.acl import AclAuthorizer
from zkbroker.server.acl_cache import AclCache
from zkbroker.server.admin_manager import AdminManager
from zkbroker.server.apis import KafkaApis
from zkbroker.server.bridge import LoopBridge
from zkbroker.server.channel_builders import CredentialCache, build_listeners
from zkbroker.server.client_quotas import ClientQuotas
from zkbroker.server.duties import Duties, log_scheduler
from zkbroker.server.dynamic_config import DynamicBrokerConfig, DynamicConfigManager
from zkbroker.server.group_coordinator import GroupCoordinatorDriver
from zkbroker.server.lab_control import BrokerState, LabControlServer
from zkbroker.server.metadata_cache import MetadataCache
from zkbroker.server.network import ConnectionLimits, SocketServer
from zkbroker.server.producer_id_manager import ProducerIdManager
from zkbroker.server.registration import BrokerRegistrar
from zkbroker.server.replica_manager import ReplicaManager
from zkbroker.server.topic_creation import TopicAutoCreator
from zkbroker.server.transaction_coordinator import TransactionCoordinatorDriver
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient
from zkbroker.zk.znodes import BrokerRegistration, ClusterId, ConfigChange, ControllerRegistration

log = logging.getLogger("zkbroker.server.KafkaServer")


def _authorizer(config: KafkaConfig) -> AclAuthorizer | None:
    """authorizer.class.name's ACL authorizer (super.users, allow.everyone.if.no.acl.found), or None."""
    if not config["authorizer.class.name"]:
        return None
    return AclAuthorizer.from_config({
        "super.users": config["super.users"],
        "allow.everyone.if.no.acl.found": str(config["allow.everyone.if.no.acl.found"]).lower()})


def _registered_endpoints(config: KafkaConfig) -> tuple[tuple[str, str, int, str], ...]:
    """Every listener's advertised endpoint, for a registration with listeners beyond one PLAINTEXT; empty
    (0.8.2's registration) otherwise."""
    endpoints = config.advertised_endpoints
    if len(endpoints) == 1 and endpoints[0].listener_name == "PLAINTEXT":
        return ()
    return tuple((e.listener_name, e.host, e.port, e.security_protocol.value) for e in endpoints)


class ControllerNotFound(Exception):
    """No `/controller` node: nobody to ask for a controlled shutdown."""


class KafkaServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.prefix = f"[Kafka Server {self.broker_id}], "
        self.inter_broker_security = inter_broker_security(config)  # checked before anything starts
        self.zk = ZkClient(config.zk_connect, config.zk_session_timeout_ms, config.zk_connection_timeout_ms,
                           name=f"broker-{self.broker_id}", secure_acls=config["zookeeper.set.acl"])
        self.metadata_cache = MetadataCache(self.zk)
        self.controller = KafkaController(self.zk, config)
        self.registrar = BrokerRegistrar(self.zk, self.broker_id, config.advertised_host,
                                         config.advertised_port, stopping=lambda: self._stopping,
                                         endpoints=_registered_endpoints(config))
        self.dynamic_config = DynamicBrokerConfig(config)
        self.config_manager: DynamicConfigManager | None = None
        self.authorizer = _authorizer(config)
        self.acl_cache = AclCache(self.zk, self.authorizer) if self.authorizer is not None else None
        self.quotas = ClientQuotas(self.zk, config["quota.window.num"], config["quota.window.size.seconds"])
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.group_coordinator: GroupCoordinatorDriver | None = None
        self.transaction_coordinator: TransactionCoordinatorDriver | None = None
        self.socket_server: SocketServer | None = None
        self._stopping = False
        self._started = False
        self._stop = asyncio.Event()
        self.duties = Duties(self.prefix)
        self.lab_control = self._lab_control()

    def _connections(self) -> list[dict]:
        return self.socket_server.connections() if self.socket_server is not None else []

    def _lab_control(self) -> LabControlServer | None:
        """In a lab (ZKBROKER_LAB_CONTROL set), the control socket and the fault points the lab wants in force
        from the first instant (ZKBROKER_LAB_FAULTS); outside one, nothing."""
        path = os.environ.get(control.ENV_VAR)
        if not path:
            return None
        FAULTS.source = f"broker:{self.broker_id}"
        handler = control.ControlHandler(FAULTS, BrokerState(self.broker_id, self.zk, self.metadata_cache,
                                                             self.controller, lambda: self.replica_manager, FAULTS,
                                                             self.quotas, self._connections))
        for request in control.initial_faults(os.environ.get(control.FAULTS_ENV_VAR)):
            answer = handler.handle(request)
            if not answer["ok"]:
                raise control.ControlError(f"{control.FAULTS_ENV_VAR}: {answer['error']}")
        return LabControlServer(path, handler)

    async def run(self) -> None:
        """Start, serve until SIGTERM/SIGINT (or stop()), then shut down cleanly."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        log.info("%sstarting", self.prefix)
        for warning in self.config.warnings:
            log.warning("%s", warning)
        try:
            if self.lab_control is not None:
                await self.lab_control.start()
            bridge = LoopBridge(loop)
            credentials = CredentialCache(self.zk, bridge)

            def users_or_clients_changed() -> None:  # their quotas, and users' SCRAM credentials
                self.quotas.reload()
                credentials.clear()

            self.config_manager = DynamicConfigManager(
                self.zk, self.dynamic_config, self._local_topics,
                lambda *change: bridge.call_soon(self._apply_dynamic_configs, *change), users_or_clients_changed)
            await loop.run_in_executor(None, self._start_zookeeper)
            self.log_manager = await loop.run_in_executor(None, self._open_logs, bridge)
            self.replica_manager = ReplicaManager(self.dynamic_config.current, self.log_manager, self.zk, bridge)
            topic_creator = TopicAutoCreator(self.config, self.zk)
            self.group_coordinator = GroupCoordinatorDriver(self.config, self.metadata_cache, self.replica_manager,
                                                            topic_creator)
            admin_manager = AdminManager(self.dynamic_config, self.metadata_cache, self.zk, self.controller.is_active,
                                         self.controller)
            producer_ids = ProducerIdManager(self.broker_id, self.zk, bridge)
            self.transaction_coordinator = TransactionCoordinatorDriver(
                self.config, self.metadata_cache, self.replica_manager, topic_creator, producer_ids)
            apis = KafkaApis(self.config, self.metadata_cache, self.replica_manager, self.zk, bridge,
                             topic_creator, self.controller, self.group_coordinator, admin_manager,
                             self.transaction_coordinator, producer_ids, authorizer=self.authorizer,
                             quotas=self.quotas)
            self.socket_server = SocketServer(self.config.host or "0.0.0.0", self.config.port, apis,
                                              self.config["socket.request.max.bytes"],
                                              ConnectionLimits.from_config(self.config),
                                              build_listeners(self.config, credentials, apis.handle_api_versions))
            await self.socket_server.start()
            self.duties.start(self.config, self.log_manager, self.replica_manager, self.group_coordinator,
                              self.transaction_coordinator)
            await loop.run_in_executor(None, self._start_cluster_membership)
        except BaseException:
            await self._shutdown()
            raise
        self._started = True
        log.info("%sstarted", self.prefix)
        await self._stop.wait()
        await self._shutdown()

    def stop(self) -> None:
        self._stopping = True
        self._stop.set()

    def _start_zookeeper(self) -> None:
        log.info("Connecting to zookeeper on %s", self.config.zk_connect)
        self.zk.start()
        for path in paths.COMMON_PATHS:
            self.zk.ensure_path(path)
        self.metadata_cache.cluster_id = self._cluster_id()
        self.config_manager.initialize()
        if self.acl_cache is not None:  # before the socket server accepts anyone
            self.acl_cache.startup()
        self.quotas.reload()
        dynamic = {**self.dynamic_config.default_configs, **self.dynamic_config.broker_configs}
        if dynamic:
            log.info("%sDynamic broker configs in force: %s", self.prefix, dynamic)

    def _cluster_id(self) -> str:
        """KafkaServer.getOrGenerateClusterId (Kafka 0.10.1): the id in /cluster/id, made now if there is none."""
        data, _ = self.zk.get(paths.CLUSTER_ID)
        if data is None:
            try:
                self.zk.kazoo.create(paths.CLUSTER_ID, ClusterId.generate().encode(), makepath=True)
            except NodeExistsError:
                pass  # another broker made it first
            data, _ = self.zk.get(paths.CLUSTER_ID)
        cluster_id = ClusterId.decode(data).id
        log.info("%sCluster ID = %s", self.prefix, cluster_id)
        return cluster_id

    def _open_logs(self, bridge: LoopBridge) -> LogManager:
        """Load (and after a crash, recover) every log, with each topic's overrides from ZooKeeper."""
        config = self.dynamic_config.current
        topic_configs = {topic: topic_log_config(config, topic, self.zk.get(paths.topic_config_path(topic))[0])
                         for topic in self.zk.get_children(paths.CONFIG_TOPICS)}
        return LogManager(self.config.log_dirs, config.topic_config({}), topic_configs,
                          schedule=log_scheduler(bridge), cleaner_config=CleanerConfig.from_broker(self.config),
                          cleaner_phase=FAULTS.at_cleaner_phase)

    def _start_cluster_membership(self) -> None:
        self.controller.startup()
        self.metadata_cache.startup()
        self.config_manager.startup()
        self.registrar.startup()

    def _local_topics(self) -> set[str]:
        """The topics with a log on this broker (read from the ZkClient event thread: a copy of the dict)."""
        return {topic for topic, _ in self.log_manager.logs_by_topic_partition()} if self.log_manager else set()

    def _apply_dynamic_configs(self, current: KafkaConfig, topic_configs: dict, change: ConfigChange) -> None:
        """On the event loop: a dynamic config change takes effect (DynamicConfigManager computed it)."""
        if self.replica_manager is not None:
            self.replica_manager.config = current  # the broker defaults of partitions opened from now on
        topics = self.log_manager.update_configs(current.topic_config({}), topic_configs)
        if self.replica_manager is not None and self.replica_manager.timeline_source is not None:
            timeline.emit(self.replica_manager.timeline_source, "config_changed", entity_type=change.entity_type,
                          entity_name=change.entity_name, topics=topics)

    def _controlled_shutdown(self) -> None:
        """0.8.2's KafkaServer.controlledShutdown (a blocking exchange, run off the loop while the server still
        serves: the controller may be this very broker, and it sends us LeaderAndIsr meanwhile).

        Each attempt reads `/controller`, connects to it (again, if it moved) and sends ControlledShutdown v1;
        it succeeds when the answer lists no partition left. An I/O error or a non-empty answer is retried after
        `controlled.shutdown.retry.backoff.ms`, up to `controlled.shutdown.max.retries` attempts (without the
        pointless pause after the last one, which 0.8.2 took). No controller, or one that cannot be reached,
        ends it at once, as in 0.8.2; the broker then shuts down uncleanly (others elect after our session).
        Unlike 0.8.2, an unreachable ZooKeeper ends it too: each attempt first waits at most
        `zookeeper.connection.timeout.ms` for the session's connection (kazoo would queue the read of
        `/controller` until ZooKeeper came back, which may be never), so SIGTERM always ends the broker."""
        retries = self.config["controlled.shutdown.max.retries"]
        backoff_s = self.config["controlled.shutdown.retry.backoff.ms"] / 1000.0
        timeout_s = self.config["controller.socket.timeout.ms"] / 1000.0
        log.info("%sStarting controlled shutdown", self.prefix)
        connection: BrokerConnection | None = None
        controller: BrokerRegistration | None = None
        succeeded = False
        try:
            while retries > 0 and not succeeded:
                retries -= 1
                if not self._zookeeper_reachable():
                    log.warning("%sGiving up the controlled shutdown: ZooKeeper (%s) has been unreachable for "
                                "zookeeper.connection.timeout.ms (%d ms)", self.prefix, self.config.zk_connect,
                                self.config.zk_connection_timeout_ms)
                    break
                found = self._current_controller()
                if found is not None and (connection is None or found != controller):
                    if connection is not None:
                        connection.close()
                    controller = found
                    connection = BrokerConnection(found.host, found.port, client_id=f"broker-{self.broker_id}",
                                                  timeout_s=timeout_s, security=self.inter_broker_security).connect()
                if connection is not None:
                    try:
                        response = connection.send(ApiKey.CONTROLLED_SHUTDOWN, 1, {"broker_id": self.broker_id})
                        if response.error_code == ErrorCode.NONE and not response.partitions_remaining:
                            succeeded = True
                            log.info("%sControlled shutdown succeeded", self.prefix)
                        else:
                            log.info("%sRemaining partitions to move: %s", self.prefix, ",".join(
                                f"[{p.topic},{p.partition}]" for p in response.partitions_remaining))
                            log.info("%sError code from controller: %d", self.prefix, response.error_code)
                    except (OSError, ProtocolError) as e:
                        connection.close()
                        connection = None
                        log.warning("%sError during controlled shutdown, possibly because leader movement took longer "
                                    "than the configured socket.timeout.ms: %s", self.prefix, e)
                if not succeeded and retries > 0:
                    time.sleep(backoff_s)
                    log.warning("%sRetrying controlled shutdown after the previous attempt failed...", self.prefix)
        except Exception as e:  # 0.8.2 swallowed everything here: the shutdown must go on
            log.warning("%sControlled shutdown could not reach the controller: %r", self.prefix, e)
        finally:
            if connection is not None:
                connection.close()
        if not succeeded:
            log.warning("%sProceeding to do an unclean shutdown as all the controlled shutdown attempts failed",
                        self.prefix)

    def _zookeeper_reachable(self) -> bool:
        """Whether the ZooKeeper connection is up, or comes back within `zookeeper.connection.timeout.ms`."""
        deadline = time.monotonic() + self.config.zk_connection_timeout_ms / 1000.0
        while not self.zk.connected:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def _current_controller(self) -> BrokerRegistration | None:
        """The controller's registration; None if its /brokers/ids node is gone (try again later)."""
        data, _ = self.zk.get(paths.CONTROLLER)
        if data is None:
            raise ControllerNotFound("Controller doesn't exist")
        controller_id = ControllerRegistration.decode(data).broker_id
        registration, _ = self.zk.get(paths.broker_path(controller_id))
        return None if registration is None else BrokerRegistration.decode(controller_id, registration)

    async def _shutdown(self) -> None:
        log.info("%sshutting down", self.prefix)
        loop = asyncio.get_running_loop()
        if self._started and self.config["controlled.shutdown.enable"]:
            await loop.run_in_executor(None, self._controlled_shutdown)
        self._stopping = True
        self.duties.cancel()
        if self.socket_server is not None:
            await self.socket_server.stop()
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()
        if self.transaction_coordinator is not None:
            self.transaction_coordinator.shutdown()
        if self.replica_manager is not None:
            await self.replica_manager.shutdown()
        if self.log_manager is not None:
            if FAULTS.cleaner_hold is not None:  # a cleaner held by the lab would keep the shutdown waiting
                log.info("%sreleasing the log cleaner held at phase %s (fault point hold_cleaner_at) to shut down",
                         self.prefix, FAULTS.cleaner_hold)
                FAULTS.heal("hold_cleaner_at")
            await loop.run_in_executor(None, self.log_manager.shutdown)
        await loop.run_in_executor(None, self.controller.shutdown)
        await loop.run_in_executor(None, self.zk.close)
        if self.lab_control is not None:
            await self.lab_control.stop()
        log.info("%sshut down completed", self.prefix)
