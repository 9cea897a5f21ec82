"""The checker on hand-made histories: it finds each kind of anomaly, names the event that lost a record,
and calls a clean run ok."""

from __future__ import annotations

from zkbroker.lab.checker import Attempt, PartitionState, check
from zkbroker.lab.narration import clock

T0 = 1_795_000_000_000.0


def acked(value: bytes, offset: int, at: float, partition: int = 0) -> Attempt:
    return Attempt("t", partition, value, sent_at=at, acked_at=at + 5, offset=offset)


def failed(value: bytes, at: float, partition: int = 0) -> Attempt:
    return Attempt("t", partition, value, sent_at=at, failed_at=at + 3000, error="REQUEST_TIMED_OUT")


def state(replicas: dict[int, dict[int, bytes]], hw: int, leader: int | None = 1, partition: int = 0):
    return PartitionState("t", partition, hw, leader, replicas)


def test_a_clean_run_is_ok():
    attempts = [acked(b"m0", 0, T0), acked(b"m1", 1, T0 + 10)]
    log = {0: b"m0", 1: b"m1"}
    report = check(attempts, [state({1: log, 2: dict(log)}, hw=2)])
    assert report.verdict() == "ok"
    assert report.as_json() == {"verdict": "ok", "acknowledged": 2, "lost": 0, "duplicated": 0, "divergent": 0,
                                "unavailable_ms_max": 0, "losses": []}


def test_an_acknowledged_record_lost_by_truncation_names_the_truncation():
    # KAFKA-1211: m1 acked at offset 1; broker 2 restarts and truncates to its HW 1, then leads.
    attempts = [acked(b"m0", 0, T0), acked(b"m1", 1, T0 + 10)]
    truncation = {"ts": T0 + 500, "source": "broker:2", "kind": "truncated", "topic": "t", "partition": 0,
                  "from": 2, "to": 1, "reason": "high-watermark truncation on becoming a follower"}
    report = check(attempts, [state({2: {0: b"m0"}, 1: {0: b"m0", 1: b"m1"}}, hw=1, leader=2)], [truncation])
    assert report.verdict() == "lost"
    (loss,) = report.losses
    assert (loss.offset, loss.value) == (1, b"m1")
    assert loss.cause == (f"t-0 offset 1 truncated on broker 2 at {clock(T0 + 500)}: "
                          "high-watermark truncation on becoming a follower")
    assert report.as_json()["losses"] == [{"topic": "t", "partition": 0, "offset": 1, "cause": loss.cause}]


def test_a_loss_by_unclean_election_names_the_leader_that_never_had_it():
    attempts = [acked(b"m0", 0, T0), acked(b"m1", 1, T0 + 10)]
    election = {"ts": T0 + 900, "source": "controller:1", "kind": "leader_changed", "topic": "t", "partition": 0,
                "leader": 3, "leader_epoch": 4, "isr": [3], "zk_version": 7}
    report = check(attempts, [state({3: {0: b"m0"}, 1: {0: b"m0", 1: b"m1"}}, hw=1, leader=3)], [election])
    (loss,) = report.losses
    assert loss.cause == f"t-0 offset 1 was never on broker 3, elected leader at {clock(T0 + 900)} (leader epoch 4)"


def test_a_loss_no_event_explains_says_so():
    report = check([acked(b"m0", 0, T0)], [state({1: {}}, hw=0)])
    assert report.losses[0].cause == "t-0 offset 0: no event in the timeline explains the loss"


def test_a_record_stored_at_another_offset_is_not_lost_and_twice_is_a_duplicate():
    attempts = [acked(b"m0", 0, T0), acked(b"m1", 1, T0 + 10)]
    log = {0: b"m0", 1: b"m1", 2: b"m1"}  # a producer retry wrote m1 again
    report = check(attempts, [state({1: log}, hw=3)])
    assert report.losses == []
    (duplicate,) = report.duplicates
    assert (duplicate.value, duplicate.offsets) == (b"m1", (1, 2))
    assert duplicate.cause == ""  # no produce_appended event says who wrote them
    assert report.verdict() == "duplicated"


def appended(offset: int, last: int, at: float, broker: int, correlation_id: int, connection: str = "c#1") -> dict:
    return {"ts": at, "source": f"broker:{broker}", "kind": "produce_appended", "topic": "t", "partition": 0,
            "offset": offset, "last_offset": last, "client": "rdkafka", "connection": connection,
            "correlation_id": correlation_id}


def test_a_duplicate_two_produce_requests_wrote_is_the_clients_resend():
    # m1 went to broker 1 (request 5), which wrote it, and broker 2 copied it; broker 1 took m2 at offset 2
    # (request 6) and stalled before answering either. The client sent m1 again to broker 2, the new leader,
    # which wrote it at 2 (request 12); broker 1's m2 there was truncated, so it is not offset 2's writer.
    events = [appended(0, 0, T0, 1, 4), appended(1, 1, T0 + 10, 1, 5), appended(2, 2, T0 + 15, 1, 6),
              appended(2, 2, T0 + 3000, 2, 12, connection="c#2")]
    report = check([acked(b"m0", 0, T0), acked(b"m1", 2, T0 + 3000)],
                   [state({2: {0: b"m0", 1: b"m1", 2: b"m1"}}, hw=3, leader=2)], events)
    (duplicate,) = report.duplicates
    assert duplicate.cause == (
        f"sent twice by the client: request 5 of client 'rdkafka' on broker 1 at {clock(T0 + 10)} wrote offset 1, "
        f"request 12 of client 'rdkafka' on broker 2 at {clock(T0 + 3000)} offset 2 (a producer without "
        "idempotence may send a set again when it cannot tell whether the first attempt was written)")
    assert report.verdict() == "duplicated"  # still a duplicate a consumer reads


def test_a_duplicate_one_produce_request_wrote_is_the_brokers():
    events = [appended(0, 2, T0, 1, 4)]
    report = check([acked(b"m0", 0, T0)], [state({1: {0: b"m0", 1: b"m1", 2: b"m1"}}, hw=3)], events)
    (duplicate,) = report.duplicates
    assert duplicate.cause == (f"one produce request wrote it twice (request 4 of client 'rdkafka' on broker 1 at "
                               f"{clock(T0)}): the brokers duplicated it")


def test_an_unacknowledged_record_that_was_stored_is_reported_but_no_anomaly():
    attempts = [acked(b"m0", 0, T0), failed(b"m1", T0 + 10), acked(b"m2", 2, T0 + 20)]
    report = check(attempts, [state({1: {0: b"m0", 1: b"m1", 2: b"m2"}}, hw=3)])
    assert [a.value for a in report.unacknowledged_stored] == [b"m1"]
    assert report.verdict() == "ok"


def test_replicas_that_differ_below_the_hw_diverge_and_above_it_do_not():
    # KIP-101 scenario 2: offsets 1 differ; offset 2 differs too but lies above the HW.
    replicas = {1: {0: b"m0", 1: b"a1", 2: b"a2"}, 2: {0: b"m0", 1: b"b1", 2: b"b2"}}
    report = check([acked(b"m0", 0, T0)], [state(replicas, hw=2)])
    (divergence,) = report.divergences
    assert (divergence.offset, dict(divergence.values)) == (1, {1: b"a1", 2: b"b1"})
    assert report.verdict() == "divergent"


def test_a_gap_between_acknowledgements_with_writes_waiting_is_an_unavailability_window():
    attempts = [acked(b"m0", 0, T0), failed(b"m1", T0 + 100), failed(b"m2", T0 + 200),
                Attempt("t", 0, b"m3", sent_at=T0 + 300, acked_at=T0 + 5300, offset=1),
                acked(b"m4", 2, T0 + 5400)]
    report = check(attempts, [state({1: {0: b"m0", 1: b"m3", 2: b"m4"}}, hw=3)])
    (window,) = report.windows
    assert (window.start, window.end, window.attempts) == (T0 + 100, T0 + 5300, 3)
    assert report.unavailable_ms_max == 5200
    assert report.verdict() == "ok" and report.verdict(max_unavailable_ms=5000) == "unavailable"


def test_short_gaps_are_not_windows():
    attempts = [acked(f"m{i}".encode(), i, T0 + 100 * i) for i in range(10)]
    report = check(attempts, [state({1: {i: f"m{i}".encode() for i in range(10)}}, hw=10)])
    assert report.windows == []


def test_writes_never_acknowledged_again_or_no_leader_is_stuck():
    attempts = [acked(b"m0", 0, T0), failed(b"m1", T0 + 100)]
    report = check(attempts, [state({1: {0: b"m0"}}, hw=1)])
    assert [(w.start, w.end) for w in report.windows] == [(T0 + 100, None)]
    assert report.verdict() == "stuck"
    leaderless = check([acked(b"m0", 0, T0)], [state({1: {0: b"m0"}}, hw=1, leader=None)])
    assert leaderless.losses == [] and leaderless.verdict() == "stuck"


def test_a_stuck_report_says_which_partition_and_since_when():
    report = check([acked(b"m0", 0, T0), failed(b"m1", T0 + 100)], [state({1: {0: b"m0"}}, hw=1)])
    assert report.stuck_reasons() == [f"t-0: 1 writes from {clock(T0 + 100)} never acknowledged"]
    leaderless = check([acked(b"m0", 0, T0)], [state({1: {0: b"m0"}}, hw=1, leader=None)])
    assert leaderless.stuck_reasons() == ["t-0 has no leader at the end"]
    assert check([acked(b"m0", 0, T0)], [state({1: {0: b"m0"}}, hw=1)]).stuck_reasons() == []


def test_the_gravest_anomaly_is_the_verdict():
    attempts = [acked(b"m0", 0, T0), acked(b"m1", 1, T0 + 10)]
    replicas = {1: {0: b"m0", 1: b"xx", 2: b"m0"}, 2: {0: b"m0", 1: b"yy"}}
    report = check(attempts, [state(replicas, hw=3)])
    assert report.losses and report.divergences and report.duplicates
    assert report.verdict() == "lost"


def test_partitions_are_checked_apart():
    attempts = [acked(b"a", 0, T0, partition=0), acked(b"b", 0, T0, partition=1)]
    report = check(attempts, [state({1: {0: b"a"}}, hw=1, partition=0), state({1: {0: b"a"}}, hw=1, partition=1)])
    assert [(loss.partition, loss.value) for loss in report.losses] == [(1, b"b")]


def test_acks_0_records_are_never_answered_so_they_open_no_unavailability_window():
    fire_and_forget = [Attempt("t", 0, b"u%d" % i, sent_at=T0 + i, acks=0) for i in range(3)]
    later = acked(b"m0", 3, T0 + 60_000)
    report = check([*fire_and_forget, later], [state({1: {0: b"u0", 1: b"u1", 2: b"u2", 3: b"m0"}}, hw=4)])
    assert report.windows == [] and report.verdict() == "ok"
    assert [a.value for a in report.unacknowledged_stored] == [b"u0", b"u1", b"u2"]
