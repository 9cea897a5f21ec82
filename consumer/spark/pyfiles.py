"""The project's Python code as one zip, for Spark's executors and driver-side Python workers that have only
pyspark and pyarrow installed.

The zip holds zkbroker, consumer and controller, and kazoo (pure Python: the zkkafka planner, which Spark runs in
a Python worker of the driver, reads ZooKeeper with it). Compiled packages cannot travel in a zip and need not:
without cramjam, lz4 and isal, message sets are decoded with pyarrow's codecs and zlib's CRC-32
(zkbroker/protocol/compression.py). It is built once per content -- the version and a digest of the files, so
an edited checkout never ships stale code -- into zkbroker's cache directory, byte for byte reproducible.

`ship(spark_context)` adds it with addPyFile; it must come before `spark.dataSource.register(ZkKafkaDataSource)`,
which captures the files shipped so far. A user of plain spark-submit passes it with --py-files:

    spark-submit --py-files "$(python -m consumer.spark.pyfiles)" job.py
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import time
import zipfile
from pathlib import Path

__all__ = ["PACKAGES", "project_zip", "ship"]

PACKAGES = ("zkbroker", "consumer", "controller", "kazoo")
KEEP_ZIPS = 4  # older builds in the cache beyond these are removed once unused for STALE_AFTER_S
STALE_AFTER_S = 24 * 3600
_EPOCH = (1980, 1, 1, 0, 0, 0)  # every entry's timestamp: the same files make the same zip


def _files() -> list[tuple[str, Path]]:
    """(name in the zip, file) of every source and data file of the packages, sorted."""
    out = []
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ImportError(f"cannot ship {package}: it is not importable here")
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in root.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                out.append((f"{package}/{path.relative_to(root).as_posix()}", path))
    return sorted(out)


def project_zip(cache: Path | None = None) -> Path:
    """The zip of this checkout's packages, built into the cache if it is not there yet."""
    from zkbroker import __version__
    from zkbroker.cache import cache_dir

    files = _files()
    digest = hashlib.sha256()
    contents = []
    for name, path in files:
        data = path.read_bytes()
        contents.append((name, data))
        digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
    directory = cache or cache_dir("spark-pyfiles")
    target = directory / f"zkbroker-{__version__}-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        os.utime(target)  # in use: not one of the stale builds another checkout's process may clear away
        return target
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{target.name}.{os.getpid()}"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in contents:
            archive.writestr(zipfile.ZipInfo(name, _EPOCH), data, zipfile.ZIP_DEFLATED)
    os.replace(tmp, target)
    # Only builds both beyond the newest KEEP_ZIPS and unused for a day go: a running Spark application (of another
    # checkout, say) fetches its zip again for every new executor, and fails if it has vanished.
    older = sorted(directory.glob("zkbroker-*.zip"), key=lambda p: p.stat().st_mtime, reverse=True)[KEEP_ZIPS:]
    for stale in older:
        if time.time() - stale.stat().st_mtime > STALE_AFTER_S:
            stale.unlink(missing_ok=True)
    return target


def ship(spark_context) -> Path:
    """Add the project's zip to `spark_context` (once): its tasks and Python workers import our code from it."""
    path = project_zip()
    # pyspark's own record of what addPyFile shipped (adding one path twice would put it twice on sys.path).
    if path.name not in spark_context._python_includes:
        spark_context.addPyFile(str(path))
    return path


if __name__ == "__main__":
    print(project_zip())
    sys.exit(0)
