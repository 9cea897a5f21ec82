"""`zkbroker lab ui`: the dashboard's web server (aiohttp). It only moves data: ZooKeeper's truth
(`zookeeper_reader`), the brokers' own views (`broker_state`), the lab's processes and network (cluster.json,
/proc, network.json) and the timeline go through the pure views (`views`, `history`, `replay`) into the JSON
of DESIGN §11, the page and one server-sent event stream.

Cost when nobody looks: none. ZooKeeper, the brokers' control sockets and the timeline file are polled only
while a page holds the event stream open (a snapshot about once a second, sooner after a timeline event),
and every open page shares the same poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from zkbroker import timeline
from zkbroker.client.async_connection import AsyncBrokerConnection
from zkbroker.client.security import ClientSecurity
from zkbroker.lab import kraft_lab
from zkbroker.lab.cluster import ClusterFile, LabCluster, LabError
from zkbroker.lab.dashboard import faults, views
from zkbroker.lab.dashboard.broker_state import query_state
from zkbroker.lab.dashboard.compare import CompareControl, comparable_json
from zkbroker.lab.dashboard.events import matches
from zkbroker.lab.dashboard.history import history
from zkbroker.lab.dashboard.lessons import LessonControl, course_json
from zkbroker.lab.dashboard.page import render_page
from zkbroker.lab.dashboard.replay import snapshot_at
from zkbroker.lab.dashboard.safety import TOKEN_HEADER, host_allowed, new_token, token_ok
from zkbroker.lab.dashboard.scenarios import ScenarioCommandError, ScenarioControl, catalogue_json
from zkbroker.lab.dashboard.snapshot import BrokerBelief, BrokerProcess, ZooKeeperServer, ZooKeeperSnapshot
from zkbroker.lab.dashboard.zookeeper_reader import ZooKeeperReader, ZooKeeperUnreachable
from zkbroker.lab.narration import describe
from zkbroker.lab.network import NetworkError, NetworkState, separated
from zkbroker.lab.processes import process_state
from zkbroker.protocol.api import ApiKey
from zkbroker.protocol.errors import ErrorCode

log = logging.getLogger("zkbroker.lab.dashboard")

STATIC = Path(__file__).parent / "static"
POLL_S = 1.0  # a snapshot this often while a page is open
MIN_SNAPSHOT_GAP_S = 0.1  # and, after a timeline event that may change what the views show, this soon
# Kinds that change nothing the cluster and truth views show (or come by the thousand under load): they go
# to the pages, but do not call for a snapshot.
QUIET_KINDS = frozenset({"produce_appended", "produce_acked", "hw_moved", "leader_and_isr_sent", "fault_fired"})
TAIL_S = 0.05  # the timeline file is looked at this often while a page is open
KEEPALIVE_S = 15.0
MAX_QUEUED = 10_000  # events a slow page may fall behind before it is dropped (it reconnects and resumes)
OFFSETS_TIMEOUT_S = 1.0


@dataclass
class Observed:
    """One moment of the lab as the dashboard saw it, and the views built from it."""

    at: float  # time.monotonic() when it was begun
    zk: ZooKeeperSnapshot
    processes: list[BrokerProcess]
    beliefs: dict[int, BrokerBelief]
    zookeepers: list[ZooKeeperServer]
    cluster: dict
    partitions: list[dict]


class Dashboard:
    """The server's state: the lab it shows, its ZooKeeper reader, the latest snapshot, the open streams."""

    def __init__(self, lab_dir: str | Path, host: str, port: int, token: str | None = None) -> None:
        self.home = Path(lab_dir).resolve()  # the directory it was started on; scenario labs go below it
        self.lab = LabCluster(lab_dir)  # the lab shown: the home one, or a scenario's
        self.host = host
        self.port = port  # the bound port once serving (--port 0 picks a free one)
        self.token = token or new_token()
        self.reader: ZooKeeperReader | None = None
        self._observed: Observed | None = None
        self._refreshing = asyncio.Lock()
        self._subscribers: set[asyncio.Queue] = set()
        self._wake = asyncio.Event()  # a timeline event or a fault: take a snapshot now
        self._tail_offset = 0
        self._tasks: list[asyncio.Task] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.scenarios = ScenarioControl(self.home, self._watch_from_thread)
        self.lessons = LessonControl(self.home, self._watch_from_thread)
        self.compare = CompareControl(self.home)

    # ---- what the lab looks like now -------------------------------------------------------------------

    def _cluster_file(self) -> ClusterFile | None:
        try:
            return self.lab.load()
        except LabError:
            return None

    def _reader_for(self, connect: str) -> ZooKeeperReader:
        if self.reader is None or self.reader.connect != connect:
            if self.reader is not None:
                self.reader.close()
            self.reader = ZooKeeperReader(connect)
            self.reader.start()
        return self.reader

    async def observe(self, max_age_s: float = 0.0) -> Observed:
        """A snapshot begun at most max_age_s before this call (0: begun after it), taken now unless there is
        one; snapshots are taken one at a time, so concurrent callers share them."""
        wanted = time.monotonic() - max_age_s
        if self._observed is not None and self._observed.at >= wanted:
            return self._observed
        async with self._refreshing:
            if self._observed is not None and self._observed.at >= wanted:
                return self._observed
            self._observed = await self._take()
            return self._observed

    async def _take(self) -> Observed:
        began = time.monotonic()
        cluster = self._cluster_file()
        if cluster is None:
            zk = ZooKeeperSnapshot(reachable=False)
            return Observed(began, zk, [], {}, [], views.cluster_view(zk, [], {}, [], lab_running=False), [])
        if cluster.kraft:
            return await self._take_kraft(began, cluster)
        fresh = self.reader is None or self.reader.connect != cluster.zookeeper
        reader = self._reader_for(cluster.zookeeper)
        if fresh:  # give a new client a moment to connect before calling ZooKeeper unreachable
            await asyncio.to_thread(_wait_connected, reader, 2.0)
        zk_task = asyncio.create_task(asyncio.to_thread(reader.snapshot))
        roles_task = asyncio.create_task(asyncio.to_thread(_zookeeper_roles, cluster))
        network = self.lab.network.load()
        processes = self._processes(cluster, network)
        answers = await asyncio.gather(*(query_state(b.control, p.id) for b, p in zip(cluster.brokers, processes)
                                         if p.process == "running"))
        beliefs = {belief.broker: belief for belief in answers if belief is not None}
        zk, zookeepers = await zk_task, await roles_task
        described = None if network is None else [p.describe() for p in network.partitions]
        return Observed(began, zk, processes, beliefs, zookeepers,
                        views.cluster_view(zk, processes, beliefs, zookeepers, described),
                        views.partitions_view(zk, beliefs))

    async def _take_kraft(self, began: float, cluster: ClusterFile) -> Observed:
        """A KRaft lab: the controllers' Raft states from their control sockets, the quorum they make, and the
        last election's votes from the timeline; no ZooKeeper to read."""
        def read() -> tuple[list[dict], list[dict], list[dict]]:
            rows = [kraft_lab.controller_row(entry) for entry in cluster.controllers]
            for entry, row in zip(cluster.controllers, rows):
                row["faults"] = self.lab._faults_in_force(entry)
            leader = kraft_lab.quorum_status(rows)["leader"]
            believed = {b["id"]: b for b in (self.lab._active_controller_view(cluster, leader) or {}).get(
                "brokers", [])}
            brokers = [kraft_lab.broker_row(entry, believed.get(entry.id)) for entry in cluster.brokers]
            return rows, brokers, self.events()
        rows, broker_rows, events = await asyncio.to_thread(read)
        quorum = kraft_lab.quorum_status(rows)
        network = self.lab.network.load()
        cut: dict[str, list[str]] = {}
        if network is not None:
            try:
                cut = separated(network.partitions, network.addresses)
            except NetworkError:
                cut = {}
        described = None if network is None else [p.describe() for p in network.partitions]
        view = views.kraft_cluster_view(quorum, rows, cut, described,
                                        views.last_election_votes(events, quorum["epoch"]),
                                        views.kraft_brokers_view(broker_rows, cut))
        return Observed(began, ZooKeeperSnapshot(reachable=False), [], {}, [], view, [])

    @staticmethod
    def _processes(cluster: ClusterFile, state: NetworkState | None) -> list[BrokerProcess]:
        cut: dict[str, list[str]] = {}
        if state is not None:
            try:
                cut = separated(state.partitions, state.addresses)
            except NetworkError:
                cut = {}
        return [BrokerProcess(b.id, b.host, b.port, b.pid, process_state(b.pid) if b.pid else "dead",
                              tuple(cut.get(f"broker:{b.id}", ()))) for b in cluster.brokers]

    # ---- the timeline ------------------------------------------------------------------------------------

    @property
    def timeline_path(self) -> Path:
        return timeline.path_in(self.lab.dir)

    def events(self) -> list[dict]:
        return timeline.read(self.timeline_path)

    def read_from(self, offset: int) -> tuple[list[tuple[int, dict]], int]:
        """Whole events after byte `offset`: [(the offset after each, event)], and the new offset. A file
        shorter than `offset` (a new lab in the directory) is read from its start."""
        try:
            with open(self.timeline_path, "rb") as f:
                f.seek(0, 2)
                if f.tell() < offset:
                    offset = 0
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return [], 0
        out = []
        end = offset
        for line in data.split(b"\n")[:-1]:
            end += len(line) + 1
            if line.strip():
                try:
                    out.append((end, json.loads(line)))
                except ValueError:
                    continue  # a line no JSON: shown nowhere, never the end of the stream
        return out, end

    # ---- the background work while pages are open --------------------------------------------------------

    @property
    def latest(self) -> Observed | None:
        """The last snapshot taken, if any (not necessarily fresh)."""
        return self._observed

    def wake(self) -> None:
        """Something changed (a fault was applied): take the next snapshot now."""
        self._wake.set()

    def watch(self, directory: str | Path) -> None:
        """Show the lab in `directory` from now on (a scenario's); open pages are told to start afresh."""
        directory = Path(directory).resolve()
        if directory == self.lab.dir:
            return
        self.lab = LabCluster(directory)
        self._observed = None
        self._tail_offset = 0
        self._publish(("lab", json.dumps({"dir": str(directory)}), None))
        self._wake.set()

    def _watch_from_thread(self, directory: Path) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.watch, directory)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._tasks = [asyncio.create_task(self._tail()), asyncio.create_task(self._poll())]

    async def stop(self) -> None:
        for queue in list(self._subscribers):
            queue.put_nowait(None)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.to_thread(self.scenarios.stop)
        await asyncio.to_thread(self.lessons.stop)
        await asyncio.to_thread(self.compare.stop)
        if self.reader is not None:
            await asyncio.to_thread(self.reader.close)

    def _publish(self, item: tuple[str | None, dict | str, int | None]) -> None:
        """To every open stream: (None, an event, its end offset) or (a view's name, its JSON, None)."""
        for queue in list(self._subscribers):
            if queue.qsize() >= MAX_QUEUED:
                self._subscribers.discard(queue)
                queue.put_nowait(None)
            else:
                queue.put_nowait(item)

    async def _tail(self) -> None:
        self._tail_offset = self.read_from(0)[1]
        while True:
            await asyncio.sleep(TAIL_S)
            if not self._subscribers:
                continue
            new, self._tail_offset = self.read_from(self._tail_offset)
            for offset, event in new:
                self._publish((None, event, offset))
            if any(e.get("kind") not in QUIET_KINDS for _, e in new):
                self._wake.set()

    async def _poll(self) -> None:
        last: dict[str, str] = {}
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), POLL_S)
            except TimeoutError:
                pass
            if self._observed is not None:  # a burst of events: snapshots MIN_SNAPSHOT_GAP_S apart, not one each
                await asyncio.sleep(max(0.0, self._observed.at + MIN_SNAPSHOT_GAP_S - time.monotonic()))
            self._wake.clear()
            if not self._subscribers:
                last.clear()
                continue
            try:
                observed = await self.observe()
            except Exception:  # one bad snapshot must not end the live view
                log.exception("Taking a snapshot of the lab failed")
                continue
            for name, value in (("cluster", observed.cluster), ("partitions", observed.partitions)):
                text = json.dumps(value)
                if last.get(name) != text:
                    last[name] = text
                    self._publish((name, text, None))

    def subscribe(self) -> tuple[asyncio.Queue, int]:
        """A queue of what is published from now on, and the timeline offset it starts after."""
        queue: asyncio.Queue = asyncio.Queue()
        self._subscribers.add(queue)
        if len(self._subscribers) == 1:
            self._tail_offset = self.read_from(0)[1]  # the tail slept while nobody looked
        self._wake.set()
        return queue, self._tail_offset

    def unsubscribe(self, queue: asyncio.Queue) -> None:
        self._subscribers.discard(queue)

    # ---- offsets for the topics view ---------------------------------------------------------------------

    async def offsets(self, zk: ZooKeeperSnapshot) -> dict[tuple[str, int], tuple[int | None, int | None]]:
        """(earliest, latest) of every partition from its leader's ListOffsets (latest = the HW)."""
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for p in zk.partitions:
            if p.leader is not None and p.leader in zk.registrations:
                by_leader.setdefault(p.leader, []).append((p.topic, p.partition))
        cluster = self._cluster_file()
        security = cluster.clients.security if cluster is not None else None  # a secured lab's admin
        results = await asyncio.gather(*(_list_offsets(zk.registrations[b].host, zk.registrations[b].port, tps,
                                                       security) for b, tps in by_leader.items()))
        return {k: v for found in results for k, v in found.items()}


def _wait_connected(reader: ZooKeeperReader, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not reader.connected and time.monotonic() < deadline:
        time.sleep(0.02)


def _zookeeper_roles(cluster: ClusterFile) -> list[ZooKeeperServer]:
    from zkbroker.lab.zookeeper import server_role

    out = []
    for z in cluster.zookeepers:
        process = process_state(z.pid) if z.pid is not None else "unknown"
        role = "down" if process in ("dead", "paused") else server_role(z.port, z.host, timeout=1.0)
        out.append(ZooKeeperServer(z.id, z.host, z.port, z.pid, role, process))
    return out


async def _list_offsets(host: str, port: int, tps: list[tuple[str, int]],
                        security: ClientSecurity | None = None) -> dict[tuple[str, int], tuple]:
    conn = AsyncBrokerConnection(host, port, "zkbroker-dashboard", timeout_s=OFFSETS_TIMEOUT_S, security=security)
    topics: dict[str, list[int]] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    out: dict[tuple[str, int], list[int | None]] = {tp: [None, None] for tp in tps}
    try:
        for i, when in enumerate((-2, -1)):  # earliest, latest
            response = await conn.send(ApiKey.LIST_OFFSETS, 0, {"replica_id": -1, "topics": [
                {"topic": t, "partitions": [{"partition": p, "timestamp": when, "max_num_offsets": 1} for p in ps]}
                for t, ps in topics.items()]})
            for t in response.topics:
                for row in t.partitions:
                    if row.error_code == ErrorCode.NONE and row.offsets and (t.topic, row.partition) in out:
                        out[(t.topic, row.partition)][i] = row.offsets[0]
    except (ConnectionError, OSError, TimeoutError):
        pass  # unknown, as the columns say
    finally:
        conn.close()
    return {k: (v[0], v[1]) for k, v in out.items()}


# ---- HTTP ------------------------------------------------------------------------------------------------


def _json(value: Any, status: int = 200) -> web.Response:
    return web.json_response(value, status=status, dumps=json.dumps)


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status)


def _query_float(request: web.Request, name: str) -> float | None:
    value = request.query.get(name)
    if value in (None, ""):
        return None
    try:
        return float(value)
    except ValueError:
        raise web.HTTPBadRequest(reason=f"{name} must be a number (epoch milliseconds), got {value!r}") from None


def _query_int(request: web.Request, name: str) -> int | None:
    value = request.query.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise web.HTTPBadRequest(reason=f"{name} must be an integer, got {value!r}") from None


DASHBOARD = web.AppKey("dashboard", Dashboard)


@web.middleware
async def _guard(request: web.Request, handler) -> web.StreamResponse:
    """403 for a foreign Host header; JSON errors for everything under /api."""
    d = request.app[DASHBOARD]
    if not host_allowed(request.headers.get("Host"), d.host, d.port):
        return _error(403, f"Host {request.headers.get('Host')!r} is not this dashboard's address "
                           f"{d.host}:{d.port} (DNS rebinding is refused)")
    try:
        return await handler(request)
    except web.HTTPException as e:
        if not request.path.startswith("/api") or e.status < 400:
            raise
        message = e.reason if e.status != 405 else f"{request.method} is not allowed on {request.path}"
        return _error(e.status, message if e.status != 404 else f"No such API: {request.method} {request.path}")
    except Exception as e:  # a bug must still answer JSON, and say what happened
        if not request.path.startswith("/api"):
            raise
        log.exception("%s %s failed", request.method, request.path)
        return _error(500, f"{type(e).__name__}: {e}")


async def _index(request: web.Request) -> web.Response:
    d = request.app[DASHBOARD]
    observed = await d.observe(max_age_s=POLL_S)
    response = web.Response(text=render_page(observed.cluster, d.token, str(d.lab.dir)), content_type="text/html")
    response.headers["Content-Security-Policy"] = ("default-src 'self'; img-src 'self' data:; "
                                                   "style-src 'self'; script-src 'self'; frame-ancestors 'none'")
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Cache-Control"] = "no-store"
    return response


async def _cluster(request: web.Request) -> web.Response:
    return _json((await request.app[DASHBOARD].observe()).cluster)


async def _partitions(request: web.Request) -> web.Response:
    return _json((await request.app[DASHBOARD].observe()).partitions)


async def _topics(request: web.Request) -> web.Response:
    d = request.app[DASHBOARD]
    observed = await d.observe()
    return _json(views.topics_view(observed.zk, observed.beliefs, await d.offsets(observed.zk)))


async def _security(request: web.Request) -> web.Response:
    d = request.app[DASHBOARD]
    observed = await d.observe()
    cluster = d._cluster_file()
    return _json(views.security_view(observed.beliefs, cluster.security if cluster is not None else None))


async def _groups(request: web.Request) -> web.Response:
    d = request.app[DASHBOARD]
    observed = await d.observe()
    if d.reader is None or not observed.zk.reachable:
        return _error(503, "ZooKeeper does not answer")
    try:
        groups = await asyncio.to_thread(d.reader.consumer_groups)
    except ZooKeeperUnreachable as e:
        return _error(503, f"ZooKeeper does not answer: {e}")
    offsets = await d.offsets(observed.zk)
    return _json(views.groups_view(groups, {k: v[1] for k, v in offsets.items()}))


async def _zookeeper_node(request: web.Request) -> web.Response:
    d = request.app[DASHBOARD]
    path = request.query.get("path", "/")
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        return _error(400, f"path must be an absolute znode path such as /brokers/ids, got {path!r}")
    await d.observe(max_age_s=5.0)  # makes the reader for the lab's connect string
    if d.reader is None:
        return _error(503, "There is no lab running in this directory")
    try:
        node = await asyncio.to_thread(d.reader.node, path)
    except ZooKeeperUnreachable as e:
        return _error(503, f"ZooKeeper does not answer: {e}")
    if node is None:
        return _error(404, f"No znode {path}")
    return _json(node)


def _with_words(request: web.Request):
    """`words=1` adds each event's plain words (`lab timeline`'s) as a `words` field."""
    if request.query.get("words") in (None, "", "0"):
        return lambda event: event
    return lambda event: {**event, "words": describe(event)}


def _event_filters(request: web.Request) -> dict:
    """`since`, `broker`, `topic`, `partition`, `kind` (comma-separated) and `exclude` (kinds left out)."""
    kinds, exclude = request.query.get("kind"), request.query.get("exclude")
    return {"since": _query_float(request, "since"), "broker": _query_int(request, "broker"),
            "topic": request.query.get("topic") or None, "partition": _query_int(request, "partition"),
            "kinds": frozenset(k for k in kinds.split(",") if k) if kinds else None,
            "exclude": frozenset(k for k in exclude.split(",") if k) if exclude else None}


async def _events(request: web.Request) -> web.Response:
    filters = _event_filters(request)
    events = await asyncio.to_thread(request.app[DASHBOARD].events)
    words = _with_words(request)
    return _json([words(e) for e in events if matches(e, **filters)])


async def _events_stream(request: web.Request) -> web.StreamResponse:
    """The timeline live (SSE): each event as an unnamed message whose id is its end offset in the file
    (a reconnecting EventSource resumes after Last-Event-ID), plus named `cluster` and `partitions` events
    whenever those views change."""
    d = request.app[DASHBOARD]
    filters = _event_filters(request)
    words = _with_words(request)
    try:
        resume = int(request.headers.get("Last-Event-ID", "0"))
    except ValueError:
        resume = 0
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                           "X-Accel-Buffering": "no"})
    await response.prepare(request)
    queue, upto = d.subscribe()
    try:
        backlog, _ = await asyncio.to_thread(d.read_from, resume)
        chunk = [_sse(None, json.dumps(words(e)), end) for end, e in backlog
                 if end <= upto and matches(e, **filters)]
        observed = d.latest
        if observed is not None:
            chunk += [_sse("cluster", json.dumps(observed.cluster)),
                      _sse("partitions", json.dumps(observed.partitions))]
        await response.write("".join(chunk).encode())
        while True:
            try:
                items = [await asyncio.wait_for(queue.get(), KEEPALIVE_S)]
            except TimeoutError:
                await response.write(b": keepalive\n\n")
                continue
            while not queue.empty():  # whatever else is waiting goes in the same write
                items.append(queue.get_nowait())
            out = []
            for item in items:
                if item is None:
                    break
                name, data, end = item
                if name is None:
                    if not matches(data, **filters):
                        continue
                    data = json.dumps(words(data))
                out.append(_sse(name, data, end))
            if out:
                await response.write("".join(out).encode())
            if None in items:
                break
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        d.unsubscribe(queue)
    return response


def _sse(name: str | None, data: str, event_id: int | None = None) -> str:
    return (f"id: {event_id}\n" if event_id is not None else "") + (f"event: {name}\n" if name else "") + \
        f"data: {data}\n\n"


async def _history(request: web.Request) -> web.Response:
    events = await asyncio.to_thread(request.app[DASHBOARD].events)
    return _json(history(events))


async def _replay(request: web.Request) -> web.Response:
    """The cluster and partitions views as the timeline tells them at `at` (epoch ms)."""
    d = request.app[DASHBOARD]
    at = _query_float(request, "at")
    if at is None:
        return _error(400, "replay needs at=<epoch milliseconds>")
    observed = await d.observe(max_age_s=5.0)
    events = await asyncio.to_thread(d.events)
    if observed.cluster.get("mode") == "kraft":
        return _json({"at": at, "cluster": views.kraft_cluster_at(events, at, observed.cluster), "partitions": []})
    assignments = {(p.topic, p.partition): p.replicas for p in observed.zk.partitions}
    state = d.lab.network.load()
    nodes = list(state.addresses) if state else []
    zk, processes, beliefs, zookeepers = snapshot_at(events, at, observed.processes, observed.zookeepers,
                                                     assignments, nodes)
    return _json({"at": at, "cluster": views.cluster_view(zk, processes, beliefs, zookeepers),
                  "partitions": views.partitions_view(zk, beliefs)})


async def _read_json(request: web.Request) -> Any:
    d = request.app[DASHBOARD]
    if not token_ok(request.headers.get(TOKEN_HEADER), d.token):
        raise web.HTTPForbidden(reason=f"A state-changing request needs the page's {TOKEN_HEADER} header")
    if request.content_type != "application/json":
        raise web.HTTPUnsupportedMediaType(reason="Send the request body as application/json")
    try:
        return await request.json()
    except ValueError as e:
        raise web.HTTPBadRequest(reason=f"The body is not JSON: {e}") from None


async def _faults(request: web.Request) -> web.Response:
    d = request.app[DASHBOARD]
    body = await _read_json(request)
    try:
        fault = faults.parse(body)
    except faults.BadFaultRequest as e:
        return _error(400, str(e))
    try:
        message = await asyncio.to_thread(faults.apply, d.lab, fault)
    except LabError as e:
        return _error(409, str(e))
    d.wake()
    return _json({"ok": True, "message": message})


def _add_runner(app: web.Application, path: str, catalogue_path: str, catalogue: Callable[[], Any],
                runner: str) -> None:
    """The same three routes for each runner the page drives (scenarios, lessons, the side-by-side comparison):
    GET `catalogue_path` lists what it can run, GET `path` is its status, POST `path` a command."""
    async def listed(request: web.Request) -> web.Response:
        return _json(await asyncio.to_thread(catalogue))

    async def status(request: web.Request) -> web.Response:
        return _json(await asyncio.to_thread(getattr(request.app[DASHBOARD], runner).status))

    async def command(request: web.Request) -> web.Response:
        body = await _read_json(request)
        try:
            return _json(await asyncio.to_thread(getattr(request.app[DASHBOARD], runner).command, body))
        except ScenarioCommandError as e:
            return _error(e.status, str(e))

    app.router.add_get(catalogue_path, listed)
    app.router.add_get(path, status)
    app.router.add_post(path, command)


def make_app(dashboard: Dashboard) -> web.Application:
    app = web.Application(middlewares=[_guard], client_max_size=64 * 1024)
    app[DASHBOARD] = dashboard
    app.router.add_get("/", _index)
    app.router.add_static("/static/", STATIC, append_version=False)
    app.router.add_get("/api/cluster", _cluster)
    app.router.add_get("/api/partitions", _partitions)
    app.router.add_get("/api/topics", _topics)
    app.router.add_get("/api/groups", _groups)
    app.router.add_get("/api/security", _security)
    app.router.add_get("/api/zookeeper", _zookeeper_node)
    app.router.add_get("/api/events", _events)
    app.router.add_get("/api/events/stream", _events_stream)
    app.router.add_get("/api/history", _history)
    app.router.add_get("/api/replay", _replay)
    app.router.add_post("/api/faults", _faults)
    _add_runner(app, "/api/scenario", "/api/scenarios", catalogue_json, "scenarios")
    _add_runner(app, "/api/compare", "/api/comparable", comparable_json, "compare")
    _add_runner(app, "/api/lesson", "/api/lessons", course_json, "lessons")

    async def started(app: web.Application) -> None:
        dashboard.start()

    async def stopped(app: web.Application) -> None:
        await dashboard.stop()

    app.on_startup.append(started)
    app.on_shutdown.append(stopped)
    return app


async def serve(lab_dir: str | Path, host: str, port: int, announce=print) -> None:
    """Serve until cancelled; `announce` gets the `Dashboard: http://HOST:PORT/` line once connections are
    accepted."""
    dashboard = Dashboard(lab_dir, host, port)
    runner = web.AppRunner(make_app(dashboard), access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    dashboard.port = runner.addresses[0][1]
    shown = f"[{host}]" if ":" in host else host
    announce(f"Dashboard: http://{shown}:{dashboard.port}/")
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):  # SIGTERM ends it as cleanly as Ctrl-C
        loop.add_signal_handler(signal.SIGTERM, stopping.set)
    try:
        await stopping.wait()
    finally:
        await runner.cleanup()
