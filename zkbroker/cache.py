"""zkbroker's cache directory: what is built once per machine and version and kept between runs (the Spark workers'
Python of the lab, the zip of our code that Spark ships to executors)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir(*parts: str) -> Path:
    """$XDG_CACHE_HOME/zkbroker/<parts>, else ~/.cache/zkbroker/<parts> (not created here)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root, "zkbroker", *parts)
