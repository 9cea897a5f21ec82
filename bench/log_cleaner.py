"""The log cleaner's speed, and what it costs the request path, printed as figures.

In one process, no broker: a compacted log of `--messages` 100-byte values over `--keys` keys, written as
sets of 100 messages (uncompressed, then again gzip-compressed), is cleaned once by a Cleaner (the work of
one `kafka-log-cleaner-thread`), and its messages/s and MB/s (of the log as stored) are printed. Then
appends of 100-message sets to another log on the main thread (what the broker's event loop does for a
produce) are timed alone and while a cleaner thread compacts a third log: Python threads share one
interpreter lock, so this is the price the request path pays for a cleaner running beside it.

Usage: python bench/log_cleaner.py [--messages 200000] [--keys 10000] [--seconds 3]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zkbroker.log.cleaner import Cleaner, CleanerConfig, Throttler  # noqa: E402
from zkbroker.log.log import Log  # noqa: E402
from zkbroker.log.log_config import LogConfig  # noqa: E402
from zkbroker.protocol.compression import CODEC_GZIP, CODEC_NONE  # noqa: E402
from zkbroker.protocol.message_set import build_message_set  # noqa: E402

VALUE = b"v" * 100
SET = 100
COMPACT = LogConfig(segment_bytes=16 * 1024 * 1024, cleanup_policy="compact")


def clock() -> int:
    return time.time_ns() // 1_000_000


def keep_files(name: str, task: object, delay_ms: int) -> None:
    """The logs' delayed deletes never run here: the replaced segments' files stay until the end."""


def write_log(directory: Path, messages: int, keys: int, codec: int) -> Log:
    log = Log(str(directory), COMPACT, clock=clock, schedule=keep_files)
    for n in range(0, messages, SET):
        items = [(f"key-{(n + i) % keys}".encode(), VALUE) for i in range(SET)]
        log.append(bytearray(build_message_set(items, codec=codec)))
    log.roll()
    return log


def appends_per_second(log: Log, seconds: float) -> float:
    batch = build_message_set([(b"k", VALUE)] * SET)
    count, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        log.append(bytearray(batch))
        count += SET
    return count / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-log-cleaner-"))
    try:
        print(f"{args.messages:,} messages of {len(VALUE)}-byte values over {args.keys:,} keys, sets of {SET}")
        print("| figure | measured |\n|---|---|")
        for name, codec in (("uncompressed", CODEC_NONE), ("gzip", CODEC_GZIP)):
            log = write_log(root / f"{name}-0", args.messages, args.keys, codec)
            size = log.size
            start = time.monotonic()
            Cleaner(0, CleanerConfig(), clock=clock).clean(log, 0)
            elapsed = time.monotonic() - start
            print(f"| cleaning, {name} | {args.messages / elapsed:,.0f} messages/s, {size / 1e6 / elapsed:,.1f} MB/s "
                  f"({size / 1e6:.1f} MB -> {log.size / 1e6:.2f} MB in {elapsed:.1f} s) |")
            log.close()
        target = Log(str(root / "appends-0"), LogConfig(), clock=clock, schedule=keep_files)
        alone = appends_per_second(target, args.seconds)
        print(f"| appends on the request path, alone | {alone:,.0f} messages/s |")
        for name, rate in (("", float("inf")), (", log.cleaner.io.max.bytes.per.second=2000000", 2e6)):
            busy = write_log(root / f"busy{len(name)}-0", args.messages, args.keys, CODEC_NONE)
            config = CleanerConfig(max_io_bytes_per_second=rate)
            stop = threading.Event()
            cleaner = Cleaner(0, config, clock=clock, throttler=Throttler(rate, sleep=stop.wait))
            thread = threading.Thread(target=cleaner.clean, args=(busy, 0))
            thread.start()
            beside = appends_per_second(target, args.seconds)
            stop.set()  # a throttled cleaning need not finish
            thread.join()
            print(f"| appends on the request path, beside a cleaning{name} | "
                  f"{beside:,.0f} messages/s ({100 * beside / alone:.0f}% of alone) |")
            busy.close()
        target.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
