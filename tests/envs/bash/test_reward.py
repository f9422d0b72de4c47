"""The pure reward parts, checked against hand-computed values and an independent TF-IDF."""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stateflow.envs.bash.reward import (
    answer_similarity,
    bash_reward,
    content_score,
    content_targets,
    diff_score,
    parse_git_status,
)


def test_parse_git_status_pairs_path_and_status() -> None:
    out = " M testbed/a.php\n?? tmp/\n D system/x.txt\nA  new.txt\n"
    assert parse_git_status(out) == [
        ("testbed/a.php", "M"),
        ("tmp/", "??"),
        ("system/x.txt", "D"),
        ("new.txt", "A"),
    ]


def test_parse_git_status_quoted_space_breaks_pairing_like_upstream() -> None:
    out = '?? "system/folder2/special text3.txt"\n?? b.txt\n'
    # tokens: ?? "system/folder2/special text3.txt" ?? b.txt -> pairs shift, last token dropped
    assert parse_git_status(out) == [('"system/folder2/special', "??"), ("??", 'text3.txt"')]


@pytest.mark.parametrize(("n_diffs", "expected"), [(0, 0.33), (1, 0.05), (2, 0.0), (5, 0.0)])
def test_diff_score_erf_steps(n_diffs: int, expected: float) -> None:
    agent = [(f"f{i}", "??") for i in range(n_diffs)]
    score, miss, extra = diff_score(agent, [])
    assert score == expected == round(0.33 * (1 - math.erf(n_diffs)), 2)
    assert miss == [] and sorted(extra) == sorted(agent)


def test_content_targets_only_added_untracked_copied_on_both_sides() -> None:
    agent = [("a.txt", "??"), ("b.txt", "M"), ("c.txt", "A"), ("d.txt", "??")]
    gold = [("a.txt", "??"), ("b.txt", "M"), ("c.txt", "A"), ("e.txt", "C")]
    assert sorted(content_targets(agent, gold)) == [("a.txt", "??"), ("c.txt", "A")]


def test_content_score() -> None:
    assert content_score(0, 0) == 0.33
    assert content_score(1, 3) == 0.11
    assert content_score(2, 3) == 0.22


def _reference_tfidf_cosine(a: str, b: str) -> float:
    """TF-IDF cosine written from the documented definition (lowercase, \\b\\w\\w+\\b, smooth idf, l2)."""
    docs = [re.findall(r"(?u)\b\w\w+\b", d.lower()) for d in (a, b)]
    vocab = sorted(set(docs[0]) | set(docs[1]))
    if not vocab:
        raise ValueError("empty vocabulary")
    n = 2
    df = {t: sum(t in set(d) for d in docs) for t in vocab}
    idf = {t: math.log((1 + n) / (1 + df[t])) + 1 for t in vocab}
    vecs = []
    for d in docs:
        tf = Counter(d)
        v = [tf[t] * idf[t] for t in vocab]
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        vecs.append([x / norm for x in v])
    return sum(x * y for x, y in zip(vecs[0], vecs[1], strict=True))


words = st.sampled_from(["apple", "Pear", "fig", "x", "42", "a1", "txt", "testbed", "dir1", "é", "ÉTÉ", "été"])
texts = st.lists(words, max_size=12).map(lambda ws: " ".join(ws) + "\n")


@settings(max_examples=150, deadline=None)
@given(texts, texts)
def test_answer_similarity_matches_reference_tfidf(a: str, b: str) -> None:
    try:
        expected = _reference_tfidf_cosine(a, b)
    except ValueError:
        expected = 1.0 if a == b else 0.0
    assert answer_similarity(a, b) == pytest.approx(expected, abs=1e-12)


def test_answer_similarity_fallbacks() -> None:
    assert answer_similarity("", "") == 1.0  # empty vocabulary, equal
    assert answer_similarity("a", "b") == 0.0  # single-letter tokens only: empty vocabulary, different
    assert answer_similarity("hello world", None) == 0.0  # corrupt gold


def test_perfect_submission_is_exactly_one() -> None:
    status = [("tmp/", "??"), ("testbed/a.txt", "M")]
    result = bash_reward(status, list(status), {("tmp/", "??"): True}, "5 files\n", "5 files\n")
    assert result.reward == 1.0
    assert result.info()["reward"] == {"file_diff": 0.33, "file_changes": 0.33, "answer_similarity": 0.33}
    assert result.info()["diff_same"] == {"files": [("tmp/", "??")], "correct": 1, "total": 1}


def test_partial_submission_parts() -> None:
    agent = [("x.txt", "??")]
    gold = [("x.txt", "??"), ("y.txt", "??")]
    result = bash_reward(agent, gold, {("x.txt", "??"): False}, "alpha beta", "gamma delta")
    assert (result.file_diff, result.file_changes, result.answer_similarity_score) == (0.05, 0.0, 0.0)
    assert result.reward == pytest.approx(0.06)
    assert result.miss == [("y.txt", "??")] and result.extra == []
