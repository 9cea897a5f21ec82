"""The fuzzer of bench/fuzz.py in `make test`: a short smoke of it against a real broker, and a replay of the
corpus of frames it found (tests/fuzz_corpus/, the bytes as they went on the wire), after which the broker
must be alive, must have logged no exception that no handler caught, and must answer a well-formed client
correctly."""

from __future__ import annotations

import importlib.util
import socket
import struct
import sys
from pathlib import Path

import pytest

from tests.integration.harness import Broker, create_topic

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "tests" / "fuzz_corpus").glob("*.bin"))
SMOKE_FRAMES = 3000


def load_fuzz():
    spec = importlib.util.spec_from_file_location("bench_fuzz", ROOT / "bench" / "fuzz.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


fuzz = load_fuzz()


@pytest.fixture
def broker(brokers, zk_connect) -> Broker:
    """One broker with the fuzzer's configuration and its two topics."""
    overrides = dict(setting.split("=", 1) for setting in fuzz.BROKER_CONFIG)
    (broker,) = brokers(1, **{key.replace(".", "_"): value for key, value in overrides.items()})
    create_topic(zk_connect, fuzz.FUZZ_TOPIC, fuzz.PARTITIONS, 1, [broker])
    create_topic(zk_connect, fuzz.CANARY_TOPIC, fuzz.PARTITIONS, 1, [broker])
    return broker


def fuzzer_for(broker: Broker, corpus: Path, seeds_per_api: int):
    return fuzz.Fuzzer(broker.host, broker.port, broker.log_path, broker.alive, seed=7, seeds_per_api=seeds_per_api,
                       corpus=corpus)


@pytest.mark.timeout(300)
def test_a_fuzz_smoke_finds_no_crash_and_no_refused_write(broker, tmp_path):
    fuzzer = fuzzer_for(broker, tmp_path / "corpus", seeds_per_api=5)
    report = fuzzer.run(SMOKE_FRAMES)
    assert report.findings == 0, report.crashes + report.violations
    assert report.frames_sent == SMOKE_FRAMES
    assert report.answers > SMOKE_FRAMES // 2  # most frames parse, so most are answered and checked
    assert report.accepted_appends > 0 and report.answers_checked > 0
    assert {seed.api_key for seed in fuzzer.seeds} == {key for key, _ in fuzz.served_apis()}


@pytest.mark.timeout(180)
def test_every_corpus_frame_leaves_the_broker_serving(broker, tmp_path):
    assert CORPUS, "tests/fuzz_corpus/ holds no frames"
    fuzzer = fuzzer_for(broker, tmp_path / "corpus", seeds_per_api=1)
    for path in CORPUS:
        with socket.create_connection((broker.host, broker.port), timeout=30) as sock:
            sock.sendall(path.read_bytes())
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(1 << 16):
                pass  # answers, until the broker closes the connection
        assert broker.alive(), f"{path.name} killed the broker"
        assert fuzzer.log.uncaught() == [], f"{path.name} raised in the broker"
        fuzzer.check_canary()
        assert fuzzer.report.violations == [], f"after {path.name}"


def _answer_then_close(broker: Broker, frames: bytes) -> list[bytes]:
    """Send `frames` on one connection; the answers read until the broker closes it."""
    with socket.create_connection((broker.host, broker.port), timeout=30) as sock:
        sock.sendall(frames)
        answers = []
        while (answer := fuzz._read_frame(sock)) is not None:
            answers.append(answer)
        return answers


@pytest.mark.timeout(180)
def test_hostile_flexible_frames_close_only_their_own_connection(broker, tmp_path):
    """DESIGN §13 for flexible versions: each hostile unsigned varint of an ApiVersions v3 request (in its header
    v2 or its body) closes that connection after the requests before it are answered, and nothing else: a
    connection opened before it keeps being answered, and the broker logs why it closed the connection."""
    fuzzer = fuzzer_for(broker, tmp_path / "corpus", seeds_per_api=1)
    valid = fuzz.make_seed(18, 3, {"client_software_name": "librdkafka", "client_software_version": "2.0.2"})
    assert [kind for _, kind in valid.varints] == ["tags", "length", "length", "tags"]
    bystander = broker.connection()
    cases = 0
    for at, kind in valid.varints:
        _, end = fuzz.read_unsigned_varint(valid.frame, at)
        for hostile in fuzz.HOSTILE_VARINTS[kind] + fuzz.HOSTILE_VARINTS["any"]:
            body = valid.frame[4:at] + hostile + valid.frame[end:]
            answers = _answer_then_close(broker, valid.frame + struct.pack(">i", len(body)) + body + valid.frame)
            assert len(answers) == 1, f"{kind} at {at} replaced by {hostile[:12].hex()}: {len(answers)} answers"
            assert broker.alive() and fuzzer.log.uncaught() == []
            assert bystander.send(18, 2, {}).error_code == 0  # the other connection is still served
            cases += 1
    assert cases >= 20
    assert len(broker.log_lines("Closing socket connection")) >= cases
    fuzzer.check_canary()
    assert fuzzer.report.violations == []
    bystander.close()
