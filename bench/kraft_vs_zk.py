"""ZooKeeper against KRaft in one run (issue 26, part 5): controller failover, a broker's restart to serving again,
and a controlled shutdown of a broker leading a third of the partitions, at each partition count in both modes.

Both sides are the controllers of this repository, real processes, with stand-in brokers (no broker here holds
100,000 partitions): the ZooKeeper side is bench/failover.py's `--stub-brokers` (a real ZooKeeper, broker 1 the
controller, stand-ins 2-4 answering its requests at once), the KRaft side bench/kraft.py's `--stand-ins` (three
controllers of a real quorum, stand-in brokers pulling the metadata log as Raft observers). Per round:

* controller failover, twice: from the kill (detection included: controller.quorum.fetch.timeout.ms in KRaft;
  in ZooKeeper mode zookeeper.session.timeout.ms, added to the measured rest because the controller is the only
  real broker there) and the handover: KRaft, from the new controller's election to its first committed
  leadership change (a controlled shutdown waits for it), and to a stand-in having applied it; ZooKeeper, from
  the new /controller to its context loaded from ZooKeeper and UpdateMetadata acknowledged by every broker;
* controlled shutdown of the broker leading the most (a third): to the answer that every leadership moved;
* restart to serving: a stand-in's start to the controller's UpdateMetadata for it (ZooKeeper) or its unfencing
  (KRaft).

Medians of the rounds, the machine's load average beside each size (the machine is shared), the targets (the
KRaft handover at 1,000,000 partitions under 1 s) and the published chart (Confluent, "Apache Kafka Made Simple:
A First Glimpse of a Kafka Without ZooKeeper", 2021: 2 million partitions).

Usage: python bench/kraft_vs_zk.py [--sizes 10000,100000,1000000] [--rounds 10,5,2] [--zookeeper-max 100000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import failover  # noqa: E402  bench/failover.py: the ZooKeeper side
import kraft  # noqa: E402  bench/kraft.py: the KRaft side

TARGET_HANDOVER_MS = 1000  # issue 26: the KRaft handover at 1,000,000 partitions
PARTITIONS_PER_TOPIC = 1000  # the ZooKeeper side's topics (failover.py writes each topic's assignment znode)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="10000,100000,1000000", help="partition counts, comma-separated")
    p.add_argument("--rounds", default="10,5,2", help="rounds per size (the last one repeats)")
    p.add_argument("--zookeeper-max", type=int, default=100_000,
                   help="the largest size run in ZooKeeper mode too (what this machine holds)")
    p.add_argument("--only", choices=("zookeeper", "kraft"), help="one mode only")
    p.add_argument("--in-memory", default="",
                   help="partition counts at which the quorum controller's handover is also measured alone, in memory "
                        "(bench/kraft.py's in_memory_handover), e.g. 10000,100000,1000000")
    p.add_argument("--keep", metavar="DIR", help="keep the KRaft cluster's directories (its controllers' logs) here")
    args = p.parse_args(argv)
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s]
        args.rounds = [int(r) for r in args.rounds.split(",")]
        args.in_memory = [int(s) for s in args.in_memory.split(",") if s]
    except ValueError:
        p.error("--sizes and --rounds take comma-separated integers")
    if min(args.sizes + args.in_memory, default=0) < 3 or not args.rounds or min(args.rounds) < 1:
        p.error("--sizes need at least 3 partitions each, --rounds at least 1 each")
    return args


def med(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f}" if values else "-"


def main() -> int:
    args = parse_args()
    results: dict[int, dict[str, dict[str, list[float]] | float]] = {}
    for i, n in enumerate(args.sizes):
        rounds = args.rounds[min(i, len(args.rounds) - 1)]
        results[n] = {}
        if args.only != "kraft" and n <= args.zookeeper_max:
            print(f"{n:,} partitions, ZooKeeper mode, {rounds} rounds", flush=True)
            workdir = Path(tempfile.mkdtemp(prefix="bench-kraft-vs-zk-zk-"))
            try:
                with failover.Bench(failover.stand_in_args(n, max(1, n // PARTITIONS_PER_TOPIC)), workdir) as bench:
                    print(f"  created and online in {bench.create_topics():.1f} s (setup)", flush=True)
                    results[n]["zookeeper"] = failover.zookeeper_rounds(bench, rounds)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            results[n]["zookeeper load"] = os.getloadavg()[0]
        if args.only != "zookeeper":
            print(f"{n:,} partitions, KRaft mode, {rounds} rounds", flush=True)
            if args.keep:
                Path(args.keep).mkdir(parents=True, exist_ok=True)
            root = Path(tempfile.mkdtemp(prefix="bench-kraft-vs-zk-kraft-", dir=args.keep))
            try:
                results[n]["kraft"] = kraft.stand_in_run(n, rounds, root)
            finally:
                if args.keep is None:
                    shutil.rmtree(root, ignore_errors=True)
            results[n]["kraft load"] = os.getloadavg()[0]
    for n in args.in_memory:
        print(f"{n:,} partitions, the KRaft handover in memory", flush=True)
        results.setdefault(n, {})["in memory"] = kraft.in_memory_handover(n)
        results[n]["in memory load"] = os.getloadavg()[0]
    report(results)
    return 0


def report(results: dict) -> None:
    print()
    print("medians in ms (rounds)               | failover from the kill | handover            | controlled shutdown "
          "| restart to serving | load")
    for n, modes in results.items():
        if "zookeeper" in modes:
            z = modes["zookeeper"]
            print(f"{n:>9,} ZooKeeper ({len(z['shutdown'])})           | {med(z['from_kill']):>22} | "
                  f"{med(z['handover']):>19} | {med(z['shutdown']):>19} | {med(z['restart']):>18} | "
                  f"{modes['zookeeper load']:.1f}")
        if "kraft" in modes:
            k = modes["kraft"]
            print(f"{n:>9,} KRaft ({len(k['shutdown'])})               | {med(k['from_kill']):>22} | "
                  f"{med(k['handover']):>8} / {med(k['served']):>8} | {med(k['shutdown']):>19} | "
                  f"{med(k['restart']):>18} | {modes['kraft load']:.1f}")
        if "in memory" in modes:
            k = modes["in memory"]
            shutdown = f"{k['shutdown']:,.0f}" if k["shutdown"] is not None else f"{k['per_part']:,.0f} a part"
            print(f"{n:>9,} KRaft, controller in memory (1)  | {'-':>22} | {k['handover']:>19,.0f} | "
                  f"{shutdown:>19} | {'-':>18} | {modes['in memory load']:.1f}")
    print("ZooKeeper: from the kill = zookeeper.session.timeout.ms (2,000) + the handover (new /controller -> "
          "context loaded -> UpdateMetadata acknowledged by every broker)")
    print("KRaft: handover = the new controller's election -> its first leadership change committed / applied by a "
          "stand-in broker; from the kill includes controller.quorum.fetch.timeout.ms (2,000)")
    print(f"Target: the KRaft handover at 1,000,000 partitions under {TARGET_HANDOVER_MS:,} ms. Published (Confluent "
          "2021, 2 million partitions): controlled shutdown minutes with ZooKeeper, tens of seconds with KRaft; "
          "recovery after an uncontrolled shutdown many minutes against under a minute")


if __name__ == "__main__":
    sys.exit(main())
