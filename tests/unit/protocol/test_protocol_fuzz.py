"""Property tests: every schema round-trips generated values; no decoder fails on hostile bytes
with anything but RemoteProtocolError."""

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkbroker.protocol import types
from zkbroker.protocol.api import REQUEST_SCHEMAS, RESPONSE_SCHEMAS, decode_request, decode_response, encode_request
from zkbroker.protocol.compression import compress, decompress
from zkbroker.protocol.errors import RemoteProtocolError
from zkbroker.protocol.frame import FrameDecoder
from zkbroker.protocol.headers import parse_request_header
from zkbroker.protocol.message_set import analyze, assign_offsets, build_message_set, iter_messages

FAST = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
SCHEMA_KEYS = sorted(set(REQUEST_SCHEMAS) | set(RESPONSE_SCHEMAS))

_RANGES = {"b": 7, "h": 15, "i": 31, "q": 63}


def unknown_tags(known):
    """Tags a flexible struct does not declare, ascending, each with some bytes."""
    tags = st.lists(st.integers(0, 2**20).filter(lambda tag: tag not in known), max_size=3, unique=True)
    return tags.flatmap(lambda picked: st.tuples(*(st.tuples(st.just(tag), st.binary(max_size=6))
                                                   for tag in sorted(picked))).map(list))


def values_for(wire_type):
    if isinstance(wire_type, types.FlexibleSchema):
        regular = [values_for(t) for _, t in wire_type.fields]
        tagged = [values_for(field.type) for field in wire_type.tagged]
        known = {field.tag for field in wire_type.tagged}
        return st.tuples(*regular, *tagged, unknown_tags(known))
    if isinstance(wire_type, types.Schema):
        return st.tuples(*(values_for(t) for _, t in wire_type.fields))
    if isinstance(wire_type, types.Array):
        items = st.lists(values_for(wire_type.element), max_size=3)
        return st.none() | items if wire_type.nullable else items
    if wire_type is types.Boolean:
        return st.booleans()
    if wire_type is types.UInt32:
        return st.integers(0, 2**32 - 1)
    if wire_type is types.UInt16:
        return st.integers(0, 2**16 - 1)
    if wire_type is types.UnsignedVarint:
        return st.integers(0, 2**32 - 1)
    if wire_type is types.Float64:
        return st.floats(allow_nan=False)
    if wire_type is types.Uuid:
        return st.binary(min_size=16, max_size=16)
    if isinstance(wire_type, types._Fixed):
        bits = _RANGES[wire_type.code]
        return st.integers(-(2**bits), 2**bits - 1)
    if isinstance(wire_type, types._String):
        text = st.text(max_size=12)
        return st.none() | text if wire_type.nullable else text
    binary = st.binary(max_size=24)
    return st.none() | binary if wire_type.nullable else binary


def plain(value):
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


@FAST
@given(st.data())
def test_every_schema_round_trips(data):
    key = data.draw(st.sampled_from(SCHEMA_KEYS))
    for registry in (REQUEST_SCHEMAS, RESPONSE_SCHEMAS):
        schema = registry.get(key)
        if schema is None:
            continue
        value = data.draw(values_for(schema))
        encoded = schema.encode(value)
        decoded, offset = schema.decode(memoryview(encoded), 0)
        assert offset == len(encoded)
        assert plain(decoded) == plain(value)


@FAST
@given(st.binary(max_size=300))
def test_random_request_frames(frame):
    try:
        header, offset = parse_request_header(frame)
        decode_request(header, frame, offset)
    except RemoteProtocolError:
        pass


@FAST
@given(st.sampled_from(sorted(REQUEST_SCHEMAS)), st.binary(max_size=200))
def test_random_bodies_for_every_request(key, body):
    frame = struct.pack(">hhih", key[0], key[1], 1, 1) + b"c" + body
    try:
        header, offset = parse_request_header(frame)
        decode_request(header, frame, offset)
    except RemoteProtocolError:
        pass


@FAST
@given(st.sampled_from(sorted(RESPONSE_SCHEMAS)), st.binary(max_size=200))
def test_random_bodies_for_every_response(key, body):
    try:
        decode_response(key[0], key[1], struct.pack(">i", 1) + body)
    except RemoteProtocolError:
        pass


VALID_REQUEST = encode_request(
    0, 2, 1, "c", {"acks": 1, "timeout_ms": 5, "topics": [("t", [(0, b"x" * 30), (1, None)])]}
)[4:]
#: A flexible one: header v2 and a compact body with a tag buffer (ApiVersions v3 as librdkafka sends it).
VALID_FLEXIBLE_REQUEST = encode_request(
    18, 3, 1, "rdkafka", {"client_software_name": "librdkafka", "client_software_version": "2.0.2",
                          "unknown_tagged_fields": [(4, b"ab"), (9, b"")]})[4:]


@FAST
@given(st.sampled_from([VALID_REQUEST, VALID_FLEXIBLE_REQUEST]), st.data())
def test_mutated_valid_request(valid, data):
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(valid) - 1), st.integers(0, 255)), max_size=4))
    cut = data.draw(st.integers(0, len(valid)))
    frame = bytearray(valid)
    for pos, byte in flips:
        frame[pos] = byte
    frame = frame[:cut]
    try:
        header, offset = parse_request_header(frame)
        decode_request(header, frame, offset)
    except RemoteProtocolError:
        pass


@FAST
@given(st.lists(st.binary(max_size=40), max_size=8), st.integers(0, 64))
def test_frame_decoder_on_random_streams(chunks, max_frame):
    decoder = FrameDecoder(max_frame_bytes=max_frame)
    try:
        for chunk in chunks:
            decoder.receive_data(chunk)
            while decoder.next_frame() is not None:
                pass
    except RemoteProtocolError:
        pass


def _message_set_decoders(data):
    for decode in (
        lambda: list(iter_messages(data)),
        lambda: analyze(data),
        lambda: assign_offsets(bytearray(data), 0),
    ):
        try:
            decode()
        except RemoteProtocolError:
            pass


@FAST
@given(st.binary(max_size=200))
def test_random_message_sets(data):
    _message_set_decoders(data)


SEEDS = [
    build_message_set([(b"k", b"v" * 20), (None, b"w", 5)], magic=magic, codec=codec)
    for magic in (0, 1)
    for codec in (0, 1, 2, 3)
]


@FAST
@given(st.sampled_from(SEEDS), st.data())
def test_mutated_message_sets(seed, data):
    mutated = bytearray(seed)
    for _ in range(data.draw(st.integers(1, 4))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    _message_set_decoders(bytes(mutated))
    # with CRC checks off, the layout checks alone must hold the line
    try:
        list(iter_messages(mutated, verify_crc=False))
        assign_offsets(mutated, 0, verify_crc=False)
    except RemoteProtocolError:
        pass


@FAST
@given(st.sampled_from([1, 2, 3]), st.binary(max_size=120), st.data())
def test_decompress_random_and_mutated(codec, data, draw):
    try:
        decompress(codec, data)
    except RemoteProtocolError:
        pass
    good = bytearray(compress(codec, data, draw.draw(st.sampled_from([0, 1]))))
    good[draw.draw(st.integers(0, len(good) - 1))] ^= draw.draw(st.integers(1, 255))
    try:
        decompress(codec, bytes(good))
    except RemoteProtocolError:
        pass
