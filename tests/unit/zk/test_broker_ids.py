"""The one reading of `/brokers/ids` the controller and the brokers' metadata caches share."""

from __future__ import annotations

import logging

from zkbroker.zk import paths
from zkbroker.zk.broker_ids import read_broker_registrations
from zkbroker.zk.znodes import BrokerRegistration


class _Nodes:
    """Registrations by path; get_many answers (data, stat) in order, (None, None) for a missing node."""

    def __init__(self, nodes: dict[str, bytes]) -> None:
        self.nodes = nodes
        self.asked: list[list[str]] = []

    def get_many(self, node_paths: list[str]):
        self.asked.append(list(node_paths))
        return [(self.nodes[p], object()) if p in self.nodes else (None, None) for p in node_paths]


def test_reads_every_registration_in_one_request_and_keys_them_by_broker_id():
    one, two = BrokerRegistration(1, "127.0.0.1", 9092), BrokerRegistration(2, "127.0.0.1", 9093)
    zk = _Nodes({paths.broker_path(1): one.encode(), paths.broker_path(2): two.encode()})
    assert read_broker_registrations(zk, ["2", "1"], logging.getLogger("test")) == {1: one, 2: two}
    assert zk.asked == [[paths.broker_path(2), paths.broker_path(1)]]


def test_skips_a_child_that_is_not_an_id_and_an_unreadable_registration_with_a_warning(caplog):
    one = BrokerRegistration(1, "127.0.0.1", 9092)
    zk = _Nodes({paths.broker_path(1): one.encode(), paths.broker_path(3): b"not json"})
    with caplog.at_level(logging.WARNING, logger="test"):
        brokers = read_broker_registrations(zk, ["1", "x", "3"], logging.getLogger("test"))
    assert brokers == {1: one}
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and "registration x" in warned[0] and "registration 3" in warned[1]


def test_a_broker_gone_since_the_listing_is_left_out_silently(caplog):
    with caplog.at_level(logging.WARNING, logger="test"):
        assert read_broker_registrations(_Nodes({}), ["4"], logging.getLogger("test")) == {}
    assert not caplog.records
    assert read_broker_registrations(_Nodes({}), [], logging.getLogger("test")) == {}
