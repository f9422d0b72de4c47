"""Root-cause dissection with scripted agents whose weakness is known."""

from __future__ import annotations

from stateflow.envs.pdoctor import ClauseForm, SynthesisConfig, synthesize
from stateflow.envs.pdoctor.dissection import dissect, mutations

from .helpers import before, hand_request, one

REQ = hand_request(one(before(0, 1), before(2, 3)), one(before(1, 2, ClauseForm.PREP)), one(before(3, 0)))


def test_meaning_preserving_mutations_keep_the_constraints_and_change_the_text():
    r = synthesize(SynthesisConfig(n=10, seed=1), 9)
    for m in mutations(r, per_kind=50):
        if m.kind in ("terminal", "connective", "clause order", "topic"):
            assert sorted((o.first, o.then) for o in m.request.orders) == sorted((o.first, o.then) for o in r.orders)
            assert m.request.text != r.text, m.description
        if m.kind == "drop sentence":
            assert len(m.request.sentences) == len(r.sentences) - 1


def test_an_agent_that_cannot_meet_one_sentence_gets_that_sentence_named():
    def attempt(req):  # fails whenever the (unsatisfiable-for-it) sentence 3 is present
        return not any(c.precedes and c.subj.actions == (3,) for s in req.sentences for c in s.clauses)

    d = dissect(REQ, attempt)
    assert d.cause == "drop sentence" and "sentence 3 dropped" in d.mutation.description


def test_an_agent_confused_by_one_wording_is_diagnosed_as_terminal():
    confusing = "must be done before"

    def attempt(req):
        return confusing not in req.text

    d = dissect(hand_request(one(before(0, 1))), attempt)
    assert d.cause == "terminal" and confusing in d.mutation.description
    assert d.mutation.request.orders[0].first == 0 and d.mutation.request.orders[0].then == 1


def test_a_flaky_agent_is_probability_and_a_hopeless_one_is_unresolved():
    calls = []

    def flaky(req):
        calls.append(req)
        return len(calls) == 1

    assert dissect(REQ, flaky).cause == "probability"
    d = dissect(REQ, lambda req: False, budget=5)
    assert d.cause == "unresolved" and d.tried == 5 and d.mutation is None
