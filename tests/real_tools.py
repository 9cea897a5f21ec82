"""The real command-line tools the test suite drives, and the Debian package each comes from.

`make test` runs ``python -m tests.real_tools ensure`` first, which apt-get installs the missing ones (as
``zkbroker.lab.zookeeper ensure`` does for ZooKeeper). A test that needs one calls :func:`require`: without
the tool it skips, naming the package, and with ``CI`` set tests/conftest.py turns that skip into a failure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

import pytest

from zkbroker.lab.debian import AptGetFailed, apt_get_install

# executable -> package; nft and ip build the lab network (`lab up --network`, partitions), as root; chromium
# is the real browser the dashboard's tests drive (through Playwright, pointed at it)
DEBIAN_PACKAGES = {"kcat": "kcat", "docker-compose": "docker-compose", "nft": "nftables", "ip": "iproute2",
                   "chromium": "chromium"}


def ci_is_set() -> bool:
    """Whether we run under CI, where a test may not skip for a missing tool."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def require(executable: str) -> str:
    """The tool's path; skips the calling test (a failure under CI) when it is not installed."""
    path = shutil.which(executable)
    if path is None:
        pytest.skip(f"{executable} is not installed (Debian package {DEBIAN_PACKAGES[executable]}; "
                    "`make test` installs it)")
    return path


def ensure(ci: bool) -> int:
    """Install every missing tool and say where each is; one line per tool still missing, and then, under CI
    (where the tests would fail for it), exit status 1."""
    missing = [name for name in DEBIAN_PACKAGES if shutil.which(name) is None]
    if missing:
        try:
            apt_get_install([DEBIAN_PACKAGES[name] for name in missing])
        except AptGetFailed as error:
            print(error, file=sys.stderr)
    still = [name for name in DEBIAN_PACKAGES if shutil.which(name) is None]
    for name in still:
        print(f"{name} is not installed and apt-get may not run here: install the Debian package "
              f"{DEBIAN_PACKAGES[name]} (or its equivalent)", file=sys.stderr)
    for name in DEBIAN_PACKAGES:
        if name not in still:
            print(f"{name}: {shutil.which(name)}")
    return 1 if still and ci else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.real_tools", description=__doc__.splitlines()[0])
    parser.add_subparsers(dest="command", required=True).add_parser(
        "ensure", help="apt-get install the tools that are missing, and say where each is")
    parser.parse_args(argv)
    return ensure(ci=ci_is_set())


if __name__ == "__main__":
    sys.exit(main())
