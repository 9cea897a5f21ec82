"""The Raft simulation at length: as many seeded fault schedules as fit in a time budget, each run on the
simulated network of tests/unit/raft/simulation.py with every invariant checked after every event and
liveness checked once the network heals. Reports schedules and events per second, beside the floor of the
same number of events through the bare event queue (a heap push and pop each), and the simulated time from
the heal to the first commit after it, beside the configured election timeout. Any violation is printed with
its seed; `--seed N --trace` replays one schedule event by event.

Then the two later fixes the lab plays as `kraft-fixed` (zkbroker/raft/config.py), each over 200 seeds of its
own failure, without and with the switch: a voter cut off alone for 6 s and healed (how often its return
forced an election, and the epochs it burnt while away: Pre-Vote, KIP-996), and a lagging voter plus one that
lost its disk while the leader dies (how often committed entries were overwritten: directory ids, KIP-853).

Usage: python bench/raft_sim.py [--minutes 20] [--first-seed 0] | --seed N [--trace]
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit.raft.simulation import Fault, InvariantViolation, Schedule, Simulation, random_schedule  # noqa: E402
from zkbroker.raft.config import QuorumConfig  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def queue_floor(events: int) -> float:
    """Seconds for `events` heap pushes and pops of event-shaped tuples: the simulator's bare scheduling cost."""
    queue: list[tuple[int, int, str, tuple]] = []
    start = time.perf_counter()
    for i in range(events):
        heapq.heappush(queue, (i * 7 % 1000, i, "deliver", ()))
        if len(queue) > 64:
            heapq.heappop(queue)
    while queue:
        heapq.heappop(queue)
    return time.perf_counter() - start


def replay(seed: int, trace: bool) -> int:
    sim = Simulation(random_schedule(seed), trace=print if trace else None)
    try:
        outcome = sim.run()
        sim.check_liveness(outcome)
    except InvariantViolation as violation:
        print(violation)
        return 1
    print(f"seed {seed}: {outcome}")
    return 0


def disruptions(pre_vote: bool, seeds: range) -> tuple[int, float]:
    """Over `seeds`: runs in which the voter cut off alone forced a new epoch once back, and the mean number of
    epochs it went through while cut off."""
    forced, climbed = 0, []
    for seed in seeds:
        sim = Simulation(Schedule(seed=seed, voters=3, heal_at_ms=8000, pre_vote=pre_vote, run_until_ms=14000,
                                  faults=(Fault(2000, "isolate-follower"),)))
        sim.run()
        before = max((epoch for n, history in sim.history.items() for at, state, epoch in history
                      if state == "leader" and at < 2000), default=0)
        cut = min(v for v in sim.voters if not any(state == "leader" and at < 2000
                                                   for at, state, _ in sim.history[v]))
        away = [epoch for at, _, epoch in sim.history[cut] if 2000 <= at < 8000]
        climbed.append(max(away, default=before) - before)
        forced += any(state == "leader" and epoch > before and at >= 8000
                      for history in sim.history.values() for at, state, epoch in history)
    return forced, statistics.mean(climbed)


def overwrites(directory_ids: bool, seeds: range) -> int:
    """Over `seeds`: runs in which a committed entry was overwritten after a voter lost its disk."""
    found = 0
    for seed in seeds:
        sim = Simulation(Schedule(seed=seed, voters=3, heal_at_ms=12000, directory_ids=directory_ids,
                                  faults=(Fault(2000, "isolate-follower"), Fault(4000, "wipe-follower"),
                                          Fault(4001, "crash-leader"), Fault(4002, "heal"))))
        try:
            sim.run()
        except InvariantViolation as violation:
            found += "committed" in str(violation)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--first-seed", type=int, default=1_000_000, help="seeds below it are the unit suite's")
    parser.add_argument("--seed", type=int, help="replay this one schedule")
    parser.add_argument("--trace", action="store_true", help="with --seed: print every event")
    args = parser.parse_args()
    if args.seed is not None:
        return replay(args.seed, args.trace)

    budget = args.minutes * 60
    start = time.perf_counter()
    seed, events, schedules = args.first_seed, 0, 0
    recovery_ms: list[int] = []
    violations: list[tuple[int, str]] = []
    while time.perf_counter() - start < budget:
        schedule = random_schedule(seed)
        sim = Simulation(schedule)
        try:
            outcome = sim.run()
            sim.check_liveness(outcome)
            events += outcome.events
            recovery_ms.append(outcome.live_at_ms - schedule.heal_at_ms)
        except InvariantViolation as violation:
            violations.append((seed, str(violation).splitlines()[0]))
            events += sim.events
        schedules += 1
        seed += 1
    elapsed = time.perf_counter() - start

    floor = queue_floor(min(events, 2_000_000))
    floor_rate = min(events, 2_000_000) / floor
    timeout = QuorumConfig(node_id=1, voters=frozenset({1})).election_timeout_ms
    print(f"Raft simulation: {schedules} schedules (seeds {args.first_seed}..{seed - 1}) in {elapsed:.0f} s")
    print(f"  schedules per second       {schedules / elapsed:10.1f}")
    print(f"  events per second          {events / elapsed:10.0f}   (bare event queue: {floor_rate:,.0f}/s)")
    print(f"  events per schedule        {events / max(schedules, 1):10.0f}")
    if recovery_ms:
        print(f"  heal to first commit, ms   p50 {statistics.median(recovery_ms):.0f}  "
              f"p99 {percentile(recovery_ms, 99):.0f}  max {max(recovery_ms)}   "
              f"(election timeout {timeout} ms, randomized up to {2 * timeout})")
    print(f"  violations                 {len(violations):10d}")
    for bad_seed, line in violations[:20]:
        print(f"    seed {bad_seed}: {line}   (replay: python bench/raft_sim.py --seed {bad_seed} --trace)")

    seeds = range(200)
    print("Later fixes, 200 seeds each (kraft = Kafka 3.7, kraft-fixed = with the switch):")
    for label, pre_vote in (("kraft", False), ("kraft-fixed", True)):
        forced, climbed = disruptions(pre_vote, seeds)
        print(f"  voter cut off 6 s, {label:<11}  its return forced an election in {forced:3d}/200 runs; "
              f"epochs it burnt away: {climbed:.1f} on average")
    for label, directory_ids in (("kraft", False), ("kraft-fixed", True)):
        lost = overwrites(directory_ids, seeds)
        print(f"  voter lost its disk, {label:<11} committed entries overwritten in {lost:3d}/200 runs")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
