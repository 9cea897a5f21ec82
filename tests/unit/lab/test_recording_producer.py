"""A `via` produce step's producer (zkbroker/lab/recorder.py) goes by what one broker says of the topic: it
starts again until that broker answered its metadata request (librdkafka may ask any broker it learned), and it
never refreshes on a timer. librdkafka is replaced by a stand-in that answers from a script."""

from __future__ import annotations

from types import SimpleNamespace

import confluent_kafka
import pytest

from zkbroker.lab import recorder
from zkbroker.lab.recorder import RecordingProducer


class ScriptedProducer:
    """A stand-in for confluent_kafka.Producer whose metadata answers come from `answers`, one per producer."""

    made: list[ScriptedProducer] = []
    answers: list[int] = []

    def __init__(self, config: dict) -> None:
        self.config = config
        ScriptedProducer.made.append(self)

    def list_topics(self, topic: str, timeout: float):
        return SimpleNamespace(orig_broker_id=ScriptedProducer.answers.pop(0), topics={topic: None})


@pytest.fixture
def scripted(monkeypatch):
    ScriptedProducer.made, ScriptedProducer.answers = [], []
    monkeypatch.setattr(confluent_kafka, "Producer", ScriptedProducer)
    return ScriptedProducer


def producer(via: int) -> RecordingProducer:
    return RecordingProducer("127.0.0.1:9092", "t", 0, [b"v"], acks=1, via=via, name="stale")


def test_a_via_producer_starts_again_until_that_broker_answered_and_never_refreshes_on_a_timer(scripted):
    scripted.answers = [2, 2, 1]  # the other broker answered twice (librdkafka asked a broker it learned)
    chosen = producer(1)._producer_via()
    assert chosen is scripted.made[-1] and len(scripted.made) == 3
    assert chosen.config["topic.metadata.refresh.interval.ms"] == -1
    assert chosen.config["bootstrap.servers"] == "127.0.0.1:9092"


def test_an_answer_through_the_bootstrap_connection_is_the_via_brokers(scripted):
    scripted.answers = [recorder.BOOTSTRAP_NODE]  # its bootstrap list names that broker alone
    producer(1)._producer_via()
    assert len(scripted.made) == 1


def test_a_via_broker_that_never_answers_fails_the_step_with_who_did(scripted):
    scripted.answers = [2] * recorder.VIA_ATTEMPTS
    with pytest.raises(RuntimeError, match=r"producer stale: broker 1 did not answer its metadata request in 20 "
                                           r"tries \(answered: broker 2, broker 2"):
        producer(1)._producer_via()
