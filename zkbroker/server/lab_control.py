"""The broker's end of the lab control interface (the protocol is zkbroker/control_protocol.py's): a Unix socket
served on the broker's asyncio loop, and the `state` this broker reports through it.

Only a broker started by a lab opens it (ZKBROKER_LAB_CONTROL names the socket); outside a lab there is no
socket and no fault point is ever in force. Requests are answered on the loop, so `state` reads the replica
manager's partitions between two steps of the broker's own work, never half-way through a LeaderAndIsr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from zkbroker.control_protocol import MAX_LINE, ControlHandler, encode, unix_address
from zkbroker.fault_points import FaultPoints
from zkbroker.server.metadata_cache import MetadataCache
from zkbroker.zk.client import ZkClient

if TYPE_CHECKING:
    from controller.controller import KafkaController
    from zkbroker.server.client_quotas import ClientQuotas
    from zkbroker.server.replica_manager import ReplicaManager

log = logging.getLogger("zkbroker.server.LabControl")


class LabControlServer:
    def __init__(self, path: str | os.PathLike, handler: ControlHandler) -> None:
        self.path = Path(path)
        self.handler = handler
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task] = set()

    async def start(self) -> None:
        """Listen on the socket (a file left by an earlier process of this broker is replaced)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with unix_address(self.path) as address:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(address)
                sock.bind(address)
            sock.listen(16)
            self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=MAX_LINE)
        except BaseException:
            sock.close()
            raise
        log.info("Lab control interface listening on %s", self.path)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2.0)
        self._server = None
        with contextlib.suppress(OSError), unix_address(self.path) as address:
            os.unlink(address)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # longer than MAX_LINE
                    writer.write(encode({"ok": False, "error": f"a request line is at most {MAX_LINE} bytes"}))
                    break
                if not line.endswith(b"\n"):
                    break  # the client closed (a partial last line is not a request)
                answer, go_on = self.handler.handle_line(line)
                writer.write(answer)
                await writer.drain()
                if not go_on:
                    break
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()


class BrokerState:
    """The `state` answer (zkbroker/control_protocol.py documents its shape), read on the broker's loop."""

    def __init__(self, broker_id: int, zk: ZkClient, metadata_cache: MetadataCache, controller: KafkaController,
                 replica_manager: Callable[[], ReplicaManager | None], faults: FaultPoints,
                 quotas: ClientQuotas | None = None, connections: Callable[[], list[dict]] | None = None) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.metadata_cache = metadata_cache
        self.controller = controller
        self.replica_manager = replica_manager
        self.faults = faults
        self.quotas = quotas
        self.connections = connections  # the socket server's, once it listens

    def __call__(self) -> dict:
        snapshot = self.metadata_cache.snapshot
        session = self.zk.session_id
        rm = self.replica_manager()
        return {
            "broker": self.broker_id, "pid": os.getpid(),
            "session": f"0x{session:x}" if session is not None else None,
            "zookeeper_connected": self.zk.connected,
            "controller_epoch_seen": rm.controller_epoch if rm is not None else None,
            "partitions": partition_rows(rm, snapshot),
            "metadata": metadata_rows(snapshot),
            "controller": self.controller.lab_state(),
            "faults": self.faults.in_force(),
            "quotas": self.quotas.usage() if self.quotas is not None else [],
            "connections": self.connections() if self.connections is not None else [],
        }


class KRaftBrokerState:
    """A KRaft broker's `state` (process.roles=broker): the ZooKeeper-mode keys that still mean something (its
    partitions, its metadata cache, its fault points; no session, never the controller), and what KRaft adds:
    its lifecycle with the active controller (registered, fenced or not, broker epoch, incarnation id) and the
    metadata log it follows as an observer (the offset of the image it applied)."""

    def __init__(self, server, faults: FaultPoints) -> None:
        self.server = server  # a BrokerServer (not imported, even for its type: broker_server imports this module)
        self.faults = faults

    def __call__(self) -> dict:
        server = self.server
        snapshot = server.metadata_cache.snapshot
        rm = server.replica_manager
        lifecycle = server.lifecycle
        raft = None
        if server.raft is not None and server.raft.node is not None:
            node = server.raft.node
            raft = {"state": node.state.name, "epoch": node.epoch, "leader": node.leader_id,
                    "log_end_offset": server.raft.log.end_offset, "high_watermark": node.high_watermark}
        return {
            "broker": server.broker_id, "pid": os.getpid(), "role": "broker",
            "session": None, "zookeeper_connected": False,
            "controller_epoch_seen": rm.controller_epoch if rm is not None else None,
            "lifecycle": None if lifecycle is None else {
                "state": lifecycle.state.value, "broker_epoch": lifecycle.broker_epoch, "fenced": lifecycle.fenced,
                "incarnation_id": lifecycle.incarnation_id.hex()},
            "metadata_offset": server.metadata_offset(),
            "raft": raft,
            "partitions": partition_rows(rm, snapshot),
            "metadata": metadata_rows(snapshot),
            "controller": None,
            "faults": self.faults.in_force(),
            "quotas": [],
            "connections": server.socket_server.connections() if server.socket_server is not None else [],
        }


def partition_rows(rm: ReplicaManager | None, snapshot) -> list[dict]:
    """The applied leadership of each partition this broker has (as LeaderAndIsr or the metadata image set it)."""
    rows = []
    if rm is None:
        return rows
    for (topic, partition), p in sorted(rm.partitions.items()):
        cached = snapshot.partitions.get(topic, {}).get(partition)
        rows.append({
            "topic": topic, "partition": partition,
            "role": "leader" if p.is_leader else "follower" if p.leader_id >= 0 else "none",
            "leader": p.leader_id, "leader_epoch": p.leader_epoch, "isr": list(p.isr),
            "replicas": list(p.replicas), "zk_version": p.zk_version, "controller_epoch": p.controller_epoch,
            "hw": p.high_watermark, "leo": p.log_end_offset, "log_start": p.log.log_start_offset,
            "lso": p.last_stable_offset, "open_transactions": len(p.log.producer_state.ongoing),
            "metadata_leader": cached.leader if cached is not None else None})
    return rows


def metadata_rows(snapshot) -> dict:
    """The metadata cache: the controller it names, the live brokers, each partition's leader and ISR."""
    return {"controller": snapshot.controller_id, "live_brokers": sorted(snapshot.brokers),
            "partitions": [{"topic": topic, "partition": partition, "leader": s.leader,
                            "leader_epoch": s.leader_epoch, "isr": list(s.isr), "replicas": list(s.replicas)}
                           for topic, states in sorted(snapshot.partitions.items())
                           for partition, s in sorted(states.items())]}
