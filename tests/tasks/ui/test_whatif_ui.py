""" "Replay from this state with another model" on the episode page: a recorded run of the fake
OpenAI server's model "a" (it runs a wrong query), replayed from a state with model "b" (it runs
the gold query); in Chromium, then the refusals over plain HTTP."""

from __future__ import annotations

import http.client
import re
from typing import Any
from urllib.parse import urlencode

import pytest
from stateflow.tasks.harness.records import ResultsFile
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.sql.benchmark import INTERCODE_SQL
from stateflow.tasks.ui.app import UiApp
from stateflow.tasks.ui.index import RunIndex
from stateflow.tasks.ui.server import running
from stateflow.tasks.ui.whatif_jobs import WhatIfJobs

from stateflow import ModelAssignment, ModelProfile
from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.tasks.ui.test_browser import _click_to_page, _shot, _wait_ready, browser  # noqa: F401  (a fixture)


class Models:
    """Model "a" runs ``SELECT 1`` then submits; model "b" runs the task's gold query then submits."""

    def __init__(self) -> None:
        self.gold: dict[str, str] = {}  # question -> gold, filled from the recorded run

    def __call__(self, model: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        said = [str(m.get("content") or "") for m in messages if m.get("role") == "assistant"]
        if model == "b":
            text = " ".join(str(m.get("content") or "") for m in messages)
            gold = next((g for q, g in self.gold.items() if q in text), "SELECT 2")
            if any(f"execute[{gold}]" in t for t in said):
                return "Thought: that is the answer.\nAction: submit"
            return f"Thought: the gold way.\nAction: execute[{gold}]"
        if any("Action: execute[" in t for t in said):
            return "Thought: done.\nAction: submit"
        return "Thought: guess.\nAction: execute[SELECT 1]"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, sql_available) -> Any:
    """Two demo SQL tasks run by StateFlow with model "a"; the fake server stays up."""
    models = Models()
    out = tmp_path_factory.mktemp("ui-whatif") / "run"
    with FakeOpenAIServer(models) as srv:
        profiles = [
            ModelProfile(name=n, model=n, base_url=srv.url, api_key_env=None, max_retries=0, timeout=30)
            for n in ("a", "b")
        ]
        spec = RunSpec(
            INTERCODE_SQL,
            ("stateflow",),
            models=ModelAssignment.of({"default": "a"}, profiles=profiles),
            models_label="default=a",
            out=out,
            tasks="0:2",
        )
        records = evaluate(spec, progress=False).records
        models.gold.update({r.query: r.gold for r in records})
        jobs = WhatIfJobs(default_registry(), ModelAssignment.of(None, profiles=profiles), timeout_s=60)
        yield out, records, jobs


def test_replay_from_a_state_with_another_model_in_chromium(recorded, browser) -> None:  # noqa: F811
    out, records, jobs = recorded
    r = next(x for x in records if x.task == 0)
    assert r.reward_raw == 0.0 and [c["state"] for c in r.calls] == ["Observe", "Solve"]
    app = UiApp(RunIndex([out]), live_poll_s=0.3, whatif=jobs)
    with running(app) as server:
        browser.get(server.url + "episode?" + urlencode({"src": 0, "id": r.identity_digest, "task": 0}))
        _wait_ready(browser)
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import Select, WebDriverWait

        states = [o.text for o in Select(browser.find_element(By.ID, "whatif-at")).options]
        assert states == ["Observe", "Solve"]  # the path's states that asked a model
        Select(browser.find_element(By.ID, "whatif-at")).select_by_visible_text("Solve")
        Select(browser.find_element(By.ID, "whatif-profile")).select_by_visible_text("b")
        _click_to_page(browser, browser.find_element(By.ID, "whatif-go"))
        WebDriverWait(browser, 90).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '.replay[data-status="done"] .reward-after')
        )
        box = browser.find_element(By.CSS_SELECTOR, ".replay")
        assert box.find_element(By.CLASS_NAME, "reward-before").text == "0.000"
        assert box.find_element(By.CLASS_NAME, "reward-after").text == "1.000"
        steps = box.find_elements(By.CLASS_NAME, "replay-step")
        assert steps[0].get_attribute("data-state") == "Solve"  # the new steps start at the fork
        assert f"execute[{r.gold}]" in box.text  # model b's new step
        _shot(browser, "whatif")
    # the new record is where `stateflow whatif` puts it, stamped as a replay
    new = ResultsFile(out / "whatif-Solve-Solve-b" / "results.jsonl").load().records
    assert [(x.task, x.reward_raw, x.whatif["at"], x.whatif["replayed_calls"]) for x in new] == [(0, 1.0, "Solve", 1)]
    assert new[0].calls[0] == r.calls[0]  # Observe's reply came from the recording


def _post(server, form: dict[str, Any], headers: dict[str, str] | None = None, raw: bytes | None = None):
    host, port = server.server_address[:2]
    body = raw if raw is not None else urlencode(form).encode()
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request(
        "POST",
        "/whatif",
        body=body,
        headers={"Content-Type": "application/x-www-form-urlencoded", **(headers or {})},
    )
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    return resp.status, text


def test_bad_replay_requests_are_refused(recorded, tmp_path) -> None:
    out, records, jobs = recorded
    r = next(x for x in records if x.task == 1)
    app = UiApp(RunIndex([out, out / "results.jsonl"]), whatif=jobs)
    page = app.handle("/episode", {"src": "0", "id": r.identity_digest or "", "task": "1"}).body.decode()
    token = re.search(r'name="token" value="([^"]+)"', page).group(1)
    good = {"token": token, "src": 0, "id": r.identity_digest, "task": 1, "at": "Solve", "profile": "b"}
    with running(app) as server:
        cases = [
            ({**good, "token": ""}, 403, "token"),
            ({**good, "token": token + "x"}, 403, "token"),
            ({**good, "at": "Verify"}, 400, "not a state of this episode"),
            ({**good, "at": "Init"}, 409, "never asked a model in Init"),
            ({**good, "profile": "nope"}, 400, "not a known model profile"),
            ({**good, "profile": "../a"}, 400, "not a known model profile"),
            ({**good, "task": 7}, 400, "no episode"),
            ({**good, "src": 9}, 400, "no episode"),
            ({**good, "src": 1}, 400, "replays need a results directory"),  # a source given as a file
        ]
        for form, status, words in cases:
            got, text = _post(server, form)
            assert (got, words in text) == (status, True), (form, got, text[:300])
        got, text = _post(server, good, {"Origin": "http://evil.example"})
        assert got == 403 and "evil.example" in text
        assert _post(server, good, {"Sec-Fetch-Site": "cross-site"})[0] == 403
        assert _post(server, good, {"Content-Type": "text/plain"})[0] == 415
        assert _post(server, good, raw=b"x" * 5000)[0] == 413
    assert jobs.of_episode(0, r.identity_digest or "", 1) == []  # nothing was started
    replays = out / "whatif-Solve-Solve-b" / "results.jsonl"
    assert not replays.exists() or all(x.task != 1 for x in ResultsFile(replays).load().records)


def test_an_oracle_episode_offers_no_replay_and_a_forged_post_is_refused(oracle_run, recorded) -> None:
    _, _, jobs = recorded
    app = UiApp(RunIndex([oracle_run]), whatif=jobs)
    ep = next(iter(app.index.episodes()))
    params = {"src": "0", "id": ep.key[0], "task": str(ep.record.task)}
    page = app.handle("/episode", params).body.decode()
    assert 'id="whatif-form"' not in page  # a gold replay has no model to swap
    at = next(s for s in ep.record.path if s not in ("Init", "End"))
    resp = app.post("/whatif", {**params, "token": app.token, "at": at, "profile": "b"})
    assert resp.status == 409 and "oracle" in resp.body.decode()
