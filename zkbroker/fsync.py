"""fsync by path, for a file or a directory: a directory's fsync is what makes a rename or a new file in it
durable (the file's own fsync does not).

The one helper for the writers that replace a file by renaming a fsynced temporary over it (the offset
checkpoints of the log directories, the Spark ingest job's manifests and published batches) and for the
offset index, which is written through a memory map rather than a file object.
"""

from __future__ import annotations

import os


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Raises FileNotFoundError if nothing is at `path`."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
