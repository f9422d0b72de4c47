"""A brute-force evaluator of the behaviour semantics, independent of any automaton.

``language(f, sigma, n)`` enumerates L(f) ∩ Σ^{≤n} straight from the definitions in
docs/agent-spec.md (concatenation, union, star, bounded repetition, intersection, complement).
"""

from __future__ import annotations

import itertools
from functools import cache

from stateflow.spec.model import Always, And, Atom, Eventually, Formula, Next, Not, Or, Until

Word = tuple[str, ...]


def all_words(sigma: tuple[str, ...], n: int) -> list[Word]:
    return [w for k in range(n + 1) for w in itertools.product(sigma, repeat=k)]


def _concat(xs: frozenset[Word], ys: frozenset[Word], n: int) -> frozenset[Word]:
    by_len: dict[int, list[Word]] = {}
    for y in ys:
        by_len.setdefault(len(y), []).append(y)
    out = set()
    for x in xs:
        for k in range(n - len(x) + 1):
            for y in by_len.get(k, ()):
                out.add(x + y)
    return frozenset(out)


def _repeat(xs: frozenset[Word], n: int, times: int | None) -> frozenset[Word]:
    """Union of xs^0 .. xs^times (times=None: unbounded, up to length n)."""
    result = frozenset({()})
    power = frozenset({()})
    k = 0
    while times is None or k < times:
        power = _concat(power, xs, n)
        k += 1
        new = result | power
        if new == result and times is None:
            break
        result = new
        if k > n and times is None:
            break
    return result


def language(f: Formula, sigma: tuple[str, ...], n: int) -> frozenset[Word]:
    @cache
    def lang(g: Formula) -> frozenset[Word]:
        if isinstance(g, Atom):
            return frozenset({(g.name,)}) if n >= 1 else frozenset()
        if isinstance(g, Next):
            acc = frozenset({()})
            for p in g.parts:
                acc = _concat(acc, lang(p), n)
            return acc
        if isinstance(g, Or):
            return frozenset().union(*(lang(p) for p in g.parts))
        if isinstance(g, And):
            acc = lang(g.parts[0])
            for p in g.parts[1:]:
                acc = acc & lang(p)
            return acc
        if isinstance(g, Not):
            return frozenset(all_words(sigma, n)) - lang(g.body)
        if isinstance(g, Always):
            return _repeat(lang(g.body), n, None)
        if isinstance(g, Until):
            return _concat(_repeat(lang(g.body), n, g.bound), lang(g.then), n)
        if isinstance(g, Eventually):
            return _concat(frozenset(all_words(sigma, n)), lang(g.body), n)
        raise TypeError(g)

    return lang(f)
