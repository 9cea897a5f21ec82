"""Pre-Vote (KIP-996) between real controller processes, switched by controller.quorum.pre.vote.enable (Vote v2
on the wire): a voter cut off from its leader (its fetches held by the lab's hold_fetchers) that comes back
unseats a healthy leader without Pre-Vote, as Kafka 3.7 does, and does not with it (DESIGN §17, docs/raft.md)."""

from __future__ import annotations

import pytest

from tests.integration.harness import wait_for
from tests.integration.kraft_support import leader_of, make_quorum
from zkbroker import timeline
from zkbroker.protocol.api import ApiKey

pytestmark = pytest.mark.integration


def _states(events, node: int, state: str, since: int) -> list[dict]:
    """The node's moves into `state` among the timeline's events from index `since` on (the election that started
    the quorum has candidates and prospective voters of its own: they must not count)."""
    return [e for e in timeline.read(events)[since:] if e["kind"] == "raft_state" and e["node"] == node
            and e["state"] == state]


@pytest.mark.parametrize("pre_vote", [False, True], ids=["kraft", "kraft-fixed"])
def test_a_voter_cut_off_from_its_leader_unseats_it_on_return_only_without_pre_vote(tmp_path, monkeypatch, pre_vote):
    events = tmp_path / "timeline.jsonl"
    monkeypatch.setenv(timeline.ENV_VAR, str(events))
    quorum = make_quorum(tmp_path, controller_quorum_pre_vote_enable=str(pre_vote).lower())
    try:
        for controller in quorum:
            controller.start()
        leader, epoch = leader_of(quorum)
        with quorum[0].connection() as conn:  # Pre-Vote is Vote v2's PreVote field: Kafka 3.7 speaks only v0
            versions = conn.send(ApiKey.API_VERSIONS, 3, {"client_software_name": "test",
                                                          "client_software_version": "1"})
        vote = next(k for k in versions.api_keys if k.api_key == ApiKey.VOTE)
        assert vote.max_version == (2 if pre_vote else 0)
        cut_off = next(c for c in quorum if c.id != leader)
        since = len(timeline.read(events))
        with cut_off.control() as client:
            client.fault("hold_fetchers")
        if pre_vote:
            # It loses its leader, asks whether a majority would vote for it, is told no (they still hear from
            # the leader) and follows the leader the answers name again (its only way back while its fetches are
            # held: the pre-votes went out as Vote v2 and were answered); twice over, and the epoch never moves.
            wait_for(lambda: len(_states(events, cut_off.id, "prospective", since)) >= 2, 60,
                     "the cut-off voter to ask for a pre-vote twice")
            assert {(r["leader"], r["epoch"]) for r in (c.raft() for c in quorum)} == {(leader, epoch)}
            assert not _states(events, cut_off.id, "candidate", since)

        else:
            # It stands in the next epoch at once; its Vote request alone takes the leader's epoch away.
            wait_for(lambda: _states(events, cut_off.id, "candidate", since), 60, "the cut-off voter to stand")
        with cut_off.control() as client:
            client.heal("hold_fetchers")
        new_leader, new_epoch = leader_of(quorum, above_epoch=epoch - 1)
        if pre_vote:
            assert (new_leader, new_epoch) == (leader, epoch)
            wait_for(lambda: cut_off.raft()["state"] == "follower", 30, "the cut-off voter to follow again")
        else:
            assert new_epoch > epoch
            left = [e for e in timeline.read(events) if e["kind"] == "raft_state" and e["node"] == leader
                    and e["epoch"] > epoch and e["state"] != "leader"]
            assert left, "the leader of the first epoch never left it"
    finally:
        for controller in quorum:
            controller.cleanup()
