"""The fuzzer of bench/fuzz.py in `make test`: a short smoke of it against a real broker, and a replay of the
corpus of frames it found (tests/fuzz_corpus/, the bytes as they went on the wire), after which the broker
must be alive, must have logged no exception that no handler caught, and must answer a well-formed client
correctly."""

from __future__ import annotations

import importlib.util
import socket
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
