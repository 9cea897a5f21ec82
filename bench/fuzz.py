"""Fuzzing a live broker: a structure-aware fuzzer that mutates valid requests of every API and version the
broker serves, and also sends random frames (issue 15 item 3; DESIGN §13).

How:

1. **Seeds, from hypothesis.** For every (api_key, version) the broker advertises, hypothesis draws request
   bodies from strategies built out of the wire schemas (`zkbroker/protocol/api.py`): every field of its
   type, integers biased to the edges, real message sets (magic 0 and 1, every codec) and random bytes for
   `records`. Each seed is encoded once, remembering where each integer field and each message set lies.
2. **Mutations, by the million.** Frames are made from seeds cheaply: an integer field overwritten with an
   edge value or a random one (the frame still parses: only values change), bytes of a message set flipped
   (the set must then be refused, or stored whole), or the seed sent as it is. These go many to a connection,
   pipelined. The last frame of a connection may be destructive -- bits flipped anywhere (lengths, counts,
   the header), a truncated body, a lying size prefix, a random header and body, random bytes -- since a
   frame that does not parse closes its connection. Flexible versions (KIP-482) get their own hostile frames,
   spliced at the unsigned varints the seed noted (compact lengths and counts, tag buffers): a varint longer
   than five bytes, a length or an array count far beyond the frame, ten thousand tagged fields (declared, or
   present), a tag repeated (DESIGN §13: each closes its own connection, nothing is allocated first).
3. **Oracles.** After each connection: the broker process is alive and its log has no "unexpected error"
   (an exception no handler caught); every answer parses as the response to its request, in order; each
   Produce partition answered with error 0 took exactly the offsets its set holds, at the log end (so a
   refused request that wrote anything is caught: the log end moves without an answer that explains it),
   and the log end the broker reports equals what the accepted answers add up to. Every few connections a
   well-formed client (its own connection) produces a record to a canary topic, reads it back at the offset
   it was acknowledged with and asks for metadata; each answer is checked.

Some fields are kept where a fuzzer would otherwise only measure itself or take the cluster apart through
requests the broker rightly accepts: acks is never 0 (no answer to check), Produce's timeout and Fetch's
max_wait_ms stay small, controller requests carry a stale controller epoch (<= 0; the broker must refuse
them) and ControlledShutdown names brokers that do not exist; auto.create.topics.enable is off, so random
topic names create nothing. Admin requests only validate (validate_only is always set; DeleteTopics is refused,
delete.topic.enable being off) and ask for a few partitions at most, except CreateTopics v0, which has no
validate_only and may create a topic of a random name with one or two partitions.

A connection whose frames broke an oracle is replayed frame by frame to find the culprit, which is written
to `tests/fuzz_corpus/` (one file per frame, the bytes on the wire); `tests/integration/test_fuzz.py`
replays that corpus and runs a short smoke of this fuzzer in `make test`.

Usage: python bench/fuzz.py [--frames N] [--seed S] [--seeds-per-api N]
Prints frames sent / answers checked / crashes / log violations; exits 1 on any finding.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from zkbroker.client.connection import BrokerConnection  # noqa: E402
from zkbroker.protocol import types  # noqa: E402
from zkbroker.protocol.api import ApiKey, advertised_versions, decode_response, request_schema  # noqa: E402
from zkbroker.protocol.errors import ProtocolError  # noqa: E402
from zkbroker.protocol.headers import encode_request_header, parse_request_header, request_header_version  # noqa: E402
from zkbroker.protocol.message_set import InvalidMessageError, build_message_set, iter_messages  # noqa: E402
from zkbroker.protocol.varint import encode_unsigned_varint, read_unsigned_varint  # noqa: E402

FUZZ_TOPIC = "fuzz"
CANARY_TOPIC = "canary"
PARTITIONS = 4
BROKER_CONFIG = ("auto.create.topics.enable=false", "num.partitions=1")
CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fuzz_corpus"
UNCAUGHT = b"after an unexpected error"  # network.py's log line for an exception no handler caught
FRAMES_PER_CONNECTION = 100
CANARY_EVERY = 20  # connections
ANSWER_TIMEOUT_S = 30.0

# APIs that wait on ZooKeeper in every request (milliseconds each, against tens of microseconds for the rest)
# are drawn this much less often, so that a million frames fit in minutes; every one of them is still fuzzed.
ZOOKEEPER_BOUND = {ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.CONTROLLED_SHUTDOWN, ApiKey.CREATE_TOPICS,
                   ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS,
                   ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ELECT_LEADERS}
ZOOKEEPER_BOUND_WEIGHT = 0.05

# Kafka error codes whose Produce answer does not say whether the set was appended (a timeout after the
# append; too few replicas after it): the log end is read again instead of being predicted.
AMBIGUOUS_PRODUCE_ERRORS = {7, 20}

_INT_RANGES = {code: (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1)
               for code, size in (("b", 1), ("h", 2), ("i", 4), ("q", 8))}
_INT_RANGES["I"] = (0, (1 << 32) - 1)


def _edges(low: int, high: int) -> list[int]:
    return sorted({v for v in (low, low + 1, -2, -1, 0, 1, 2, 255, 256, 65535, 65536, high - 1, high,
                               1 << 30, (1 << 31) - 1, -(1 << 31)) if low <= v <= high})


# Fields kept where the docstring says, by name: (low, high) ranges or a list of choices.
FIELD_RANGES: dict[str, tuple[int, int] | list[int]] = {
    "acks": [1, -1, 2, -2, 32767, -32768],
    "timeout_ms": (1, 200),
    "max_wait_ms": (0, 5),
    "controller_epoch": (-(1 << 31), 0),
    "broker_id": (100, (1 << 31) - 1),  # ControlledShutdown: a broker that is not in the cluster
    "replica_id": [-1, -2, 100, 1 << 20, -(1 << 31)],
    # the Admin API: a few partitions (an accepted CreateTopics v0 creates them), or a count refused at once
    "num_partitions": [-1, 0, 1, 2, -2, (1 << 31) - 1, -(1 << 31)],
    "count": [0, 1, 2, 5, -1, (1 << 31) - 1, -(1 << 31)],
}
#: Boolean fields held at one value: the Admin API's validate_only, so admin requests change nothing.
FIXED_BOOLEANS = {"validate_only": True}

# String fields given valid values half the time, so that requests get past their checks.
STRING_CHOICES: dict[str, list[str]] = {
    "topic": [FUZZ_TOPIC, FUZZ_TOPIC, "no-such-topic"],
    "client_software_name": ["librdkafka", "kafka-python", "apache-kafka-java"],
    "client_software_version": ["2.0.2", "3.0.12", "2.8.0"],
}


def pick_int(name: str, code: str, rng: random.Random) -> int:
    """A value for integer field `name` of struct code `code`: an edge half the time, else uniform."""
    choices = FIELD_RANGES.get(name)
    if isinstance(choices, list):
        return rng.choice(choices)
    low, high = choices or _INT_RANGES[code]
    if rng.random() < 0.5:
        return rng.choice(_edges(low, high))
    return rng.randint(low, high)


# ---- hypothesis strategies from the wire schemas -------------------------------------------------------------


def message_sets() -> st.SearchStrategy:
    """Valid message sets (magic 0/1, every codec), random bytes, and null."""
    records = st.lists(st.tuples(st.none() | st.binary(max_size=16), st.none() | st.binary(max_size=64)),
                       min_size=1, max_size=4)
    valid = st.builds(lambda items, magic, codec: build_message_set(items, magic=magic, codec=codec),
                      records, st.sampled_from([0, 1]), st.sampled_from([0, 1, 2, 3]))
    return st.one_of(valid, valid, st.binary(max_size=64), st.none())


def strategy_for(wire: types.WireType, name: str = "") -> st.SearchStrategy:
    """Values of `wire` for field `name`: the whole domain of the type, edges first."""
    if isinstance(wire, types.FlexibleSchema):
        known = {field.tag for field in wire.tagged}
        unknown = st.lists(st.tuples(st.integers(0, 1 << 20).filter(lambda tag: tag not in known),
                                     st.binary(max_size=8)), max_size=3, unique_by=lambda pair: pair[0])
        return st.fixed_dictionaries(
            {fname: strategy_for(ftype, fname) for fname, ftype in wire.fields},
            optional={field.name: strategy_for(field.type, field.name) for field in wire.tagged}
            | {"unknown_tagged_fields": unknown})
    if isinstance(wire, types.Schema):
        return st.fixed_dictionaries({fname: strategy_for(ftype, fname) for fname, ftype in wire.fields})
    if isinstance(wire, types.Array):
        items = st.lists(strategy_for(wire.element, name), max_size=3)
        return st.none() | items if wire.nullable else items
    if wire in (types.Records, types.CompactRecords):
        return message_sets()
    if wire is types.Boolean:
        return st.just(FIXED_BOOLEANS[name]) if name in FIXED_BOOLEANS else st.booleans()
    if wire is types.Float64:  # client quotas' values: NaN and infinities too
        return st.floats(width=64)
    if hasattr(wire, "code"):
        choices = FIELD_RANGES.get(name)
        if isinstance(choices, list):
            return st.sampled_from(choices)
        low, high = choices or _INT_RANGES[wire.code]
        if name == "partition":
            return st.sampled_from(range(PARTITIONS)) | st.integers(low, high)
        return st.sampled_from(_edges(low, high)) | st.integers(low, high)
    if isinstance(wire, types._String):  # int16-length and compact, nullable or not
        text = st.text(max_size=12)
        if name in STRING_CHOICES:
            text = st.sampled_from(STRING_CHOICES[name]) | text
        return st.none() | text if wire.nullable else text
    if isinstance(wire, types._Bytes):
        data = st.binary(max_size=32)
        return st.none() | data if wire.nullable else data
    if wire is types.UnsignedVarint:
        return st.integers(0, (1 << 32) - 1)
    if wire is types.Uuid:
        return st.binary(min_size=16, max_size=16)
    raise TypeError(f"no strategy for {wire!r}")


# ---- seeds: encoded requests that know where their fields are ------------------------------------------------


@dataclass(frozen=True)
class Seed:
    api_key: int
    api_version: int
    frame: bytes  # size prefix, header, body; correlation id 0
    ints: tuple[tuple[int, str, str], ...]  # (offset in frame, struct code, field name)
    records: tuple[tuple[int, int], ...]  # (offset, length) of each message set
    # Flexible versions: (offset, kind) of each unsigned varint that is a compact "length" (strings, bytes,
    # records), an array "count" or the count of a tag buffer ("tags"); the request header v2's included.
    varints: tuple[tuple[int, str], ...] = ()


def _encode(wire: types.WireType, value: Any, name: str, at: int, ints: list, records: list,
            varints: list) -> bytes:
    """wire.encode(value), noting where integer fields, message sets and (flexible versions) unsigned varints
    land (offsets from `at`)."""
    if isinstance(wire, types.Schema):
        out = b""
        for fname, ftype in wire.fields:
            out += _encode(ftype, value[fname], fname, at + len(out), ints, records, varints)
        if wire.flexible:  # the tag buffer: whatever the schema writes after the fields
            varints.append((at + len(out), "tags"))
            out += wire.encode(value)[len(out):]
        return out
    if isinstance(wire, types.Array) and value is not None:
        if wire.flexible:
            varints.append((at, "count"))
            out = encode_unsigned_varint(len(value) + 1)
        else:
            out = struct.pack(">i", len(value))
        for item in value:
            out += _encode(wire.element, item, name, at + len(out), ints, records, varints)
        return out
    if hasattr(wire, "code") and wire not in (types.Boolean, types.Float64):  # the integers the mutator changes
        ints.append((at, wire.code, name))
    encoded = wire.encode(value)
    if wire.flexible and isinstance(wire, (types._String, types._Bytes)):
        varints.append((at, "length"))
    if wire in (types.Records, types.CompactRecords) and value is not None:
        records.append((at + len(encoded) - len(value), len(value)))
    return encoded


def make_seed(api_key: int, api_version: int, body: dict) -> Seed:
    header = encode_request_header(api_key, api_version, 0, "fuzz")
    ints: list = []
    records: list = []
    varints: list = []
    if request_header_version(api_key, api_version) == 2:  # request header v2 ends with its tag buffer
        varints.append((4 + len(header) - 1, "tags"))
    encoded = _encode(request_schema(api_key, api_version), body, "", 4 + len(header), ints, records, varints)
    payload = header + encoded
    return Seed(api_key, api_version, struct.pack(">i", len(payload)) + payload, tuple(ints), tuple(records),
                tuple(varints))


def served_apis() -> list[tuple[int, int]]:
    return [(key, version) for key, (low, high) in advertised_versions().items() for version in range(low, high + 1)]


def hypothesis_seeds(per_api: int, seed: int) -> list[Seed]:
    """`per_api` seeds drawn by hypothesis for each served (api_key, version)."""
    seeds: list[Seed] = []

    def collector(api_key: int, version: int) -> Callable[[], None]:
        @settings(max_examples=per_api, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(strategy_for(request_schema(api_key, version)))
        @hypothesis_seed(seed + 1000 * api_key + version)
        def collect(body: dict) -> None:
            seeds.append(make_seed(api_key, version, body))

        return collect

    for api_key, version in served_apis():
        collector(api_key, version)()
    return seeds


# ---- mutations -------------------------------------------------------------------------------------------------


def with_correlation(frame: bytes | bytearray, correlation_id: int) -> bytearray:
    out = bytearray(frame)
    if len(out) >= 12:
        out[8:12] = struct.pack(">i", correlation_id)
    return out


def mutate_value(seed: Seed, rng: random.Random) -> bytearray:
    """Integer fields overwritten, or message-set bytes flipped: the frame still parses."""
    frame = bytearray(seed.frame)
    if seed.records and rng.random() < 0.3:
        start, length = rng.choice(seed.records)
        for _ in range(rng.randint(1, 4)):
            if length:
                frame[start + rng.randrange(length)] ^= 1 << rng.randrange(8)
        return frame
    for _ in range(rng.randint(1, 3) if seed.ints else 0):
        at, code, name = rng.choice(seed.ints)
        struct.pack_into(">" + code, frame, at, pick_int(name, code, rng))
    return frame


#: What replaces an unsigned varint of a flexible frame, by what it stands for (DESIGN §13's hostile frames).
_TEN_THOUSAND_TAGS = encode_unsigned_varint(10_000) + b"".join(
    encode_unsigned_varint(tag) + b"\x00" for tag in range(10_000))
HOSTILE_VARINTS: dict[str, list[bytes]] = {
    "any": [b"\x80\x80\x80\x80\x80\x01", b"\xff\xff\xff\xff\xff\xff\xff",  # longer than 5 bytes
            b"\xff\xff\xff\xff\x7f"],  # 5 bytes, above 2**32 - 1
    "length": [encode_unsigned_varint((1 << 31) + 1), encode_unsigned_varint(1 << 20)],  # beyond the frame
    "count": [encode_unsigned_varint((1 << 31) + 1), encode_unsigned_varint(1 << 20)],  # beyond the frame
    "tags": [encode_unsigned_varint(10_000), _TEN_THOUSAND_TAGS,  # declared; present (more than the bound)
             b"\x02\x01\x00\x01\x00", b"\x02\x05\x00\x02\x00",  # a tag repeated; out of order
             b"\x01\x00" + encode_unsigned_varint(1 << 30)],  # a tagged field's size beyond the frame
}


def mutate_flexible(seed: Seed, rng: random.Random) -> bytearray:
    """One unsigned varint of a flexible frame replaced by a hostile one, the size prefix telling the truth."""
    at, kind = rng.choice(seed.varints)
    _, end = read_unsigned_varint(seed.frame, at)
    hostile = rng.choice(HOSTILE_VARINTS[kind] + HOSTILE_VARINTS["any"])
    body = seed.frame[4:at] + hostile + seed.frame[end:]
    return bytearray(struct.pack(">i", len(body)) + body)


def mutate_destructive(seed: Seed, rng: random.Random) -> bytearray:
    """Anything at all: the frame may not parse, and its connection may close."""
    if seed.varints and rng.random() < 0.5:
        return mutate_flexible(seed, rng)
    kind = rng.randrange(6)
    frame = bytearray(seed.frame)
    if kind == 0:  # bits flipped anywhere, the size prefix spared
        for _ in range(rng.randint(1, 8)):
            frame[4 + rng.randrange(len(frame) - 4)] ^= 1 << rng.randrange(8)
    elif kind == 1:  # body truncated, size prefix telling the truth
        cut = rng.randrange(4, len(frame))
        frame = bytearray(struct.pack(">i", cut - 4)) + frame[4:cut]
    elif kind == 2:  # a lying size prefix
        frame[0:4] = struct.pack(">i", rng.choice([-1, -(1 << 31), 0, 1, (1 << 31) - 1, rng.randrange(1 << 27)]))
    elif kind == 3:  # a header of any api and version, the seed's body
        struct.pack_into(">hh", frame, 4, rng.randint(-5, 40), rng.randint(-2, 12))
    elif kind == 4:  # random bytes under a truthful size
        body = rng.randbytes(rng.randrange(0, 200))
        frame = bytearray(struct.pack(">i", len(body))) + body
    else:  # random bytes, no framing at all
        frame = bytearray(rng.randbytes(rng.randrange(1, 64)))
    return frame


# ---- the run ------------------------------------------------------------------------------------------------------


@dataclass
class Report:
    frames_sent: int = 0
    connections: int = 0
    answers: int = 0  # fuzz answers that parsed as the response to their request
    answers_checked: int = 0  # well-formed requests whose answers were checked against what they must say
    accepted_appends: int = 0
    crashes: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    corpus: list[Path] = field(default_factory=list)

    @property
    def findings(self) -> int:
        return len(self.crashes) + len(self.violations)


class BrokerLog:
    """The broker's log, read from where it was last read, for exceptions no handler caught."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.position = path.stat().st_size if path.exists() else 0

    def uncaught(self) -> list[str]:
        with open(self.path, "rb") as f:
            f.seek(self.position)
            data = f.read()
        self.position += len(data)
        return [line.decode(errors="replace") for line in data.splitlines() if UNCAUGHT in line]


def _read_frame(sock: socket.socket) -> bytes | None:
    def exactly(n: int) -> bytes | None:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                return None
            out += chunk
        return out

    head = exactly(4)
    if head is None:
        return None
    return exactly(struct.unpack(">i", head)[0])


class Fuzzer:
    def __init__(self, host: str, port: int, log_path: Path, broker_alive: Callable[[], bool], seed: int,
                 seeds_per_api: int, corpus: Path = CORPUS) -> None:
        self.host, self.port = host, port
        self.log = BrokerLog(log_path)
        self.broker_alive = broker_alive
        self.rng = random.Random(seed)
        self.seeds = hypothesis_seeds(seeds_per_api, seed)
        self.weights = [ZOOKEEPER_BOUND_WEIGHT if s.api_key in ZOOKEEPER_BOUND else 1.0 for s in self.seeds]
        self.corpus = corpus
        self.report = Report()
        self.log_end = self.list_offsets(FUZZ_TOPIC)  # what the accepted appends add up to, per partition
        self.canary_sent = self.list_offsets(CANARY_TOPIC)[0]
        self.correlation = 0

    # -- well-formed requests --------------------------------------------------------------------------------

    def connection(self) -> BrokerConnection:
        return BrokerConnection(self.host, self.port, client_id="fuzz-check", timeout_s=ANSWER_TIMEOUT_S).connect()

    def list_offsets(self, topic: str) -> list[int]:
        with self.connection() as conn:
            response = conn.send(ApiKey.LIST_OFFSETS, 0, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": p, "timestamp": -1, "max_num_offsets": 1} for p in range(PARTITIONS)]}]})
        rows = sorted(response.topics[0].partitions, key=lambda row: row.partition)
        if any(row.error_code for row in rows):
            raise RuntimeError(f"ListOffsets of {topic} failed: {rows}")
        return [row.offsets[0] for row in rows]

    def check_canary(self) -> None:
        """Produce one record, read it back where it was acknowledged, ask for metadata: all as they must be."""
        value = b"canary-%d" % self.canary_sent
        with self.connection() as conn:
            records = build_message_set([(None, value)])
            produced = conn.send(ApiKey.PRODUCE, 0, {"acks": 1, "timeout_ms": 5000, "topics": [
                {"topic": CANARY_TOPIC, "partitions": [{"partition": 0, "records": records}]}]})
            row = produced.topics[0].partitions[0]
            self._expect(row.error_code == 0 and row.base_offset == self.canary_sent,
                         f"canary produce answered {row}, expected offset {self.canary_sent}")
            fetched = conn.send(ApiKey.FETCH, 0, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
                {"topic": CANARY_TOPIC, "partitions": [{"partition": 0, "fetch_offset": self.canary_sent,
                                                        "max_bytes": 1 << 16}]}]})
            data = fetched.topics[0].partitions[0]
            got = [(m.offset, m.value) for m in iter_messages(data.records or b"")][:1]
            self._expect(data.error_code == 0 and got == [(self.canary_sent, value)],
                         f"canary fetch at {self.canary_sent} answered error {data.error_code}, {got}")
            metadata = conn.send(ApiKey.METADATA, 0, {"topics": [FUZZ_TOPIC, CANARY_TOPIC]})
            shapes = sorted((t.topic, t.error_code, len(t.partitions)) for t in metadata.topics)
            self._expect(shapes == [(CANARY_TOPIC, 0, PARTITIONS), (FUZZ_TOPIC, 0, PARTITIONS)],
                         f"metadata answered {shapes}")
        self.canary_sent += 1
        self.report.answers_checked += 3

    def _expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.report.violations.append(what)

    # -- fuzz connections ----------------------------------------------------------------------------------------

    def batch(self, size: int) -> list[tuple[Seed, bytearray, bool]]:
        """(seed, frame, parses) for one connection: parse-preserving frames, maybe a destructive last one."""
        out = []
        for i, seed in enumerate(self.rng.choices(self.seeds, self.weights, k=size)):
            destructive = i == size - 1 and self.rng.random() < 0.5
            if destructive:
                frame = mutate_destructive(seed, self.rng)
            elif self.rng.random() < 0.15:
                frame = bytearray(seed.frame)
            else:
                frame = mutate_value(seed, self.rng)
            out.append((seed, frame, not destructive))
        return out

    def send(self, batch: list[tuple[Seed, bytearray, bool]]) -> list[str]:
        """Send a batch pipelined on one connection, check every answer; returns what broke."""
        problems: list[str] = []
        frames = []
        for _, frame, _ in batch:
            self.correlation = (self.correlation + 1) & 0x7FFFFFFF
            frames.append(with_correlation(frame, self.correlation))
        first = self.correlation - len(batch) + 1
        try:
            sock = socket.create_connection((self.host, self.port), timeout=ANSWER_TIMEOUT_S)
        except OSError as e:
            return [f"cannot connect: {e}"]
        self.report.connections += 1
        try:
            sock.sendall(b"".join(frames))
            self.report.frames_sent += len(frames)
            sock.shutdown(socket.SHUT_WR)  # the broker answers what it read, then sees the end
            for i, (seed, frame, parses) in enumerate(batch):
                answer = _read_frame(sock)
                if answer is None:
                    break  # the connection closed: a frame that does not parse may do that, and ends it
                if parses:
                    problems += self.check_answer(seed, frame, answer, first + i)
                else:
                    self.account_destructive(frame)
        except (TimeoutError, ConnectionError) as e:
            problems.append(f"connection failed while answering: {e!r}")
        finally:
            sock.close()
        return problems

    def check_answer(self, seed: Seed, frame: bytearray, answer: bytes, correlation_id: int) -> list[str]:
        try:
            got_correlation, response = decode_response(seed.api_key, seed.api_version, answer)
        except ProtocolError as e:
            return [f"answer to api {seed.api_key} v{seed.api_version} does not parse: {e}"]
        if got_correlation != correlation_id:
            return [f"answer with correlation id {got_correlation}, expected {correlation_id}"]
        self.report.answers += 1
        if seed.api_key == ApiKey.PRODUCE:
            return self.account_produce(frame, seed, response)
        return []

    def account_destructive(self, frame: bytearray) -> None:
        """A destructive frame was answered, so it parsed as some request: if that could have been a Produce,
        the log ends are read again rather than predicted."""
        if len(frame) < 6 or struct.unpack_from(">h", frame, 4)[0] == ApiKey.PRODUCE:
            self.log_end = [-1] * PARTITIONS

    def account_produce(self, frame: bytearray, seed: Seed, response: Any) -> list[str]:
        """Each partition answered with error 0 took exactly its set's messages at the log end."""
        schema = request_schema(seed.api_key, seed.api_version)
        request = schema.decode(memoryview(bytes(frame)), _body_offset(frame))[0]
        sets: dict[int, list] = {}
        for topic in request.topics:
            if topic.topic == FUZZ_TOPIC:
                for part in topic.partitions:
                    sets.setdefault(part.partition, []).append(part.records)
        problems = []
        for topic in response.topics:
            if topic.topic != FUZZ_TOPIC:
                continue
            for row in topic.partitions:
                if not 0 <= row.partition < PARTITIONS:
                    continue
                given = sets.get(row.partition, [])
                if row.error_code in AMBIGUOUS_PRODUCE_ERRORS or len(given) != 1:
                    self.log_end[row.partition] = -1  # unknown until read again
                    continue
                if row.error_code != 0:
                    continue
                try:
                    count = sum(1 for _ in iter_messages(given[0] or b""))
                except InvalidMessageError as e:
                    problems.append(f"[{FUZZ_TOPIC},{row.partition}] accepted a set we cannot read ({e})")
                    self.log_end[row.partition] = -1
                    continue
                expected = self.log_end[row.partition]
                if expected >= 0 and row.base_offset != expected:
                    problems.append(f"[{FUZZ_TOPIC},{row.partition}] appended at {row.base_offset}, but the "
                                    f"accepted appends end at {expected}: a refused request wrote to the log")
                self.log_end[row.partition] = row.base_offset + count
                self.report.accepted_appends += 1
        return problems

    def check_log_ends(self) -> list[str]:
        actual = self.list_offsets(FUZZ_TOPIC)
        problems = [f"[{FUZZ_TOPIC},{p}] ends at {actual[p]}, the accepted appends at {self.log_end[p]}: a refused "
                    "request wrote to the log" for p in range(PARTITIONS) if self.log_end[p] not in (-1, actual[p])]
        self.log_end = actual
        return problems

    def run(self, frames: int, progress_every: int = 0) -> Report:
        started = time.monotonic()
        while self.report.frames_sent < frames:
            size = min(FRAMES_PER_CONNECTION, frames - self.report.frames_sent)
            batch = self.batch(size)
            problems = self.send(batch)
            if not self.broker_alive():
                self.report.crashes.append("the broker process died")
                self.save(batch, "broker died")
                break
            uncaught = self.log.uncaught()
            problems += self.check_log_ends()
            if uncaught:
                self.report.crashes += uncaught
                self.minimize(batch)
            elif problems:
                self.report.violations += problems
                self.save(batch, "; ".join(problems))
            if self.report.connections % CANARY_EVERY == 0:
                self.check_canary()
            if progress_every and self.report.connections % progress_every == 0:
                rate = self.report.frames_sent / (time.monotonic() - started)
                print(f"  {self.report.frames_sent:,} frames, {rate:,.0f}/s, {self.report.answers:,} answers, "
                      f"{self.report.findings} findings", flush=True)
        self.check_canary()
        return self.report

    # -- findings ------------------------------------------------------------------------------------------------

    def minimize(self, batch: list[tuple[Seed, bytearray, bool]]) -> None:
        """Replay a batch whose frames made the broker log an uncaught exception one frame at a time; keep
        the frames that do it alone (or the whole batch, when none does)."""
        culprits = []
        for item in batch:
            self.send([item])
            if self.log.uncaught():
                culprits.append(item)
        self.save(culprits or batch, "uncaught exception in the broker")

    def save(self, batch: list[tuple[Seed, bytearray, bool]], why: str) -> None:
        self.corpus.mkdir(parents=True, exist_ok=True)
        data = b"".join(bytes(frame) for _, frame, _ in batch)
        path = self.corpus / f"{hashlib.sha256(data).hexdigest()[:16]}.bin"
        path.write_bytes(data)
        self.report.corpus.append(path)
        print(f"  finding saved to {path}: {why}", flush=True)


def _body_offset(frame: bytearray) -> int:
    return 4 + parse_request_header(memoryview(frame)[4:])[1]


# ---- standalone: a ZooKeeper and a one-broker lab of our own --------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seeds-per-api", type=int, default=100)
    args = parser.parse_args(argv)

    from zkbroker import admin
    from zkbroker.lab.cluster import LabCluster
    from zkbroker.lab.processes import process_state
    from zkbroker.lab.zookeeper import ZooKeeperServer
    from zkbroker.zk.client import ZkClient

    with tempfile.TemporaryDirectory(prefix="zkbroker-fuzz-") as workdir, \
            ZooKeeperServer(tick_time_ms=200, data_dir=Path(workdir) / "zookeeper") as zookeeper:
        lab = LabCluster(Path(workdir) / "lab")
        cluster = lab.up(brokers=1, zookeeper=zookeeper.connect_string, config=list(BROKER_CONFIG))
        try:
            broker = cluster.brokers[0]
            zk = ZkClient(cluster.zookeeper, name="fuzz-admin")
            zk.start()
            try:
                for topic in (FUZZ_TOPIC, CANARY_TOPIC):
                    admin.create_topic(zk, topic, PARTITIONS, 1)
            finally:
                zk.close()
            wait_for_leaders(broker.host, broker.port)
            fuzzer = Fuzzer(broker.host, broker.port, Path(broker.config).parent / "server.log",
                            lambda: process_state(broker.pid) != "dead", args.seed, args.seeds_per_api)
            started = time.monotonic()
            print(f"{len(fuzzer.seeds)} hypothesis seeds over {len(served_apis())} (api, version) pairs; "
                  f"sending {args.frames:,} frames", flush=True)
            report = fuzzer.run(args.frames, progress_every=1000)
            elapsed = time.monotonic() - started
        finally:
            lab.down()
    print_report(report, elapsed)
    return 1 if report.findings else 0


def wait_for_leaders(host: str, port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with BrokerConnection(host, port, client_id="fuzz-setup", timeout_s=5).connect() as conn:
                metadata = conn.send(ApiKey.METADATA, 0, {"topics": [FUZZ_TOPIC, CANARY_TOPIC]})
            if all(t.error_code == 0 and len(t.partitions) == PARTITIONS and all(p.leader >= 0 for p in t.partitions)
                   for t in metadata.topics):
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"no leaders for {FUZZ_TOPIC} and {CANARY_TOPIC} within {timeout_s} s")


def print_report(report: Report, elapsed: float) -> None:
    print(f"frames sent:      {report.frames_sent:,} in {elapsed:,.0f} s ({report.frames_sent / elapsed:,.0f}/s) "
          f"over {report.connections:,} connections (target >= 1,000,000 per run)")
    print(f"fuzz answers:     {report.answers:,} parsed and matched to their requests; "
          f"{report.accepted_appends:,} accepted appends accounted for")
    print(f"answers checked:  {report.answers_checked:,} well-formed requests answered correctly")
    print(f"crashes:          {len(report.crashes)} (target 0)")
    print(f"log violations:   {len(report.violations)} (target 0)")
    for line in (report.crashes + report.violations)[:20]:
        print(f"  {line}")


if __name__ == "__main__":
    sys.exit(main())
