"""The lab network's pure parts: addresses by node, NODE names, and where each drop rule goes."""

from __future__ import annotations

import pytest

from zkbroker.lab import network
from zkbroker.lab.network import CLIENTS, NetworkError, Partition, expand, plan_addresses, rulesets

ADDRESSES = plan_addresses("10.9.0.0/24", [1, 2, 3], [1, 2])


def test_addresses_tell_the_node():
    assert ADDRESSES == {CLIENTS: "10.9.0.1", "zookeeper:1": "10.9.0.11", "zookeeper:2": "10.9.0.12",
                         "zookeeper:3": "10.9.0.13", "broker:1": "10.9.0.101", "broker:2": "10.9.0.102"}


@pytest.mark.parametrize("subnet", ["10.9.0.0/25", "fd00::/64", "nonsense"])
def test_a_subnet_too_small_or_not_ipv4_is_refused(subnet):
    with pytest.raises(NetworkError, match="--subnet"):
        plan_addresses(subnet, [1], [1])


def test_zookeeper_names_every_server_and_an_unknown_node_lists_the_names():
    assert expand("zookeeper", ADDRESSES) == ["zookeeper:1", "zookeeper:2", "zookeeper:3"]
    assert expand("broker:2", ADDRESSES) == ["broker:2"]
    with pytest.raises(NetworkError, match=r"no node 'broker:9' .*nodes: zookeeper, clients, zookeeper:1"):
        expand("broker:9", ADDRESSES)


def test_a_partition_drops_both_directions_unless_one_way():
    both = Partition("broker:1", ("zookeeper",)).drops(ADDRESSES)
    assert both == {(a, b) for z in ("zookeeper:1", "zookeeper:2", "zookeeper:3")
                    for a, b in (("broker:1", z), (z, "broker:1"))}
    assert Partition("broker:1", ("broker:2",), one_way=True).drops(ADDRESSES) == {("broker:1", "broker:2")}
    with pytest.raises(NetworkError, match="from itself"):
        Partition("broker:1", ("broker:1",)).drops(ADDRESSES)


def test_drops_go_to_the_receiver_s_input_and_towards_clients_to_the_sender_s_output():
    tables = rulesets([Partition("broker:1", ("broker:2", CLIENTS))], ADDRESSES)
    assert "ip saddr 10.9.0.102 drop" in tables["broker:1"]  # from broker 2
    assert "ip saddr 10.9.0.1 drop" in tables["broker:1"]  # from clients
    assert "ip saddr 10.9.0.101 drop" in tables["broker:2"]
    output = tables["broker:1"].split("chain output")[1]
    assert "ip daddr 10.9.0.1 drop" in output  # towards clients, filtered where it leaves
    assert "drop" not in tables["zookeeper:1"]
    assert set(tables) == set(ADDRESSES) - {CLIENTS}
    assert all(t.startswith("table inet zkbroker\ndelete table inet zkbroker\n") for t in tables.values())


def test_heal_finds_the_partitions_involving_a_node():
    p = Partition("broker:1", ("zookeeper",))
    assert p.involves("zookeeper:2", ADDRESSES) and p.involves("broker:1", ADDRESSES)
    assert not p.involves("broker:2", ADDRESSES)


def test_without_root_the_lab_network_is_refused_in_one_sentence(monkeypatch):
    monkeypatch.setattr(network.os, "geteuid", lambda: 1000)
    with pytest.raises(NetworkError) as refused:
        network.check_privilege()
    assert "needs root" in str(refused.value) and "\n" not in str(refused.value)
