"""The dashboard of a KRaft lab (DESIGN §17) in a real headless Chromium (Debian's, driven by Playwright): the
strip shows the quorum (each voter's Raft state, epoch, log end and lag, the high watermark, the last
election's votes); a kill pressed on the active controller shows the new leader in a higher epoch, and the
history draws the quorum's leadership epochs. Screenshots go to the test's tmp dir."""

from __future__ import annotations

import pytest

from tests.integration.dashboard_support import Dashboard, browser_page, screenshot
from tests.integration.lab_support import ok, status

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WAIT_MS = 60_000


def test_the_quorum_strip_shows_the_new_leader_after_the_active_controller_is_killed(lab_dir, tmp_path):
    ok("up", "--dir", str(lab_dir), "--kraft", "--brokers", "0")
    quorum = status(lab_dir)["quorum"]
    leader, epoch = quorum["leader"], quorum["epoch"]
    dashboard = Dashboard(lab_dir)
    try:
        cluster = dashboard.get("/api/cluster")
        assert cluster["mode"] == "kraft" and cluster["controller"] == {"node": leader, "epoch": epoch}
        assert sorted(v["id"] for v in cluster["quorum"]["voters"]) == [3001, 3002, 3003]
        assert all({"state", "log_end_offset", "lag"} <= set(v) for v in cluster["quorum"]["voters"])
        assert f'<b id="quorum-leader">{leader}</b>' in dashboard.page()  # rendered by the server, before scripts
        with browser_page() as page:
            page.goto(dashboard.url)
            page.wait_for_selector("#live.on")
            page.wait_for_function("l => document.querySelector('#quorum-leader')?.textContent === String(l)",
                                   arg=leader, timeout=WAIT_MS)
            assert page.locator(f'li.voter.is-controller[data-controller="{leader}"]').count() == 1
            assert page.locator("li.voter.raft-follower").count() == 2
            screenshot(page, tmp_path, "1-quorum")

            page.locator(f'li.voter[data-controller="{leader}"] button[data-action="kill"]').click()
            page.wait_for_function(
                "([l, e]) => { const b = document.querySelector('#quorum-leader');"
                " return b && b.textContent !== String(l) &&"
                " Number(document.querySelector('#quorum-epoch').textContent) > e; }",
                arg=[leader, epoch], timeout=WAIT_MS)
            new_leader = int(page.locator("#quorum-leader").inner_text())
            assert new_leader != leader and status(lab_dir)["quorum"]["leader"] == new_leader
            assert page.locator(f'li.voter.state-dead[data-controller="{leader}"]').count() == 1
            page.wait_for_function("() => document.querySelector('#quorum-votes')?.textContent.includes('→')",
                                   timeout=WAIT_MS)
            assert "killed" in page.locator("#message").inner_text().lower()
            screenshot(page, tmp_path, "2-new-leader")

            page.locator('.tabs button[data-view="history"]').click()
            page.wait_for_selector("svg[data-chart='controller'] rect.quorum-epoch", timeout=WAIT_MS)
            bands = page.locator("svg[data-chart='controller'] rect.quorum-epoch").count()
            assert bands >= 2  # the first leader's epoch, then the new one's
            screenshot(page, tmp_path, "3-history")
    finally:
        dashboard.close()
    assert (tmp_path / "2-new-leader.png").stat().st_size > 0
