"""Driving the dashboard as a user does: `zkbroker lab ui` in a subprocess on a free port, its JSON API over
HTTP, its event stream, and a real headless Chromium (Debian's, driven by Playwright) on its page."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from tests.real_tools import require

ROOT = Path(__file__).resolve().parents[2]
DOCS_ENV = "ZKBROKER_SCREENSHOTS_TO_DOCS"  # set: docs/dashboard.png is refreshed from the browser tests


class Dashboard:
    """A running `zkbroker lab ui`; `url` as it announced itself."""

    def __init__(self, lab_dir: Path, timeout_s: float = 30.0) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "zkbroker", "lab", "ui", "--dir", str(lab_dir), "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = _read_line(self.process, timeout_s)
        assert line.startswith("Dashboard: http://"), f"lab ui said {line!r}: {self.process.stderr.read()}"
        self.url = line.split(" ", 1)[1].strip()
        parts = urlsplit(self.url)
        self.host, self.port = parts.hostname, parts.port

    def request(self, method: str, path: str, body: object = None, headers: dict | None = None,
                timeout_s: float = 90.0) -> tuple[int, dict, object]:
        """(status, headers, JSON body) of one request."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)
        try:
            data = json.dumps(body) if body is not None and not isinstance(body, str) else body
            hdrs = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers={**hdrs, **(headers or {})})
            response = conn.getresponse()
            raw = response.read()
            return response.status, dict(response.getheaders()), json.loads(raw) if raw else None
        finally:
            conn.close()

    def get(self, path: str) -> object:
        status, _, body = self.request("GET", path)
        assert status == 200, f"GET {path}: {status} {body}"
        return body

    def page(self) -> str:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request("GET", "/")
            return conn.getresponse().read().decode()
        finally:
            conn.close()

    def token(self) -> str:
        html = self.page()
        start = html.index('name="lab-token" content="') + len('name="lab-token" content="')
        return html[start:html.index('"', start)]

    def fault(self, body: dict) -> tuple[int, object]:
        status, _, answer = self.request("POST", "/api/faults", body, {"X-Lab-Token": self.token()})
        return status, answer

    @contextlib.contextmanager
    def stream(self, query: str = "") -> Iterator[Iterator[tuple[str | None, dict]]]:
        """The event stream as (event name or None, data) pairs."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        conn.request("GET", "/api/events/stream" + query)
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("Content-Type").startswith("text/event-stream")

        def messages() -> Iterator[tuple[str | None, dict]]:
            name = None
            while True:
                line = response.readline().decode()
                if not line:
                    return
                line = line.rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    yield name, json.loads(line[6:])
                elif not line:
                    name = None
        try:
            yield messages()
        finally:
            conn.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        for stream in (self.process.stdout, self.process.stderr):
            stream.close()


def _read_line(process: subprocess.Popen, timeout_s: float) -> str:
    """The first line of the process's stdout, or fail after timeout_s (the process is then killed)."""
    import selectors

    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if selector.select(0.2):
            return process.stdout.readline()
        if process.poll() is not None:
            return f"(exited {process.returncode})"
    process.kill()
    return "(no line in time)"


def chromium_path() -> str:
    """Debian's Chromium binary (the /usr/bin/chromium wrapper only adds flags around it)."""
    wrapper = require("chromium")
    real = Path("/usr/lib/chromium/chromium")
    return str(real) if real.exists() else wrapper


@contextlib.contextmanager
def browser_page(width: int = 1300, height: int = 900):
    """A page of a real headless Chromium; errors thrown by the page's scripts fail the test at the end."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            yield page
            assert not errors, f"the page's scripts failed: {errors}"
        finally:
            browser.close()


def screenshot(page, tmp_path: Path, name: str, docs_name: str | None = None) -> Path:
    """Save a screenshot under the test's directory; with $ZKBROKER_SCREENSHOTS_TO_DOCS set, the copy in docs/
    too."""
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if docs_name and os.environ.get(DOCS_ENV):
        shutil.copyfile(path, ROOT / "docs" / docs_name)
    return path
