"""SocketServer with a stand-in for KafkaApis: responses in request order and byte for byte, file ranges from
sendfile (large) or pread (small), a reader too slow for the socket buffer, bad frames and shrinking files --
under asyncio's own loop and under uvloop."""

import asyncio
import importlib.util
import os
import socket
import struct
import threading
import time

import pytest

from zkbroker.protocol.fetch_response import FileRange
from zkbroker.protocol.frame import encode_frame
from zkbroker.protocol.headers import encode_request_header
from zkbroker.server.network import SocketServer

LOOPS = ["asyncio", pytest.param("uvloop", marks=pytest.mark.skipif(importlib.util.find_spec("uvloop") is None,
                                                                    reason="uvloop is not installed"))]

ECHO, FILE_RANGES, SILENT = 3, 1, 0  # api keys the stand-in answers: bytes, pieces with file ranges, nothing


class StandInApis:
    """Answers ECHO with the frame, FILE_RANGES with the framing around the ranges listed in `ranges`, and
    SILENT with no response (Produce acks=0)."""

    def __init__(self, file, ranges):
        self.file = file
        self.ranges = ranges

    async def handle(self, header, frame, body_offset):
        await asyncio.sleep(0)  # a handler that yields, as a long-poll Fetch does
        tag = struct.pack(">i", header.correlation_id)
        if header.api_key == ECHO:
            return encode_frame(tag + bytes(frame))
        if header.api_key == SILENT:
            return None
        total = 4 + sum(4 + size for _, size in self.ranges)
        pieces = [struct.pack(">i", total) + tag]
        for position, size in self.ranges:
            pieces += [struct.pack(">i", size), FileRange(self.file, position, size)]
        return pieces


class Server:
    def __init__(self, loop_kind, apis):
        self.loop = asyncio.new_event_loop() if loop_kind == "asyncio" else __import__("uvloop").new_event_loop()
        self.server = SocketServer("127.0.0.1", 0, apis, max_request_bytes=1 << 20)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(self.server.start())

    def call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)

    def connect(self):
        sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)  # small: the server's sends block
        return sock

    def close(self):
        self.call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def request(api_key, correlation_id, body=b""):
    return encode_frame(encode_request_header(api_key, 0, correlation_id, "test") + body)


def read_exactly(sock, n, pause=0.0):
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), 256 * 1024))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
        if pause:
            time.sleep(pause)
    return bytes(out)


def read_response(sock, pause=0.0):
    (size,) = struct.unpack(">i", read_exactly(sock, 4))
    return read_exactly(sock, size, pause)


@pytest.fixture
def segment(tmp_path):
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(6 * 1024 * 1024))
    with open(path, "rb") as f:
        yield f


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_pipelined_responses_come_back_in_order_and_byte_exact(loop_kind, segment):
    data = open(segment.name, "rb").read()
    # a large range (sendfile, beyond the socket buffers), a small one (pread), one at the end of the file
    ranges = [(1000, 4 * 1024 * 1024), (17, 300), (len(data) - 70000, 70000)]
    server = Server(loop_kind, StandInApis(segment, ranges))
    try:
        with server.connect() as sock:
            sock.sendall(b"".join(request(key, i, b"x" * i) for i, key in
                                  enumerate([FILE_RANGES, ECHO, SILENT, FILE_RANGES, ECHO, FILE_RANGES])))
            expected_ranges = b"".join(struct.pack(">i", size) + data[p : p + size] for p, size in ranges)
            for i, key in enumerate([FILE_RANGES, ECHO, FILE_RANGES, ECHO, FILE_RANGES]):
                response = read_response(sock, pause=0.002 if i == 0 else 0.0)  # the first read slowly
                correlation_id = [0, 1, 3, 4, 5][i]
                assert response[:4] == struct.pack(">i", correlation_id)
                if key == ECHO:
                    assert response[4:].endswith(b"x" * correlation_id)
                else:
                    assert response[4:] == expected_ranges
    finally:
        server.close()


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_bad_frame_closes_the_connection_after_the_requests_before_it(loop_kind, segment):
    server = Server(loop_kind, StandInApis(segment, []))
    try:
        with server.connect() as sock, server.connect() as other:
            sock.sendall(request(ECHO, 7) + struct.pack(">i", -5))
            assert read_response(sock)[:4] == struct.pack(">i", 7)
            assert sock.recv(1) == b""
            other.sendall(request(ECHO, 8))  # everyone else is still served
            assert read_response(other)[:4] == struct.pack(">i", 8)
    finally:
        server.close()


@pytest.mark.parametrize("loop_kind", LOOPS)
@pytest.mark.parametrize("size", [1000, 1024 * 1024])  # pread, sendfile
def test_a_range_past_the_end_of_its_file_closes_the_connection(loop_kind, segment, size):
    end = os.fstat(segment.fileno()).st_size
    server = Server(loop_kind, StandInApis(segment, [(end - size // 2, size)]))
    try:
        with server.connect() as sock:
            sock.sendall(request(FILE_RANGES, 1))
            with pytest.raises(ConnectionError):
                read_response(sock)
    finally:
        server.close()


def test_each_open_connection_is_listed_with_its_listener_principal_and_last_client_id(segment):
    server = Server("asyncio", StandInApis(segment, []))

    async def listed():
        return server.server.connections()

    try:
        with server.connect() as sock:
            sock.sendall(request(ECHO, 1))
            read_response(sock)
            (row,) = server.call(listed())
            assert row == {"listener": "PLAINTEXT", "security_protocol": "PLAINTEXT", "principal": "User:ANONYMOUS",
                           "authenticated": True, "client_id": "test",
                           "address": f"127.0.0.1:{sock.getsockname()[1]}"}
        deadline = time.monotonic() + 10
        while server.call(listed()) and time.monotonic() < deadline:  # closed: no longer listed
            time.sleep(0.02)
        assert server.call(listed()) == []
    finally:
        server.close()
