"""A KRaft controller quorum on this machine, started the way an operator starts one (DESIGN §17): a
server.properties per controller (node ids 3001...), `zkbroker storage random-uuid` and `storage format`, then
`zkbroker server` on each; no ZooKeeper anywhere. Each controller's Raft state is read through its lab control
socket (zkbroker/control_protocol.py). Controllers only, outside any lab directory: `make demo` tells the quorum's
story with it. Its properties and formatting are the KRaft lab's (kraft_lab.py), which `lab up --kraft` runs as lab
members with every lab verb."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from zkbroker.control_protocol import ENV_VAR as CONTROL_ENV_VAR
from zkbroker.lab import kraft_lab
from zkbroker.lab.control_client import ControlClient, ControlError
from zkbroker.lab.ports import free_port

FIRST_ID = kraft_lab.FIRST_CONTROLLER_ID
HOST = "127.0.0.1"


@dataclass
class Controller:
    node_id: int
    port: int
    directory: Path
    proc: subprocess.Popen | None = None

    @property
    def config(self) -> Path:
        return self.directory / "server.properties"

    @property
    def control(self) -> Path:
        return self.directory / "control.sock"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def raft(self) -> dict | None:
        """The Raft node's state (state, epoch, leader, voted_for, log end, high watermark...), None if it does
        not answer."""
        try:
            with ControlClient(self.control, timeout_s=2.0) as client:
                return client.state().get("raft")
        except ControlError:
            return None


class KRaftQuorum:
    def __init__(self, directory: Path, count: int = 3) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.controllers = [Controller(FIRST_ID + i, free_port(HOST), directory / f"controller-{FIRST_ID + i}")
                            for i in range(count)]
        voters = kraft_lab.voters_value((c.node_id, HOST, c.port) for c in self.controllers)
        for c in self.controllers:
            c.directory.mkdir(parents=True, exist_ok=True)
            c.config.write_text(kraft_lab.controller_properties(c.node_id, HOST, c.port, voters, c.directory / "data"))
        try:
            self.cluster_id = kraft_lab.random_cluster_id()
            for c in self.controllers:
                kraft_lab.format_storage(self.cluster_id, c.config, f"controller {c.node_id}")
        except kraft_lab.KRaftLabError as e:
            raise RuntimeError(str(e)) from None

    def start(self, controller: Controller) -> None:
        env = {**os.environ, CONTROL_ENV_VAR: str(controller.control)}
        with open(controller.directory / "server.log", "ab") as out:
            controller.proc = subprocess.Popen([sys.executable, "-m", "zkbroker", "server", str(controller.config)],
                                               stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                               start_new_session=True, env=env)

    def start_all(self) -> None:
        for c in self.controllers:
            self.start(c)

    def leader(self, timeout_s: float = 60.0, above_epoch: int = 0) -> tuple[int, int]:
        """(leader, epoch) once every running controller names the same leader of an epoch above `above_epoch`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            seen = {(r["leader"], r["epoch"]) for c in self.controllers if c.alive()
                    for r in [c.raft()] if r is not None}
            if len(seen) == 1:
                leader, epoch = next(iter(seen))
                if leader is not None and epoch > above_epoch:
                    return leader, epoch
            time.sleep(0.1)
        raise TimeoutError(f"the controllers did not agree on a leader within {timeout_s:.0f} s")

    def controller(self, node_id: int) -> Controller:
        return next(c for c in self.controllers if c.node_id == node_id)

    def kill(self, node_id: int) -> None:
        c = self.controller(node_id)
        if c.alive():
            c.proc.send_signal(signal.SIGKILL)
            c.proc.wait(10)

    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{c.port}" for c in self.controllers if c.alive())

    def stop(self) -> None:
        for c in self.controllers:
            if c.alive():
                c.proc.terminate()
        for c in self.controllers:
            if c.proc is not None:
                try:
                    c.proc.wait(15)
                except subprocess.TimeoutExpired:
                    c.proc.kill()
                    c.proc.wait(5)
