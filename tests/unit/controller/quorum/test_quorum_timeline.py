"""The timeline containers (controller/quorum/timeline.py): writes undone by the registry, and a scan of a
TimelineDict's keys that spans turns of the queue without copying them first, and misses none when they change."""

from __future__ import annotations

from controller.quorum.timeline import SnapshotRegistry, TimelineDict


def _dict(n: int, registry: SnapshotRegistry | None = None) -> TimelineDict:
    d = TimelineDict(registry or SnapshotRegistry())
    for i in range(n):
        d[i] = None
    return d


def test_a_scan_walks_the_keys_in_place_in_order():
    d = _dict(5)
    scan = d.scan()
    assert [next(scan), next(scan)] == [0, 1]
    d[1] = "replaced"  # a value replaced: the keys are the same, the walk goes on where it was
    assert list(scan) == [2, 3, 4]


def test_a_scan_whose_keys_change_between_steps_goes_on_over_a_copy_from_the_first():
    d = _dict(5)
    scan = d.scan()
    assert [next(scan), next(scan)] == [0, 1]
    del d[3]
    d[9] = None
    rest = list(scan)  # from the first again (a caller skips what it has done): every key present, none lost
    assert rest == [0, 1, 2, 4, 9]
    d[10] = None  # once on its copy the walk no longer sees later changes
    assert list(scan) == []


def test_a_revert_between_steps_counts_as_a_change_of_keys():
    registry = SnapshotRegistry()
    d = _dict(3, registry)
    registry.enabled = True
    registry.offset = 7
    d[5] = None
    scan = d.scan()
    assert next(scan) == 0
    assert registry.revert_to(6) == 1
    assert list(scan) == [0, 1, 2]
    assert 5 not in d
