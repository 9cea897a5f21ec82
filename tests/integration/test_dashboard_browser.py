"""The dashboard in a real headless Chromium (Debian's, driven by Playwright) on a real lab: the page names
the controller ZooKeeper names; a kill pressed on the controller shows the new controller and the next
epoch; a broker cut off from ZooKeeper is highlighted beside ZooKeeper's truth; a scenario is stepped
through with predictions. Each test saves screenshots in its tmp dir (with $ZKBROKER_SCREENSHOTS_TO_DOCS set,
docs/dashboard.png too)."""

from __future__ import annotations

import os

import pytest

from tests.integration.admin_support import tool
from tests.integration.dashboard_support import Dashboard, browser_page, screenshot
from tests.integration.harness import ZkView, wait_for
from tests.integration.lab_support import cluster_json, lab, ok, partitions, status
from zkbroker.zk.znodes import ControllerRegistration, decode_controller_epoch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WAIT_MS = 60_000  # what the page may take to show a change (a session expiry and an election included)


def zookeeper_controller(lab_dir) -> tuple[int, int]:
    zk = ZkView(cluster_json(lab_dir)["zookeeper"])
    try:
        return (ControllerRegistration.decode(zk.client.get("/controller")[0]).broker_id,
                decode_controller_epoch(zk.client.get("/controller_epoch")[0]))
    finally:
        zk.close()


def text_is(page, selector: str, value: object, timeout_ms: int = WAIT_MS) -> None:
    page.wait_for_function("([s, v]) => document.querySelector(s)?.textContent === v", arg=[selector, str(value)],
                           timeout=timeout_ms)


@pytest.fixture
def dashboard(lab_dir):
    made: list[Dashboard] = []

    def start() -> Dashboard:
        made.append(Dashboard(lab_dir))
        return made[-1]
    yield start
    for d in made:
        d.close()


def test_the_page_names_the_controller_and_a_kill_on_it_shows_the_next_one(lab_dir, zookeeper, dashboard, tmp_path):
    ok("up", "--dir", str(lab_dir), "--brokers", "3", "--zookeeper", zookeeper.connect_string,
       "--config", "zookeeper.session.timeout.ms=2000")
    d = dashboard()
    controller, epoch = zookeeper_controller(lab_dir)
    with browser_page() as page:
        page.goto(d.url)
        text_is(page, "#controller-broker", controller)
        text_is(page, "#controller-epoch", epoch)
        page.wait_for_selector("#live.on")
        assert page.locator(f'li.broker.is-controller[data-broker="{controller}"]').count() == 1
        screenshot(page, tmp_path, "1-controller")

        page.locator(f'li.broker[data-broker="{controller}"] button[data-action="kill"]').click()
        page.wait_for_function("([c, e]) => { const b = document.querySelector('#controller-broker');"
                               " return b && b.textContent !== String(c) &&"
                               " document.querySelector('#controller-epoch').textContent === String(e); }",
                               arg=[controller, epoch + 1], timeout=WAIT_MS)
        new_controller = int(page.locator("#controller-broker").inner_text())
        assert (new_controller, epoch + 1) == zookeeper_controller(lab_dir)
        assert page.locator(f'li.broker.state-dead[data-broker="{controller}"]').count() == 1
        assert "killed" in page.locator("#message").inner_text().lower()
        screenshot(page, tmp_path, "2-new-controller")

        # the timeline has the kill; scrubbed back before it, the killed broker runs again
        page.locator('.tabs button[data-view="timeline"]').click()
        killed = page.locator("#events li", has_text="process_killed")
        killed.wait_for()
        killed_at = page.evaluate("() => window.zkbrokerDashboard.events.find(e => e.kind === 'process_killed').ts")
        page.eval_on_selector("#replay-slider", "(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }",
                              killed_at - 1)
        page.wait_for_selector(f'li.broker.state-running[data-broker="{controller}"]', timeout=10_000)
        assert "replay" in page.locator("#live").inner_text()
        screenshot(page, tmp_path, "3-replay")
        page.locator("#replay-live").click()
        page.wait_for_selector(f'li.broker.state-dead[data-broker="{controller}"]', timeout=10_000)

        # the topics tab names each topic's config overrides
        code, _, err = tool("topics", "--zookeeper", cluster_json(lab_dir)["zookeeper"], "--create", "--topic", "cfg",
                            "--partitions", "1", "--replication-factor", "1", "--config", "retention.ms=1000")
        assert code == 0, err
        page.locator('.tabs button[data-view="topics"]').click()
        overrides = page.locator('#topic-configs tr[data-topic="cfg"] td.overrides')
        overrides.wait_for(timeout=WAIT_MS)
        assert overrides.inner_text() == "retention.ms=1000"


@pytest.mark.skipif(os.geteuid() != 0, reason="the lab network needs root (namespaces, nftables)")
def test_a_broker_cut_off_from_zookeeper_is_highlighted_beside_zookeepers_truth(lab_dir, dashboard, tmp_path):
    ok("up", "--dir", str(lab_dir), "--network", "--brokers", "3", "--config", "zookeeper.session.timeout.ms=3000")
    code, _, err = tool("topics", "--zookeeper", cluster_json(lab_dir)["zookeeper"], "--create", "--topic", "t",
                        "--replica-assignment", "2:1:3")
    assert code == 0, err
    wait_for(lambda: partitions(status(lab_dir), "t").get(0, (None, None, []))[0] == 2
             and len(partitions(status(lab_dir), "t")[0][2]) == 3, 30, "broker 2 to lead t-0")
    d = dashboard()
    with browser_page(height=1000) as page:
        page.goto(d.url)
        page.wait_for_selector('#partitions tr[data-partition="t-0"] .replica[data-broker="2"]')
        assert page.locator("#partitions tr.mismatch").count() == 0
        # only the leader keeps the ISR: a follower's is the one it last heard, and the page says so
        row = '#partitions tr[data-partition="t-0"]'
        page.wait_for_selector(f'{row} .replica[data-broker="1"] span[title]')
        assert "isr (last heard)" in page.locator(f'{row} .replica[data-broker="1"]').inner_text()
        assert "last heard" not in page.locator(f'{row} .replica[data-broker="2"]').inner_text()
        assert "Only the leader keeps the ISR" in page.locator("#view-truth p.teach").inner_text()
        page.locator('li.broker[data-broker="2"] button[data-action="partition"]').click()
        # its process runs, but its session expires: not registered, and still the leader in its own eyes
        page.wait_for_selector('li.broker.state-cut-off.mismatch[data-broker="2"]', timeout=WAIT_MS)
        page.wait_for_selector('#partitions tr.mismatch[data-partition="t-0"] .replica.mismatch[data-broker="2"]',
                               timeout=WAIT_MS)
        assert page.locator('li.broker[data-broker="2"] .why[data-kind="not_registered"]').count() == 1
        assert page.locator('#mismatches li[data-kind="zombie_leader"]').count() == 1
        leader = page.locator('#partitions tr[data-partition="t-0"] td').nth(1).inner_text()
        assert leader in ("1", "3")  # ZooKeeper's truth: the controller moved the leadership
        screenshot(page, tmp_path, "cut-off", docs_name="dashboard.png")

        page.locator('li.broker[data-broker="2"] button[data-action="heal"]').click()
        page.wait_for_selector('li.broker.state-running[data-broker="2"]:not(.mismatch)', timeout=WAIT_MS)
        page.wait_for_function("() => !document.querySelector('#partitions tr.mismatch')", timeout=WAIT_MS)
        screenshot(page, tmp_path, "healed")


def test_stepping_through_a_scenario_with_predictions(lab_dir, dashboard, tmp_path):
    lab_dir.mkdir(parents=True)
    d = dashboard()
    scenario_lab = lab_dir / "scenarios" / "unclean-election-0.8"
    try:
        with browser_page(height=1000) as page:
            page.goto(d.url)
            assert "No lab runs" in page.locator("#strip").inner_text()
            page.locator('.tabs button[data-view="scenarios"]').click()
            form = page.locator("#scenario-form")
            form.locator('select[name="name"]').select_option("unclean-election")
            form.locator('select[name="mode"]').select_option("0.8")
            form.locator('select[name="predict"]').select_option("lost")
            form.locator('button[name="start"]').click()
            try:
                page.wait_for_selector('.scenario-step.current[data-step="0"]', timeout=WAIT_MS)
            except Exception:
                raise AssertionError(f"the scenario did not start: {d.get('/api/scenario')}") from None
            text_is(page, ".lab-dir", str(scenario_lab.resolve()))  # the page follows the scenario's lab
            from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

            predicted = 0
            for _ in range(60):
                if page.locator("#scenario-verdict").count():
                    break
                yes = page.locator(".scenario-step.current button[data-answer='yes']")
                if yes.count():
                    yes.click()
                    predicted += 1
                elif page.locator("#scenario-step").is_enabled():
                    try:  # it may be disabled again by the time the click lands (a step running): next round
                        page.locator("#scenario-step").click(timeout=2000)
                    except PlaywrightTimeoutError:
                        pass
                page.wait_for_timeout(700)
                if predicted == 1:
                    screenshot(page, tmp_path, "scenario-prediction")
            page.wait_for_selector("#scenario-verdict", timeout=WAIT_MS)
            assert predicted >= 1
            assert page.locator(".scenario-step [data-held]").count() == predicted
            assert "[unclean-election 0.8] 1/" in page.locator("#scenario-narration").inner_text()
            assert page.locator("#controller-broker").count() == 1  # the strip shows the scenario's lab
            screenshot(page, tmp_path, "scenario-finished")
    finally:
        if (scenario_lab / "cluster.json").exists():
            lab("down", "--dir", str(scenario_lab), timeout_s=240)


def test_a_lesson_played_in_the_lessons_tab_asks_takes_an_answer_and_reveals_what_happened(lab_dir, dashboard,
                                                                                          tmp_path):
    from zkbroker.lab.lesson import find_lesson

    lesson = find_lesson("controller-election")
    lab_dir.mkdir(parents=True)
    d = dashboard()
    lesson_lab = lab_dir / "lessons" / lesson.name
    try:
        with browser_page(height=1200) as page:
            page.goto(d.url)
            page.locator('.tabs button[data-view="lessons"]').click()
            form = page.locator("#lesson-form")
            form.locator('select[name="name"]').select_option(lesson.name)
            form.locator('button[name="start"]').click()
            answered = 0
            for index, lesson_page in enumerate(lesson.pages):
                current = page.locator(f'.lesson-page[data-page="{index}"]')
                try:
                    current.wait_for(timeout=WAIT_MS)
                except Exception:
                    raise AssertionError(f"page {index + 1} did not show: {d.get('/api/lesson')}") from None
                assert lesson_page.title in current.locator("h3").inner_text()
                q = lesson_page.question
                if q is not None:  # the first question is answered wrongly: the reveal names the right answer
                    choice = q.answer if index else (q.answer % len(q.choices)) + 1
                    button = current.locator(f'button[data-choice="{choice}"]:not([disabled])')
                    button.wait_for(timeout=WAIT_MS)
                    assert q.ask.split()[0] in current.locator(".question").inner_text()
                    if index == 0:
                        screenshot(page, tmp_path, "lesson-question")
                    button.click()
                    answered += 1
                    current.locator(f".reveal[data-correct='{str(bool(index)).lower()}']").wait_for(timeout=WAIT_MS)
                    if index == 0:
                        assert f"The answer is {q.answer}" in current.locator(".reveal").inner_text()
                        screenshot(page, tmp_path, "lesson-revealed")
                if lesson_page.steps:
                    current.locator("[data-held='true']").wait_for(timeout=WAIT_MS)
                page.locator("#lesson-next").click()
            page.wait_for_selector("#lesson-passed[data-passed='true']", timeout=WAIT_MS)
            assert answered == sum(p.question is not None for p in lesson.pages)
            text_is(page, ".lab-dir", str(lesson_lab.resolve()))  # the page showed the lesson's lab
            screenshot(page, tmp_path, "lesson-finished")
    finally:
        if (lesson_lab / "cluster.json").exists():
            lab("down", "--dir", str(lesson_lab), timeout_s=240)
