"""GET /: the page, with the cluster strip rendered by the server (DESIGN §11), so that it says who the
controller is before any script runs. The script (static/dashboard.js) re-renders the same strip live from
the same JSON; both follow the markup written here."""

from __future__ import annotations

import time
from html import escape
from importlib import resources

STATE_WORDS = {"running": "running", "paused": "paused", "dead": "dead", "cut-off": "cut off"}


def _clock(ts_ms: int | float | None) -> str:
    if ts_ms is None:
        return "?"
    return time.strftime("%H:%M:%S", time.localtime(ts_ms / 1000))


def render_quorum_strip(cluster: dict) -> str:
    """A KRaft lab's strip: the quorum's leader and epoch, its high watermark, each voter (state, epoch, log end
    and lag, vote) and who voted for whom in the last election."""
    q = cluster["quorum"]
    if q["leader"] is None:
        head = '<span class="controller none">No quorum leader known</span>'
    else:
        head = (f'<span class="controller">Quorum leader: controller <b id="quorum-leader">{q["leader"]}</b></span> '
                f'<span class="epoch">epoch <b id="quorum-epoch">{q["epoch"]}</b></span> '
                f'<span class="hw">high watermark <b id="quorum-hw">'
                f'{"?" if q["high_watermark"] is None else q["high_watermark"]}</b></span>')
    voters = "".join(_voter(v, q["leader"]) for v in q["voters"])
    votes = ", ".join(f'{v["from"]} {"→" if v["granted"] else "✗"} {v["to"]}' for v in q["votes"])
    votes_line = (f'<div class="votes" id="quorum-votes">Votes in epoch {q["epoch"]}: {escape(votes)}</div>'
                  if votes else "")
    return (f'<div class="strip-head">{head}</div>{votes_line}'
            f'<ul class="brokers voters">{voters}</ul>'
            + (f'<ul class="brokers kraft-brokers">{"".join(map(_kraft_broker, cluster["brokers"]))}</ul>'
               if cluster["brokers"] else '<p class="empty">No brokers (--brokers 0): this lab is its quorum.</p>'))


def _kraft_broker(b: dict) -> str:
    """A KRaft broker: its process, whether the active controller has it fenced, the metadata offset it applied."""
    fenced = {True: "fenced", False: "unfenced", None: "not registered"}[b["fenced"]]
    lines = [f'<span class="name">Broker {b["id"]}</span>', f'<span class="state">{escape(str(b["state"]))}</span>',
             f'<span class="lifecycle">{fenced}</span>',
             f'<span class="log-end">metadata offset {"?" if b["metadata_offset"] is None else b["metadata_offset"]}'
             f'</span>']
    if b["cut_off_from"]:
        lines.append(f'<span class="cut">cut off from {escape(", ".join(b["cut_off_from"]))}</span>')
    classes = f'broker kraft-broker state-{escape(str(b["state"]))} {"fenced" if b["fenced"] else ""}'.strip()
    return f'<li class="{classes}" data-broker="{b["id"]}">{"".join(lines)}</li>'


def _voter(v: dict, leader: int | None) -> str:
    classes = ["broker", "voter", f"state-{escape(str(v['process']))}", f"raft-{escape(str(v['state']))}"]
    if v["id"] == leader:
        classes.append("is-controller")
    lag = "" if v["lag"] is None else f', lag {v["lag"]}'
    lines = [f'<span class="name">Controller {v["id"]}</span>'
             + (' <span class="badge">leader</span>' if v["id"] == leader else ""),
             f'<span class="state raft-state">{escape(str(v["state"]))}</span>',
             f'<span class="epoch-seen">epoch {"?" if v["epoch"] is None else v["epoch"]}</span>',
             f'<span class="log-end">log end {"?" if v["log_end_offset"] is None else v["log_end_offset"]}{lag}</span>']
    if v["voted_for"] is not None:
        lines.append(f'<span class="voted">voted for {v["voted_for"]}</span>')
    if v["cut_off_from"]:
        lines.append(f'<span class="cut">cut off from {escape(", ".join(v["cut_off_from"]))}</span>')
    if v["fault_points"]:
        lines.append(f'<span class="cut">fault points: {escape("; ".join(v["fault_points"]))}</span>')
    return f'<li class="{" ".join(classes)}" data-controller="{v["id"]}">{"".join(lines)}</li>'


def render_strip(cluster: dict) -> str:
    """The cluster strip of a /api/cluster view, as HTML."""
    if cluster.get("mode") == "kraft":
        return render_quorum_strip(cluster)
    c = cluster["controller"]
    if not cluster.get("lab_running", True):
        head = ('<span class="controller none">No lab runs in this directory: start one with '
                '<code>zkbroker lab up --dir DIR</code>, or play a scenario</span>')
    elif not cluster["zookeeper_reachable"]:
        head = '<span class="controller unknown">Controller unknown: no ZooKeeper quorum answers</span>'
    elif c["broker"] is None:
        head = (f'<span class="controller none">No controller</span> '
                f'<span class="epoch">/controller_epoch <b id="controller-epoch">{escape(str(c["epoch"]))}</b></span>')
    else:
        head = (f'<span class="controller">/controller: broker <b id="controller-broker">{c["broker"]}</b></span> '
                f'<span class="epoch">/controller_epoch <b id="controller-epoch">{c["epoch"]}</b></span> '
                f'<span class="elected">elected {_clock(c["elected_at"])}</span>')
    zookeepers = "".join(
        f'<li class="zookeeper role-{escape(z["role"])}" data-zookeeper="{z["id"]}">'
        f'<span class="name">ZooKeeper {z["id"]}</span> <span class="role">{escape(z["role"])}</span></li>'
        for z in cluster["zookeepers"])
    brokers = "".join(_broker(b, c["broker"]) for b in cluster["brokers"])
    return (f'<div class="strip-head">{head}</div>'
            f'<ul class="zookeepers">{zookeepers}</ul>'
            f'<ul class="brokers">{brokers}</ul>')


def _broker(b: dict, controller: int | None) -> str:
    classes = ["broker", f"state-{b['state']}"]
    if b["id"] == controller:
        classes.append("is-controller")
    if b["mismatches"]:
        classes.append("mismatch")
    registered = {True: "registered", False: "not registered", None: "registration unknown"}[b["registered"]]
    seen = b["controller_epoch_seen"]
    lines = [f'<span class="name">Broker {b["id"]}</span>'
             + (' <span class="badge">controller</span>' if b["id"] == controller else ""),
             f'<span class="state">{STATE_WORDS.get(b["state"], escape(b["state"]))}</span>',
             f'<span class="registration">{registered}'
             + (f' <code class="session">{escape(b["session"])}</code>' if b["session"] else "") + "</span>",
             f'<span class="epoch-seen">epoch seen {"?" if seen is None else seen}</span>']
    if b["cut_off_from"]:
        lines.append(f'<span class="cut">cut off from {escape(", ".join(b["cut_off_from"]))}</span>')
    if b["zookeeper_connected"] is False:
        lines.append('<span class="cut">its ZooKeeper connection is down</span>')
    if b["fault_points"]:
        lines.append(f'<span class="cut">fault points: {escape("; ".join(b["fault_points"]))}</span>')
    lines += [f'<span class="why">{escape(m["text"])}</span>' for m in b["mismatches"]]
    return f'<li class="{" ".join(classes)}" data-broker="{b["id"]}">{"".join(lines)}</li>'


def render_page(cluster: dict, token: str, lab_dir: str) -> str:
    template = resources.files(__package__).joinpath("static/index.html").read_text()
    return (template.replace("{{strip}}", render_strip(cluster))
            .replace("{{token}}", escape(token))
            .replace("{{lab}}", escape(lab_dir)))
