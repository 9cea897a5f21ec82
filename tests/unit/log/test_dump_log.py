"""`zkbroker dump-log`: golden output in Kafka 0.8.2's DumpLogSegments format.

The segment is written by hand so that every byte is fixed: compressed values are frozen gzip streams (a
newer zlib may compress differently). Set ZKBROKER_UPDATE_GOLDEN=1 to rewrite the golden files.
"""

import os
import struct
from pathlib import Path

import pytest

from zkbroker.cli import main
from zkbroker.log.log import Log
from zkbroker.protocol.compression import CODEC_GZIP, decompress
from zkbroker.protocol.message_set import build_message_set, encode_message, iter_entries

GOLDEN = Path(__file__).parent / "golden"

# Inner sets of the two compressed messages, and their gzip streams as compressed once.
INNER_MAGIC0 = build_message_set([(None, b"a"), (b"k", None)], base_offset=2)
GZIP_MAGIC0 = bytes.fromhex(
    "1f8b0800000000000003636000032620e60fbc6f65c4c0f01f08803cc644880c0333486a4213cb37308f311b240f00fd09c44f36000000"
)
INNER_MAGIC1 = build_message_set([(b"x", b"c1", 1500000000001), (None, b"c2", 1500000000002)], magic=1)
GZIP_MAGIC1 = bytes.fromhex(
    "1f8b080000000000000363608003c97c26b55646208331d6eefb0c30a3024830251b4215808424a496f4ed862b62fa0f0460354600"
    "bc99136049000000"
)


def entry(offset, message):
    return struct.pack(">qi", offset, len(message)) + message


def write_segment(directory, offsets=(0, 1, 3, 4, 6, 7)):
    """A segment holding, in order: a plain message, a keyed one, a gzip set (offsets 2-3), a magic-1 message, a
    magic-1 gzip set (5-6) and a null value; then 5 bytes of a torn message. Returns the entry positions."""
    messages = [
        encode_message(None, b"hello"),
        encode_message(b"key", b"world"),
        encode_message(None, GZIP_MAGIC0, attributes=CODEC_GZIP),
        encode_message(None, b"m1", magic=1, timestamp=1500000000000),
        encode_message(None, GZIP_MAGIC1, magic=1, attributes=CODEC_GZIP, timestamp=1500000000002),
        encode_message(None, None),
    ]
    data, positions = b"", []
    for offset, message in zip(offsets, messages):
        positions.append(len(data))
        data += entry(offset, message)
    (directory / "00000000000000000000.log").write_bytes(data + b"\x00\x00\x00\x00\x07")
    return positions


def dump(capsys, *args):
    assert main(["dump-log", *args]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def assert_golden(name, text):
    path = GOLDEN / name
    if os.environ.get("ZKBROKER_UPDATE_GOLDEN"):
        path.write_bytes(text.encode())
    assert text.encode() == path.read_bytes()  # bytes: payloads may hold carriage returns


def test_the_frozen_gzip_streams_hold_the_inner_sets():
    assert decompress(CODEC_GZIP, GZIP_MAGIC0) == INNER_MAGIC0
    assert decompress(CODEC_GZIP, GZIP_MAGIC1) == INNER_MAGIC1


@pytest.mark.parametrize(
    "flags, golden",
    [
        ([], "dump_log.txt"),
        (["--print-data-log"], "dump_log_print_data.txt"),
        (["--deep-iteration", "--print-data-log"], "dump_log_deep.txt"),
    ],
)
def test_dump_log_golden(tmp_path, monkeypatch, capsys, flags, golden):
    write_segment(tmp_path)
    monkeypatch.chdir(tmp_path)
    out, err = dump(capsys, "--files", "00000000000000000000.log", *flags)
    assert_golden(golden, out)
    assert err == ""


def test_dump_index_golden_stops_at_the_first_empty_slot(tmp_path, monkeypatch, capsys):
    positions = write_segment(tmp_path)
    entries = [(2, positions[2]), (4, positions[3]), (5, positions[4])]  # deep first offsets of those entries
    index = b"".join(struct.pack(">ii", o, p) for o, p in entries) + bytes(8 * 5)  # preallocated, not trimmed
    (tmp_path / "00000000000000000000.index").write_bytes(index)
    monkeypatch.chdir(tmp_path)
    out, err = dump(capsys, "--files", "00000000000000000000.index")
    assert_golden("dump_index.txt", out)
    assert err == ""
    out, err = dump(capsys, "--files", "00000000000000000000.index", "--verify-index-only")
    assert out == "Dumping 00000000000000000000.index\n" and err == ""


def test_mismatched_index_entries_and_offset_gaps_go_to_stderr(tmp_path, monkeypatch, capsys):
    write_segment(tmp_path, offsets=(0, 2, 5, 6, 9, 12))
    (tmp_path / "00000000000000000000.index").write_bytes(struct.pack(">iiii", 1, 0, 3, 10_000))
    monkeypatch.chdir(tmp_path)
    out, err = dump(capsys, "--files", "00000000000000000000.log,00000000000000000000.index")
    assert_golden("dump_errors_stdout.txt", out)
    # as 0.8.2, each list is printed latest first
    assert err == (
        f"Mismatches in :{tmp_path}/00000000000000000000.index\n"
        "  Index offset: 3, log offset: -1\n"
        "  Index offset: 1, log offset: 0\n"
        f"Non-secutive offsets in :{tmp_path}/00000000000000000000.log\n"
        "  9 is followed by 12\n"
        "  0 is followed by 2\n"  # 5 and 9 are compressed: shallow iteration does not check them
    )


def test_dump_of_a_log_written_by_the_broker(tmp_path, capsys):
    log = Log(str(tmp_path / "t-0"), {"index.interval.bytes": 0})
    for i in range(3):
        log.append(bytearray(build_message_set([(None, b"v%d" % i), (b"k", b"w")])))
    log.close()
    base = tmp_path / "t-0" / "00000000000000000000"
    out, err = dump(capsys, "--files", f"{base}.log,{base}.index,{base}.timeindex")
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {base}.log", "Starting offset: 0"]
    assert [line.split(" isvalid")[0] for line in lines[2:8]] == [
        "offset: 0 position: 0", "offset: 1 position: 28", "offset: 2 position: 56",
        "offset: 3 position: 84", "offset: 4 position: 112", "offset: 5 position: 140",
    ]
    assert lines[8:] == [f"Dumping {base}.index", "offset: 2 position: 56", "offset: 4 position: 112",
                         f"Dumping {base}.timeindex"]  # magic 0: no timestamps, no time index entries
    assert err == ""


def test_entries_report_their_crc_validity():
    data = bytearray(build_message_set([(None, b"hello"), (b"k", b"v")]))
    data[-1] ^= 1
    entries = list(iter_entries(bytes(data) + b"\x00\x00"))
    assert [(e.offset, e.position, e.valid, e.key, e.value) for e in entries] == [
        (0, 0, True, None, b"hello"), (1, 31, False, b"k", b"w"),
    ]


def test_a_message_larger_than_max_message_size_fails_with_one_sentence(tmp_path, monkeypatch, capsys):
    write_segment(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["dump-log", "--files", "00000000000000000000.log", "--max-message-size", "20"]) == 1
    assert capsys.readouterr().err.startswith("zkbroker dump-log: message of 22 bytes is larger than 20")
