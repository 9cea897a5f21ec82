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
