"""The controller's channel on a scripted broker socket: requests pipelined in order, answers matched to them,
unanswered requests written again on a new connection, and one encoding shared by brokers told the same."""

from __future__ import annotations

import socket
import struct
import threading

from controller.channel import ControllerChannelManager, RequestBatch
from controller.context import LeaderIsrAndZkVersion
from zkbroker.protocol.api import ApiKey, decode_request, encode_response
from zkbroker.protocol.headers import parse_request_header
from zkbroker.zk.znodes import BrokerRegistration


class ScriptedBroker:
    """Accepts connections; `script(connection number, frames so far on it)` says what to do after each frame."""

    def __init__(self, script) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.script = script
        self.received: list[list[tuple[int, int]]] = []  # per connection: (api key, correlation id)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            frames: list[tuple] = []
            self.received.append([])
            number = len(self.received)
            while True:
                size = _read(conn, 4)
                if size is None:
                    break
                frame = _read(conn, struct.unpack(">i", size)[0])
                header, offset = parse_request_header(frame)
                frames.append((header, decode_request(header, frame, offset)))
                self.received[-1].append((header.api_key, header.correlation_id))
                action = self.script(number, len(frames))
                if action == "close":
                    conn.close()
                    break
                if action == "answer all":
                    for h, _ in frames:
                        conn.sendall(encode_response(h, {"error_code": 0, "partitions": []}))
                    frames.clear()

    def close(self) -> None:
        self.server.close()


def _read(conn: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _requests(channel: ControllerChannelManager, broker_id: int, answers: list) -> None:
    header = {"controller_id": 1, "controller_epoch": 1}
    channel.send(broker_id, ApiKey.LEADER_AND_ISR, 0, {**header, "partition_states": [], "live_leaders": []},
                 lambda r: answers.append("LeaderAndIsr"))
    channel.send(broker_id, ApiKey.UPDATE_METADATA, 0, {**header, "partition_states": [], "live_brokers": []},
                 lambda r: answers.append("UpdateMetadata"))
    channel.send(broker_id, ApiKey.STOP_REPLICA, 0, {**header, "delete_partitions": False, "partitions": []},
                 lambda r: answers.append("StopReplica"))


def _wait(condition, timeout_s: float = 5.0) -> None:
    event = threading.Event()
    for _ in range(int(timeout_s / 0.01)):
        if condition():
            return
        event.wait(0.01)
    raise AssertionError("timed out")


def test_requests_are_pipelined_in_order_and_answers_reach_their_callbacks():
    # The broker answers only once it holds all three: the channel must not wait for each answer before writing on.
    broker = ScriptedBroker(lambda connection, frames: "answer all" if frames == 3 else None)
    channel = ControllerChannelManager(1, socket_timeout_ms=5000)
    answers: list[str] = []
    try:
        channel.add_broker(BrokerRegistration(2, "127.0.0.1", broker.port))
        _requests(channel, 2, answers)
        _wait(lambda: len(answers) == 3)
        assert answers == ["LeaderAndIsr", "UpdateMetadata", "StopReplica"]
        assert [key for key, _ in broker.received[0]] == [ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA,
                                                          ApiKey.STOP_REPLICA]
    finally:
        channel.shutdown()
        broker.close()


def test_unanswered_requests_are_written_again_in_order_on_a_new_connection():
    # The first connection is closed after two requests arrive, none answered; the second answers everything.
    broker = ScriptedBroker(lambda connection, frames: ("close" if frames == 2 else None) if connection == 1
                            else ("answer all" if frames == 3 else None))
    channel = ControllerChannelManager(1, socket_timeout_ms=5000)
    answers: list[str] = []
    try:
        channel.add_broker(BrokerRegistration(2, "127.0.0.1", broker.port))
        _requests(channel, 2, answers)
        _wait(lambda: len(answers) == 3)
        assert answers == ["LeaderAndIsr", "UpdateMetadata", "StopReplica"]
        assert [key for key, _ in broker.received[1]] == [ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA,
                                                          ApiKey.STOP_REPLICA]
    finally:
        channel.shutdown()
        broker.close()


def test_brokers_told_the_same_partition_states_share_one_encoded_request():
    sent = {}
    told = {}

    class Recording:
        def send(self, broker_id, api_key, api_version, body, callback=None, payload=None):
            (sent if api_key == ApiKey.UPDATE_METADATA else told)[broker_id] = payload

    live = {b: BrokerRegistration(b, "127.0.0.1", 9000 + b) for b in (1, 2, 3)}
    state = LeaderIsrAndZkVersion(1, 3, (1, 2), 1, 4)
    batch = RequestBatch(1, 1, live)
    batch.add_leader_and_isr([1, 2], ("t", 0), state, (1, 2))
    batch.send(Recording())
    assert sent[1] is sent[2] is sent[3]
    assert sent[1].encoded() is sent[1].encoded()  # encoded once
    assert told[1] is told[2] and 3 not in told

    batch.add_leader_and_isr([1, 2], ("t", 0), state, (1, 2))
    batch.add_update_metadata([3], {("t", 1): (state, (1, 2))})  # broker 3 hears of one more partition
    batch.send(Recording())
    assert sent[1] is sent[2] and sent[3] is not sent[1]
    assert [s["partition"] for s in sent[3].body["partition_states"]] == [0, 1]
