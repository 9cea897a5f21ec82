"""Debian packages installed with apt-get when we may: as root on Debian or Ubuntu, with apt-get on PATH.

`make test` and `make demo` bootstrap a fresh machine this way (ZooKeeper for the lab; kcat and
docker-compose for the tests), so a missing tool is installed rather than skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

APT_TIMEOUT_S = 900


class AptGetFailed(RuntimeError):
    """apt-get ran and failed; the message names the command and its last line of output."""


def may_apt_install() -> bool:
    """Whether this process may install Debian packages: root, on Debian or Ubuntu, with apt-get."""
    return os.geteuid() == 0 and Path("/etc/debian_version").exists() and shutil.which("apt-get") is not None


def apt_get_install(packages: Sequence[str]) -> bool:
    """apt-get update and install ``packages`` (without recommended ones); False if we may not install.

    Raises :class:`AptGetFailed` when apt-get itself fails or runs past its timeout.
    """
    if not may_apt_install():
        return False
    print(f"Installing Debian packages: apt-get install {' '.join(packages)}...", file=sys.stderr, flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]
    for command in (["apt-get", "update", "-qq"], install):
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=APT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            done = subprocess.CompletedProcess(command, 1, "", f"timed out after {APT_TIMEOUT_S} s")
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise AptGetFailed(f"`{' '.join(command)}` failed ({last[0]})")
    return True
