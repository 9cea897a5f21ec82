"""KafkaServer: one broker process, started and stopped in Kafka 0.8.2's order.

startup: connect to ZooKeeper (creating the chroot) and create the common paths; bind the socket server;
start the controller (its election) *before* registering, as 0.8.2 does; start the metadata cache; then
register `/brokers/ids/<id>`. shutdown: stop accepting requests, stop the controller, close the session
(which removes our ephemeral nodes at once, so the cluster learns without waiting for a timeout).

The broker's threads: the asyncio loop (network), kazoo's threads, the ZkClient event thread and the
controller's event thread. Blocking ZooKeeper calls never run on the asyncio loop.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from controller.controller import KafkaController
from zkbroker.config import KafkaConfig
from zkbroker.server.apis import KafkaApis
from zkbroker.server.metadata_cache import MetadataCache
from zkbroker.server.network import SocketServer
from zkbroker.server.registration import BrokerRegistrar
from zkbroker.zk import paths
from zkbroker.zk.client import ZkClient

log = logging.getLogger("zkbroker.server.KafkaServer")


class KafkaServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.prefix = f"[Kafka Server {self.broker_id}], "
        self.zk = ZkClient(config.zk_connect, config.zk_session_timeout_ms, config.zk_connection_timeout_ms,
                           name=f"broker-{self.broker_id}")
        self.metadata_cache = MetadataCache(self.zk)
        self.controller = KafkaController(self.zk, self.broker_id)
        self.apis = KafkaApis(config, self.metadata_cache)
        self.socket_server = SocketServer(config.host or "0.0.0.0", config.port, self.apis,
                                          config["socket.request.max.bytes"])
        self.registrar = BrokerRegistrar(self.zk, self.broker_id, config.advertised_host,
                                         config.advertised_port, stopping=lambda: self._stopping)
        self._stopping = False
        self._stop = asyncio.Event()

    async def run(self) -> None:
        """Start, serve until SIGTERM/SIGINT (or stop()), then shut down cleanly."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        log.info("%sstarting", self.prefix)
        for warning in self.config.warnings:
            log.warning("%s", warning)
        try:
            await loop.run_in_executor(None, self._start_zookeeper)
            await self.socket_server.start()
            await loop.run_in_executor(None, self._start_cluster_membership)
        except BaseException:
            await self._shutdown()
            raise
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

    def _start_cluster_membership(self) -> None:
        self.controller.startup()
        self.metadata_cache.startup()
        self.registrar.startup()

    async def _shutdown(self) -> None:
        log.info("%sshutting down", self.prefix)
        self._stopping = True
        await self.socket_server.stop()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.controller.shutdown)
        await loop.run_in_executor(None, self.zk.close)
        log.info("%sshut down completed", self.prefix)
