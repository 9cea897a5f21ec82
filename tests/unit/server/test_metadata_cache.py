"""What the broker's metadata cache lets a Metadata or DescribeCluster answer say."""

from __future__ import annotations

from zkbroker.server.metadata_cache import listed_controller_id


def test_an_answer_names_the_controller_it_lists():
    assert listed_controller_id(2, [1, 2, 3]) == 2


def test_a_controller_the_answer_does_not_list_is_not_named():
    # a starting broker has seen /controller name it but not yet its own /brokers/ids registration
    assert listed_controller_id(1, []) == -1
    assert listed_controller_id(3, [1, 2]) == -1


def test_an_unknown_controller_stays_unknown():
    assert listed_controller_id(-1, [1, 2]) == -1


class _RacingZooKeeper:
    """A ZooKeeper client whose watches fire before `subscribe_*` returns the (now older) value it read: what
    ZooKeeper's event thread can do between the broker's read and the broker applying it."""

    def __init__(self) -> None:
        self.registrations = {"/brokers/ids/1": b'{"host": "h1", "port": 1, "version": 1, "jmx_port": -1}',
                              "/brokers/ids/2": b'{"host": "h2", "port": 2, "version": 1, "jmx_port": -1}'}

    def subscribe_child_changes(self, path, callback):
        callback(path, ["1", "2"])  # broker 2 registered after the read below
        return ["1"]

    def subscribe_data_changes(self, path, callback):
        callback(path, b'{"version": 1, "brokerid": 2, "timestamp": "0"}', None)  # a new controller
        return b'{"version": 1, "brokerid": 1, "timestamp": "0"}', None

    def get_many(self, paths):
        return [(self.registrations[p], _Stat()) if p in self.registrations else (None, None) for p in paths]


class _Stat:
    czxid = 7


def test_a_watch_that_fires_during_startup_is_not_overwritten_by_startups_older_read():
    from zkbroker.server.metadata_cache import MetadataCache

    cache = MetadataCache(_RacingZooKeeper())
    cache.startup()
    assert sorted(cache.snapshot.brokers) == [1, 2]
    assert cache.snapshot.controller_id == 2
