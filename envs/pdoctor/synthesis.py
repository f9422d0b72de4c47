"""Synthesizing requests whose ordering constraints are known by construction.

For request ``index`` of a :class:`SynthesisConfig`: pick the number of actions (cycling through
the configured range, so every count gets an equal share), a topic and its activities; then add
sentences one at a time: expand a random sentence of the grammar, derive its constraints, and
keep it only if the whole set stays satisfiable (Z3). A sentence is given up after ``tries``
rejected expansions, so a request may end with fewer sentences than drawn (``stats.dropped``).

The extended version adds hidden durations and time-bound sentences built from a witness
schedule (so they are satisfiable by construction, and checked with Z3 anyway).

Everything is drawn from ``random.Random`` seeded with a string of (seed, index, version): the
same configuration always yields the same requests, in any process, in any order of access.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from stateflow.envs.pdoctor.grammar import CONNECTIVES, DONE, SC_AFTER, VP_AFTER, VP_NEUTRAL
from stateflow.envs.pdoctor.request import (
    Clause,
    ClauseForm,
    Group,
    Order,
    Relative,
    Request,
    Sentence,
    SynthesisStats,
    TimeBound,
)
from stateflow.envs.pdoctor.solver import IncrementalSolver, satisfiable, witness_order
from stateflow.envs.pdoctor.topics import TOPICS, tool_name

__all__ = ["SynthesisConfig", "parse_range", "synthesize"]

_WORDS = max(len(VP_AFTER), len(VP_NEUTRAL), len(SC_AFTER), len(DONE))


def parse_range(text: str, what: str) -> tuple[int, int]:
    """``"3:8"`` -> ``(3, 8)`` (both ends included); ``"5"`` -> ``(5, 5)``.

    Raises:
        ValueError: naming ``what`` and the expected form.
    """
    a, sep, b = text.strip().partition(":")
    try:
        lo, hi = int(a), int(b) if sep else int(a)
    except ValueError:
        raise ValueError(f"{what} {text!r}: use N or LO:HI (both included), e.g. 3:8") from None
    if lo > hi or lo < 1:
        raise ValueError(f"{what} {text!r}: need 1 <= LO <= HI")
    return lo, hi


@dataclass(frozen=True)
class SynthesisConfig:
    """What to synthesize.

    Attributes:
        n: number of requests.
        actions: (min, max) actions per request, both included (2..10).
        sentences: (min, max) constraint sentences per request, both included.
        tries: rejected expansions before a sentence is given up.
        seed: the seed; the same config always gives the same requests.
        extended: add hidden durations and time bounds (the extended version).
    """

    n: int = 50
    actions: tuple[int, int] = (3, 8)
    sentences: tuple[int, int] = (2, 6)
    tries: int = 10
    seed: int = 0
    extended: bool = False

    def __post_init__(self) -> None:
        lo, hi = self.actions
        if not 2 <= lo <= hi <= 10:
            raise ValueError(f"actions {lo}:{hi}: need 2 <= LO <= HI <= 10 (topics have 10+ activities)")
        if not 1 <= self.sentences[0] <= self.sentences[1]:
            raise ValueError(f"sentences {self.sentences[0]}:{self.sentences[1]}: need 1 <= LO <= HI")
        if self.n < 1 or self.tries < 1:
            raise ValueError(f"n ({self.n}) and tries ({self.tries}) must be >= 1")

    @property
    def label(self) -> str:
        """A compact identity used as the dataset name in result records."""
        a, s = self.actions, self.sentences
        ext = ";extended" if self.extended else ""
        return f"n={self.n};actions={a[0]}:{a[1]};sentences={s[0]}:{s[1]};tries={self.tries};seed={self.seed}{ext}"

    @classmethod
    def from_label(cls, label: str) -> SynthesisConfig:
        """Parse :attr:`label` back (``key=value`` items separated by ``;``).

        Raises:
            ValueError: an unknown key or a malformed value, named.
        """
        kw: dict[str, object] = {}
        for item in filter(None, (p.strip() for p in label.split(";"))):
            key, eq, value = item.partition("=")
            if key == "extended" and not eq:
                kw["extended"] = True
            elif key in ("actions", "sentences"):
                kw[key] = parse_range(value, key)
            elif key in ("n", "tries", "seed"):
                try:
                    kw[key] = int(value)
                except ValueError:
                    raise ValueError(f"pdoctor dataset {label!r}: {key}={value!r} is not an integer") from None
            else:
                raise ValueError(
                    f"pdoctor dataset {label!r}: unknown item {item!r}; "
                    "use n=, actions=LO:HI, sentences=LO:HI, tries=, seed=, extended"
                )
        return cls(**kw)  # type: ignore[arg-type]


def _group(rng: random.Random, pool: list[int], size: int) -> tuple[int, ...]:
    picked = rng.sample(pool, size)
    for a in picked:
        pool.remove(a)
    return tuple(sorted(picked))


def _clause(rng: random.Random, n: int) -> Clause:
    pool = list(range(n))
    big = n >= 4 and rng.random() < 0.25
    subj = _group(rng, pool, 2 if big and rng.random() < 0.5 else 1)
    obj = _group(rng, pool, 2 if big and len(subj) == 1 and len(pool) >= 3 else 1)
    groups = [Group(subj), Group(obj)]
    if pool and rng.random() < 0.3:
        which = rng.randrange(2)
        rel = Relative(
            precedes=rng.random() < 0.5,
            obj=(rng.choice(pool),),
            prepositional=rng.random() < 0.5,
            words=(rng.randrange(_WORDS), rng.randrange(_WORDS)),
        )
        groups[which] = Group(groups[which].actions, rel)
    return Clause(
        form=rng.choice(list(ClauseForm)),
        subj=groups[0],
        obj=groups[1],
        precedes=rng.random() < 0.5,
        words=tuple(rng.randrange(_WORDS) for _ in range(3)),
    )


def _sentence(rng: random.Random, n: int) -> Sentence:
    k = rng.choice((1, 1, 2, 2, 3))
    return Sentence(
        clauses=tuple(_clause(rng, n) for _ in range(k)),
        connectives=tuple(rng.randrange(len(CONNECTIVES)) for _ in range(k - 1)),
    )


def _schedule(order: list[int], durations: tuple[int, ...], day_start: int) -> dict[int, tuple[int, int]]:
    out, t = {}, day_start
    for a in order:
        out[a] = (t, t + durations[a])
        t += durations[a]
    return out


def _bounds(
    rng: random.Random, n: int, orders: list[Order], durations: tuple[int, ...], day_start: int, sentence: int
) -> tuple[TimeBound, ...]:
    order = witness_order(n, orders, (), durations, day_start)
    assert order is not None  # the order constraints were kept satisfiable
    times = _schedule(order, durations, day_start)
    picked = rng.sample(range(n), min(n, max(1, n // 3)))
    out = []
    for a in picked:
        start, end = times[a]
        if start > day_start and rng.random() < 0.5:  # a start bound that the witness meets
            out.append(TimeBound(a, "start_after", start - start % 30, sentence, rng.randrange(4)))
        else:  # a deadline with some slack, rounded to the half hour
            deadline = end + (-end) % 30 + rng.choice((0, 30, 60))
            out.append(TimeBound(a, "finish_before", deadline, sentence, rng.randrange(4)))
    return tuple(out)


def synthesize(config: SynthesisConfig, index: int) -> Request:
    """Request ``index`` (0-based) of ``config``; deterministic.

    Raises:
        IndexError: ``index`` outside ``0..config.n-1``.
    """
    if not 0 <= index < config.n:
        raise IndexError(f"request {index} outside 0..{config.n - 1}")
    t0 = time.perf_counter()
    z3_s = 0.0
    rng = random.Random(f"pdoctor:{config.seed}:{index}:{int(config.extended)}")
    lo, hi = config.actions
    n = lo + index % (hi - lo + 1)
    topic = rng.choice(TOPICS)
    activities = rng.sample(topic.activities, n)
    durations = tuple(rng.choice((30, 60, 90, 120, 150, 180)) for _ in range(n)) if config.extended else None
    day_start = 8 * 60
    sentences: list[Sentence] = []
    orders: list[Order] = []
    rejected = dropped = 0
    t1 = time.perf_counter()
    solver = IncrementalSolver(n, durations, day_start)
    z3_s += time.perf_counter() - t1
    for _ in range(rng.randint(*config.sentences)):
        for _ in range(config.tries):
            candidate = _sentence(rng, n)
            new = [o for c in candidate.clauses for o in c.orders(len(sentences))]
            t1 = time.perf_counter()
            ok = solver.try_add(new)
            z3_s += time.perf_counter() - t1
            if ok:
                sentences.append(candidate)
                orders += new
                break
            rejected += 1
        else:
            dropped += 1
    if durations is not None:
        t1 = time.perf_counter()
        bounds = _bounds(rng, n, orders, durations, day_start, len(sentences))
        ok = satisfiable(n, orders, bounds, durations, day_start)
        z3_s += time.perf_counter() - t1
        if not ok:  # cannot happen: the bounds hold for a witness schedule
            raise AssertionError(f"time bounds of request {index} are unsatisfiable")
        sentences.append(Sentence(bounds=bounds))
    return Request(
        profession=topic.profession,
        actions=tuple(activities),
        tools=tuple(tool_name(a) for a in activities),
        sentences=tuple(sentences),
        durations=durations,
        day_start=day_start,
        label=f"{config.label}#{index}",
        stats=SynthesisStats(time.perf_counter() - t0, z3_s, rejected, dropped),
    )
