"""fsync of a directory: what makes a rename or a new file in it durable (the file's own fsync does not).

The one helper for every writer that replaces a file by renaming a fsynced temporary over it: the offset
checkpoints of the log directories and the Spark ingest job's manifests and published batches.
"""

from __future__ import annotations

import os


def fsync_directory(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
