import socket

from zkbroker.lab import ports


def test_candidates_are_the_ports_outside_the_ephemeral_range_from_10000_up():
    assert ports.candidate_ranges((32768, 60999)) == [range(10000, 32768), range(61000, 65536)]
    assert ports.candidate_ranges((1024, 65535)) == []  # all of it ephemeral: the kernel picks
    assert ports.candidate_ranges((10000, 65535)) == []


def test_a_free_port_is_outside_the_kernels_range_and_bindable():
    low, high = ports.ephemeral_range()
    for _ in range(20):
        port = ports.free_port()
        assert not low <= port <= high
        with socket.socket() as s:
            s.bind((ports.HOST, port))


def test_a_port_listened_on_or_already_taken_is_never_chosen():
    with socket.socket() as listener:
        listener.bind((ports.HOST, 0))
        listener.listen()
        busy = listener.getsockname()[1]
        assert not ports.port_free(busy)
    taken = set()
    for _ in range(50):
        port = ports.free_port(taken=taken)
        assert port not in taken
        taken.add(port)
