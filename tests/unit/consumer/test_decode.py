"""The consumer's message-set decoder reads every set exactly as the reference reader (iter_messages) does:
magic 0 and 1, every codec, null keys and values, a start offset, a torn tail, and corrupt messages."""

from __future__ import annotations

import random

import pytest

from consumer.decode import decode_messages, last_offset
from zkbroker.protocol.errors import RemoteProtocolError
from zkbroker.protocol.message_set import build_message_set, iter_messages


def reference(buf: bytes, start: int) -> list[tuple]:
    return [("t", 1, m.offset, m.key, m.value) for m in iter_messages(buf) if m.offset >= start]


def random_set(rng: random.Random, base: int) -> bytes:
    parts = []
    offset = base
    for _ in range(rng.randint(1, 5)):
        items = [(None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 20)),
                  None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 300)), rng.randint(0, 2**40))
                 for _ in range(rng.randint(1, 8))]
        magic = rng.choice((0, 1))
        codec = rng.choice((0, 0, 1, 2, 3))
        parts.append(build_message_set(items, magic=magic, codec=codec, base_offset=offset))
        offset += len(items)
    return b"".join(parts)


def test_decoding_matches_the_reference_reader_on_random_sets():
    rng = random.Random(11)
    for _ in range(300):
        buf = random_set(rng, rng.randint(0, 1000))
        first = next(iter_messages(buf)).offset
        start = first + rng.randint(0, 5)
        cut = rng.randint(0, len(buf)) if rng.random() < 0.3 else len(buf)
        decoded, complete = decode_messages(memoryview(buf)[:cut], "t", 1, start)
        assert [tuple(m) for m in decoded] == reference(buf[:cut], start)
        assert complete == any(True for _ in iter_messages(buf[:cut]))


def test_a_set_cut_inside_its_first_message_is_reported_incomplete():
    buf = build_message_set([(None, b"x" * 500)])
    assert decode_messages(buf[:100], "t", 0, 0) == ([], False)


def test_a_corrupt_message_is_an_error():
    buf = bytearray(build_message_set([(b"k", b"value")] * 3))
    buf[-1] ^= 0xFF
    with pytest.raises(RemoteProtocolError, match="CRC"):
        decode_messages(bytes(buf), "t", 0, 0)


def test_record_batches_decode_and_their_last_offset_counts_the_batch():
    from zkbroker.protocol.record_batch import build_record_batch

    data = build_record_batch([(b"k", b"a", 1), (None, b"b", 2)], base_offset=10) + build_record_batch(
        [(None, b"c", 3)], base_offset=12, codec=1)
    messages, complete = decode_messages(data, "t", 0, 11)
    assert complete and [(m.offset, m.key, m.value) for m in messages] == [(11, None, b"b"), (12, None, b"c")]
    assert last_offset(data) == 12 and last_offset(data[:-3]) == 11
