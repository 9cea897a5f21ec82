"""ZooKeeper 3.6's multiRead as ZkClient frames it: getData operations out, per-operation results back."""

from __future__ import annotations

import struct

from kazoo.exceptions import NoNodeError

from zkbroker.zk.client import _MultiRead

_HEADER = struct.Struct("!iBi")  # type, done, error
_STAT = struct.Struct("!qqqqiiiqiiq")


def test_the_request_lists_each_path_as_a_get_data_without_watch_then_the_end_marker():
    body = bytes(_MultiRead(["/a", "/bc"]).serialize())
    assert body == (_HEADER.pack(4, 0, -1) + struct.pack("!i", 2) + b"/a" + b"\x00"
                    + _HEADER.pack(4, 0, -1) + struct.pack("!i", 3) + b"/bc" + b"\x00"
                    + _HEADER.pack(-1, 1, -1))


def test_the_answer_gives_data_and_stat_or_the_error_of_each_read_in_order():
    stat = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    answer = (_HEADER.pack(4, 0, 0) + struct.pack("!i", 3) + b"abc" + _STAT.pack(*stat)
              + _HEADER.pack(-1, 0, -101) + struct.pack("!i", -101)
              + _HEADER.pack(4, 0, 0) + struct.pack("!i", -1) + _STAT.pack(*stat)
              + _HEADER.pack(-1, 1, -1))
    first, missing, empty = _MultiRead.deserialize(answer, 0)
    assert first[0] == b"abc" and first[1].version == 5 and first[1].mzxid == 2
    assert isinstance(missing, NoNodeError)
    assert empty[0] is None and empty[1].dataLength == 9
