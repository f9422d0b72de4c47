"""The flow fingerprint (part of every episode's identity) sees the optional reply levers."""

from __future__ import annotations

import pytest
from stateflow.tasks.harness.identity import flow_fingerprint

from stateflow import LLM, Flow, State, Transition
from stateflow.degenerate import DegenerateCut
from stateflow.repetition import RepeatGuard
from stateflow.vote import Vote


def _action(reply: str) -> str | None:
    return reply or None


def _other_action(reply: str) -> str | None:
    return reply.strip() or None


def _run(ctx, action):
    return action


def _flow(llm: LLM) -> Flow:
    ask = State("Ask", llm)
    done = State("Done", final=True)
    return Flow("f", initial=ask, transitions=[Transition(ask, done)])


def test_flows_without_levers_keep_their_fingerprint_and_each_lever_changes_it() -> None:
    plain = flow_fingerprint(_flow(LLM()))
    assert plain == flow_fingerprint(_flow(LLM()))
    variants = {
        "guard": LLM(guard=RepeatGuard(_action)),
        "guard other parser": LLM(guard=RepeatGuard(_other_action)),
        "guard other temperatures": LLM(guard=RepeatGuard(_action, temperatures=(0.9,))),
        "cut": LLM(cut=DegenerateCut()),
        "cut other run": LLM(cut=DegenerateCut(max_run=12)),
        "vote": LLM(vote=Vote(_action, _run)),
        "vote k=3": LLM(vote=Vote(_action, _run, k=3)),
    }
    prints = {name: flow_fingerprint(_flow(llm)) for name, llm in variants.items()}
    assert plain not in prints.values()
    assert len(set(prints.values())) == len(prints), prints


@pytest.mark.parametrize("make", [lambda: LLM(cut=DegenerateCut()), lambda: LLM(vote=Vote(_action, _run))])
def test_same_levers_same_fingerprint(make) -> None:
    assert flow_fingerprint(_flow(make())) == flow_fingerprint(_flow(make()))
