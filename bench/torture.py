"""Torture (issue 12): seeded runs of random kill / pause-past-session / restart / partition / ZooKeeper faults
under acks=all load, each in 0.8 mode (0.8.2's defaults) and in the safe configuration (RF 3, acks=all,
min.insync.replicas=2, unclean election off, leader epochs), side by side; the checker judges every run.

Prints, per mode: runs, acknowledged records, losses (with the event that lost each, as far as the timeline
tells), divergence, and unavailability by fault kind (median and max of the longest window without an
acknowledgement that began during each fault), beside the figures the safe configuration promises (0 lost,
0 divergent) and the run times. `--json FILE` also writes the totals.

With `--kraft` the runs are KRaft labs' (kraft_torture.py: three controllers, three brokers, the safe
configuration; faults kill, pause, partition of a broker and controller): beside the data figures it prints the
quorum's, from every voter's metadata log: metadata records committed and checked, Raft violations, and the longest
time without a quorum leader per fault kind.

Usage: python bench/torture.py [--kraft] [--runs 50] [--seed 1] [--faults KIND,...] [--minutes M] [--json FILE]
(partition faults need root; without it they are left out. `--minutes`: no run starts after that long, and the
figures say how many runs were done.)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zkbroker.lab import kraft_torture, torture  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kraft", action="store_true", help="KRaft labs (brokers and controllers faulted)")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", help="default: every kind of the mode (partition only as root)")
    parser.add_argument("--minutes", type=float, help="start no run after this long")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    logging.getLogger("kazoo").addHandler(logging.NullHandler())
    logging.getLogger("kazoo").propagate = False
    kinds = kraft_torture.FAULT_KINDS if args.kraft else torture.FAULT_KINDS
    faults = tuple(args.faults.split(",")) if args.faults else \
        tuple(k for k in kinds if k != "partition" or os.geteuid() == 0)
    started = time.monotonic()
    until = started + args.minutes * 60 if args.minutes else None

    def narrate(line: str) -> None:
        print(line, flush=True)
    if args.kraft:
        result = kraft_torture.run_kraft_torture(args.runs, args.seed, faults, narrate, until=until)
    else:
        result = torture.run_torture(args.runs, args.seed, faults, "both", narrate, until=until)
    took = time.monotonic() - started
    print(f"\n== torture: {result.runs} of {args.runs} runs, seed {args.seed}, faults {','.join(faults)}, "
          f"{took / 60:.0f} min in all")
    for totals in result.totals.values():
        j = totals.as_json()
        promise = {"fixed": "safe configuration: 0 lost, 0 divergent promised",
                   "kraft": "safe configuration: 0 lost, 0 divergent, 0 Raft violations promised"}.get(
                       totals.mode, "0.8.2 defaults")
        print(f"{totals.mode:>5}: {totals.runs} runs, {totals.faults} faults, {totals.acknowledged} acknowledged, "
              f"{totals.lost} lost, "
              f"{totals.divergent} divergent offsets, {totals.duplicated} duplicated ({promise}: "
              f"{'kept' if totals.expected else 'BROKEN'}); verdicts {j['verdicts']}")
        for kind, figures in j["unavailable_ms_by_fault"].items():
            print(f"       unavailable after {kind:<9} median {figures['median'] / 1000:5.1f} s, "
                  f"max {figures['max'] / 1000:5.1f} s ({figures['faults']} faults)")
        if totals.mode == "kraft":
            print(f"       the quorum: {j['metadata_committed']} metadata records committed and checked on every "
                  f"voter, {len(j['raft_violations'])} Raft violations; longest without a quorum leader "
                  f"{j['leaderless_ms_max'] / 1000:.1f} s")
            for kind, figures in j["leaderless_ms_by_fault"].items():
                print(f"       without a quorum leader after {kind:<10} median {figures['median'] / 1000:5.1f} s, "
                      f"max {figures['max'] / 1000:5.1f} s ({figures['faults']} faults)")
            for violation in j["raft_violations"]:
                print(f"       {violation['run']}: {violation['invariant']}: {violation['detail']}")
        for stuck in totals.stuck:
            print(f"       stuck ({stuck['run']}): {stuck['why']}")
        causes = Counter(_cause_kind(loss["cause"]) for loss in totals.losses)
        for cause, count in causes.most_common():
            print(f"       lost by {cause}: {count}")
        if totals.seconds:
            print(f"       run time median {statistics.median(totals.seconds):.0f} s, max {max(totals.seconds):.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({**result.as_json(), "minutes": round(took / 60, 1)}, indent=2))
    return 0 if result.expected else 1


def _cause_kind(cause: str) -> str:
    if " truncated on broker " in cause:
        return "truncation: " + cause.split(": ", 1)[-1]
    if " was never on broker " in cause:
        return "election of a leader that never had it"
    return "no timeline event explains it"


if __name__ == "__main__":
    sys.exit(main())
