"""The UI in a real browser: Selenium driving Debian's headless Chromium over a real oracle run.

Each page is opened, its controls are used (filters, sorting, playback, side by side, the paired
comparison) and what the page shows is checked against the records. Screenshots of each page are
written to ``docs/img/ui/`` (the docs show them).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from stateflow.tasks.reports.metrics import load_results
from stateflow.tasks.ui.app import UiApp
from stateflow.tasks.ui.index import RunIndex
from stateflow.tasks.ui.server import running
from stateflow.tasks.ui.steps import steps_of

SHOTS = Path(__file__).resolve().parents[3] / "docs" / "img" / "ui"

webdriver = pytest.importorskip("selenium.webdriver", reason="pip install selenium (scripts/setup.sh does)")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium")
    driver_bin = shutil.which("chromedriver")
    if chromium is None or driver_bin is None:
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/setup_core.sh installs them)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _wait_ready(driver) -> None:
    WebDriverWait(driver, 10).until(lambda d: d.execute_script("return document.body.dataset.ready") == "yes")


def _click_to_page(driver, element) -> None:
    """Click a link or submit button and wait for the *next* page to be ready (the page being left
    is ready too: without waiting for it to go, a busy machine reads the old page)."""
    old = driver.find_element(By.TAG_NAME, "body")
    element.click()
    WebDriverWait(driver, 20).until(EC.staleness_of(old))
    _wait_ready(driver)


def _shot(driver, name: str) -> None:
    """A screenshot of the whole page (not just the window), at most 4,000 pixels tall."""
    import base64

    SHOTS.mkdir(parents=True, exist_ok=True)
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 4000), "scale": 1}
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"clip": clip, "captureBeyondViewport": True})
    (SHOTS / f"{name}.png").write_bytes(base64.b64decode(shot["data"]))


def _console_errors(driver) -> list[str]:
    try:
        return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    except Exception:  # some driver builds do not keep the log
        return []


def test_pages_in_chromium(oracle_run, browser):
    records = load_results([str(oracle_run)])
    methods = sorted({r.method for r in records})
    app = UiApp(RunIndex([oracle_run]), live_poll_s=0.3)
    with running(app) as server:
        base = server.url.rstrip("/")

        # overview: one row per method, 100 % with its Wilson interval, a point per row on the plot
        browser.get(base + "/")
        _wait_ready(browser)
        rows = browser.find_elements(By.CSS_SELECTOR, "#cells tr[data-cell]")
        assert sorted(r.find_elements(By.TAG_NAME, "td")[1].text for r in rows) == methods
        assert {r.find_element(By.CLASS_NAME, "sr").text for r in rows} == {"100.0"}
        assert rows[0].find_element(By.CLASS_NAME, "ci").text == "61.0-100.0"  # Wilson, 6 of 6, its own column
        points = browser.find_elements(By.CSS_SELECTOR, "#success-plot g.point")
        assert len(points) == len(methods)
        assert "100.0 % success" in points[0].find_element(By.TAG_NAME, "title").get_attribute("textContent")

        # the paired comparison of two methods (the oracle solves everything: 0 won, 0 lost)
        Select(browser.find_element(By.ID, "cmp-a")).select_by_index(0)
        Select(browser.find_element(By.ID, "cmp-b")).select_by_index(1)
        _click_to_page(browser, browser.find_element(By.ID, "cmp-go"))
        assert browser.find_element(By.ID, "won").text == "0"
        assert "6 common tasks" in browser.find_element(By.ID, "comparison").text
        _shot(browser, "overview")

        # tasks: every episode, then filtered by method and by visited state, then sorted
        browser.get(base + "/tasks")
        _wait_ready(browser)
        assert len(browser.find_elements(By.CSS_SELECTOR, "tr.task-row")) == len(records)
        Select(browser.find_element(By.ID, "f-method")).select_by_visible_text("react")
        _click_to_page(browser, browser.find_element(By.ID, "f-go"))
        shown = browser.find_elements(By.CSS_SELECTOR, "tr.task-row")
        assert len(shown) == 6 and {r.get_attribute("data-method") for r in shown} == {"react"}
        Select(browser.find_element(By.ID, "f-method")).select_by_index(0)  # any
        # a state some episodes visited and others did not
        state = next(s for s in sorted({s for r in records for s in r.path}) if not all(s in r.path for r in records))
        Select(browser.find_element(By.ID, "f-state")).select_by_visible_text(state)
        _click_to_page(browser, browser.find_element(By.ID, "f-go"))
        expected = sum(state in r.path for r in records)
        assert 0 < expected < len(records)
        assert len(browser.find_elements(By.CSS_SELECTOR, "tr.task-row")) == expected
        browser.get(base + "/tasks?sort=tokens&desc=1")
        _wait_ready(browser)
        tokens = [
            int(r.find_elements(By.TAG_NAME, "td")[7].text)
            for r in browser.find_elements(By.CSS_SELECTOR, "tr.task-row")
        ]
        assert tokens == sorted(tokens, reverse=True)
        _shot(browser, "tasks")

        # episode: the stateflow episode of task 2, gold rows next to the submitted rows, playback
        r = next(x for x in records if x.method == "stateflow" and x.task == 2)
        browser.get(base + "/tasks?method=stateflow")
        _wait_ready(browser)
        _click_to_page(browser, browser.find_element(By.CSS_SELECTOR, 'tr.task-row[data-task="2"] a.ep-link'))
        assert browser.find_element(By.ID, "question").text == r.query
        assert browser.find_element(By.CSS_SELECTOR, "pre.gold-rows").text == r.eval["eval_obs"]
        assert browser.find_element(By.CSS_SELECTOR, "tr.gold td pre").text == r.gold
        visited = {
            n.find_element(By.TAG_NAME, "title").get_attribute("textContent")
            for n in browser.find_elements(By.CSS_SELECTOR, "#graph g.node.visited")
        }
        assert visited == set(r.path)
        # one highlighted edge per rule taken (Solve -> End has two rules: only the one taken is marked)
        taken = {(t["source"], t["target"], t["rule"]) for t in r.transitions}
        assert len(browser.find_elements(By.CSS_SELECTOR, "#graph g.edge.visited")) == len(taken)
        first_reply = next(m for m in r.history if m["kind"] == "llm")
        usage = first_reply["usage"]
        assert (
            f"{usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens"
            in browser.find_element(By.ID, "playback").text
        )
        browser.find_element(By.ID, "pb-first").click()
        visible = [s for s in browser.find_elements(By.CSS_SELECTOR, "#playback .step") if s.is_displayed()]
        assert len(visible) == 1
        assert browser.find_element(By.ID, "pb-pos").text.startswith("step 1 of")
        browser.find_element(By.ID, "pb-next").click()
        visible = [s for s in browser.find_elements(By.CSS_SELECTOR, "#playback .step") if s.is_displayed()]
        assert len(visible) == 2
        current = browser.find_element(By.CSS_SELECTOR, "#graph g.node.current title").get_attribute("textContent")
        assert current == visible[-1].get_attribute("data-state")
        browser.find_element(By.ID, "pb-all").click()
        _shot(browser, "episode")

        # a vote episode shows its candidates
        vote = next(x for x in records if x.method == "stateflow_error_vote" and x.task == 0)
        browser.get(base + f"/episode?src=0&id={vote.identity_digest}&task=0")
        _wait_ready(browser)
        cand = browser.find_elements(By.CSS_SELECTOR, "table.votes tr.winner")
        assert cand and "SELECT" in cand[0].text
        _shot(browser, "episode_vote")

        # side by side, from the episode page's link
        browser.get(base + f"/episode?src=0&id={r.identity_digest}&task=2")
        _wait_ready(browser)
        _click_to_page(browser, browser.find_element(By.XPATH, "//a[@class='side-link' and text()='react']"))
        heads = browser.find_element(By.ID, "side-table").find_elements(By.TAG_NAME, "th")
        assert "stateflow" in heads[1].text and "react" in heads[2].text
        other = next(x for x in records if x.method == "react" and x.task == 2)
        steps = browser.find_elements(By.CSS_SELECTOR, "tr.aligned")
        assert len(steps) >= 2
        assert browser.find_elements(By.CSS_SELECTOR, "pre.gold-rows")[1].text == other.eval["eval_obs"]
        _shot(browser, "side_by_side")
        assert _console_errors(browser) == []


def test_live_run_and_bad_input_in_chromium(oracle_run, tmp_path, browser):
    """A run being written shows each new episode; torn and newer-schema lines are shown as such."""
    live = tmp_path / "live"
    live.mkdir()
    lines = (oracle_run / "results.jsonl").read_bytes().splitlines(keepends=True)
    app = UiApp(RunIndex([live]), live_poll_s=0.3)
    with running(app) as server:
        browser.get(server.url)
        _wait_ready(browser)
        assert "No episodes recorded yet" in browser.find_element(By.ID, "empty").text
        target = live / "results.jsonl"
        with target.open("ab") as fh:  # the run writes its first two episodes, the third half-way
            fh.write(lines[0] + lines[1] + lines[2][:100])
        WebDriverWait(browser, 10).until(EC.presence_of_element_located((By.ID, "cells")))
        assert browser.find_element(By.CSS_SELECTOR, "#cells td.num").text == "2"
        assert "bytes of a record being written" in browser.find_element(By.CSS_SELECTOR, "header .sources").text
        newer = json.loads(lines[3]) | {"schema_version": 99}
        with target.open("ab") as fh:  # the third line completes; a record of a newer schema follows
            fh.write(lines[2][100:] + (json.dumps(newer) + "\n").encode())
        WebDriverWait(browser, 10).until(EC.presence_of_element_located((By.ID, "problems")))
        assert browser.find_element(By.CSS_SELECTOR, "#cells td.num").text == "3"
        problem = browser.find_element(By.CSS_SELECTOR, "#problems tr.newer-schema").text
        assert "schema_version 99" in problem and "results.jsonl:4 " in problem
        _shot(browser, "live_and_problems")
        # traversal through the URL is refused, in the browser as anywhere
        browser.get(server.url + "runs/0/..%2F..%2F..%2F..%2Fetc%2Fpasswd")
        assert "outside" in browser.find_element(By.ID, "error-message").text
        assert any("403 (Forbidden)" in e for e in _console_errors(browser))  # and read off the log


def test_static_report_shows_the_same_views_in_chromium(oracle_run, tmp_path, browser):
    """`stateflow report`'s one file: the UI's table, plot and episode views, clickable offline."""
    from stateflow.tasks.ui.static_report import write_html

    records = load_results([str(oracle_run)])
    page = write_html(records, tmp_path)
    browser.get(page.as_uri())
    _wait_ready(browser)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#cells tr[data-cell]")) == 3
    assert len(browser.find_elements(By.CSS_SELECTOR, "#success-plot g.point")) == 3
    group = browser.find_elements(By.CSS_SELECTOR, "section.group")[0]
    shown = [d for d in group.find_elements(By.CLASS_NAME, "epdetail") if d.is_displayed()]
    assert len(shown) == 1
    group.find_elements(By.CLASS_NAME, "ep")[2].click()
    shown = [d for d in group.find_elements(By.CLASS_NAME, "epdetail") if d.is_displayed()]
    assert len(shown) == 1 and shown[0].get_attribute("data-i") == "2"
    # the first group is react's (groups are sorted), listing its episodes by task
    rec = sorted((r for r in records if r.method == "react"), key=lambda r: r.task)[2]
    assert shown[0].find_element(By.CSS_SELECTOR, "pre.gold-rows").text == rec.eval["eval_obs"]
    assert group.find_elements(By.CSS_SELECTOR, "g.node.visited")
    _shot(browser, "report")
    assert _console_errors(browser) == []


def test_an_archive_of_embedded_model_runs_in_chromium(browser):
    """The paper comparison's archive (1.5B embedded model, traces dropped): real successes and
    failures, intervals, filters, and an episode page that says its trace is not kept."""
    archive = SHOTS.parents[1] / "data" / "paper" / "intercode-sql" / "local.jsonl"
    if not archive.exists():
        pytest.skip(f"{archive} is not in this checkout")
    records = load_results([str(archive)])
    app = UiApp(RunIndex([archive]))
    with running(app) as server:
        base = server.url.rstrip("/")
        browser.get(base + "/")
        _wait_ready(browser)
        from stateflow.tasks.ui.overview import cells

        expected = cells(records)
        rows = browser.find_elements(By.CSS_SELECTOR, "#cells tr[data-cell]")
        assert len(rows) == len(expected)
        first = rows[0].find_element(By.CLASS_NAME, "ci").text
        assert first == f"{expected[0].success_lo:.1f}-{expected[0].success_hi:.1f}"
        _shot(browser, "overview_archive")
        browser.get(base + "/tasks?outcome=failed&method=stateflow")
        _wait_ready(browser)
        failed = [r for r in records if r.method == "stateflow" and r.status == "ok" and not r.success]
        assert f"{len(failed)} episode" in browser.find_element(By.ID, "matched").text
        _click_to_page(browser, browser.find_elements(By.CSS_SELECTOR, "a.ep-link")[0])
        assert "holds no trace" in browser.find_element(By.ID, "playback").text
        assert browser.find_element(By.CSS_SELECTOR, "tr.submitted td pre").text  # the last action is kept


RECORDED = Path(__file__).parent / "data" / "local_small_run.jsonl"


def test_a_recorded_embedded_model_run_in_chromium(browser):
    """Episodes the embedded Qwen2.5-Coder-0.5B model played (recorded once, kept here): a failed
    episode shows what it submitted next to the gold rows, and each reply's tokens and latency."""
    records = load_results([str(RECORDED)])
    failed = next(r for r in records if not r.success and r.status == "ok")
    app = UiApp(RunIndex([RECORDED]))
    with running(app) as server:
        base = server.url.rstrip("/")
        browser.get(base + "/tasks?outcome=failed")
        _wait_ready(browser)
        assert len(browser.find_elements(By.CSS_SELECTOR, "tr.task-row")) == sum(
            1 for r in records if r.status == "ok" and not r.success
        )
        browser.get(base + f"/episode?src=0&id={failed.identity_digest}&task={failed.task}")
        _wait_ready(browser)
        assert browser.find_element(By.CSS_SELECTOR, "tr.submitted td pre").text == (failed.last_action or "-")
        assert browser.find_element(By.CSS_SELECTOR, "pre.gold-rows").text == failed.eval["eval_obs"]
        text = browser.find_element(By.ID, "playback").text
        for m in (m for m in failed.history if m["kind"] == "llm"):
            u = m["usage"]
            assert f"{u['prompt_tokens']} prompt + {u['completion_tokens']} completion tokens" in text
            assert f"{u['latency_s']:.3f} s" in text
        _shot(browser, "episode_local_model")
        # the same task under the other method, step by step
        other = next(r for r in records if r.task == failed.task and r.method != failed.method)
        _click_to_page(browser, browser.find_element(By.XPATH, f"//a[@class='side-link' and text()='{other.method}']"))
        rows = browser.find_elements(By.CSS_SELECTOR, "tr.aligned")
        assert len(rows) == max(len(steps_of(failed.history)), len(steps_of(other.history)))
        assert other.last_action in browser.find_elements(By.CSS_SELECTOR, "tr.submitted td pre")[2].text


def _fs_table(browser) -> dict[str, tuple[str, str, str, str]]:
    """path -> (agent status, gold status, outcome class, content) of the shown file-system diff."""
    out = {}
    for row in browser.find_elements(By.CSS_SELECTOR, "table.fs-diff tr.fs-row"):
        cls = row.get_attribute("class").split()
        outcome = next(c for c in cls if c != "fs-row")
        cells = [row.find_element(By.CLASS_NAME, c).text for c in ("fs-agent", "fs-gold", "fs-content")]
        out[row.get_attribute("data-path")] = (cells[0], cells[1], outcome, cells[2])
    return out


def test_bash_episode_shows_what_the_reward_compared_in_chromium(bash_run, tmp_path, browser):
    """A real Bash run (oracle and a policy changing the wrong files): the episode page, side by
    side and the one-file report show each side's file-system changes, the missing and extra ones,
    the content checks and the output similarity the reward used; an older record says "not recorded"."""
    records = load_results([str(bash_run)])
    wrong = {r.task: r for r in records if r.models == "default=wrong"}
    oracle = {r.task: r for r in records if r.models == "oracle" and r.method == "stateflow"}
    assert set(wrong) == {6, 7} and set(oracle) == {5, 6, 7}
    assert {r.method for r in records} == {"stateflow", "try_again"}  # Try-Again keeps its scored attempt's
    for r in records:  # the recorded parts are the score's: 0.01 + p1 + p2 + p3
        c = r.bash_comparison
        assert c is not None
        assert round(0.01 + c.diff_score + c.content_score + c.answer_score, 2) == round(r.reward_raw, 2)
    app = UiApp(RunIndex([bash_run]))
    with running(app) as server:
        base = server.url.rstrip("/")

        # the policy deleted report.md where the gold edited it: one path, two different changes
        r = wrong[7]
        browser.get(base + f"/episode?src=0&id={r.identity_digest}&task=7")
        _wait_ready(browser)
        c = r.bash_comparison
        (extra,), (missing,) = c.extra, c.missing
        assert extra.path == missing.path
        assert _fs_table(browser) == {missing.path: (extra.status, missing.status, "different", "")}
        assert browser.find_element(By.CLASS_NAME, "fs-p1").text == f"{c.diff_score:.2f}" == "0.00"
        assert browser.find_element(By.CLASS_NAME, "fs-sim").text == f"{c.similarity:.3f}"
        # sed -i prints nothing: an empty output is shown as such, not as "not recorded"
        assert r.eval["eval_obs"] == ""
        assert browser.find_element(By.CSS_SELECTOR, "pre.gold-rows").text == "(no output)"

        # task 6: the empty files the gold deleted are missing, the file the policy made is extra
        r = wrong[6]
        browser.get(base + f"/episode?src=0&id={r.identity_digest}&task=6")
        _wait_ready(browser)
        shown = _fs_table(browser)
        c = r.bash_comparison
        assert {p for p, v in shown.items() if v[2] == "missing"} == {m.path for m in c.missing} != set()
        assert {p for p, v in shown.items() if v[2] == "extra"} == {e.path for e in c.extra} != set()
        assert all(shown[e.path][:2] == (e.status, "-") for e in c.extra)
        _shot(browser, "episode_bash")

        # the oracle's copied directory: same change on both sides, and its content compared
        r = oracle[5]
        browser.get(base + f"/episode?src=0&id={r.identity_digest}&task=5")
        _wait_ready(browser)
        checked = r.bash_comparison.content
        assert checked and {p: v[3] for p, v in _fs_table(browser).items()} == {
            x.path: ("same" if x.same else "differs") for x in checked
        }

        # side by side: both sides' comparisons
        a, b = wrong[7], oracle[7]
        side = {"a_src": 0, "a_id": a.identity_digest, "b_src": 0, "b_id": b.identity_digest, "task": 7}
        browser.get(base + "/side?" + "&".join(f"{k}={v}" for k, v in side.items()))
        _wait_ready(browser)
        outcomes = [row.get_attribute("class") for row in browser.find_elements(By.CSS_SELECTOR, "tr.fs-row")]
        assert outcomes == ["fs-row different", "fs-row same"]

    # a record written before the comparison was kept: the page says so
    old_dir = tmp_path / "old"
    old_dir.mkdir()
    line = json.loads((bash_run / "results.jsonl").read_text().splitlines()[0])
    del line["bash_comparison"]
    (old_dir / "results.jsonl").write_text(json.dumps(line) + "\n")
    with running(UiApp(RunIndex([old_dir]))) as server:
        browser.get(server.url + f"episode?src=0&id={line['identity_digest']}&task={line['task']}")
        _wait_ready(browser)
        assert "not recorded" in browser.find_element(By.CLASS_NAME, "fs-not-recorded").text
        assert not browser.find_elements(By.CSS_SELECTOR, "table.fs-diff")

    # the one-file report shares the template
    from stateflow.tasks.ui.static_report import write_html

    browser.get(write_html(records, tmp_path).as_uri())
    _wait_ready(browser)
    assert len(browser.find_elements(By.CSS_SELECTOR, "div.fs-comparison")) == len(records)
    assert _console_errors(browser) == []
