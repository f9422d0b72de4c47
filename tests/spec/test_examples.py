"""Few-shot examples are checked step by step against the spec (file formats, line numbers)."""

from __future__ import annotations

import json

import pytest

from stateflow.spec import SpecError, library_spec
from stateflow.spec.examples import check_example, check_examples_file

REACT = library_spec("react")

EXAMPLES = """\
Question: What is the elevation range of the area?
Thought: I need to search.
Action: Search
Action Input: eastern sector
Observation: It extends to 7,000 ft.
Final Thought: The range is 1,800 to 7,000 ft.
Answer: 1,800 to 7,000 ft
---
Question: Who wrote it?
Thought: I know this.
Answer: Somebody
---
Question: Is it true?
Thought: Let me check.
Action: Search
Action Input: fact
Observation: yes
"""


def test_valid_and_first_violating_step(tmp_path):
    path = tmp_path / "ex.txt"
    path.write_text(EXAMPLES)
    reports = check_examples_file(REACT, path)
    assert [r.ok for r in reports] == [True, False, False]
    assert reports[0].trace[-1] == "Answer"
    bad = reports[1]
    assert (bad.step, bad.line, bad.error_line) == (3, 9, 11)
    assert "Answer cannot come after Thought; valid here: Action" in bad.message
    short = reports[2]
    assert short.step == 6 and "ends after Observation; expected Thought, Final-Thought" in short.message
    assert str(bad).startswith("example 2 (line 9): step 3 (line 11):")


def test_longest_text_wins_and_preamble_is_a_violation():
    r = check_example(REACT, "Question: q\nFinal Thought: done\nAnswer: a")
    assert r.ok and r.trace == ("Question", "Final-Thought", "Answer")
    r = check_example(REACT, "Here is an example.\nQuestion: q\nFinal Thought: done\nAnswer: a")
    assert not r.ok and r.step == 1 and "text before the first state text" in r.message


def test_constraints_are_checked(tmp_path):
    from stateflow.spec import AgentSpec

    spec = AgentSpec.from_text(
        '(define t (:states (Q "Q:" :env-input) (Tool "Tool:" (:output-constrs "a" "b"))) (:behavior (next Q Tool)))'
    )
    path = tmp_path / "ex.json"
    path.write_text(json.dumps(["Q: x\nTool: a", "Q: x\nTool: c"]))
    reports = check_examples_file(spec, path)
    assert reports[0].ok and not reports[1].ok
    assert "Tool content 'c' is not one of ['a', 'b']" in reports[1].message


def test_bad_example_files(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"not": "a list"}')
    with pytest.raises(SpecError, match="list of strings"):
        check_examples_file(REACT, p)
    p.write_text("[1, 2")
    with pytest.raises(SpecError, match="invalid JSON"):
        check_examples_file(REACT, p)
    with pytest.raises(FileNotFoundError):
        check_examples_file(REACT, tmp_path / "missing.txt")
