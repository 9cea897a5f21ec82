"""A client of a broker's lab control socket (the protocol: zkbroker/control_protocol.py), for the lab's commands,
the scenario runner, the dashboard and tests:

    with ControlClient("DIR/broker-2/control.sock") as broker:
        broker.fault("drop_next_leader_and_isr", count=1)
        view = broker.state()
        broker.heal()

Every failure is a ControlError whose message is one sentence (no such socket, nobody listening, no answer
in time -- a paused broker cannot answer --, or the broker's refusal).
"""

from __future__ import annotations

import os
import socket
from typing import Any

from zkbroker.control_protocol import ControlError, decode, encode, fault_request, unix_address

DEFAULT_TIMEOUT_S = 5.0


class ControlClient:
    def __init__(self, path: str | os.PathLike, timeout_s: float = DEFAULT_TIMEOUT_S, name: str | None = None) -> None:
        self.path = os.fspath(path)
        self.timeout_s = timeout_s
        self.name = name or f"the control socket {self.path}"
        self._sock: socket.socket | None = None
        self._buffer = b""

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        sock, self._sock = self._sock, None
        self._buffer = b""
        if sock is not None:
            sock.close()

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout_s)
            try:
                with unix_address(self.path) as address:
                    sock.connect(address)
            except FileNotFoundError:
                sock.close()
                raise ControlError(f"{self.name} does not exist (the broker is not running, or not in a lab)") from None
            except ConnectionRefusedError:
                sock.close()
                raise ControlError(f"Nothing listens on {self.name} (the broker is not running)") from None
            except OSError as e:
                sock.close()
                raise ControlError(f"Cannot connect to {self.name}: {e.strerror or e}") from None
            self._sock = sock
        return self._sock

    def request(self, message: dict) -> dict:
        """Send one request; its answer (with "ok": true), or ControlError with the broker's refusal."""
        sock = self._connect()
        try:
            sock.sendall(encode(message))
            while b"\n" not in self._buffer:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    raise ControlError(f"{self.name} closed the connection without answering")
                self._buffer += chunk
                if len(self._buffer) > 1 << 30:
                    raise ControlError(f"{self.name} sent an answer line without end")
        except TimeoutError:
            self.close()
            raise ControlError(f"No answer on {self.name} within {self.timeout_s:g} s "
                               f"(is the broker paused?)") from None
        except ControlError:
            self.close()
            raise
        except OSError as e:
            self.close()
            raise ControlError(f"The connection to {self.name} failed: {e.strerror or e}") from None
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer = decode(line)
        if not answer.get("ok"):
            raise ControlError(str(answer.get("error", "the broker refused the request")))
        return answer

    def state(self) -> dict:
        return self.request({"command": "state"})["state"]

    def faults(self) -> list[dict]:
        return self.request({"command": "faults"})["faults"]

    def fault(self, point: str, **params: Any) -> list[dict]:
        """Apply a fault point (zkbroker/fault_points.py); returns the points in force afterwards."""
        return self.request(fault_request(point, **params))["faults"]

    def heal(self, point: str | None = None) -> list[dict]:
        """Heal one point, or every one; returns the points still in force."""
        message: dict = {"command": "heal"}
        if point is not None:
            message["point"] = point
        return self.request(message)["faults"]

