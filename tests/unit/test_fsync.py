"""fsync_path: a directory and a file alike, by path; a missing path says so."""

import pytest

from zkbroker.fsync import fsync_path


def test_a_directory_and_a_file_are_fsynced_by_path(tmp_path):
    (tmp_path / "f").write_bytes(b"x")
    fsync_path(tmp_path)
    fsync_path(str(tmp_path / "f"))


def test_a_missing_path_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        fsync_path(tmp_path / "gone")
