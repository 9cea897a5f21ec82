"""History as pictures: per partition, leadership bands per leader epoch, ISR membership over time, HW and
log-end lines, acknowledged writes per second and the gaps in them, drawn from the timeline (DESIGN §10
kinds). Jepsen's plots shade the fault periods; so do ours. A pure function of the events."""

from __future__ import annotations

from collections.abc import Iterable

from zkbroker.lab.dashboard.events import broker_of, partition_of
from zkbroker.lab.kraft_lab import quorum_bands

ACK_BUCKET_MS = 1000
ACK_GAP_MS = 1000  # the checker's unavailability window: no acknowledgement for more than a second

# A process fault starts with the first kind and ends with any of the second.
_PROCESS_FAULTS = {"process_killed": ("process_started",), "process_stopped": ("process_started",),
                   "process_paused": ("process_resumed", "process_started")}


def history(events: Iterable[dict], ack_gap_ms: float = ACK_GAP_MS) -> dict:
    """{"start", "end", "controllers": [bands], "quorum": [bands], "faults": [bands], "partitions": [per
    partition]}. `quorum` holds a KRaft lab's leadership epochs ({"start", "end", "node", "epoch"}, from the
    controllers' raft_state events), as `controllers` holds ZooKeeper mode's controller epochs."""
    events = sorted((e for e in events if isinstance(e.get("ts"), (int, float))), key=lambda e: e["ts"])
    if not events:
        return {"start": None, "end": None, "controllers": [], "quorum": [], "faults": [], "partitions": []}
    quorum = quorum_bands(events)
    start, end = events[0]["ts"], events[-1]["ts"]
    per_partition: dict[tuple[str, int], _PartitionHistory] = {}
    controllers: list[dict] = []
    faults: list[dict] = []
    open_faults: dict[tuple, dict] = {}
    open_kinds: dict[str, str] = {}  # node -> the kind that opened its process fault
    for e in events:
        kind = e.get("kind")
        tp = partition_of(e)
        if tp is not None:
            per_partition.setdefault(tp, _PartitionHistory(*tp)).add(e)
        if kind == "controller_elected":
            _close(controllers, e["ts"])
            controllers.append({"start": e["ts"], "end": None, "broker": e.get("broker"), "epoch": e.get("epoch")})
        elif kind == "controller_resigned":
            _close(controllers, e["ts"])
        elif kind in _PROCESS_FAULTS and isinstance(e.get("node"), str):
            if ("process", e["node"]) not in open_faults:
                band = {"start": e["ts"], "end": None, "node": e["node"], "what": f"{e['node']} {kind[8:]}"}
                open_faults[("process", e["node"])] = band
                open_kinds[e["node"]] = kind
                faults.append(band)
        elif ("process", e.get("node")) in open_faults and kind in _PROCESS_FAULTS[open_kinds[e["node"]]]:
            open_faults.pop(("process", e["node"]))["end"] = e["ts"]
        elif kind == "fault_applied":
            key = ("fault", e.get("fault"), e.get("node"), tuple(e.get("peers") or ()))
            band = {"start": e["ts"], "end": None, "node": e.get("node"), "what": _fault_words(e)}
            open_faults[key] = band
            faults.append(band)
        elif kind == "fault_healed":
            key = ("fault", e.get("fault"), e.get("node"), tuple(e.get("peers") or ()))
            if key in open_faults:
                open_faults.pop(key)["end"] = e["ts"]
    return {"start": start, "end": end, "controllers": controllers, "quorum": quorum, "faults": faults,
            "partitions": [per_partition[tp].result(ack_gap_ms) for tp in sorted(per_partition)]}


def _close(bands: list[dict], ts: float) -> None:
    if bands and bands[-1]["end"] is None:
        bands[-1]["end"] = ts


def _fault_words(e: dict) -> str:
    if e.get("fault") == "partition":
        return f"{e.get('node')} cut off from {', '.join(map(str, e.get('peers') or ()))}"
    return str(e.get("fault"))


class _PartitionHistory:
    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self.leadership: list[dict] = []
        self.isr: list[dict] = []
        self.hw: dict[int, list[list[float]]] = {}
        self.log_end: dict[int, list[list[float]]] = {}
        self.acks: list[tuple[float, int]] = []  # (when, how many records)
        self.truncations: list[dict] = []

    def add(self, e: dict) -> None:
        kind, ts = e.get("kind"), e["ts"]
        if kind in ("leader_changed", "isr_changed") and "leader" in e:
            # the controller's writes of the state znode: a new leader, or a new leader epoch for the same one
            leader, epoch = e.get("leader"), e.get("leader_epoch")
            last = self.leadership[-1] if self.leadership else None
            if last is None or (last["leader"], last["leader_epoch"]) != (leader, epoch):
                _close(self.leadership, ts)
                self.leadership.append({"start": ts, "end": None, "leader": leader, "leader_epoch": epoch})
            self._isr(ts, e.get("isr"))
        elif kind == "isr_changed":  # the leader's own ISR write
            self._isr(ts, e.get("isr"))
        elif kind == "hw_moved":
            broker = broker_of(e)
            if broker is not None and isinstance(e.get("to"), int):
                self.hw.setdefault(broker, []).append([ts, e["to"]])
        elif kind == "truncated":
            broker = broker_of(e)
            self.truncations.append({"ts": ts, "broker": broker, "from": e.get("from"), "to": e.get("to"),
                                     "reason": e.get("reason")})
            if broker is not None and isinstance(e.get("to"), int):
                self.log_end.setdefault(broker, []).append([ts, e["to"]])
        elif kind == "produce_acked" and isinstance(e.get("offset"), int):
            last = e["last_offset"] if isinstance(e.get("last_offset"), int) else e["offset"]
            self.acks.append((ts, last - e["offset"] + 1))  # one event per acknowledged batch
            leader = broker_of(e) if str(e.get("source", "")).startswith("broker:") else self._leader_at()
            if leader is not None:
                points = self.log_end.setdefault(leader, [])
                if not points or points[-1][1] < last + 1:
                    points.append([ts, last + 1])  # the leader's log end is at least past it
        if isinstance(e.get("leo"), int) and broker_of(e) is not None and kind != "truncated":
            self.log_end.setdefault(broker_of(e), []).append([ts, e["leo"]])

    def _leader_at(self) -> int | None:
        if self.leadership and isinstance(self.leadership[-1]["leader"], int) and self.leadership[-1]["leader"] >= 0:
            return self.leadership[-1]["leader"]
        return None

    def _isr(self, ts: float, isr: object) -> None:
        if not isinstance(isr, list):
            return
        if self.isr and self.isr[-1]["isr"] == sorted(isr):
            return
        _close(self.isr, ts)
        self.isr.append({"start": ts, "end": None, "isr": sorted(isr)})

    def result(self, ack_gap_ms: float) -> dict:
        buckets: dict[int, int] = {}
        for ts, records in self.acks:
            bucket = int(ts // ACK_BUCKET_MS * ACK_BUCKET_MS)
            buckets[bucket] = buckets.get(bucket, 0) + records
        times = [ts for ts, _ in self.acks]
        gaps = [{"start": a, "end": b} for a, b in zip(times, times[1:]) if b - a > ack_gap_ms]
        no_leader = [{"start": band["start"], "end": band["end"]} for band in self.leadership
                     if band["leader"] is None or band["leader"] < 0]
        members: dict[int, list[list[float | None]]] = {}
        for seg in self.isr:
            for b in seg["isr"]:
                spans = members.setdefault(b, [])
                if spans and spans[-1][1] == seg["start"]:
                    spans[-1][1] = seg["end"]  # still a member: extend the span
                else:
                    spans.append([seg["start"], seg["end"]])
        return {"topic": self.topic, "partition": self.partition, "leadership": self.leadership, "isr": self.isr,
                "isr_members": {str(b): spans for b, spans in sorted(members.items())},
                "hw": {str(b): p for b, p in sorted(self.hw.items())},
                "log_end": {str(b): p for b, p in sorted(self.log_end.items())},
                "acks": [[b, n] for b, n in sorted(buckets.items())], "ack_gaps": gaps, "no_leader": no_leader,
                "truncations": self.truncations}
