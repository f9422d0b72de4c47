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
        jobs.server = srv  # type: ignore[attr-defined]  (the tests slow it down)
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
        # the form says exactly what changes, for either scope (issue 57 item 20)
        what = browser.find_element(By.ID, "whatif-what")
        assert "From there, Solve and every other state that asks a model (Observe, Verify, Error) use b." in what.text
        Select(browser.find_element(By.ID, "whatif-scope")).select_by_value("only")
        assert what.text.endswith(
            "From there, only Solve uses b; Observe keeps a; Verify keeps a; Error keeps a (their recorded models)."
        )
        Select(browser.find_element(By.ID, "whatif-scope")).select_by_value("on")
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
    # the new record is where `stateflow whatif` puts it (for every state it changed), stamped as a replay
    new = ResultsFile(out / "whatif-Solve-Error-b-Observe-b-Solve-b-Verify-b" / "results.jsonl").load().records
    assert [(x.task, x.reward_raw, x.whatif["at"], x.whatif["replayed_calls"]) for x in new] == [(0, 1.0, "Solve", 1)]
    assert new[0].calls[0] == r.calls[0]  # Observe's reply came from the recording
    after = [(c["state"], c["profile"]) for c in new[0].calls[1:]]
    assert after[0] == ("Solve", "b") and ("Verify", "b") in after  # every later call: model b


def test_only_this_state_keeps_the_later_states_models_shows_progress_and_is_listed_on_live(
    recorded,
    browser,  # noqa: F811
) -> None:
    """Issue 57 item 20: a replay of "only this state" leaves Verify on model a, and while it runs
    (model b answers slowly here) the page shows where it is and /live lists its episode."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    out, records, jobs = recorded
    r = next(x for x in records if x.task == 1)
    app = UiApp(RunIndex([out]), live_poll_s=0.3, whatif=jobs)
    jobs.server.latency_s = 1.5
    try:
        with running(app) as server:
            browser.get(server.url + "episode?" + urlencode({"src": 0, "id": r.identity_digest, "task": 1}))
            _wait_ready(browser)
            Select(browser.find_element(By.ID, "whatif-at")).select_by_visible_text("Solve")
            Select(browser.find_element(By.ID, "whatif-profile")).select_by_visible_text("b")
            Select(browser.find_element(By.ID, "whatif-scope")).select_by_value("only")
            _click_to_page(browser, browser.find_element(By.ID, "whatif-go"))
            box = browser.find_element(By.CSS_SELECTOR, ".replay")
            assert "only Solve uses b" in box.find_element(By.CLASS_NAME, "replay-what").text
            WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".replay .replay-state"))
            progress = browser.find_element(By.CSS_SELECTOR, ".replay .replay-progress").text
            assert progress.startswith("running ") and "now in " in progress and "live page" in progress
            # the live page lists the replay's episode while it runs
            feed = app.live_feed()
            lines = [e for e in feed.poll() if "line" in e]
            assert lines and all(e["file"].startswith("whatif-Solve-Solve-b/") for e in lines)
            first = next(e["line"] for e in lines if e["line"]["type"] == "episode")
            assert first["task"] == 1 and "(whatif at Solve)" in first["models"]
            WebDriverWait(browser, 60).until(
                lambda d: d.find_elements(By.CSS_SELECTOR, '.replay[data-status="done"] .reward-after')
            )
            assert not list((out / "whatif-Solve-Solve-b" / "live").glob("*.jsonl"))  # recorded: gone from /live
    finally:
        jobs.server.latency_s = 0.0
    (new,) = [x for x in ResultsFile(out / "whatif-Solve-Solve-b" / "results.jsonl").load().records if x.task == 1]
    after = [(c["state"], c["profile"]) for c in new.calls[1:]]
    assert after[0] == ("Solve", "b") and ("Verify", "a") in after  # only Solve changed: Verify kept a


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
    started = len(jobs.of_episode(0, r.identity_digest or "", 1))  # replays an earlier test asked for
    written = {p: p.stat().st_size for p in out.glob("whatif-*/results.jsonl")}
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
            ({**good, "scope": "all"}, 400, "expected one of on, only"),
            ({**good, "src": 1}, 409, "results directory with `stateflow ui DIR`"),  # a source given as a file
        ]
        for form, status, words in cases:
            got, text = _post(server, form)
            assert (got, words in text) == (status, True), (form, got, text[:300])
        got, text = _post(server, good, {"Origin": "http://evil.example"})
        assert got == 403 and "evil.example" in text
        assert _post(server, good, {"Sec-Fetch-Site": "cross-site"})[0] == 403
        assert _post(server, good, {"Content-Type": "text/plain"})[0] == 415
        assert _post(server, good, raw=b"x" * 5000)[0] == 413
    assert len(jobs.of_episode(0, r.identity_digest or "", 1)) == started  # nothing was started
    assert {p: p.stat().st_size for p in out.glob("whatif-*/results.jsonl")} == written  # nor written


def test_an_oracle_episode_says_why_it_cannot_be_replayed_and_a_post_gets_the_same_409(
    oracle_run,
    recorded,
    browser,  # noqa: F811
) -> None:
    from selenium.webdriver.common.by import By

    _, _, jobs = recorded
    app = UiApp(RunIndex([oracle_run]), whatif=jobs)
    ep = next(iter(app.index.episodes()))
    params = {"src": "0", "id": ep.key[0], "task": str(ep.record.task)}
    with running(app) as server:
        browser.get(server.url + "episode?" + urlencode(params))
        _wait_ready(browser)
        assert not browser.find_elements(By.ID, "whatif-form")  # a gold replay has no model to swap
        reason = browser.find_element(By.ID, "whatif-refused").text
        assert reason.startswith("This episode cannot be replayed: the records replay the gold answer (oracle policy)")
    at = next(s for s in ep.record.path if s not in ("Init", "End"))
    resp = app.post("/whatif", {**params, "token": app.token, "at": at, "profile": "b"})
    assert resp.status == 409 and "the records replay the gold answer (oracle policy)" in resp.body.decode()


class _Handle:
    """A managed server of the pool below: "starting" it points at the fake OpenAI server."""

    def __init__(self, url: str) -> None:
        self.url, self.up = url, False

    def ensure_running(self) -> str:
        self.up = True
        return self.url

    def alive(self) -> bool:
        return self.up

    def check(self) -> None:
        pass

    def stop(self) -> None:
        self.up = False


def test_a_replay_stops_the_model_servers_it_started_and_only_those(recorded, monkeypatch) -> None:
    """Issue 57 item 20: the managed pool's bookkeeping before and after a replay whose model is
    a ``local`` profile (its "server" is the fake OpenAI server; no model is loaded)."""
    import stateflow.backends.local.pool as pool_module
    from stateflow.backends.local.pool import LocalServerPool

    out, records, jobs = recorded
    url = jobs.server.url

    class Pool(LocalServerPool):
        def server(self, local_model, alias=None, *, n_threads=None, replicas=None):
            with self._lock:
                return self._servers.setdefault(local_model, _Handle(url))

    pool = Pool()
    monkeypatch.setattr(pool_module._DEFAULT, "_pool", pool)  # what resolve_endpoint uses
    pool.endpoint("already-up")  # a server that ran before the replay (e.g. the run's own)
    local_b = ModelProfile(name="lb", model="b", provider="local", local_model="fake-b", timeout=30)
    profiles = [*jobs.profiles.profiles.values(), local_b]
    mine = WhatIfJobs(default_registry(), ModelAssignment.of(None, profiles=profiles), timeout_s=60)
    r = next(x for x in records if x.task == 0)
    job = mine.start(0, out, r, "Solve", "lb")
    assert job.done.wait(60), "the replay did not end"
    assert job.status == "done", job.error
    assert job.outcome is not None and job.outcome.after.reward_raw == 1.0  # model b answered through "lb"
    assert sorted(pool.running()) == ["already-up"]  # the one it started is stopped, the other left
    assert job.stopped == ["fake-b"]
    app = UiApp(RunIndex([out]), whatif=mine)
    page = app.handle("/episode", {"src": "0", "id": r.identity_digest or "", "task": "0"}).body.decode()
    assert "stopped the embedded model server(s) it started: fake-b" in page
