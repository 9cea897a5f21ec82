import struct

import pytest

from zkbroker.protocol.errors import RemoteProtocolError
from zkbroker.protocol.frame import FrameDecoder, encode_frame


def frames_of(decoder):
    out = []
    while (payload := decoder.next_frame()) is not None:
        out.append(bytes(payload))
    return out


def test_frames_split_across_and_within_chunks():
    stream = encode_frame(b"one") + encode_frame(b"") + encode_frame(b"three" * 100) + encode_frame(b"4")
    for chunk in (1, 2, 3, 7, 64, len(stream)):
        decoder = FrameDecoder()
        got = []
        for i in range(0, len(stream), chunk):
            decoder.receive_data(stream[i : i + chunk])
            got += frames_of(decoder)
        assert got == [b"one", b"", b"three" * 100, b"4"]
        assert decoder.buffered == 0


def test_frames_are_owned_writable_bytearrays():
    decoder = FrameDecoder()
    decoder.receive_data(encode_frame(b"abc") + encode_frame(b"de"))
    first = decoder.next_frame()
    assert isinstance(first, bytearray)
    first[0] = 0
    assert decoder.next_frame() == b"de"


def test_oversized_and_negative_sizes_fail_on_the_prefix():
    decoder = FrameDecoder(max_frame_bytes=10)
    with pytest.raises(RemoteProtocolError):
        decoder.receive_data(struct.pack(">i", 11))
    decoder = FrameDecoder()
    decoder.receive_data(b"\xff\xff")
    with pytest.raises(RemoteProtocolError):
        decoder.receive_data(b"\xff\xfe")


def test_a_bad_prefix_after_a_good_frame_does_not_lose_the_frame():
    decoder = FrameDecoder(max_frame_bytes=10)
    decoder.receive_data(encode_frame(b"ok") + struct.pack(">i", 1000))
    assert decoder.next_frame() == b"ok"
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()


def test_large_frame_in_small_chunks_is_linear():
    payload = bytes(range(256)) * 4096  # 1 MiB
    decoder = FrameDecoder()
    data = encode_frame(payload)
    for i in range(0, len(data), 4096):
        decoder.receive_data(data[i : i + 4096])
    assert decoder.next_frame() == payload
    assert decoder.next_frame() is None
