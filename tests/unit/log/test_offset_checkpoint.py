"""OffsetCheckpoint: 0.8.2's text format, atomic replacement, and clear errors for malformed files."""

import os

import pytest

from zkbroker.log.checkpoint import CheckpointError, OffsetCheckpoint


def test_round_trip_in_0_8_2_format(tmp_path):
    path = str(tmp_path / "replication-offset-checkpoint")
    checkpoint = OffsetCheckpoint(path)
    assert checkpoint.read() == {}
    offsets = {("my-topic", 0): 1234, ("my-topic", 1): 99, ("other", 7): 0}
    checkpoint.write(offsets)
    with open(path) as f:
        assert f.read() == "0\n3\nmy-topic 0 1234\nmy-topic 1 99\nother 7 0\n"
    assert OffsetCheckpoint(path).read() == offsets
    checkpoint.write({})
    assert checkpoint.read() == {}
    assert not os.path.exists(path + ".tmp")


def test_a_leftover_tmp_file_is_removed_and_the_old_checkpoint_kept(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    OffsetCheckpoint(path).write({("t", 0): 5})
    with open(path + ".tmp", "w") as f:
        f.write("0\n1\nt 0 9")  # a write that crashed before its rename
    assert OffsetCheckpoint(path).read() == {("t", 0): 5}
    assert not os.path.exists(path + ".tmp")


@pytest.mark.parametrize("text", ["", "0\n", "0\n0\n"])
def test_empty_checkpoints(tmp_path, text):
    path = tmp_path / "cp"
    path.write_text(text)
    assert OffsetCheckpoint(str(path)).read() == {}


@pytest.mark.parametrize(
    "text, error",
    [
        ("1\n0\n", "Unrecognized version of the offset checkpoint file"),
        ("x\n", "Malformed version 'x'"),
        ("0\ntwo\n", "Malformed entry count 'two'"),
        ("0\n1\nt 0\n", "Malformed line in offset checkpoint file"),
        ("0\n1\nt 0 5 6\n", "Malformed line"),
        ("0\n1\nt zero 5\n", "Malformed partition 'zero'"),
        ("0\n1\nt 0 5.5\n", "Malformed offset '5.5'"),
        ("0\n2\nt 0 5\n", "Expected 2 entries but found only 1"),
        ("0\n1\nt 0 5\n\n", "Malformed line"),
    ],
)
def test_malformed_files_name_the_file(tmp_path, text, error):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError) as e:
        OffsetCheckpoint(str(path)).read()
    assert error in str(e.value) and str(path) in str(e.value)
