"""A Spark executor with only pyspark and pyarrow decodes every codec as the fast path does: the same compressed
message sets go through `message_set_batch` here (cramjam, lz4, isal) and in an interpreter where cramjam, lz4 and
isal cannot be imported (pyarrow's codecs, zlib's CRC-32), and the record batches are equal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from consumer.spark.arrow import message_set_batch
from consumer.spark.source import kafka_schema
from zkbroker.protocol.compression import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY
from zkbroker.protocol.message_set import build_message_set

SCHEMA = to_arrow_schema(kafka_schema(), timezone="UTC")
ROOT = Path(__file__).resolve().parents[4]

# Runs in the child: the compiled packages made unimportable before anything of ours is imported.
CHILD = """
import sys
sys.modules["cramjam"] = None
sys.modules["lz4"] = None
sys.modules["isal"] = None
import zlib
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from consumer.spark.arrow import message_set_batch
from consumer.spark.source import kafka_schema
from zkbroker.protocol import compression, message_set

schema = to_arrow_schema(kafka_schema(), timezone="UTC")
sets = pa.ipc.open_stream(sys.stdin.buffer.read()).read_all().column("records").to_pylist()
sink = pa.BufferOutputStream()
with pa.ipc.new_stream(sink, schema) as out:
    for records in sets:
        batch, _, _ = message_set_batch(records, "t", 3, 0, 2**62, schema)
        out.write_batch(batch)
assert [d.name for d in compression.decoders()] == ["pyarrow"], compression.decoders()
assert message_set.crc32 is zlib.crc32
sys.stdout.buffer.write(sink.getvalue().to_pybytes())
"""


def compressed_sets() -> list[bytes]:
    """For each codec and magic: a fetched set of two wrappers and, after them, a message cut short."""
    sets = []
    for codec in (CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4):
        for magic in (0, 1):
            items = [(None if i % 5 == 0 else b"k%d" % i, None if i % 7 == 0 else b"value %d " % i * (i % 9),
                      1_700_000_000_000 + i) for i in range(300)]
            first = build_message_set(items[:180], magic=magic, codec=codec, base_offset=0)
            second = build_message_set(items[180:], magic=magic, codec=codec, base_offset=180)
            torn = build_message_set(items[:1], magic=magic, codec=codec, base_offset=300)[:-5]
            sets.append(first + second + torn)
    return sets


def test_without_cramjam_lz4_and_isal_every_codec_decodes_to_the_same_record_batches():
    sets = compressed_sets()
    here = [message_set_batch(records, "t", 3, 0, 2**62, SCHEMA)[0] for records in sets]
    assert all(batch.num_rows == 300 for batch in here)

    table = pa.table({"records": pa.array(sets, pa.binary())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as out:
        out.write_table(table)
    child = subprocess.run([sys.executable, "-c", CHILD], input=sink.getvalue().to_pybytes(), capture_output=True,
                           cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert child.returncode == 0, child.stderr.decode(errors="replace")[-3000:]
    there = pa.ipc.open_stream(child.stdout).read_all().to_batches()
    assert len(there) == len(here)
    for ours, theirs in zip(here, there):
        assert theirs.equals(ours)
