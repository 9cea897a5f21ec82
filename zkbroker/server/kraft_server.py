"""KafkaRaftServer: a combined KRaft node (process.roles=broker,controller), as Kafka 3.7 runs one: the controller
(a voter of the metadata quorum, serving the controller listener) and the broker (serving clients on PLAINTEXT)
in one process, the broker reading the controller's own metadata log instead of fetching it as an observer.
Start: the controller, then the broker on its Raft manager. Stop (SIGTERM, SIGINT, or either side failing): the
broker first (its controlled shutdown still has a quorum to answer it), then the controller.
"""

from __future__ import annotations

import asyncio
import signal

from zkbroker.config import KafkaConfig
from zkbroker.server.broker_server import BrokerServer
from zkbroker.server.controller_server import ControllerServer


class KafkaRaftServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.controller = ControllerServer(config)
        self.broker = BrokerServer(config)

    def stop(self) -> None:
        self.controller.stop()
        self.broker.stop()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        await self.controller.start()
        try:
            await self.broker.start(raft=self.controller.raft)
        except BaseException:
            await self.controller._shutdown()
            raise
        stops = [loop.create_task(server._stop.wait()) for server in (self.controller, self.broker)]
        await asyncio.wait(stops, return_when=asyncio.FIRST_COMPLETED)
        for task in stops:
            task.cancel()
        await self.broker._shutdown()
        await self.controller._shutdown()
        for server in (self.broker, self.controller):
            if server._failure is not None:
                raise server._failure
