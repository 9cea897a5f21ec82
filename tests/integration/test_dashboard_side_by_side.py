"""The dashboard's side-by-side view (issue 26) in a real headless Chromium (Debian's, driven by Playwright):
controller-failover run on a ZooKeeper lab and a KRaft lab together from the Side by side tab; both timelines
are drawn aligned at the kill (time 0) and each names its new controller after it, with each run's verdict. The
screenshot goes to the test's tmp dir."""

from __future__ import annotations

import pytest

from tests.integration.dashboard_support import Dashboard, browser_page, screenshot
from zkbroker.lab.scenario import VERDICTS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WAIT_MS = 200_000  # two labs started and failed over together on a loaded machine


def test_one_controller_failover_on_both_designs_is_drawn_aligned_at_the_kill(lab_dir, tmp_path):
    lab_dir.mkdir()
    dashboard = Dashboard(lab_dir)
    try:
        offered = {c["name"]: c for c in dashboard.get("/api/comparable")}
        assert offered["controller-failover"]["zookeeper_modes"] == ["0.8"]
        assert offered["controller-failover"]["kraft_modes"] == ["kraft"]
        with browser_page(height=1000) as page:
            page.goto(dashboard.url)
            page.wait_for_selector("#live.on")
            page.locator('.tabs button[data-view="compare"]').click()
            page.wait_for_selector('#compare-form select[name=name] option[value="controller-failover"]',
                                   state="attached")
            page.select_option("#compare-form select[name=name]", "controller-failover")
            page.locator("#compare-form button[name=start]").click()
            page.wait_for_function("() => document.querySelector('#compare-state')?.textContent.endsWith('finished')",
                                   timeout=WAIT_MS)
            status = dashboard.get("/api/compare")
            # each run ended with the checker's verdict (what the verdict is belongs to the scenario's own tests)
            assert [(s["design"], s["mode"], s["error"]) for s in status["sides"]] == [
                ("zookeeper", "0.8", None), ("kraft", "kraft", None)]
            assert all(s["verdict"] in VERDICTS for s in status["sides"])
            for side in status["sides"]:
                killed = "broker:" if side["design"] == "zookeeper" else "controller:"
                assert side["fault"]["what"].startswith(killed) and side["fault"]["what"].endswith("killed")
                elected = {m["label"]: m["at"] for m in side["milestones"]}
                assert elected["new controller"] > 0  # after the kill, on the common time axis

                lane = page.locator(f'svg[data-chart="compare"] g.lane[data-design="{side["design"]}"]')
                milestone = lane.locator('g.milestone[data-label="new controller"]')
                assert float(milestone.get_attribute("data-at")) == elected["new controller"]
                cell = page.locator(f'#compare-milestones tr[data-milestone="new controller"] '
                                    f'td[data-design="{side["design"]}"]')
                assert cell.inner_text() == f'{elected["new controller"] / 1000:.1f} s'
                verdict = page.locator(f'.compare-side[data-design="{side["design"]}"] b[data-verdict]')
                assert verdict.inner_text() == side["verdict"]
            assert page.locator('svg[data-chart="compare"] line.fault-line').count() == 1
            screenshot(page, tmp_path, "side-by-side")
    finally:
        dashboard.close()
    assert (tmp_path / "side-by-side.png").stat().st_size > 0
