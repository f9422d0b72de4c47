"""Issue 57 item 21, in Chromium at 1280 px: the paper flow's graph can be read (a simplified
drawing and an actual-size view), the overview's points do not cover each other and its setting
column says what each row ran under, the episode page labels its counts and says when the turn
limit (not a submission) ended the episode, and the "live" badge explains its colour."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.reports.metrics import load_results
from stateflow.tasks.sql.benchmark import INTERCODE_SQL
from stateflow.tasks.ui.app import UiApp
from stateflow.tasks.ui.index import RunIndex
from stateflow.tasks.ui.server import running

from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.scripted import ScriptedLLM
from tests.tasks.ui.test_browser import _click_to_page, _wait_ready, browser  # noqa: F401  (a fixture)

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


@pytest.fixture
def narrow(browser):  # noqa: F811
    """The browser at 1280 px wide (a laptop), restored afterwards."""
    before = browser.get_window_size()
    browser.set_window_size(1280, 900)
    yield browser
    browser.set_window_size(before["width"], before["height"])


def _label_heights(driver, box_id: str) -> list[float]:
    """The rendered heights, in CSS pixels, of the edge labels of the graph in ``box_id``."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#' + arguments[0] + ' svg g.edge text'))"
        ".map(t => t.getBoundingClientRect().height);",
        box_id,
    )


def test_the_paper_flows_graph_can_be_read_at_1280_px(oracle_run, narrow) -> None:
    driver = narrow
    r = next(x for x in load_results([str(oracle_run)]) if x.method == "stateflow" and x.task == 2)
    app = UiApp(RunIndex([oracle_run]), live_poll_s=0.3)
    with running(app) as server:
        driver.get(server.url + "episode?" + urlencode({"src": 0, "id": r.identity_digest, "task": 2}))
        _wait_ready(driver)
        fitted = _label_heights(driver, "graph")
        assert fitted and max(fitted) < 9, fitted  # every rule, fitted to the column: too small to read
        # simplified: one arrow per pair of states, numbers for labels, in larger type
        driver.find_element(By.ID, "g-simple").click()
        assert driver.find_element(By.ID, "graph-simple").is_displayed()
        assert not driver.find_element(By.ID, "graph").is_displayed()
        simple = _label_heights(driver, "graph-simple")
        assert min(simple) >= 11, simple
        edges = driver.find_elements(By.CSS_SELECTOR, "#graph-simple svg g.edge")
        assert len(edges) < len(driver.find_elements(By.CSS_SELECTOR, "#graph svg g.edge"))
        titles = [e.find_element(By.TAG_NAME, "title").get_attribute("textContent") for e in edges]
        assert len(titles) == len(set(titles))  # one arrow per pair
        pairs = {f"{a}->{b}" for a, b in itertools.pairwise(r.path)}
        marked = {
            e.find_element(By.TAG_NAME, "title").get_attribute("textContent")
            for e in driver.find_elements(By.CSS_SELECTOR, "#graph-simple g.edge.visited")
        }
        assert marked == pairs  # the path is drawn on the simplified graph too
        strokes = driver.execute_script(
            "return Array.from(document.querySelectorAll('#graph-simple g.edge.visited path'))"
            ".map(p => getComputedStyle(p).stroke);"
        )
        assert strokes and set(strokes) == {"rgb(224, 112, 0)"}  # in the path's colour
        legend = driver.find_element(By.ID, "graph-rules").text
        assert "Solve: 1. submitted · 2. turn limit reached · 3. action failed · 4. ran SELECT" in legend
        driver.find_element(By.ID, "pb-first").click()  # playback marks the current state on it
        current = driver.find_element(By.CSS_SELECTOR, "#graph-simple g.node.current title")
        assert current.get_attribute("textContent") == r.path[0]
        # every rule again, at actual size: its labels are readable, the box scrolls
        driver.find_element(By.ID, "g-every").click()
        driver.find_element(By.ID, "g-actual").click()
        actual = _label_heights(driver, "graph")
        assert min(actual) >= 11, actual
        assert "actual" in driver.find_element(By.ID, "graph").get_attribute("class")


PAPER_SQL = Path(__file__).parents[3] / "docs" / "data" / "paper" / "intercode-sql" / "local.jsonl"


def test_overview_points_do_not_overlap_and_each_row_names_its_setting(narrow) -> None:
    """The paper comparison's archive: 19 rows, several at nearly the same success and tokens."""
    driver = narrow
    app = UiApp(RunIndex([PAPER_SQL]), live_poll_s=0.3)
    with running(app) as server:
        driver.get(server.url)
        _wait_ready(driver)
        circles = driver.execute_script(
            "return Array.from(document.querySelectorAll('#success-plot g.point circle.marker'))"
            ".map(c => c.getBoundingClientRect())"
            ".map(b => [b.x + b.width / 2, b.y + b.height / 2, b.width]);"
        )
        assert len(circles) == len(driver.find_elements(By.CSS_SELECTOR, "#cells tr[data-cell]")) == 19
        for (x1, y1, w), (x2, y2, _) in itertools.combinations(circles, 2):
            assert math.hypot(x1 - x2, y1 - y2) >= w, circles  # no marker covers another
        assert driver.find_elements(By.CSS_SELECTOR, "#success-plot line.leader")  # moved ones point at their value
        settings = [td.text for td in driver.find_elements(By.CSS_SELECTOR, "#cells td.setting")]
        assert len(settings) == 19 and all(
            s.startswith("spider · llm · 10 turns · grammar · embedded") for s in settings
        )
        # the two settings of one method are told apart by what differs between them
        assert sum("flow_sha256=" in s for s in settings) == 2


def _never_submits() -> ScriptedLLM:
    def reply(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        return "Thought: look again.\nAction: execute[SELECT 1]"

    return ScriptedLLM(reply)


@pytest.fixture(scope="module")
def out_of_turns(tmp_path_factory, sql_available):
    """A real StateFlow run on a demo SQL task whose policy never submits, with a 2-turn limit."""
    out = tmp_path_factory.mktemp("ui-turns")
    loop = ModelProfile(name="loop", model="loop", provider="scripted", api_key_env=None)
    spec = RunSpec(
        INTERCODE_SQL,
        ("stateflow",),
        models=ModelAssignment.of(loop),
        models_label="default=loop",
        out=out,
        tasks="0:1",
        max_turns=2,
        scripts={"loop": _never_submits()},
    )
    (record,) = evaluate(spec, progress=False).records
    return out, record


def test_counts_are_labelled_the_turn_limit_is_named_and_the_badge_explains_itself(out_of_turns, narrow) -> None:
    driver = narrow
    out, r = out_of_turns
    assert r.stop_reason == "final" and not r.submitted and r.turns == 2  # what the page used to show as "final"
    app = UiApp(RunIndex([out]), live_poll_s=0.3)
    with running(app) as server:
        driver.get(server.url + "episode?" + urlencode({"src": 0, "id": r.identity_digest, "task": 0}))
        _wait_ready(driver)
        assert driver.find_element(By.ID, "ending").text == "ended: turn limit reached (2 of 2 turns), not submitted"
        assert driver.find_element(By.ID, "turns").text == "2 environment turns of 2"
        steps = driver.find_elements(By.CSS_SELECTOR, "#playback .step")
        head = driver.find_element(By.ID, "steps-head").text
        assert head == f"Steps ({len(steps)}: model replies and tool states' actions)"
        badge = driver.find_element(By.ID, "live")
        assert badge.text == "not refreshed" and "does not change" in badge.get_attribute("title")
        # the overview's badge is live, says so, and says why when it turns to offline
        driver.find_element(By.ID, "nav-overview").click()
        _wait_ready(driver)
        badge = driver.find_element(By.ID, "live")
        assert badge.text == "live" and "redraws by itself" in badge.get_attribute("title")

        def broken(_params):
            raise RuntimeError("the check fails")

        app.stamp = broken  # the live check now gets a 500
        WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "live").text == "offline")
        assert "check for new records failed" in driver.find_element(By.ID, "live").get_attribute("title")


def test_ending_words_for_each_way_an_episode_ends(oracle_run) -> None:
    from stateflow.tasks.ui.steps import ending_of

    from tests.tasks.ui.conftest import make_record

    submitted = next(x for x in load_results([str(oracle_run)]) if x.method == "stateflow")
    assert ending_of(submitted) == "submitted"
    archived = make_record(0, identity={"max_turns": 3}, turns=3, submitted=False, stop_reason="final")
    assert ending_of(archived) == "turn limit reached (3 of 3 turns), not submitted"  # no transitions kept
    bound = make_record(0, stop_reason="max_transitions")
    assert ending_of(bound) == "the flow's transition bound (max_transitions) was reached"
    failed = make_record(0, status="error", error="LLMError: refused", stop_reason="error")
    assert ending_of(failed) == "error (see the error below)"
