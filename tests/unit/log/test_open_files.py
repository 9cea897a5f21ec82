"""The open-files limit against the logs: what a number of partitions needs, the sentence naming the limit when
it falls short, the soft limit raised to the hard one, and a LogManager that says so before and when it runs out."""

import errno
import logging
import os
import resource

import pytest

from zkbroker.log import manager as manager_module
from zkbroker.log import open_files
from zkbroker.log.manager import LogDirError, LogManager
from zkbroker.log.open_files import FILES_PER_PARTITION, RESERVE, files_needed, raise_soft_limit, shortfall


def test_files_needed_counts_every_partitions_descriptors_and_a_reserve():
    assert files_needed(0) == RESERVE
    assert files_needed(10_000) == 10_000 * FILES_PER_PARTITION + RESERVE


def test_no_shortfall_within_the_limit_or_without_one():
    assert shortfall(100, files_needed(100)) is None
    assert shortfall(1_000_000, resource.RLIM_INFINITY) is None


def test_a_shortfall_names_the_limit_and_the_need():
    sentence = shortfall(10_000, 20_000)
    assert "RLIMIT_NOFILE" in sentence and "20,000" in sentence and f"{files_needed(10_000):,}" in sentence


class FakeLimits:
    RLIMIT_NOFILE = resource.RLIMIT_NOFILE
    RLIM_INFINITY = resource.RLIM_INFINITY

    def __init__(self, soft, hard, refuse=False):
        self.limits = (soft, hard)
        self.refuse = refuse

    def getrlimit(self, which):
        assert which == resource.RLIMIT_NOFILE
        return self.limits

    def setrlimit(self, which, limits):
        if self.refuse:
            raise ValueError("not allowed")
        self.limits = limits


@pytest.mark.parametrize(("soft", "hard", "refuse", "after"), [
    (1024, 20_000, False, (20_000, 20_000)),  # raised to the hard limit
    (20_000, 20_000, False, (20_000, 20_000)),  # already there
    (1024, 20_000, True, (1024, 20_000)),  # refused: kept, and said
])
def test_the_soft_limit_is_raised_to_the_hard_one(monkeypatch, caplog, soft, hard, refuse, after):
    fake = FakeLimits(soft, hard, refuse)
    monkeypatch.setattr(open_files, "resource", fake)
    with caplog.at_level(logging.INFO, logger=open_files.__name__):
        assert raise_soft_limit() == after
    assert fake.limits == after
    if refuse:
        assert "Could not raise the open-files limit" in caplog.text


def test_a_log_manager_says_when_its_logs_need_more_files_than_the_limit(tmp_path, monkeypatch, caplog):
    d = tmp_path / "logs"
    for p in range(5):
        os.makedirs(d / f"t-{p}")
    monkeypatch.setattr(manager_module, "resource", FakeLimits(RESERVE + 4, RESERVE + 4))
    m = LogManager([str(d)])
    try:
        assert len(m.logs_by_topic_partition()) == 5  # it still tries: the limit may be enough after all
    finally:
        m._release_locks()
    assert "5 partition logs need about" in caplog.text and "RLIMIT_NOFILE" in caplog.text


def test_running_out_of_files_while_loading_is_a_sentence_naming_the_limit(tmp_path, monkeypatch):
    d = tmp_path / "logs"
    for p in range(3):
        os.makedirs(d / f"t-{p}")
    opened = []

    def open_log(self, path, *args):
        if len(opened) == 2:
            raise OSError(errno.EMFILE, "Too many open files")
        opened.append(path)
        return real(self, path, *args)

    real = LogManager._open_log
    monkeypatch.setattr(LogManager, "_open_log", open_log)
    with pytest.raises(LogDirError, match=r"Ran out of open files loading log t-2 after 2 others: .*RLIMIT_NOFILE"):
        LogManager([str(d)])
    monkeypatch.setattr(LogManager, "_open_log", real)
    LogManager([str(d)])._release_locks()  # the failed start released its locks
