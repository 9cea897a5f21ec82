"""Record the ApiVersions v3 request each real client opens a connection with (one-off; the bytes live in
``client_frames.py``).

    python -m tests.unit.protocol.record_client_frames

A listening socket on a free port stands in for a broker: it answers an ApiVersions request above v3 as this
broker does (the v0-format UNSUPPORTED_VERSION answer listing our versions), so a client that opens with v4
retries with v3, and prints the first v3 frame each client sends (without its size prefix) as hex, with the
client's version.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import threading
import time

from zkbroker.protocol.api import api_versions_unsupported_response
from zkbroker.protocol.headers import parse_request_header


def _read_frame(conn: socket.socket) -> bytes | None:
    def exactly(n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    size = exactly(4)
    return None if size is None else exactly(struct.unpack(">i", size)[0])


def record(start_client) -> bytes:
    """The first ApiVersions v3 frame the client started by ``start_client(port)`` sends."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    found: list[bytes] = []

    def serve() -> None:
        while not found:
            conn, _ = listener.accept()
            with conn:
                while (frame := _read_frame(conn)) is not None:
                    header, _ = parse_request_header(frame)
                    if header.api_key == 18 and header.api_version == 3:
                        found.append(frame)
                        return
                    if header.api_key == 18 and header.api_version > 3:
                        conn.sendall(api_versions_unsupported_response(header))
                        continue
                    break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    stop = start_client(port)
    thread.join(30)
    stop()
    listener.close()
    if not found:
        raise RuntimeError("no ApiVersions v3 request arrived")
    return found[0]


def _confluent(port: int):
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            producer.poll(0.1)

    threading.Thread(target=poll, daemon=True).start()
    return done.set


def _kafka_python(port: int):
    import kafka

    def run() -> None:
        try:
            kafka.KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=5000)
        except Exception:  # noqa: BLE001 -- the fake broker answers nothing more; only the request matters
            pass

    threading.Thread(target=run, daemon=True).start()
    return lambda: None


def _kcat(port: int):
    proc = subprocess.Popen(["kcat", "-b", f"127.0.0.1:{port}", "-L", "-m", "5"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return lambda: (proc.kill(), proc.wait())


def main() -> None:
    import confluent_kafka
    import kafka

    kcat_version = subprocess.run(["kcat", "-V"], capture_output=True, text=True).stdout.splitlines()[3]
    for name, version, start in (
        ("confluent-kafka", f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})",
         _confluent),
        ("kafka-python", kafka.__version__, _kafka_python),
        ("kcat", kcat_version, _kcat),
    ):
        frame = record(start)
        print(f"# {name} {version}\n{frame.hex()}")
        time.sleep(0.2)


if __name__ == "__main__":
    main()
