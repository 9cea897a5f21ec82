"""The real command-line tools the test suite drives, and the Debian package each comes from.

`make test` runs ``python -m tests.real_tools ensure`` first, which apt-get installs the missing ones (as
``zkbroker.lab.zookeeper ensure`` does for ZooKeeper). A test that needs one calls :func:`require`: without
the tool it skips, naming the package, and with ``CI`` set tests/conftest.py turns that skip into a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zkbroker.lab.debian import AptGetFailed, apt_get_install

# executable -> package; nft and ip build the lab network (`lab up --network`, partitions), as root; chromium
# is the real browser the dashboard's tests drive (through Playwright, pointed at it)
NODE_DIR = Path(__file__).resolve().parent / "node"  # package.json and package-lock.json: KafkaJS

DEBIAN_PACKAGES = {"kcat": "kcat", "docker-compose": "docker-compose", "nft": "nftables", "ip": "iproute2",
                   "chromium": "chromium", "openssl": "openssl"}


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


def require_node_package(name: str) -> Path:
    """The package's directory under tests/node/node_modules; skips the calling test (a failure under CI) when it
    is not installed."""
    path = NODE_DIR / "node_modules" / name
    if not (path / "package.json").exists():
        pytest.skip(f"the Node.js package {name} is not installed in {NODE_DIR} (`make test` installs it with npm)")
    return path


def ensure_node_packages() -> list[str]:
    """`npm ci` in tests/node (the versions its package-lock.json pins) unless every package is there; npm comes
    with Debian's nodejs/npm packages when missing. Returns what is still missing."""
    wanted = sorted(json.loads((NODE_DIR / "package.json").read_text())["dependencies"])
    missing = [n for n in wanted if not (NODE_DIR / "node_modules" / n / "package.json").exists()]
    if not missing:
        return []
    if shutil.which("npm") is None:
        try:
            apt_get_install(["nodejs", "npm"])
        except AptGetFailed as error:
            print(error, file=sys.stderr)
    if shutil.which("npm") is not None:
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, timeout=600)
        if done.returncode != 0:
            print(f"npm ci in {NODE_DIR} failed with exit status {done.returncode}", file=sys.stderr)
    return [n for n in wanted if not (NODE_DIR / "node_modules" / n / "package.json").exists()]


def ensure(ci: bool) -> int:
    """Install every missing tool and say where each is; one line per tool still missing, and then, under CI
    (where the tests would fail for it), exit status 1."""
    still_node = ensure_node_packages()
    for name in still_node:
        print(f"the Node.js package {name} is not installed: run `npm ci` in {NODE_DIR}", file=sys.stderr)
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
    return 1 if (still or still_node) and ci else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.real_tools", description=__doc__.splitlines()[0])
    parser.add_subparsers(dest="command", required=True).add_parser(
        "ensure", help="apt-get install the tools that are missing, and say where each is")
    parser.parse_args(argv)
    return ensure(ci=ci_is_set())


if __name__ == "__main__":
    sys.exit(main())
