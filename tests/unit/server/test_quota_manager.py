"""Client quotas as Kafka's ClientQuotaManager computes them: the precedence of the quota znodes, usage counted
per quota entity, the rate over its samples and the throttle time that brings it back to the bound."""

import pytest

from zkbroker.server.quota_manager import DEFAULT, PRODUCE, ClientQuotaManager, Rate, find_quota

Q = PRODUCE


@pytest.mark.parametrize(("configs", "expected"), [
    ({("alice", "app"): {Q: "1"}, ("alice", None): {Q: "3"}}, (("alice", "app"), 1.0)),
    ({("alice", DEFAULT): {Q: "2"}, ("alice", None): {Q: "3"}}, (("alice", "app"), 2.0)),
    ({("alice", None): {Q: "3"}, (DEFAULT, "app"): {Q: "4"}}, (("alice", None), 3.0)),
    ({(DEFAULT, "app"): {Q: "4"}, (DEFAULT, DEFAULT): {Q: "5"}}, (("alice", "app"), 4.0)),
    ({(DEFAULT, DEFAULT): {Q: "5"}, (DEFAULT, None): {Q: "6"}}, (("alice", "app"), 5.0)),
    ({(DEFAULT, None): {Q: "6"}, (None, "app"): {Q: "7"}}, (("alice", None), 6.0)),
    ({(None, "app"): {Q: "7"}, (None, DEFAULT): {Q: "8"}}, ((None, "app"), 7.0)),
    ({(None, DEFAULT): {Q: "8"}}, ((None, "app"), 8.0)),
    ({("bob", None): {Q: "9"}, ("alice", None): {"consumer_byte_rate": "1"}}, None),
])
def test_kafkas_precedence_and_the_entity_usage_is_counted_for(configs, expected):
    assert find_quota(configs, Q, "alice", "app") == expected


def test_the_rate_spans_at_least_all_samples_but_one():
    rate = Rate(samples=11, window_s=1.0)
    rate.record(1000, now=0.0)
    # 1000 bytes over 10.5 s: the 0.5 s elapsed plus the 10 full windows missing (Kafka's Rate.windowSize)
    assert rate.measure(now=0.5) == pytest.approx(1000 / 10.5)
    for t in range(1, 21):
        rate.record(1000, now=float(t))
    assert rate.measure(now=20.5) == pytest.approx(11000 / 10.5)  # old samples dropped


def test_a_rate_above_the_bound_is_throttled_for_the_time_that_brings_it_back():
    manager = ClientQuotaManager(PRODUCE, samples=2, window_s=1.0)
    manager.update({("alice", None): {PRODUCE: "1000"}})
    assert manager.record("alice", "app", 500, now=0.0) == 0
    # 3000 bytes over 1.5 s (0.5 s elapsed plus the one missing full window): 2000 B/s, twice the bound,
    # throttled (2000-1000)/1000 * 1.5 s
    assert manager.record("alice", "app", 2500, now=0.5) == 1500
    assert manager.record("bob", "app", 10**6, now=0.5) == 0  # no quota for bob


def test_usage_reports_each_entitys_bound_measured_rate_and_last_throttle():
    manager = ClientQuotaManager(PRODUCE, samples=2, window_s=1.0)
    manager.update({("alice", None): {PRODUCE: "1000"}})
    manager.record("alice", "app", 500, now=0.0)
    assert manager.usage(now=0.5) == [{"quota": PRODUCE, "user": "alice", "client_id": None, "bound": 1000.0,
                                       "rate": 333.333, "throttle_ms": 0, "throttled_s_ago": None}]
    manager.record("alice", "app", 2500, now=0.5)
    [row] = manager.usage(now=1.0)
    assert (row["rate"], row["throttle_ms"], row["throttled_s_ago"]) == (3000.0, 1500, 0.5)
