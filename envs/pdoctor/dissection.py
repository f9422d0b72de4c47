"""Root-cause dissection: mutate a failing request until the agent passes.

Single edits, tried smallest first (each is one change to the request):

1. ``rerun``: the same request again (passes → the failure was probabilistic);
2. ``terminal``: one terminal of one clause rephrased (its next surface form);
3. ``connective``: one connective of one sentence replaced by the next one;
4. ``clause order``: the clauses of one sentence reversed;
5. ``topic``: the same structure with another profession's activities;
6. ``drop sentence``: one sentence removed (this weakens the constraints: the agent is then
   judged against the smaller set).

Mutations 2-5 keep the constraints exactly; the first mutation after which the agent passes is
reported, so a "terminal" diagnosis means a wording confused the agent, a "drop sentence" one
names the sentence whose requirement it could not meet. ``unresolved`` means no single edit
within the budget made it pass.

The agent is any ``attempt(request) -> bool`` (see ``stateflow.tasks.pdoctor.dissect`` for running a flow).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from stateflow.envs.pdoctor.grammar import CONNECTIVES, render_sentence
from stateflow.envs.pdoctor.request import Clause, Request, Sentence
from stateflow.envs.pdoctor.topics import TOPICS, tool_name

__all__ = ["Diagnosis", "Mutation", "dissect", "mutations"]


@dataclass(frozen=True)
class Mutation:
    """One edited request and what the edit was."""

    kind: str  # rerun | terminal | connective | clause order | topic | drop sentence
    description: str
    request: Request


@dataclass(frozen=True)
class Diagnosis:
    """The result of a dissection.

    Attributes:
        cause: the kind of the first passing mutation, or ``"unresolved"``.
        mutation: that mutation (``None`` when unresolved).
        tried: how many mutated requests the agent ran.
    """

    cause: str
    mutation: Mutation | None
    tried: int


def _with_sentence(r: Request, i: int, s: Sentence) -> Request:
    return replace(r, sentences=(*r.sentences[:i], s, *r.sentences[i + 1 :]))


def _rephrasings(r: Request) -> Iterator[Mutation]:
    for i, s in enumerate(r.sentences):
        before = render_sentence(s, r.actions)
        for j, c in enumerate(s.clauses):
            for k in range(len(c.words)):
                words = tuple(w + 1 if n == k else w for n, w in enumerate(c.words))
                clauses: list[Clause] = list(s.clauses)
                clauses[j] = replace(c, words=words)
                s2 = replace(s, clauses=tuple(clauses))
                after = render_sentence(s2, r.actions)
                if after != before:  # this form does not use every word slot
                    yield Mutation("terminal", f"sentence {i + 1}: {before!r} -> {after!r}", _with_sentence(r, i, s2))


def _connectives(r: Request) -> Iterator[Mutation]:
    for i, s in enumerate(r.sentences):
        for j, w in enumerate(s.connectives):
            cs = tuple((x + 1) % len(CONNECTIVES) if n == j else x for n, x in enumerate(s.connectives))
            old, new = CONNECTIVES[w % len(CONNECTIVES)], CONNECTIVES[cs[j]]
            yield Mutation(
                "connective", f"sentence {i + 1}: {old!r} -> {new!r}", _with_sentence(r, i, replace(s, connectives=cs))
            )


def _reorders(r: Request) -> Iterator[Mutation]:
    for i, s in enumerate(r.sentences):
        if len(s.clauses) > 1:
            s2 = replace(s, clauses=tuple(reversed(s.clauses)))
            yield Mutation("clause order", f"sentence {i + 1}: clauses reversed", _with_sentence(r, i, s2))


def _topics(r: Request, rng: random.Random) -> Iterator[Mutation]:
    others = [t for t in TOPICS if t.profession != r.profession and len(t.activities) >= len(r.actions)]
    for topic in rng.sample(others, min(2, len(others))):
        acts = tuple(rng.sample(topic.activities, len(r.actions)))
        yield Mutation(
            "topic",
            f"profession {r.profession!r} -> {topic.profession!r}",
            replace(r, profession=topic.profession, actions=acts, tools=tuple(tool_name(a) for a in acts)),
        )


def _drops(r: Request) -> Iterator[Mutation]:
    for i, s in enumerate(r.sentences):
        text = render_sentence(s, r.actions)
        yield Mutation(
            "drop sentence",
            f"sentence {i + 1} dropped: {text!r}",
            replace(r, sentences=r.sentences[:i] + r.sentences[i + 1 :]),
        )


def mutations(request: Request, *, per_kind: int = 3, seed: int = 0) -> Iterator[Mutation]:
    """Single-edit mutations of ``request`` in the order they are tried: at most ``per_kind`` of
    each meaning-preserving kind, then every sentence drop."""
    rng = random.Random(f"dissect:{seed}:{request.label}")
    yield Mutation("rerun", "the same request again", request)
    for kind in (_rephrasings(request), _connectives(request), _reorders(request), _topics(request, rng)):
        yield from itertools.islice(kind, per_kind)
    yield from _drops(request)


def dissect(
    request: Request, attempt: Callable[[Request], bool], *, per_kind: int = 3, budget: int = 20, seed: int = 0
) -> Diagnosis:
    """Run ``attempt`` on mutations of a failing ``request`` until one passes (at most ``budget``)."""
    tried = 0
    for m in itertools.islice(mutations(request, per_kind=per_kind, seed=seed), budget):
        tried += 1
        if attempt(m.request):
            cause = "probability" if m.kind == "rerun" else m.kind
            return Diagnosis(cause, m, tried)
    return Diagnosis("unresolved", None, tried)
