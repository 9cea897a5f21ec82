"""The producer's configuration: 0.8.2's new-producer keys and defaults, and one clear sentence per bad value."""

from __future__ import annotations

import pytest

from zkbroker.client.metadata import parse_broker_list
from zkbroker.client.producer import PRODUCER_CONFIGS, ProducerConfig
from zkbroker.config import ConfigError


def test_defaults_are_0_8_2s():
    c = ProducerConfig({"bootstrap.servers": "h:1"})
    assert (c.acks, c["batch.size"], c["linger.ms"], c["retries"], c["buffer.memory"], c.codec) == (
        1, 16384, 0, 0, 32 * 1024 * 1024, 0)
    assert c["max.in.flight.requests.per.connection"] == 5


def test_values_may_be_python_values_or_text():
    c = ProducerConfig({"bootstrap.servers": ["a:1", "b:2"], "acks": "all", "linger.ms": 5,
                        "block.on.buffer.full": False, "compression.type": "LZ4"})
    assert (c.acks, c["linger.ms"], c["block.on.buffer.full"], c.codec) == (-1, 5, False, 3)
    assert c.bootstrap == ("a:1", "b:2")
    assert ProducerConfig({"bootstrap.servers": "h:1"}, acks=-1).acks == -1


@pytest.mark.parametrize("given, message", [
    ({}, "Invalid value '' for configuration bootstrap.servers: must name at least one broker"),
    ({"bootstrap.servers": "nohost"}, "Invalid url in bootstrap.servers: nohost"),
    ({"bootstrap.servers": "h:1", "acks": "2"}, "Invalid value '2' for configuration acks: must be one of all"),
    ({"bootstrap.servers": "h:1", "linger.ms": "soon"}, "Invalid value 'soon' for configuration linger.ms: "
                                                        "not an integer"),
    ({"bootstrap.servers": "h:1", "retries": -1}, "configuration retries: must be at least 0"),
    ({"bootstrap.servers": "h:1", "compression.type": "brotli"}, "compression.type: must be one of none, gzip"),
    ({"bootstrap.servers": "h:1", "compression.type": "zstd"}, "compression.type: zstd needs message.format.version"),
])
def test_bad_values_are_one_clear_sentence(given, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        ProducerConfig(given)


def test_unknown_keys_are_warnings():
    assert ProducerConfig({"bootstrap.servers": "h:1", "lingr.ms": 5}).warnings == (
        "Property lingr.ms is not valid",)


def test_old_producer_broker_list_is_accepted():
    assert ProducerConfig({"metadata.broker.list": "h:1"}).bootstrap == ("h:1",)


def test_every_key_is_documented():
    assert all(key.doc for key in PRODUCER_CONFIGS.values())


def test_broker_lists():
    assert parse_broker_list("a:1, b:2") == [("a", 1), ("b", 2)]
    with pytest.raises(ValueError, match="Invalid url in bootstrap.servers: a:x"):
        parse_broker_list("a:x")
