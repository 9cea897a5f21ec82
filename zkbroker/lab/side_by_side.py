"""One failure on two designs, side by side: a run's timeline aligned at its fault, and the moments that tell the
story (the dead broker declared failed, a new controller, a leadership moved, a partition created and led) as
times after the fault. Pure functions of the timeline (DESIGN §10 and §17 kinds); the dashboard's side-by-side
view and the demo's "why ZooKeeper was removed" chapter both use them, so the two tell the same numbers.

Time 0 is the first fault the lab itself applied (a process killed, paused or stopped, a partition, a fault
point); the events shown end at `until` (the end of the run's last step) or where the lab starts tearing down
(`process_stopped` by the lab after the fault, or `lab_down`)."""

from __future__ import annotations

from collections.abc import Iterable

from zkbroker.lab.narration import describe

BEFORE_MS = 2000.0  # the moments before the fault that are shown: the cluster as it was
FAULT_KINDS = ("process_killed", "process_paused", "process_stopped", "fault_applied")
# What a student follows in either design; the rest (appends, HW samples, metadata commits) would drown it.
STORY_KINDS = frozenset({
    *FAULT_KINDS, "process_started", "process_resumed", "fault_healed",
    "controller_elected", "controller_resigned", "broker_failed", "broker_started", "broker_registered",
    "broker_expired", "broker_fenced", "broker_unfenced", "raft_state", "vote", "leader_changed", "isr_changed",
    "truncated"})
# A KRaft broker follows the metadata log as an observer and reports its Raft states too; only voters lead.
_QUIET_RAFT_STATES = frozenset({"unattached", "follower", "voted"})

# (label, the test an event passes) in the order a story tells them; the first after the fault counts.
MILESTONES = (
    ("broker declared failed", lambda e: e.get("kind") in ("broker_failed", "broker_expired")
     or (e.get("kind") == "broker_fenced" and not e.get("registered"))),
    ("new controller", lambda e: e.get("kind") == "controller_elected"
     or (e.get("kind") == "raft_state" and e.get("state") == "leader")),
    ("leadership moved", lambda e: e.get("kind") == "leader_changed" and e.get("previous_leader") is not None
     and isinstance(e.get("leader"), int) and e["leader"] >= 0),
    ("new partition led", lambda e: e.get("kind") == "leader_changed" and e.get("previous_leader") is None
     and isinstance(e.get("leader"), int) and e["leader"] >= 0),  # a metadata change the new controller made
)


def fault_of(events: list[dict]) -> dict | None:
    """The first fault the lab applied: a process killed, paused or stopped, or a fault applied at run time."""
    for e in events:
        if e.get("source") == "lab" and e.get("kind") in FAULT_KINDS and not e.get("at_start"):
            return e
    return None


def _fault_words(e: dict) -> str:
    node = e.get("node", "?")
    if e.get("kind") == "fault_applied":
        return f"{e.get('fault')} on {node}" if e.get("fault") != "partition" else \
            f"{node} cut off from {', '.join(map(str, e.get('peers') or ()))}"
    return f"{node} {e['kind'].removeprefix('process_')}"


def aligned(events: Iterable[dict], until: float | None = None, before_ms: float = BEFORE_MS) -> dict:
    """{"fault": {"ts", "what"} or None, "events": [{"at": ms after the fault, "kind", "source", "words"}],
    "milestones": [{"label", "at"}]} for one run's timeline, its events from `before_ms` before the fault on.
    Before any fault, times count from the first event and there are no milestones."""
    events = sorted((e for e in events if isinstance(e.get("ts"), (int, float))
                     and (until is None or e["ts"] <= until)), key=lambda e: e["ts"])
    fault = fault_of(events)
    zero = fault["ts"] if fault is not None else (events[0]["ts"] if events else 0.0)
    if fault is not None:  # the lab tearing down ends the run's story
        events = next((events[:i] for i, e in enumerate(events) if e["ts"] > zero and e.get("source") == "lab"
                       and e.get("kind") in ("process_stopped", "lab_down") and e is not fault), events)
    shown: list[dict] = []
    for e in events:
        if e.get("kind") not in STORY_KINDS or (fault is not None and e["ts"] < zero - before_ms):
            continue
        if e.get("kind") == "raft_state" and e.get("state") in _QUIET_RAFT_STATES:
            continue
        if e.get("kind") == "vote" and not e.get("granted"):
            continue
        shown.append({"at": round(e["ts"] - zero, 1), "kind": e["kind"], "source": e.get("source"),
                      "words": describe(e)})
    milestones = []
    if fault is not None:
        after = [e for e in events if e["ts"] >= zero]
        for label, test in MILESTONES:
            first = next((e for e in after if test(e)), None)
            if first is not None:
                milestones.append({"label": label, "at": round(first["ts"] - zero, 1)})
    return {"fault": None if fault is None else {"ts": zero, "what": _fault_words(fault)},
            "events": shown, "milestones": milestones}
