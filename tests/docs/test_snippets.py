"""Every Python snippet of the documentation site runs as written (issue 48, item 1).

A page's ```` ```python ```` blocks run in order in one namespace (a later block may use what an
earlier one defined), in a temporary working directory. A block that cannot run in the test
suite says so in its fence, ```` ```{.python test="skip" reason="..."} ```` (the braces keep
it a Python block for MkDocs): it must give the reason and still compile. A page with a block
marked ``{.python test="local-model"}`` runs on the embedded 0.5B model. Elsewhere what each
``print()`` shows is written under it as ``#> ...`` lines and checked
(``pytest tests/docs/test_snippets.py --update-examples`` rewrites them).
The README's one snippet runs in tests/test_readme.py.

A snippet whose first line is ``# NAME.py`` is a module the reader saves: it is also written to
the working directory, and on such a page every other snippet is a script of its own, run in a
fresh namespace (it must import what it uses from the module, as it would when run as a file;
issue 57, item 18).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from pytest_examples import CodeExample, EvalExample, find_examples

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SKIP, LOCAL_MODEL = "skip", "local-model"
MODULE_LINE = re.compile(r"#\s*([A-Za-z_]\w*\.py)\s*$")  # "# my_flows.py": a file the reader saves


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "data" not in p.relative_to(DOCS).parts)


def _examples(page: Path) -> list[CodeExample]:
    return list(find_examples(page))


def _mode(example: CodeExample) -> str | None:
    return example.prefix_settings().get("test")


def _module_name(example: CodeExample) -> str | None:
    """``NAME.py`` when the snippet's first line says it is that file."""
    first = example.source.lstrip().split("\n", 1)[0]
    found = MODULE_LINE.fullmatch(first)
    return found.group(1) if found else None


def _params() -> list[object]:
    params = []
    for page in _pages():
        examples = _examples(page)
        if not examples:
            continue
        marks = [pytest.mark.local_model] if any(_mode(e) == LOCAL_MODEL for e in examples) else []
        params.append(pytest.param(page, marks=marks, id=str(page.relative_to(DOCS))))
    return params


@pytest.mark.parametrize("page", _params())
def test_the_pages_python_snippets_run_as_written(
    page: Path, eval_example: EvalExample, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch
) -> None:
    examples = _examples(page)
    if any(_mode(e) == LOCAL_MODEL for e in examples):
        request.getfixturevalue("local_small_model")  # skips, naming the set-up script, without it
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # a page may write a module and import it
    namespace: dict[str, object] = {}
    scripts = any(_module_name(e) for e in examples)  # each snippet stands alone, as a file would
    ran = 0
    for example in examples:
        mode = _mode(example)
        module = _module_name(example)
        if module is not None:
            (tmp_path / module).write_text(example.source, encoding="utf-8")
            monkeypatch.delitem(sys.modules, module.removesuffix(".py"), raising=False)  # import this one
        if scripts:
            namespace = {}
        assert mode in (None, SKIP, LOCAL_MODEL), f"{example}: unknown test={mode!r}"
        if mode == SKIP:
            assert example.prefix_settings().get("reason"), f"{example}: a skipped snippet must say why (reason=...)"
            compile(example.source, str(example), "exec")
            continue
        failure = ""
        try:
            if any(_mode(e) == LOCAL_MODEL for e in examples):
                # a real model's words vary with the build and the machine: the page's own checks decide
                namespace = eval_example.run(example, module_globals=namespace)
            elif eval_example.update_examples:
                namespace = eval_example.run_print_update(example, module_globals=namespace)
            else:  # what each print() shows is written under it as "#> ..." and checked
                namespace = eval_example.run_print_check(example, module_globals=namespace)
        except Exception as err:
            # pytest cannot render the traceback pytest-examples rewrites (INTERNALERROR), even as
            # the context of another exception: one line naming the snippet and the error, raised
            # outside this handler
            failure = f"{example}: {type(err).__name__}: {err}"
        if failure:
            pytest.fail(failure, pytrace=False)
        ran += 1
    assert ran, f"{page}: every snippet is skipped"


def test_skip_marks_are_rare_and_explained() -> None:
    marked = [e for p in _pages() for e in _examples(p) if _mode(e) == SKIP]
    total = sum(len(_examples(p)) for p in _pages())
    assert total >= 10
    assert len(marked) * 3 < total, [str(e) for e in marked]


def test_the_readme_has_one_python_snippet_and_test_readme_runs_it() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(re.findall(r"^```python", readme, re.M)) == 1
    assert "```python" in (ROOT / "tests" / "test_readme.py").read_text(encoding="utf-8")
