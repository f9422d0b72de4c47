"""Trust in `verify`: its verdict equals brute force on random small flows x random specs (issue 60).

A seeded generator builds small flows (2-5 working states, 1-2 final states, rules from single
states, lists and ``ANY``, conditions drawn from a small shared pool so that a condition object
repeats, unconditional rules, sometimes a subflow) and random spec formulas (every operator of
the language, bounded loops included), sometimes read through an alphabet that merges or hides
states. For each pair, brute force enumerates every maximal bounded path of the flow (written
here from the runtime's semantics, not from verify's code) and reads it with the automaton:

* verify says *holds* exactly when no path breaks the spec;
* a counterexample is a real path of the flow that breaks the spec, and no path breaks it in
  fewer states.

Then ``shortest_replayable`` against brute force over concrete runs: on 200 more cases (bound up
to 4), each state may say only some of four replies, the conditions read the last reply, and every
run is enumerated: the shortest counterexample a run can take has the length brute force finds (or
there is none), and it is never shorter than the graph's.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from stateflow import ANY, LLM, Flow, State, Transition, last_contains
from stateflow.errors import FlowDefinitionError
from stateflow.spec import AgentSpec, SpecError
from stateflow.spec.verify import verify
from stateflow.subflow import expand_subflows

pytestmark = pytest.mark.filterwarnings("ignore::stateflow.flow.FlowWarning")

CASES = 600
SEED = 60
CONDITIONS = [last_contains(w) for w in ("a", "b", "c")]


@dataclass(frozen=True)
class Case:
    flow: Flow
    spec: AgentSpec
    alphabet: dict[str, str | None] | None
    bound: int
    cut_off: str


def _random_flow(rng: random.Random, index: int) -> Flow:
    while True:
        work = [State(f"S{i}", LLM()) for i in range(rng.randint(2, 5))]
        finals = [State(f"F{i}", final=True) for i in range(rng.randint(1, 2))]
        if rng.random() < 0.2:  # one state runs a small subflow
            a, b, done = State("A", LLM()), State("B", LLM()), State("D", final=True)
            inner = Flow(
                "inner",
                initial=a,
                transitions=[Transition(a, done, when=rng.choice(CONDITIONS)), Transition(a, b), Transition(b, done)],
            )
            work[-1] = State(work[-1].name, inner)
        everyone = work + finals
        rules: list[Transition] = []
        for _ in range(rng.randint(2, 8)):
            roll = rng.random()
            source = (
                ANY
                if roll < 0.2
                else rng.sample(work, rng.randint(1, min(2, len(work))))
                if roll < 0.5
                else rng.choice(work)
            )
            when = None if rng.random() < 0.3 else rng.choice(CONDITIONS)
            rules.append(Transition(source, rng.choice(everyone), when))
        rules.append(Transition(ANY, rng.choice(finals), rng.choice([None, CONDITIONS[0]])))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return Flow(f"random-{index}", initial=work[0], states=everyone, transitions=rules, max_transitions=6)
        except FlowDefinitionError:
            continue


def _formula(rng: random.Random, names: list[str], depth: int) -> str:
    if depth <= 0 or rng.random() < 0.25:
        return rng.choice(names)
    op = rng.choice(["next", "next", "or", "until", "until_N", "always", "eventually", "not", "and"])
    sub = lambda: _formula(rng, names, depth - 1)  # noqa: E731
    if op in ("next", "or", "and"):
        return f"({op} {' '.join(sub() for _ in range(rng.randint(2, 3)))})"
    if op == "until":
        return f"(until {sub()} {sub()})"
    if op == "until_N":
        return f"(until_{rng.randint(1, 3)} {sub()} {sub()})"
    return f"({op} {sub()})"


def _random_case(rng: random.Random, index: int) -> Case:
    flow = _random_flow(rng, index)
    visited = list(expand_subflows(flow).states)
    alphabet: dict[str, str | None] | None = None
    if rng.random() < 0.3:  # merge and hide states
        symbols = ["X", "Y", "Z"]
        alphabet = {n: rng.choice([*symbols, None]) for n in visited}
        names = symbols
    else:
        alphabet = {n: n.replace(".", "-") for n in visited if "." in n} or None
        names = [n.replace(".", "-") for n in visited]
    while True:
        text = f"(define random-{index} (:states {' '.join(names)}) (:behavior {_formula(rng, names, 3)}))"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                spec = AgentSpec.from_text(text)
            break
        except SpecError:  # a behaviour that accepts nothing
            continue
    return Case(flow, spec, alphabet, rng.randint(1, 6), rng.choice(["prefix", "prefix", "complete"]))


# -- brute force, from the runtime's semantics --------------------------------------------------


def _targets(flow: Flow, state: str) -> list[str]:
    """Where a run may go after ``state`` when conditions are unknown: rules in order, up to the
    first unconditional one; a condition seen earlier (it failed then) cannot hold later."""
    out, failed = [], []
    for rule in flow.transitions:
        if not rule.applies_to(state):
            continue
        if rule.when is None:
            out.append(rule.target)
            break
        if any(rule.when is c for c in failed):
            continue
        failed.append(rule.when)
        out.append(rule.target)
    return out


def _maximal_paths(flow: Flow, bound: int) -> Iterator[tuple[list[str], bool]]:
    """Every path a run can take: ``(states, complete)``; incomplete ones hit the bound."""
    stack = [[flow.initial]]
    while stack:
        path = stack.pop()
        here = path[-1]
        if flow.states[here].final:
            yield path, True
        elif len(path) - 1 == bound:
            yield path, False
        else:
            stack.extend([*path, t] for t in _targets(flow, here))


def _violation_length(case: Case, path: list[str], complete: bool) -> int | None:
    """Fewest states of ``path`` that show it breaks the spec, or None."""
    dfa = case.spec.dfa
    q = dfa.start
    for i, name in enumerate(path):
        symbol = (case.alphabet or {}).get(name, name) if case.alphabet and name in case.alphabet else name
        if symbol is None:
            continue
        nxt = dfa.step(q, symbol)
        if nxt is None:
            return i + 1
        q = nxt
    if (complete or case.cut_off == "complete") and not dfa.may_stop(q):
        return len(path)
    return None


def _brute_force(case: Case) -> tuple[int | None, set[tuple[str, ...]]]:
    """The shortest violation's length (None: holds) and every shortest violating prefix."""
    flat = expand_subflows(case.flow)
    best: int | None = None
    witnesses: set[tuple[str, ...]] = set()
    for path, complete in _maximal_paths(flat, case.bound):
        n = _violation_length(case, path, complete)
        if n is None:
            continue
        if best is None or n < best:
            best, witnesses = n, set()
        if n == best:
            witnesses.add(tuple(path[:n]))
    return best, witnesses


def test_verify_agrees_with_brute_force() -> None:
    rng = random.Random(SEED)
    counts = {"holds": 0, "violated": 0, "with subflow": 0, "with alphabet": 0}
    for index in range(CASES):
        case = _random_case(rng, index)
        verdict = verify(case.flow, case.spec, bound=case.bound, alphabet=case.alphabet, cut_off=case.cut_off)  # type: ignore[arg-type]
        best, witnesses = _brute_force(case)
        where = f"case {index}: flow {[str(r) for r in case.flow.transitions]} spec {case.spec.spec.behavior}"
        assert verdict.holds == (best is None), where
        if best is None:
            counts["holds"] += 1
        else:
            counts["violated"] += 1
            assert verdict.counterexample is not None, where
            assert len(verdict.counterexample.path) == best, where
            assert verdict.counterexample.path in witnesses, where
        counts["with subflow"] += any(st.subflow is not None for st in case.flow.states.values())
        counts["with alphabet"] += case.alphabet is not None
    print(f"differential: {CASES} cases, {counts}")
    # the generator must exercise both answers, not only one
    assert counts["holds"] >= 100 and counts["violated"] >= 100, counts


# -- shortest_replayable against brute force over concrete runs ---------------------------------

REPLIES = ("a", "b", "c", "x")  # every state is an LLM state; the conditions read the last reply


def _concrete_shortest(case: Case, bound: int, replies: dict[str, list[str]]) -> int | None:
    """The fewest states of a run prefix that breaks the spec, over every run whose replies come
    from ``replies[state]`` (each visit picks one), by depth-first enumeration."""
    from stateflow.context import Context
    from stateflow.messages import History, Kind, Message

    flat = expand_subflows(case.flow)
    best: list[int | None] = [None]

    def symbol(name: str) -> str | None:
        return case.alphabet[name] if case.alphabet and name in case.alphabet else name

    def step(q: int | None, name: str) -> int | None:
        s = symbol(name)
        return q if s is None or q is None else case.spec.dfa.step(q, s)

    def walk(path: list[str], history: list[Message], q: int) -> None:
        here = flat.states[path[-1]]
        if here.final or len(path) - 1 >= bound:
            return
        for reply in replies.get(here.name, [""]):
            grown = [*history, Message("assistant", "llm", here.name, Kind.LLM, reply)] if here.outputs else history
            rule = flat.decide(Context(task="", history=History(grown), state=here.name))
            if rule is None:
                continue
            nxt = [*path, rule.target]
            q2 = step(q, rule.target)
            target = flat.states[rule.target]
            broken = (
                q2 is None
                or (target.final and not case.spec.dfa.may_stop(q2))
                or (
                    not target.final
                    and len(nxt) - 1 >= bound
                    and case.cut_off == "complete"
                    and not case.spec.dfa.may_stop(q2)
                )
            )
            if broken:
                if best[0] is None or len(nxt) < best[0]:
                    best[0] = len(nxt)
                continue
            walk(nxt, grown, q2)  # type: ignore[arg-type]

    q0 = step(case.spec.dfa.start, flat.initial)
    if q0 is None:
        return 1
    walk([flat.initial], [], q0)
    return best[0]


def test_shortest_replayable_agrees_with_brute_force_over_runs() -> None:
    from stateflow.outputs import LLM
    from stateflow.spec.replay import Outcome, shortest_replayable

    rng = random.Random(SEED + 1)
    counts = {"none": 0, "found": 0, "graph path no run takes": 0}
    for index in range(200):
        case = _random_case(rng, index)
        bound = min(case.bound, 4)
        flat = expand_subflows(case.flow)
        # each state may say only some of the replies: then some graph paths no run can take
        replies = {
            n: rng.sample(REPLIES, rng.randint(1, len(REPLIES)))
            for n, st in flat.states.items()
            if any(isinstance(o, LLM) for o in st.outputs)
        }
        pool = {n: [Outcome(r, r) for r in said] for n, said in replies.items()}
        found = shortest_replayable(
            case.flow,
            case.spec,
            pool,
            bound=bound,
            alphabet=case.alphabet,
            cut_off=case.cut_off,  # type: ignore[arg-type]
        )
        expected = _concrete_shortest(case, bound, replies)
        where = f"case {index}: {[str(r) for r in case.flow.transitions]} {case.spec.spec.behavior}"
        graph = verify(case.flow, case.spec, bound=bound, alphabet=case.alphabet, cut_off=case.cut_off)  # type: ignore[arg-type]
        if expected is None:
            assert found is None, where
            counts["none"] += 1
            counts["graph path no run takes"] += not graph.holds
        else:
            assert found is not None and len(found.counterexample.path) == expected, where
            counts["found"] += 1
            assert graph.counterexample is not None and len(graph.counterexample.path) <= expected, where
            counts["graph path no run takes"] += len(graph.counterexample.path) < expected
    print(f"replayable differential: 200 cases, {counts}")
    assert counts["none"] >= 20 and counts["found"] >= 20 and counts["graph path no run takes"] >= 5, counts
