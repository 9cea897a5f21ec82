"""The scenario catalogue: each scenario run as a user runs it (`zkbroker lab scenario run NAME --seed 7 --json
--mode M`), one after another, with each run's verdict, whether it matched its expectation, the longest time
without a leader the run saw, its wall time and the CPU of every process it started (the command, its labs'
brokers, ZooKeeper servers and controllers: a cgroup of its own as root, else a lower bound from getrusage).

By default every mode of every scenario (`--mode all`); `--kraft` runs the KRaft modes only (kraft and
kraft-fixed, of every scenario that has one), the suite running but a few of them. The reference is the
scenario's own expectation (its `expect` per mode): every row should say `yes`.

Usage: python bench/catalogue.py [--kraft | --mode MODE] [--only NAME[,NAME...]] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cpu_account import CpuAccount  # noqa: E402
from zkbroker.lab.scenario import KRAFT_MODES, catalogue  # noqa: E402

SEED = 7


def run_one(name: str, mode: str) -> dict:
    """One `lab scenario run` in a CPU account of its own."""
    account = CpuAccount(f"catalogue-{name}")
    began_cpu, began = account.seconds(), time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "zkbroker", "lab", "scenario", "run", name, "--seed", str(SEED),
                               "--mode", mode, "--json"], capture_output=True, text=True, timeout=1200, cwd=ROOT)
    finally:
        seconds, cpu = time.monotonic() - began, account.seconds() - began_cpu
        account.close()
    try:
        runs = json.loads(done.stdout)["runs"]
    except (json.JSONDecodeError, KeyError):
        runs = [{"mode": mode, "verdict": "error", "expected": False,
                 "unavailable_ms_max": None, "error": done.stderr.strip().splitlines()[-1:]}]
    return {"scenario": name, "mode": mode, "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1),
            "cpu_exact": account.exact, "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--kraft", action="store_true", help="the KRaft modes only")
    which.add_argument("--mode", default="all", help="0.8, fixed, kraft, kraft-fixed, both or all (default)")
    parser.add_argument("--only", metavar="NAME[,NAME...]")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    wanted = set(args.only.split(",")) if args.only else None
    rows = []
    for scenario in catalogue():
        if wanted is not None and scenario.name not in wanted:
            continue
        if args.kraft:
            modes = [m for m in KRAFT_MODES if m in scenario.modes]
        elif args.mode in ("all", "both"):
            modes = [args.mode]
        else:
            modes = [args.mode] if args.mode in scenario.modes else []
        for mode in modes:  # each KRaft mode alone, so that its time and CPU are its own
            row = run_one(scenario.name, mode)
            rows.append(row)
            for run in row["runs"]:
                print(f"{scenario.name:32} {run['mode']:12} {run['verdict']:12} "
                      f"{'yes' if run['expected'] else 'NO':4} leaderless/unavailable max "
                      f"{run.get('unavailable_ms_max')} ms  {row['seconds']:6.1f} s  CPU {row['cpu_seconds']:6.1f} s"
                      + ("" if row["cpu_exact"] else " (lower bound)"), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0 if all(run["expected"] for row in rows for run in row["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
