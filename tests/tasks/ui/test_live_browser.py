"""The live page in a real browser: a run against the fake OpenAI server streaming its replies
word by word, its current episode's state and tokens shown while the episode is still running
(before its record is written), then the episode leaving the page once its record is saved."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from stateflow.tasks.harness.live_file import LIVE_DIR
from stateflow.tasks.harness.records import ResultsFile
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.sql.benchmark import INTERCODE_SQL
from stateflow.tasks.ui.app import UiApp
from stateflow.tasks.ui.index import RunIndex
from stateflow.tasks.ui.server import running

from stateflow import ModelAssignment, ModelProfile
from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.tasks.ui.test_browser import _shot, _wait_ready, browser  # noqa: F401  (a fixture)

pytest.importorskip("selenium.webdriver", reason="pip install selenium (scripts/setup.sh does)")
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

THOUGHT = "Thought: " + " ".join(f"word{i}" for i in range(60))


def respond(model: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """A long thought (streamed a word at a time), one query, then a submit."""
    said = [str(m.get("content") or "") for m in messages if m.get("role") == "assistant"]
    ran = any("execute[SELECT COUNT(*)" in text for text in said)
    if ran:
        return "Thought: done.\nAction: submit"
    return f"{THOUGHT}\nAction: execute[SELECT COUNT(*) FROM singer]"


def _records(out: Path) -> int:
    path = out / "results.jsonl"
    return len(ResultsFile(path).load().records) if path.exists() else 0


def test_live_page_streams_the_current_episode_before_its_record(sql_available, tmp_path, browser) -> None:  # noqa: F811
    out = tmp_path / "run"
    out.mkdir()
    with FakeOpenAIServer(respond, chunk_delay_s=0.05) as srv:
        profile = ModelProfile(name="fake", model="fake", base_url=srv.url, api_key_env=None, max_retries=0, timeout=60)
        spec = RunSpec(
            INTERCODE_SQL,
            ("stateflow",),
            models=ModelAssignment.of({"default": "fake"}, profiles=[profile]),
            models_label="default=fake",
            out=out,
            tasks="0:1",
            live_tokens=True,
        )
        app = UiApp(RunIndex([out]), live_poll_s=0.1)
        with running(app) as server:
            browser.get(server.url + "live")
            _wait_ready(browser)
            assert browser.find_element(By.ID, "live-none").is_displayed()
            failure: list[BaseException] = []

            def go() -> None:
                try:
                    evaluate(spec, progress=False)
                except BaseException as err:  # reported by the test below
                    failure.append(err)

            worker = threading.Thread(target=go)
            worker.start()
            try:
                # tokens of the streamed thought reach the page while the episode runs
                WebDriverWait(browser, 60).until(
                    lambda d: (
                        "word20"
                        in d.execute_script(
                            "const t = document.querySelector('.live-ep .tokens'); return t ? t.textContent : ''"
                        )
                    )
                )
                assert _records(out) == 0  # ... before the episode's record is written
                ep = browser.find_element(By.CSS_SELECTOR, ".live-ep")
                assert ep.get_attribute("data-state")  # the state it is in
                assert "stateflow · task 0 · default=fake" in ep.find_element(By.CLASS_NAME, "lhead").text
                assert not browser.find_element(By.ID, "live-none").is_displayed()
                _shot(browser, "live")
                # the record is saved: the episode leaves the feed, its side file is gone
                WebDriverWait(browser, 90).until(
                    lambda d: d.find_element(By.CSS_SELECTOR, ".live-ep").get_attribute("data-done") == "yes"
                )
                assert _records(out) == 1
                steps = browser.find_elements(By.CSS_SELECTOR, ".live-ep .lsteps .m")
                assert any("SELECT COUNT(*) FROM singer" in s.text for s in steps)
            finally:
                worker.join(120)
            assert not failure, failure
            assert not (out / LIVE_DIR).exists()
