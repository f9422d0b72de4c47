"""Generated sections between marker lines: replaced in place, the rest untouched, bad markers refused."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stateflow.tasks.reports import doc_sections
from stateflow.tasks.reports.doc_sections import (
    MarkerError,
    SectionMarkers,
    check_section,
    replace_section,
    write_section,
)

M = SectionMarkers("paper")
DOC = "# Results\n\nintro\n\n<!-- paper-begin -->\nold table\nold plot\n<!-- paper-end -->\n\n## Later\ntail text\n"


def test_section_is_replaced_in_place_and_the_rest_is_untouched():
    new = replace_section(DOC, M, "new table\n\n")
    assert new == "# Results\n\nintro\n\n<!-- paper-begin -->\nnew table\n<!-- paper-end -->\n\n## Later\ntail text\n"


def test_missing_section_is_appended_after_a_blank_line():
    section = "<!-- paper-begin -->\nbody\n<!-- paper-end -->\n"
    assert replace_section("# Results\ntext", M, "body") == "# Results\ntext\n\n" + section
    assert replace_section("", M, "body") == section


def test_indented_markers_count_and_a_quoted_marker_does_not():
    doc = "see `<!-- paper-begin -->` in prose\n  <!-- paper-begin -->\nold\n<!-- paper-end -->  \nend"
    assert replace_section(doc, M, "new") == (
        "see `<!-- paper-begin -->` in prose\n<!-- paper-begin -->\nnew\n<!-- paper-end -->\nend"
    )


@pytest.mark.parametrize(
    ("doc", "line", "problem"),
    [
        (
            "a\n<!-- paper-begin -->\nb\n<!-- paper-begin -->\n<!-- paper-end -->\n",
            4,
            "appears again (first on line 2)",
        ),
        ("<!-- paper-begin -->\n<!-- paper-end -->\nx\n<!-- paper-end -->\n", 4, "again (first on line 2)"),
        ("a\nb\n<!-- paper-begin -->\nc\n", 3, "has no <!-- paper-end --> after it"),
        ("a\n<!-- paper-end -->\n", 2, "has no <!-- paper-begin --> before it"),
        ("<!-- paper-end -->\nx\n<!-- paper-begin -->\n", 1, "comes before <!-- paper-begin --> (line 3)"),
    ],
)
def test_bad_markers_name_the_file_and_line(doc, line, problem):
    with pytest.raises(MarkerError) as info:
        replace_section(doc, M, "new", where="docs/results.md")
    assert (info.value.where, info.value.line) == ("docs/results.md", line)
    assert str(info.value).startswith(f"docs/results.md:{line}: ") and problem in str(info.value)


def test_a_body_holding_a_marker_is_refused():
    with pytest.raises(MarkerError, match="new section holds the marker <!-- paper-end -->"):
        replace_section(DOC, M, "table\n<!-- paper-end -->\n")


def test_write_section_leaves_a_file_with_bad_markers_as_it_was(tmp_path):
    path = tmp_path / "results.md"
    bad = "x\n<!-- paper-begin -->\n<!-- paper-begin -->\n"
    path.write_text(bad)
    with pytest.raises(MarkerError, match=rf"{path}:3: "):
        write_section(path, M, "new")
    with pytest.raises(MarkerError, match=rf"{path}:3: "):
        check_section(path, M)
    assert path.read_text() == bad and sorted(p.name for p in tmp_path.iterdir()) == ["results.md"]


def test_write_section_creates_then_replaces(tmp_path):
    path = tmp_path / "sub" / "results.md"
    check_section(path, M)  # absent: fine
    write_section(path, M, "one")
    path.write_text(path.read_text() + "\nkept\n")
    write_section(path, M, "two")
    assert path.read_text() == "<!-- paper-begin -->\ntwo\n<!-- paper-end -->\n\nkept\n"


_line = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=12)
_lines = st.lists(_line.filter(lambda s: s.strip() not in (M.begin, M.end)), max_size=5)


@given(before=_lines, old=_lines, after=_lines, first=_lines, second=_lines)
def test_replacing_keeps_everything_outside_and_replacing_twice_equals_once(before, old, after, first, second):
    doc = "\n".join([*before, M.begin, *old, M.end, *after])
    body1, body2 = "\n".join(first) or "x", "\n".join(second) or "y"
    once = replace_section(doc, M, body1)
    assert once == "\n".join([*before, M.begin, *body1.rstrip("\n").split("\n"), M.end, *after])
    assert replace_section(once, M, body2) == replace_section(doc, M, body2)


def test_the_module_docstring_example_runs_as_written():
    result = doctest.testmod(doc_sections)
    assert result.attempted > 0 and result.failed == 0
