"""iter_keys and retain_messages: what the log cleaner reads of a set, and the set with only the messages a
predicate keeps."""

import pytest

from zkbroker.protocol.compression import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY
from zkbroker.protocol.message_set import (
    CODEC_MASK,
    build_message_set,
    iter_entries,
    iter_keys,
    iter_messages,
    retain_messages,
)

CODECS = [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4]


def two_wrappers(codec, magic):
    """Offsets 0-2 in one wrapper, 3-5 in another; keys a, b, c, a, b, d."""
    first = build_message_set([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], codec=codec, magic=magic,
                              base_offset=0, timestamp=1000)
    second = build_message_set([(b"a", b"4"), (b"b", None), (b"d", b"6")], codec=codec, magic=magic,
                               base_offset=3, timestamp=2000)
    return first + second


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_a_wrapper_losing_some_messages_is_recompressed_with_its_codec_and_offsets_kept(codec, magic):
    data = two_wrappers(codec, magic)
    retained = retain_messages(data, lambda offset, key, null: offset not in (0, 4))
    assert retained.walked == len(data)
    assert (retained.kept, retained.dropped) == (4, 2)
    assert [(m.offset, m.key, m.value) for m in iter_messages(retained.records)] == [
        (1, b"b", b"2"), (2, b"c", b"3"), (3, b"a", b"4"), (5, b"d", b"6"),
    ]
    entries = list(iter_entries(retained.records))
    assert [e.attributes & CODEC_MASK for e in entries] == [codec, codec]
    assert [e.magic for e in entries] == [magic, magic]
    assert [e.offset for e in entries] == [2, 5]  # a wrapper's offset is its last kept message's
    assert all(e.valid for e in entries)
    # where an index entry for each would point: the first kept message of each wrapper
    assert [first for _, first in retained.entries] == [1, 3]
    assert [position for position, _ in retained.entries] == [0, entries[1].position]


@pytest.mark.parametrize("codec", CODECS)
def test_a_wrapper_keeping_everything_is_copied_as_it_is_and_one_keeping_nothing_goes(codec):
    data = two_wrappers(codec, 0)
    retained = retain_messages(data, lambda offset, key, null: offset >= 3)
    assert retained.records == data[len(data) - len(retained.records):]
    assert [m.offset for m in iter_messages(retained.records)] == [3, 4, 5]
    assert retained.entries == [(0, 3)]


def test_plain_messages_are_copied_byte_for_byte_and_gaps_kept():
    data = build_message_set([(b"k", str(i).encode()) for i in range(5)], base_offset=10)
    retained = retain_messages(data, lambda offset, key, null: offset % 2 == 0)
    assert [m.offset for m in iter_messages(retained.records)] == [10, 12, 14]
    kept = [e for e in iter_entries(data) if e.offset % 2 == 0]
    assert retained.records == b"".join(data[e.position:e.position + 12 + e.size] for e in kept)
    assert [first for _, first in retained.entries] == [10, 12, 14]


def test_a_torn_tail_is_left_for_the_next_read():
    data = build_message_set([(b"k", b"v")] * 3, codec=CODEC_NONE)
    retained = retain_messages(data[:-3], lambda offset, key, null: True)
    assert retained.kept == 2
    assert retained.walked == 2 * (len(data) // 3)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [CODEC_NONE, *CODECS])
def test_iter_keys_gives_each_message_s_offset_key_and_whether_its_value_is_null(codec, magic):
    data = two_wrappers(codec, magic)
    assert list(iter_keys(data)) == [(0, b"a", False), (1, b"b", False), (2, b"c", False),
                                     (3, b"a", False), (4, b"b", True), (5, b"d", False)]
    torn = 5 if codec == CODEC_NONE else 3  # a torn tail is left out: a message, or a whole wrapper
    assert list(iter_keys(data[:-1])) == list(iter_keys(data))[:torn]
