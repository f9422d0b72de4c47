"""Vote(k): sample k replies, execute each read-only, reply with the majority's result."""

from __future__ import annotations

import itertools
import re

import pytest

from stateflow import LLM, Flow, Prompt, State, Tool, ToolResult, Transition, run
from stateflow.backends.scripted import ScriptedLLM
from stateflow.vote import Candidate, Variant, Vote, decided, tally
from tests.core.helpers import scripted


def parse(text: str) -> str | None:
    m = re.search(r"Action: execute\[(.*)\]", text)
    return m.group(1) if m else None


def reply(stmt: str) -> str:
    return f"Thought: t\nAction: execute[{stmt}]"


RESULTS = {"A1": (1,), "A2": (1,), "B": (2,), "C": (3,)}


def fake_executor(calls: list[str]):
    def execute(ctx, action):
        calls.append(action)
        if action not in RESULTS:
            raise RuntimeError(f"no such table in {action}")
        return RESULTS[action]

    return execute


def vote_flow(vote: Vote, seen: list[str]) -> Flow:
    def act(ctx) -> ToolResult:
        seen.append(parse(ctx.history.last("llm").content))
        return ToolResult("ok", {"ok": True})

    ask = State("Ask", Prompt("p"), LLM(vote=vote), Tool(act, "execute"))
    return Flow("vote", initial=ask, transitions=[Transition(ask, State("End", final=True))])


def test_the_majority_result_wins_even_when_sampled_later_and_every_candidate_is_traced():
    calls: list[str] = []
    seen: list[str] = []
    llm = ScriptedLLM([reply("B"), reply("A1"), reply("X"), reply("A2"), reply("C")])
    r = run(vote_flow(Vote(parse, fake_executor(calls), k=5), seen), "T", models=scripted(), scripts={"fake": llm})
    assert seen == ["A1"]  # A1 and A2 share the result (1,): two votes beat B's and C's one
    assert calls == ["B", "A1", "X", "A2", "C"]
    cands = [s for s in r.steps if "[candidate" in s.output]
    assert [s.detail["votes"] for s in cands] == [1, 2, 0, 2, 1]
    assert [s.detail["won"] for s in cands] == [False, True, False, False, False]
    assert cands[2].detail["error"].startswith("RuntimeError")
    assert r.usage().calls == 5 and all(s.usage is not None for s in cands)
    assert [q.params["seed"] for q in llm.requests] == [0, 1, 2, 3, 4]
    winner = r.history.last("llm")
    tally_ = {k: v for k, v in winner.meta["vote"].items() if k != "candidates"}
    assert tally_ == {"winner": 1, "votes": 2, "k": 5, "per_candidate": [1, 2, 0, 2, 1], "errors": 1}
    # each candidate's action and result travel with the message (result files keep them)
    kept = winner.to_dict()["meta"]["vote"]
    assert kept["winner"] == 1
    assert [c["action"] for c in kept["candidates"]] == ["B", "A1", "X", "A2", "C"]
    assert [c["result"] for c in kept["candidates"]] == ["(2,)", "(1,)", None, "(1,)", "(3,)"]
    assert kept["candidates"][2]["error"].startswith("RuntimeError: no such table in X")
    assert kept["candidates"][0]["error"] is None
    assert {q.params["temperature"] for q in llm.requests} == {0.7}


def test_a_tie_goes_to_the_first_sample_and_errors_never_win():
    c = [
        Candidate("x", "X", None, "boom"),
        Candidate("b", "B", (2,), None),
        Candidate("c", "C", (3,), None),
    ]
    assert tally(c)[0] == 1
    assert tally([Candidate("x", "X", None, "e"), Candidate("y", None, None, "no action")]) == (0, {0: 0, 1: 0})


def test_all_errors_reply_with_the_first_candidate():
    seen: list[str] = []
    llm = ScriptedLLM([reply("X"), "no action", reply("Y")])
    r = run(vote_flow(Vote(parse, fake_executor([]), k=3), seen), "T", models=scripted(), scripts={"fake": llm})
    assert seen == ["X"]
    assert r.usage().calls == 3


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="temperature"):
        Vote(parse, fake_executor([]), temperature=0.0)
    with pytest.raises(ValueError, match="k must"):
        Vote(parse, fake_executor([]), k=0)


def test_greedy_first_asks_candidate_0_with_the_request_settings_and_a_tie_falls_back_to_it():
    seen: list[str] = []
    llm = ScriptedLLM([reply("C"), reply("B"), reply("X")])  # three different outcomes: no majority
    vote = Vote(parse, fake_executor([]), k=3, greedy_first=True)
    run(vote_flow(vote, seen), "T", models=scripted(), scripts={"fake": llm})
    assert seen == ["C"]  # the tie goes to the greedy reply
    first, *rest = llm.requests
    assert first.params.get("temperature") != 0.7 and "seed" not in first.params
    assert [(q.params["temperature"], q.params["seed"]) for q in rest] == [(0.7, 1), (0.7, 2)]


def test_variants_ask_each_candidate_with_its_own_rewritten_prompt_and_the_first_wins_a_tie():
    llm = ScriptedLLM([reply("C"), reply("B"), reply("X")])  # three outcomes, no majority
    variants = (
        Variant("own"),
        Variant("shout", rewrite=str.upper),
        Variant("sampled, renamed", rewrite=lambda t: t.replace("instruction", "order"), sampled=True),
    )
    vote = Vote(parse, fake_executor([]), variants=variants)
    assert vote.k == 3
    ask = State("Ask", Prompt("instruction"), LLM(vote=vote), Tool(lambda ctx: ToolResult("ok", {"ok": True}), "x"))
    flow = Flow("vote", initial=ask, transitions=[Transition(ask, State("End", final=True))], system_message="system")
    r = run(flow, "the task", models=scripted(), scripts={"fake": llm})
    own, shout, renamed = llm.requests
    texts = [[m["content"] for m in q.messages] for q in (own, shout, renamed)]
    assert "system" in texts[0][0] and "the task" in "\n".join(texts[0])
    assert all(t == t.upper() for t in texts[1]) and "THE TASK" in "\n".join(texts[1])  # system message too
    assert texts[2] == [t.replace("instruction", "order") for t in texts[0]] != texts[0]
    assert "temperature" not in shout.params or shout.params["temperature"] != 0.7
    assert (renamed.params["temperature"], renamed.params["seed"]) == (0.7, 2)
    cands = [s for s in r.steps if "[candidate" in s.output]
    assert [s.detail["variant"] for s in cands] == ["own", "shout", "sampled, renamed"]
    assert r.history.last("llm").content == reply("C")  # the tie goes to the first variant
    assert r.history.last("llm").meta["vote"]["variants"] == ["own", "shout", "sampled, renamed"]
    # the agent's system message is restored after each variant
    assert llm.requests[0].messages[0]["content"] == "system"


def test_variants_fix_k_and_a_conflicting_k_is_refused():
    with pytest.raises(ValueError, match="k=5 but 2 variants"):
        Vote(parse, fake_executor([]), k=5, variants=(Variant("a"), Variant("b")))
    assert Vote(parse, fake_executor([])).k == 5


def _candidates(keys: tuple[str | None, ...]) -> list[Candidate]:
    """``None``: a candidate that failed."""
    return [Candidate(k or "", k, k, None if k is not None else "failed") for k in keys]


def test_decided_is_true_exactly_when_no_remaining_replies_can_change_the_winner():
    # every prefix of every vote of up to 5 candidates over 3 results and failures, against
    # brute force over every way the rest could reply (a result seen already, or a new one)
    outcomes = ("a", "b", "c", None)
    checked = 0
    for k in range(1, 6):
        for full in itertools.product(outcomes, repeat=k):
            for asked in range(1, k + 1):  # with nothing asked there is no reply yet
                prefix, remaining = full[:asked], k - asked
                winners = {
                    tally(_candidates(prefix + rest))[0] for rest in itertools.product(outcomes, repeat=remaining)
                }
                assert decided(_candidates(prefix), remaining) == (len(winners) == 1), (prefix, remaining)
                checked += 1
    assert checked > 3000
    assert not decided([], 1)


def test_a_decided_vote_stops_asking_and_replies_as_the_full_vote_would():
    calls: list[str] = []
    seen: list[str] = []
    llm = ScriptedLLM([reply("A1"), reply("A2"), reply("B"), reply("C"), reply("B")])
    vote = Vote(parse, fake_executor(calls), k=5, stop_when_decided=True)
    r = run(vote_flow(vote, seen), "T", models=scripted(), scripts={"fake": llm})
    # after A1, A2 (2 votes) and B, C (1 each) one candidate is left: B could tie at 2, but
    # A's result was seen first, so the fifth is not asked
    assert seen == ["A1"] and calls == ["A1", "A2", "B", "C"] and r.usage().calls == 4
    assert r.history.last("llm").meta["vote"]["asked"] == 4
    assert r.history.last("llm").meta["vote"]["k"] == 5

    seen.clear()
    llm = ScriptedLLM([reply("B"), reply("A1"), reply("A2"), reply("C"), reply("B")])
    r = run(vote_flow(vote, seen), "T", models=scripted(), scripts={"fake": llm})
    assert r.usage().calls == 5 and seen == ["B"]  # B, seen first, could still tie A: the fifth is asked and does


def test_a_quorum_stops_at_the_first_result_two_candidates_share_and_that_result_wins():
    calls: list[str] = []
    seen: list[str] = []
    vote = Vote(parse, fake_executor(calls), k=5, quorum=2)
    # B, C, then A1 and A2 agree: the fifth (B again, which a full vote would tie at 2) is not asked
    llm = ScriptedLLM([reply("B"), reply("C"), reply("A1"), reply("A2"), reply("B")])
    r = run(vote_flow(vote, seen), "T", models=scripted(), scripts={"fake": llm})
    assert calls == ["B", "C", "A1", "A2"] and r.usage().calls == 4 and seen == ["A1"]
    tally_ = r.history.last("llm").meta["vote"]
    assert tally_["asked"] == 4 and tally_["k"] == 5 and tally_["per_candidate"] == [1, 1, 2, 2]

    # failures never count toward the quorum: with no two results alike, all k are asked
    calls.clear()
    seen.clear()
    llm = ScriptedLLM([reply("X"), reply("Y"), reply("B"), reply("Z"), reply("C")])
    r = run(vote_flow(vote, seen), "T", models=scripted(), scripts={"fake": llm})
    assert r.usage().calls == 5 and seen == ["B"]  # the first result that ran wins the 1-1 tie


def test_quorum_reached_counts_only_results_and_bad_quorums_are_refused():
    from stateflow.vote import quorum_reached

    cands = _candidates(("a", None, None, "b"))
    assert not quorum_reached(cands, 2)
    assert quorum_reached(cands + _candidates(("b",)), 2)
    for bad in (1, 6):
        with pytest.raises(ValueError, match="quorum must be between 2 and k=5"):
            Vote(parse, fake_executor([]), k=5, quorum=bad)
