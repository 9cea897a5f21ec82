"""The dashboard's views as pure functions: snapshots in (`snapshot.py`), the JSON of DESIGN §11 out.

The mismatch rules live here, one function each for a broker and for a replica: every place where a
broker's own view disagrees with ZooKeeper's truth is reported with the words a student needs, and the
incident it recalls (a missed re-registration, a zombie controller or leader, a stuck ISR).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from zkbroker import fault_points
from zkbroker.lab.dashboard.snapshot import (
    BrokerBelief,
    BrokerProcess,
    PartitionTruth,
    ReplicaBelief,
    ZooKeeperServer,
    ZooKeeperSnapshot,
    session_text,
)
from zkbroker.lab.kraft_lab import quorum_status

NO_LEADER = -1


def mismatch(kind: str, text: str, broker: int | None = None) -> dict:
    return {"kind": kind, "broker": broker, "text": text}


# ---- the cluster strip: GET /api/cluster ------------------------------------------------------------------


def broker_state(process: BrokerProcess) -> str:
    """running, paused, dead or cut-off (running, but a partition in force separates it from some node)."""
    if process.process != "running":
        return process.process
    return "cut-off" if process.cut_off_from else "running"


def broker_mismatches(zk: ZooKeeperSnapshot, process: BrokerProcess, belief: BrokerBelief | None) -> list[dict]:
    """Where the broker's process or its own view disagrees with its registration and the controller."""
    b = process.id
    out = []
    if not zk.reachable:
        return out
    registration = zk.registrations.get(b)
    if registration is None and process.process == "running":
        out.append(mismatch("not_registered", f"Broker {b} runs, but /brokers/ids/{b} is gone: the controller "
                            "counts it dead (its session expired and it has not registered again)", b))
    if registration is not None and process.process == "dead":
        out.append(mismatch("lingering_registration", f"Broker {b} is dead, but /brokers/ids/{b} stays until "
                            f"its session {session_text(registration.session)} times out", b))
    if belief is None:
        return out
    if (registration is not None and belief.session is not None and belief.session != registration.session):
        out.append(mismatch("registration_session", f"/brokers/ids/{b} belongs to session "
                            f"{session_text(registration.session)}, but broker {b}'s session is "
                            f"{session_text(belief.session)} (a lingering ephemeral node, KAFKA-7165)", b))
    if (zk.controller_epoch is not None and belief.controller_epoch is not None
            and belief.controller_epoch < zk.controller_epoch):
        out.append(mismatch("stale_controller_epoch", f"Broker {b} last heard controller epoch "
                            f"{belief.controller_epoch}; /controller_epoch is {zk.controller_epoch}", b))
    if belief.is_controller and zk.controller != b:
        named = f"names broker {zk.controller}" if zk.controller is not None else "is empty"
        out.append(mismatch("zombie_controller", f"Broker {b} still acts as controller, but /controller {named} "
                            "(a zombie controller, KAFKA-6082)", b))
    return out


def cluster_view(zk: ZooKeeperSnapshot, processes: Iterable[BrokerProcess], beliefs: Mapping[int, BrokerBelief],
                 zookeepers: Iterable[ZooKeeperServer], network: list[str] | None = None,
                 lab_running: bool = True) -> dict:
    """GET /api/cluster (DESIGN §11), with the extra fields the strip shows. `network` is None without a
    lab network, else the partitions in force, described; `lab_running` false when the directory holds no
    lab (no cluster.json)."""
    brokers = []
    for p in processes:
        registration = zk.registrations.get(p.id)
        belief = beliefs.get(p.id)
        brokers.append({
            "id": p.id, "host": p.host, "port": p.port, "pid": p.pid, "state": broker_state(p),
            "registered": (registration is not None) if zk.reachable else None,
            "session": session_text(registration.session) if registration else None,
            "registered_at": registration.registered_at if registration else None,
            "controller_epoch_seen": belief.controller_epoch if belief else None,
            "own_session": session_text(belief.session) if belief else None,
            "zookeeper_connected": belief.zookeeper_connected if belief else None,
            "fault_points": [fault_points.describe(f) for f in belief.faults] if belief else [],
            "answered": belief is not None,
            "cut_off_from": list(p.cut_off_from),
            "mismatches": broker_mismatches(zk, p, belief),
        })
    return {
        "controller": {"broker": zk.controller, "epoch": zk.controller_epoch,
                       "elected_at": zk.controller_elected_at, "epoch_zk_version": zk.controller_epoch_zk_version},
        "zookeeper_reachable": zk.reachable,
        "lab_running": lab_running,
        "network": None if network is None else {"partitions": list(network)},
        "brokers": brokers,
        "zookeepers": [{"id": z.id, "host": z.host, "port": z.port, "pid": z.pid, "role": z.role, "process": z.process}
                       for z in zookeepers],
    }


def last_election_votes(events: Iterable[dict], epoch: int | None) -> list[dict]:
    """Who voted for whom in the election of `epoch` (the timeline's `vote` events, DESIGN §17): the latest
    answer of each voter to each candidate."""
    if epoch is None:
        return []
    votes: dict[tuple, dict] = {}
    for e in events:
        if e.get("kind") == "vote" and e.get("epoch") == epoch:
            votes[(e.get("from"), e.get("to"))] = {"from": e.get("from"), "to": e.get("to"), "epoch": epoch,
                                                   "granted": bool(e.get("granted"))}
    return [votes[k] for k in sorted(votes, key=lambda k: (str(k[0]), str(k[1])))]


def kraft_cluster_view(quorum: dict, rows: list[dict], cut_off: Mapping[str, list[str]],
                       network: list[str] | None, votes: list[dict], brokers: list[dict] | None = None) -> dict:
    """GET /api/cluster of a KRaft lab (DESIGN §17): the quorum (each voter's state, epoch, log end and lag,
    the high watermark, the last election's votes) instead of ZooKeeper's /controller. `quorum` and `rows` are
    kraft_lab.quorum_status's and controller_row's; `cut_off`: node -> the nodes a partition separates it from."""
    by_id = {r["id"]: r for r in rows}
    voters = []
    for v in quorum["voters"]:
        row = by_id.get(v["id"], {})
        raft = row.get("raft") or {}
        process = row.get("process", "dead")
        cut = list(cut_off.get(f"controller:{v['id']}", ()))
        voters.append({**v, "process": process, "pid": row.get("pid"), "host": row.get("host"),
                       "port": row.get("port"), "cut_off_from": cut,
                       "fault_points": [fault_points.describe(f) for f in row.get("faults") or []],
                       "log_start_offset": raft.get("log_start_offset")})
    return {
        "mode": "kraft",
        "controller": {"node": quorum["leader"], "epoch": quorum["epoch"]},
        "quorum": {"leader": quorum["leader"], "epoch": quorum["epoch"],
                   "high_watermark": quorum["high_watermark"], "voters": voters,
                   "observers": quorum.get("observers", []), "votes": votes},
        "zookeeper_reachable": True,
        "lab_running": True,
        "network": None if network is None else {"partitions": list(network)},
        "brokers": brokers or [],
        "zookeepers": [],
    }


def kraft_brokers_view(rows: list[dict], cut_off: Mapping[str, list[str]]) -> list[dict]:
    """A KRaft lab's brokers in GET /api/cluster (DESIGN §17): each one's process state (cut-off when a partition
    separates it), whether the active controller has it fenced, and the metadata offset it has applied (beside
    the one the active controller saw in its last heartbeat). `rows`: kraft_lab.broker_row's."""
    out = []
    for r in rows:
        cut = list(cut_off.get(f"broker:{r['id']}", ()))
        state = "cut-off" if cut and r["process"] == "running" else r["process"]
        out.append({"id": r["id"], "host": r["host"], "port": r["port"], "pid": r["pid"], "state": state,
                    "fenced": r["fenced"], "metadata_offset": r["metadata_offset"],
                    "controller_metadata_offset": r["controller_metadata_offset"], "broker_epoch": r["broker_epoch"],
                    "cut_off_from": cut})
    return out


def kraft_cluster_at(events: Iterable[dict], at: float, now: dict) -> dict:
    """A KRaft lab's strip as the timeline tells it at `at` (epoch ms): each controller's last raft_state before
    then, and whether it was killed, paused or stopped; the voters are those of `now` (the live view)."""
    last: dict[int, dict] = {}
    process: dict[int, str] = {}
    for e in events:
        if not isinstance(e.get("ts"), (int, float)) or e["ts"] > at:
            continue
        if e.get("kind") == "raft_state":
            last[e.get("node")] = e
        node = e.get("node")
        if isinstance(node, str) and node.startswith("controller:") and node[11:].isdigit():
            word = {"process_killed": "dead", "process_stopped": "dead", "process_paused": "paused",
                    "process_resumed": "running", "process_started": "running"}.get(e.get("kind"))
            if word:
                process[int(node[11:])] = word
    rows = []
    for v in now["quorum"]["voters"]:
        e = last.get(v["id"])
        state = process.get(v["id"], "running")
        raft = None if e is None or state != "running" else {
            "state": e.get("state"), "epoch": e.get("epoch"), "leader": e.get("leader"),
            "voted_for": e.get("voted_for"), "log_end_offset": None, "high_watermark": None, "log_start_offset": None}
        rows.append({"id": v["id"], "host": v.get("host"), "port": v.get("port"), "pid": v.get("pid"),
                     "process": state, "raft": raft})
    quorum = quorum_status(rows)
    return kraft_cluster_view(quorum, rows, {}, None, last_election_votes(
        (e for e in events if isinstance(e.get("ts"), (int, float)) and e["ts"] <= at), quorum["epoch"]),
        kraft_brokers_at(events, at, now.get("brokers") or []))


def kraft_brokers_at(events: Iterable[dict], at: float, now: list[dict]) -> list[dict]:
    """A KRaft lab's brokers as the timeline tells them at `at`: each one's process faults, the fencing the
    active controller last committed for it (its `broker_fenced` / `broker_unfenced`, source controller:ID) and
    the metadata offset it last applied (`metadata_applied`). The brokers are those of `now` (the live view)."""
    process: dict[int, str] = {}
    fenced: dict[int, bool] = {}
    applied: dict[int, int] = {}
    for e in events:
        if not isinstance(e.get("ts"), (int, float)) or e["ts"] > at:
            continue
        kind, node = e.get("kind"), e.get("node")
        if isinstance(node, str) and node.startswith("broker:") and node[7:].isdigit():
            word = {"process_killed": "dead", "process_stopped": "dead", "process_paused": "paused",
                    "process_resumed": "running", "process_started": "running"}.get(kind)
            if word:
                process[int(node[7:])] = word
        if kind in ("broker_fenced", "broker_unfenced") and str(e.get("source", "")).startswith("controller:"):
            fenced[e.get("broker")] = kind == "broker_fenced"
        elif kind == "metadata_applied" and isinstance(e.get("offset"), int):
            applied[e.get("broker")] = e["offset"]
    return [{**b, "state": process.get(b["id"], "running"), "fenced": fenced.get(b["id"]),
             "metadata_offset": applied.get(b["id"]), "controller_metadata_offset": None, "cut_off_from": []}
            for b in now]


# ---- truth beside the caches: GET /api/partitions --------------------------------------------------------


def replica_mismatches(truth: PartitionTruth, broker: int, belief: ReplicaBelief) -> list[dict]:
    """Where one replica's view of a partition disagrees with its state znode."""
    out = []
    tp = f"[{truth.topic},{truth.partition}]"
    if truth.leader is None:
        return out
    if belief.leader_epoch is not None and truth.leader_epoch is not None and belief.leader_epoch < truth.leader_epoch:
        out.append(mismatch("stale_leader_epoch", f"Broker {broker} applied leader epoch {belief.leader_epoch} "
                            f"for {tp}; the state znode is at epoch {truth.leader_epoch} (a LeaderAndIsr it "
                            "never got)", broker))
    if belief.leader is not None and belief.leader != truth.leader:
        if belief.leader == broker:
            text = (f"Broker {broker} still believes it leads {tp}; ZooKeeper names "
                    + (f"broker {truth.leader}" if truth.leader != NO_LEADER else "no leader"))
            out.append(mismatch("zombie_leader", text, broker))
        else:
            out.append(mismatch("wrong_leader", f"Broker {broker} follows broker {belief.leader} for {tp}; "
                                f"ZooKeeper names {_leader_words(truth.leader)}", broker))
    if belief.metadata_leader is not None and belief.metadata_leader != truth.leader:
        out.append(mismatch("metadata_leader", f"Broker {broker}'s metadata cache tells clients "
                            f"{_leader_words(belief.metadata_leader)} leads {tp}; ZooKeeper names "
                            f"{_leader_words(truth.leader)}", broker))
    if broker == truth.leader and belief.leader == broker:
        if belief.zk_version is not None and truth.zk_version is not None and belief.zk_version != truth.zk_version:
            out.append(mismatch("cached_zk_version", f"Cached zkVersion [{belief.zk_version}] not equal to that in "
                                f"zookeeper ({truth.zk_version}): leader {broker} cannot change {tp}'s ISR "
                                "(a stuck ISR, KAFKA-2729)", broker))
        if belief.isr is not None and tuple(sorted(belief.isr)) != tuple(sorted(truth.isr)):
            out.append(mismatch("isr_differs", f"Leader {broker} holds ISR {_ids(belief.isr)} for {tp}; the state "
                                f"znode says {_ids(truth.isr)}", broker))
    return out


def _leader_words(leader: int | None) -> str:
    return "no leader" if leader in (None, NO_LEADER) else f"broker {leader}"


def _ids(ids: Iterable[int]) -> str:
    return ",".join(map(str, ids)) or "none"


def partitions_view(zk: ZooKeeperSnapshot, beliefs: Mapping[int, BrokerBelief]) -> list[dict]:
    """GET /api/partitions (DESIGN §11): each state znode beside what each assigned replica believes."""
    out = []
    for truth in sorted(zk.partitions, key=lambda t: (t.topic, t.partition)):
        replicas = []
        mismatches: list[dict] = []
        for broker in truth.replicas:
            belief = beliefs.get(broker)
            replica = belief.replica(truth.topic, truth.partition) if belief else None
            found = replica_mismatches(truth, broker, replica) if replica else []
            mismatches += found
            replicas.append({
                "broker": broker, "answered": belief is not None,
                "believes_leader": replica.leader if replica else None,
                "leader_epoch": replica.leader_epoch if replica else None,
                "isr": list(replica.isr) if replica and replica.isr is not None else None,
                "zk_version": replica.zk_version if replica else None,
                "metadata_leader": replica.metadata_leader if replica else None,
                "hw": replica.hw if replica else None, "leo": replica.leo if replica else None,
                "mismatch": [m["kind"] for m in found],
            })
        out.append({"topic": truth.topic, "partition": truth.partition, "leader": truth.leader,
                    "leader_epoch": truth.leader_epoch, "isr": list(truth.isr), "zk_version": truth.zk_version,
                    "controller_epoch": truth.controller_epoch, "assigned": list(truth.replicas),
                    "replicas": replicas, "mismatches": mismatches})
    return out


# ---- topics and groups: GET /api/topics, GET /api/groups ----------------------------------------------------


def topics_view(zk: ZooKeeperSnapshot, beliefs: Mapping[int, BrokerBelief],
                offsets: Mapping[tuple[str, int], tuple[int | None, int | None]] | None = None) -> dict:
    """The columns Kafka's UIs use per partition, per topic its config overrides (what a live AlterConfigs
    changed), and per broker what it hosts (Kafdrop, CMAK, Redpanda Console #210). `offsets` are (earliest,
    latest) from ListOffsets to each leader, where known; the leader's own `state` answer (log start, HW, LEO)
    wins over them."""
    offsets = offsets or {}
    registered = set(zk.registrations)
    rows = []
    hosted: dict[int, dict] = {}
    for truth in sorted(zk.partitions, key=lambda t: (t.topic, t.partition)):
        leader = truth.leader
        offline = leader in (None, NO_LEADER) or (zk.reachable and leader not in registered)
        under = len(truth.isr) < len(truth.replicas)
        preferred = truth.replicas[0] if truth.replicas else None
        belief = beliefs.get(leader) if leader not in (None, NO_LEADER) else None
        replica = belief.replica(truth.topic, truth.partition) if belief else None
        earliest, latest = offsets.get((truth.topic, truth.partition), (None, None))
        rows.append({
            "topic": truth.topic, "partition": truth.partition, "leader": leader,
            "leader_epoch": truth.leader_epoch, "replicas": list(truth.replicas), "isr": list(truth.isr),
            "preferred_leader": preferred, "leader_is_preferred": leader == preferred,
            "under_replicated": under, "offline": offline,
            "offline_replicas": [r for r in truth.replicas if zk.reachable and r not in registered],
            "log_start": replica.log_start if replica and replica.log_start is not None else earliest,
            "log_end": replica.leo if replica else None,
            "hw": replica.hw if replica and replica.hw is not None else latest,
            "lso": replica.lso if replica else None,
            "open_transactions": replica.open_transactions if replica else None,
        })
        for r in truth.replicas:
            row = hosted.setdefault(r, {"broker": r, "replicas": 0, "leaders": 0, "under_replicated": 0,
                                        "out_of_isr": 0, "registered": r in registered if zk.reachable else None})
            row["replicas"] += 1
            row["leaders"] += leader == r
            row["under_replicated"] += under
            row["out_of_isr"] += r not in truth.isr
    topics = sorted({t.topic for t in zk.partitions} | set(zk.topic_configs))
    configs = [{"topic": t, "overrides": dict(sorted(zk.topic_configs.get(t, {}).items()))} for t in topics]
    return {"partitions": rows, "topics": configs, "brokers": [hosted[b] for b in sorted(hosted)]}


def groups_view(groups: Mapping[str, Mapping], log_ends: Mapping[tuple[str, int], int | None]) -> list[dict]:
    """ZooKeeper consumer groups (`/consumers/G`): members, and per partition owner, offset, log end, lag.

    `groups` is {group: {"members": {id: registration dict}, "owners": {(t, p): owner},
    "offsets": {(t, p): offset}}}; `log_ends` the high watermark per partition (what a consumer can reach)."""
    out = []
    for name in sorted(groups):
        g = groups[name]
        keys = sorted(set(g.get("owners", {})) | set(g.get("offsets", {})))
        partitions = []
        for topic, partition in keys:
            offset = g.get("offsets", {}).get((topic, partition))
            end = log_ends.get((topic, partition))
            partitions.append({"topic": topic, "partition": partition,
                               "owner": g.get("owners", {}).get((topic, partition)), "offset": offset,
                               "log_end": end,
                               "lag": end - offset if end is not None and offset is not None else None})
        members = [{"id": cid, **reg} for cid, reg in sorted(g.get("members", {}).items())]
        out.append({"group": name, "kind": "zookeeper", "members": members, "partitions": partitions,
                    "lag": sum(p["lag"] for p in partitions if p["lag"] is not None)})
    return out


THROTTLED_RECENTLY_S = 10.0  # a throttle this recent shows as in force


def security_view(beliefs: Mapping[int, BrokerBelief], security: Mapping | None) -> dict:
    """Who is connected as whom, per broker and listener (each broker's open connections, DESIGN §19's
    principals: User:ANONYMOUS until a SASL exchange completes, a certificate's subject over SSL), and each quota
    entity in use with its bound, the rate the broker measures and its last throttle (KIP-219). `security` is
    cluster.json's block (None: a plaintext lab)."""
    connections = [{"broker": broker, "listener": c.get("listener"), "security_protocol": c.get("security_protocol"),
                    "principal": c.get("principal"), "authenticated": c.get("authenticated"),
                    "client_id": c.get("client_id"), "address": c.get("address")}
                   for broker, belief in sorted(beliefs.items()) for c in belief.connections]
    connections.sort(key=lambda c: (c["broker"], str(c["listener"]), str(c["principal"]), str(c["address"])))
    quotas = []
    for broker, belief in sorted(beliefs.items()):
        for q in belief.quotas:
            ago = q.get("throttled_s_ago")
            quotas.append({"broker": broker, **{k: q.get(k) for k in ("quota", "user", "client_id", "bound", "rate",
                                                                       "throttle_ms", "throttled_s_ago")},
                           "throttled": isinstance(ago, (int, float)) and ago <= THROTTLED_RECENTLY_S
                           and bool(q.get("throttle_ms"))})
    principals: dict[str, int] = {}
    for c in connections:
        principals[c["principal"]] = principals.get(c["principal"], 0) + 1
    return {"protocol": (security or {}).get("protocol", "PLAINTEXT"),
            "mechanisms": list((security or {}).get("mechanisms") or ()),
            "principals": [{"principal": p, "connections": n} for p, n in sorted(principals.items())],
            "connections": connections, "quotas": quotas}
