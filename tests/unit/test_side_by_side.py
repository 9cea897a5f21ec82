"""The workers' run lock of tests/side_by_side.py: an alone test runs while no other test runs, and once it
waits, no new test starts before it (flock locks of separate open files conflict even within one process)."""

from __future__ import annotations

import threading

from tests.side_by_side import RunLock


def entered_in_thread(lock: RunLock, alone: bool) -> threading.Event:
    entered = threading.Event()

    def enter() -> None:
        lock.enter(alone)
        entered.set()

    threading.Thread(target=enter, daemon=True).start()
    return entered


def test_tests_share_the_lock_and_an_alone_test_waits_for_them(tmp_path):
    first, second, alone = RunLock(tmp_path), RunLock(tmp_path), RunLock(tmp_path)
    first.enter(alone=False)
    second.enter(alone=False)  # would block if the lock were exclusive
    waiting = entered_in_thread(alone, alone=True)
    assert not waiting.wait(0.3)
    first.leave(keep=False)
    assert not waiting.wait(0.3)
    second.leave(keep=False)
    assert waiting.wait(5)


def test_no_test_starts_while_an_alone_test_waits_or_runs(tmp_path):
    running, alone, late = RunLock(tmp_path), RunLock(tmp_path), RunLock(tmp_path)
    running.enter(alone=False)
    alone_entered = entered_in_thread(alone, alone=True)
    assert not alone_entered.wait(0.3)
    late_entered = entered_in_thread(late, alone=False)
    assert not late_entered.wait(0.3)  # behind the waiting alone test, not beside the running one
    running.leave(keep=False)
    assert alone_entered.wait(5)
    assert not late_entered.wait(0.3)
    alone.leave(keep=False)
    assert late_entered.wait(5)


def test_consecutive_alone_tests_keep_the_lock_between_them(tmp_path):
    alone, other = RunLock(tmp_path), RunLock(tmp_path)
    alone.enter(alone=True)
    alone.leave(keep=True)  # the next test of this worker is alone too
    other_entered = entered_in_thread(other, alone=False)
    alone.enter(alone=True)
    assert not other_entered.wait(0.3)
    alone.leave(keep=False)
    assert other_entered.wait(5)


def test_the_tests_of_a_module_with_a_module_fixture_are_one_group_and_the_others_none(tmp_path):
    import pytest

    from tests.side_by_side import group_of

    (tmp_path / "test_shared.py").write_text(
        "import pytest\n\n@pytest.fixture(scope='module')\ndef cluster():\n    return 1\n\n"
        "@pytest.fixture\ndef own():\n    return 2\n\n"
        "def test_a(cluster):\n    pass\n\ndef test_b(cluster, own):\n    pass\n\ndef test_c(own):\n    pass\n")
    groups = {}

    class Collector:
        def pytest_collection_finish(self, session):
            groups.update({item.name: group_of(item) for item in session.items})

    assert pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        str(tmp_path / "test_shared.py")], plugins=[Collector()]) == 0
    assert groups == {"test_a": "module test_shared.py", "test_b": "module test_shared.py", "test_c": None}
