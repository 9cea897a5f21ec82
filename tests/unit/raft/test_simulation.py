"""The quorum under faults: schedules of crashes, restarts, partitions, drops, delays and resignations run on
the simulated network (simulation.py), every invariant checked after every event, and liveness once the
network heals. 1,000 schedules in all: 500 drawn by hypothesis (shrunk to a minimal schedule on failure),
500 from seeds through the bench's generator (`bench/raft_sim.py --seed N --trace` replays any seed)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.raft.simulation import (
    OBSERVER_BASE_ID,
    Fault,
    InvariantViolation,
    Schedule,
    Simulation,
    random_schedule,
)
from zkbroker.raft.node import RaftNode

SEEDED_SCHEDULES = 500
HYPOTHESIS_SCHEDULES = 500


def run(schedule: Schedule):
    sim = Simulation(schedule)
    outcome = sim.run()
    sim.check_liveness(outcome)
    return outcome


FAULT_KINDS = ("crash", "crash-mid-step", "restart", "resign", "crash-leader", "isolate-leader", "partition", "heal")


@st.composite
def schedules(draw) -> Schedule:
    """Schedules drawn from plain integers (a fault is a time, a kind and a node or group bit mask), which
    hypothesis draws and shrinks cheaply: what shrinks is the schedule's shape, the seed only the network."""
    voters = draw(st.sampled_from((1, 3, 3, 5)))
    observers = draw(st.integers(0, 2))
    nodes = list(range(1, voters + 1)) + [OBSERVER_BASE_ID + i for i in range(1, observers + 1)]
    heal_at = draw(st.integers(0, 3000))
    raw = draw(st.lists(st.tuples(st.integers(0, heal_at), st.integers(0, len(FAULT_KINDS) - 1),
                                  st.integers(1, 2 ** len(nodes) - 1)), max_size=6))
    faults = []
    for at, kind, mask in raw:
        group = frozenset(n for i, n in enumerate(nodes) if mask >> i & 1)
        faults.append(Fault(at, FAULT_KINDS[kind], node=nodes[mask % len(nodes)], group=group))
    return Schedule(
        seed=draw(st.integers(0, 2**32 - 1)), voters=voters, observers=observers,
        drop_rate=draw(st.sampled_from((0.0, 0.05, 0.3))),
        min_delay_ms=1, max_delay_ms=draw(st.sampled_from((2, 20, 150))),
        append_every_ms=draw(st.sampled_from((100, 400, 1000))),
        faults=tuple(sorted(faults, key=lambda f: f.at_ms)), heal_at_ms=heal_at, pre_vote=draw(st.booleans()),
    )


@settings(max_examples=HYPOTHESIS_SCHEDULES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(schedules())
def test_hypothesis_schedules_keep_every_invariant_and_elect_a_committing_leader_once_healed(schedule):
    run(schedule)


@pytest.mark.parametrize("block", range(5))
def test_seeded_schedules_keep_every_invariant_and_elect_a_committing_leader_once_healed(block):
    per_block = SEEDED_SCHEDULES // 5
    for seed in range(block * per_block, (block + 1) * per_block):
        run(random_schedule(seed))


@pytest.mark.parametrize("voters", [1, 3, 5])
def test_a_healthy_quorum_elects_one_leader_that_commits(voters):
    outcome = run(Schedule(seed=voters, voters=voters, observers=1, heal_at_ms=0))
    assert outcome.max_epoch >= 1 and outcome.live_at_ms is not None and outcome.committed >= 2


def test_a_leader_cut_off_alone_resigns_by_check_quorum_while_the_majority_elects_another():
    sim = Simulation(Schedule(seed=11, voters=3, heal_at_ms=9000, faults=(Fault(3000, "isolate-leader"),)))
    sim.check_liveness(sim.run())
    (cut,) = [n for n, history in sim.history.items()
              if any(state == "leader" and at < 3000 for at, state, _ in history)]
    resigned = [at for at, state, _ in sim.history[cut] if state == "resigned"]
    assert resigned and 3000 < resigned[0] <= 6000  # 1.5 x fetch timeout after the last majority fetch
    elected = [(at, n) for n in sim.node_ids if n != cut for at, state, _ in sim.history[n] if state == "leader"]
    assert any(3000 < at < 9000 for at, _ in elected)


def test_a_mutant_that_counts_an_older_epoch_toward_the_high_watermark_is_caught(monkeypatch):
    """The invariants have teeth: commit without the own-epoch rule and some schedule breaks one."""
    def advance_from_any_epoch(self, now, leader):
        ends = sorted((self.log.end_offset if v == self.node_id else leader.end_offset(v)
                       for v in self.config.voters), reverse=True)
        reached = ends[len(ends) // 2]
        if reached > 0 and (self.high_watermark is None or reached > self.high_watermark):
            self.high_watermark = reached
            self._complete_parked(now, leader)

    monkeypatch.setattr(RaftNode, "_maybe_advance_high_watermark", advance_from_any_epoch)
    with pytest.raises(InvariantViolation):
        for seed in range(300):
            run(random_schedule(seed))


def test_a_mutant_that_grants_votes_to_stale_logs_is_caught(monkeypatch):
    monkeypatch.setattr(RaftNode, "_can_grant_vote",
                        lambda self, request: self.config.is_voter and self.state.name == "unattached")
    with pytest.raises(InvariantViolation):
        for seed in range(300):
            run(random_schedule(seed))


def test_a_seed_replays_the_same_run():
    first, second = run(random_schedule(42)), run(random_schedule(42))
    assert first == second


def leader_epochs(sim: Simulation) -> dict[int, int]:
    """epoch -> the node that led it, over the run."""
    return {epoch: n for n, history in sim.history.items() for _, state, epoch in history if state == "leader"}


@pytest.mark.parametrize("pre_vote", [False, True])
def test_a_voter_cut_off_alone_unseats_the_leader_when_it_returns_unless_pre_vote_keeps_its_epoch(pre_vote):
    """KIP-996's case: cut off for 6 s, a voter stands again and again, each time in a higher epoch; back, its
    Vote (Kafka 3.7) carries that epoch and the healthy leader steps down. With Pre-Vote it asks first, gets no
    majority while the others hear from their leader, so its epoch never moves and the leader stays."""
    sim = Simulation(Schedule(seed=5, voters=3, heal_at_ms=8000, pre_vote=pre_vote, run_until_ms=14000,
                              faults=(Fault(2000, "isolate-follower"),)))
    outcome = sim.run()
    sim.check_liveness(outcome)
    before = {epoch: n for epoch, n in leader_epochs(sim).items()
              if any(state == "leader" and at < 2000 for at, state, e in sim.history[n] if e == epoch)}
    (epoch_before, leader_before), = before.items()
    cut = min(v for v in sim.voters if v != leader_before)
    cut_epochs = [epoch for at, _, epoch in sim.history[cut] if 2000 <= at < 8000]
    if pre_vote:
        assert max(cut_epochs) == epoch_before and "prospective" in {s for _, s, _ in sim.history[cut]}
        assert outcome.max_epoch == epoch_before and leader_epochs(sim) == {epoch_before: leader_before}
        assert sim.nodes[leader_before].state.name == "leader"
    else:
        assert max(cut_epochs) > epoch_before + 1  # it stood several times while cut off
        assert outcome.max_epoch > epoch_before  # and, back, forced an election
        assert sim.nodes[leader_before].epoch > epoch_before  # the healthy leader of epoch_before stepped down


@pytest.mark.parametrize("directory_ids", [False, True])
def test_a_voter_that_lost_its_disk_helps_elect_a_leader_without_the_committed_log_unless_directory_ids(
        directory_ids):
    """KIP-853's case: one voter falls behind (cut off), the leader commits with the other, which then loses its
    disk and restarts empty; the leader dies. In Kafka 3.7 the empty voter votes for the one behind, and what
    was committed is overwritten. With directory ids the empty disk is not the voter it replaced: nobody is
    elected until the old leader returns, and nothing committed changes."""
    sim = Simulation(Schedule(seed=3, voters=3, heal_at_ms=12000, directory_ids=directory_ids,
                              faults=(Fault(2000, "isolate-follower"), Fault(4000, "wipe-follower"),
                                      Fault(4001, "crash-leader"), Fault(4002, "heal"))))
    if not directory_ids:
        with pytest.raises(InvariantViolation, match="committed"):
            sim.run()
        return
    outcome = sim.run()
    sim.check_liveness(outcome)
    elected = [(at, n) for n, history in sim.history.items() for at, state, _ in history if state == "leader"]
    assert not [at for at, _ in elected if 4001 < at < 12000]  # no leader while the old one was down
