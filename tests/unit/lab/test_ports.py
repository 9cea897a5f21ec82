"""Choosing ports before a server starts (zkbroker.lab.ports): below the ephemeral range, claimed, bindable."""

import os
import socket
import time

import pytest

from zkbroker.lab import ports


@pytest.fixture
def claims(tmp_path, monkeypatch):
    monkeypatch.setattr(ports, "CLAIMS", tmp_path)
    return tmp_path


def draws(monkeypatch, *sequence: int) -> None:
    """free_port() draws these ports, in this order."""
    queue = list(sequence)
    monkeypatch.setattr(ports.random, "randint", lambda low, high: queue.pop(0))


def test_a_port_is_chosen_below_the_ephemeral_range_so_no_outgoing_connection_can_hold_it(claims):
    port = ports.free_port()
    assert ports.LOWEST <= port < ports._ephemeral_low()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_ports_chosen_one_after_another_are_all_different_because_each_is_claimed(claims):
    chosen = ports.free_ports(200)
    assert len(set(chosen)) == 200
    assert sorted(int(p.name) for p in claims.iterdir()) == sorted(chosen)


def test_a_port_another_process_claimed_lately_is_passed_over(claims, monkeypatch):
    (claims / "21000").touch()
    draws(monkeypatch, 21000, 21001)
    assert ports.free_port() == 21001


def test_a_stale_claim_is_taken_over(claims, monkeypatch):
    stale = claims / "21000"
    stale.touch()
    long_ago = time.time() - ports.CLAIM_S - 1
    os.utime(stale, (long_ago, long_ago))
    draws(monkeypatch, 21000)
    assert ports.free_port() == 21000
    assert time.time() - stale.stat().st_mtime < ports.CLAIM_S


def test_a_port_something_listens_on_is_passed_over(claims, monkeypatch):
    with socket.create_server(("127.0.0.1", 0)) as held:
        taken = held.getsockname()[1]
        draws(monkeypatch, taken, 21002)
        assert ports.free_port() == 21002


def test_an_unusually_low_ephemeral_range_leaves_the_choice_to_the_kernel(claims, monkeypatch):
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: ports.LOWEST + 10)
    port = ports.free_port()
    assert port > 0
    assert not list(claims.iterdir())


def test_a_port_found_taken_is_not_left_claimed(claims, monkeypatch):
    with socket.create_server(("127.0.0.1", 0)) as held:
        draws(monkeypatch, held.getsockname()[1], 21003)
        assert ports.free_port() == 21003
    assert [p.name for p in claims.iterdir()] == ["21003"]
