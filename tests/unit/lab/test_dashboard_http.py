"""The dashboard's HTTP layer without a cluster (a lab directory holding only a timeline): the page, JSON
errors, the Host check, the token on POST, the event list and stream. The same API against a real lab is
tested in tests/integration/test_dashboard_api.py."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp.test_utils import TestClient, TestServer

from zkbroker import timeline
from zkbroker.lab.dashboard.server import Dashboard, make_app

T = 1_795_000_000_000.0


def run(lab_dir, test) -> None:
    async def main() -> None:
        dashboard = Dashboard(lab_dir, "127.0.0.1", 0, token="secret-token")
        server = TestServer(make_app(dashboard), host="127.0.0.1")
        async with TestClient(server) as client:
            dashboard.port = server.port
            await test(client, dashboard)
    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.fixture
def lab_dir(tmp_path):
    path = tmp_path / "lab"
    path.mkdir()
    for i, (kind, fields) in enumerate([("process_started", {"node": "broker:1", "pid": 5}),
                                        ("process_killed", {"node": "broker:1", "pid": 5, "signal": "SIGKILL"}),
                                        ("leader_changed", {"topic": "t", "partition": 0, "leader": 2,
                                                            "leader_epoch": 1, "isr": [2], "zk_version": 1})]):
        (path / timeline.FILE_NAME).open("a").write(timeline.encode("lab", kind, fields, T + i).decode())
    return path


def test_the_page_has_the_strip_and_the_token(lab_dir):
    async def test(client, dashboard):
        r = await client.get("/")
        assert r.status == 200 and r.content_type == "text/html"
        html = await r.text()
        assert 'content="secret-token"' in html and "No lab runs in this directory" in html
        assert "script-src 'self'" in r.headers["Content-Security-Policy"]
        assert (await client.get("/static/dashboard.js")).status == 200
    run(lab_dir, test)


def test_a_foreign_host_header_gets_403(lab_dir):
    async def test(client, dashboard):
        for path in ("/", "/api/cluster"):
            r = await client.get(path, headers={"Host": f"evil.example:{dashboard.port}"})
            assert r.status == 403 and "DNS rebinding" in (await r.json())["error"]
        assert (await client.get("/api/cluster", headers={"Host": f"localhost:{dashboard.port}"})).status == 200
    run(lab_dir, test)


def test_api_errors_are_json(lab_dir):
    async def test(client, dashboard):
        r = await client.get("/api/nothing")
        assert r.status == 404 and (await r.json()) == {"error": "No such API: GET /api/nothing"}
        r = await client.get("/api/faults")
        assert r.status == 405 and (await r.json()) == {"error": "GET is not allowed on /api/faults"}
        r = await client.get("/api/events", params={"since": "yesterday"})
        assert r.status == 400 and "since must be a number" in (await r.json())["error"]
        r = await client.get("/api/replay")
        assert r.status == 400 and "at=" in (await r.json())["error"]
        r = await client.get("/api/zookeeper", params={"path": "brokers"})
        assert r.status == 400
    run(lab_dir, test)


def test_faults_need_post_the_token_and_json(lab_dir):
    async def test(client, dashboard):
        body = json.dumps({"action": "kill", "broker": 1})
        r = await client.post("/api/faults", data=body, headers={"Content-Type": "application/json"})
        assert r.status == 403 and "X-Lab-Token" in (await r.json())["error"]
        token = {"X-Lab-Token": "secret-token"}
        r = await client.post("/api/faults", data=body, headers={**token, "Content-Type": "text/plain"})
        assert r.status == 415
        r = await client.post("/api/faults", data="{kill", headers={**token, "Content-Type": "application/json"})
        assert r.status == 400 and "not JSON" in (await r.json())["error"]
        r = await client.post("/api/faults", json={"action": "explode"}, headers=token)
        assert r.status == 400 and "Unknown action" in (await r.json())["error"]
        r = await client.post("/api/faults", json={"action": "kill", "broker": 1}, headers=token)
        assert r.status == 409 and "No lab cluster" in (await r.json())["error"]  # the lab's own words
    run(lab_dir, test)


def test_events_filtered_and_with_words(lab_dir):
    async def test(client, dashboard):
        events = await (await client.get("/api/events")).json()
        assert [e["kind"] for e in events] == ["process_started", "process_killed", "leader_changed"]
        assert "words" not in events[0]
        since = await (await client.get("/api/events", params={"since": str(T), "words": "1"})).json()
        assert [e["kind"] for e in since] == ["process_killed", "leader_changed"]
        assert since[0]["words"] == "broker:1 killed with SIGKILL (pid 5)"
        assert len(await (await client.get("/api/events", params={"broker": "1"})).json()) == 2
        assert len(await (await client.get("/api/events", params={"topic": "t", "kind": "leader_changed"})).json()) == 1
    run(lab_dir, test)


def test_the_stream_sends_the_backlog_then_new_events(lab_dir):
    async def test(client, dashboard):
        r = await client.get("/api/events/stream")
        assert r.headers["Content-Type"].startswith("text/event-stream")
        seen: list[dict] = []
        ids: list[int] = []
        named: list[str] = []

        async def read_until(count: int, view: str | None = None) -> None:
            name = None
            while len(seen) < count or (view is not None and view not in named):
                line = (await r.content.readline()).decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    (named.append(name) if name else seen.append(json.loads(line[6:])))
                elif line.startswith("id: "):
                    ids.append(int(line[4:]))
                elif not line:
                    name = None
        await asyncio.wait_for(read_until(3), 10)
        timeline.append(timeline.path_in(lab_dir), "lab", "process_started", node="broker:1", pid=6)
        await asyncio.wait_for(read_until(4, "cluster"), 10)
        assert [e["kind"] for e in seen] == ["process_started", "process_killed", "leader_changed", "process_started"]
        assert ids == sorted(ids) and ids[-1] == timeline.path_in(lab_dir).stat().st_size
        assert "cluster" in named  # the views come on the same stream, named
        r.close()
    run(lab_dir, test)


def test_history_and_replay_from_the_timeline(lab_dir):
    async def test(client, dashboard):
        h = await (await client.get("/api/history")).json()
        assert h["faults"][0]["what"] == "broker:1 killed"
        assert h["partitions"][0]["leadership"][0]["leader"] == 2
        replay = await (await client.get("/api/replay", params={"at": str(T + 5)})).json()
        assert replay["at"] == T + 5 and replay["cluster"]["brokers"] == []
        assert replay["partitions"][0]["leader"] == 2
    run(lab_dir, test)
