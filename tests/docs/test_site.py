"""The documentation site builds offline and strictly; its generated pages come from the code."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stateflow.cli.main import build_command
from stateflow.cli.reference import cli_reference

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from docs_griffe import to_markdown  # noqa: E402  (scripts/ is not a package)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built once by scripts/docs.sh (strict) into a temporary directory."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        # no --quiet: it hides warnings from the counter that makes --strict fail on them
        ["bash", str(ROOT / "scripts" / "docs.sh"), "--site-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def test_the_strict_build_writes_every_section(site: Path) -> None:
    for page in (
        "index.html",
        "concepts/judge.html",
        "tutorials/sql-flow.html",
        "howto/endpoints.html",
        "durable.html",
        "results.html",
        "reference/cli.html",
        "reference/api/flows.html",
    ):
        assert (site / page).is_file(), page
    assert not (site / "data").exists()  # the archived records stay out of the site
    # a fence MkDocs did not recognise (e.g. an unknown option after the language) shows as text
    unrendered = [str(p.relative_to(site)) for p in site.rglob("*.html") if "<p>```" in p.read_text(encoding="utf-8")]
    assert not unrendered


def test_the_site_fetches_nothing_from_the_network(site: Path) -> None:
    html = "\n".join(p.read_text(encoding="utf-8") for p in site.rglob("*.html"))
    for host in ("fonts.googleapis.com", "fonts.gstatic.com", "cdn.jsdelivr.net", "unpkg.com"):
        assert host not in html
    assert (site / "search" / "search_index.js").is_file()  # the offline plugin's search index


def test_the_api_reference_is_the_docstrings(site: Path) -> None:
    flows = (site / "reference" / "api" / "flows.html").read_text(encoding="utf-8")
    assert "A validated StateFlow definition." in flows  # Flow's docstring
    assert "An LLM-judged classification of the history." in flows  # Judge's docstring


def test_the_cli_reference_lists_every_command_and_option(site: Path) -> None:
    page = cli_reference()
    root = build_command()
    for name, command in root.commands.items():
        assert f"## `stateflow {name}`" in page, name
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert f"`{opt}" in page or f" {opt}" in page, (name, opt)
    html = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "stateflow run" in html and "--policy" in html


def test_doctests_and_roles_become_markdown() -> None:
    text = "See :func:`~stateflow.runtime.run` and :mod:`stateflow.outputs`.\n\n>>> [1]\n[1]\n\nafter"
    assert to_markdown(text) == "See `run` and `stateflow.outputs`.\n\n```pycon\n>>> [1]\n[1]\n```\n\nafter"
    fenced = "```python\n>>> x\n```"
    assert to_markdown(fenced) == fenced


def test_the_docs_extra_is_installed_by_setup() -> None:
    assert "docs" in (ROOT / "scripts" / "setup.sh").read_text().split('-e ".[', 1)[1].split("]", 1)[0].split(",")
    assert importlib.util.find_spec("mkdocs") is not None


def test_the_readmes_links_into_the_docs_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t for t in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme) if "://" not in t]
    assert len(targets) >= 15
    missing = [t for t in targets if not (ROOT / t).is_file()]
    assert not missing, missing


def test_search_works_from_the_file_system_in_chromium(site: Path) -> None:
    """Read offline from file://, the site's search answers (the pinned shim runs its worker)."""
    from docs_screenshots import open_chromium
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = open_chromium()
    try:
        driver.get((site / "index.html").as_uri())
        assert driver.title.startswith("StateFlow")
        box = driver.find_element(By.CSS_SELECTOR, "input.md-search__input")  # in the header at this width
        box.click()
        box.send_keys("blackboard")
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "li.md-search-result__item"))
        hits = [a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, "li.md-search-result__item a")]
        assert any("/concepts/context.html" in h for h in hits), hits
    finally:
        driver.quit()
