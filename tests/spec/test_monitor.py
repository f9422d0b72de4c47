"""The decoding monitor against scripted models that violate the spec in each possible way."""

from __future__ import annotations

import pytest

from stateflow.spec import AgentSpec, SpecViolationError, library_spec
from stateflow.spec.completer import CompletionRequest, ScriptedCompleter
from stateflow.spec.monitor import DecodingMonitor
from tests.spec.specs import react_tools

REACT_TOOLS = react_tools()
PROMPT = [{"role": "system", "content": "Follow the format."}, {"role": "user", "content": "Solve it."}]


def env(state, steps):
    return {"Question": "What is 6*7?", "Observation": "42", "Evaluation": "correct"}.get(state, "(input)")


class Tape:
    """A model that continues whichever ideal transcript the prompt is a prefix of."""

    def __init__(self, *transcripts: str):
        self.transcripts = transcripts

    def __call__(self, req: CompletionRequest) -> str:
        last = req.messages[-1]
        prefix = last["content"] if last["role"] == "assistant" else ""
        for t in self.transcripts:
            if t.startswith(prefix):
                return t[len(prefix) :]
        raise AssertionError(f"no transcript continues {prefix!r}")


GOOD = (
    "Question: What is 6*7?\nThought: easy\nAction: search\nAction Input: 6*7\nObservation: 42\n"
    "Final Thought: ok\nAnswer: 42"
)
CLEAN = (
    "Question: What is 6*7?\n"
    "Thought: multiply\nAction: search\nAction Input: 6*7\nObservation: 42\n"
    "Final Thought: it is 42\nAnswer: 42"
)


def _run(spec, outputs, **kw):
    model = ScriptedCompleter(outputs)
    return DecodingMonitor(spec, model, **kw).run(PROMPT, env), model


def test_clean_output_passes_untouched():
    tr, model = _run(REACT_TOOLS, Tape(CLEAN))
    assert tr.trace == ["Question", "Thought", "Action", "Action-Input", "Observation", "Final-Thought", "Answer"]
    assert tr.violations == [] and tr.corrections == 0 and tr.wasted_tokens == 0
    assert tr.stop_reason == "must_stop"
    assert tr.transcript.strip() == CLEAN
    # env-input texts are stop sequences, anchored at line starts
    assert "\nObservation:" in model.requests[0].stop
    # the question was env-input: no model call before it
    assert model.requests[0].messages[-1]["content"] == "Question: What is 6*7?\n"


def test_chunked_generation_gives_the_same_result_in_more_calls():
    whole, _ = _run(REACT_TOOLS, Tape(CLEAN))
    chunked, model = _run(REACT_TOOLS, Tape(CLEAN), chunk_tokens=2)
    assert chunked.trace == whole.trace and chunked.transcript == whole.transcript
    assert chunked.calls > whole.calls
    assert all(r.max_tokens == 2 for r in model.requests)


def test_invalid_state_is_cut_and_corrected_with_common_prefix():
    bad = "Question: What is 6*7?\nThought: easy\nAnswer: 41 or so, and more text here\n"
    tr, model = _run(REACT_TOOLS, Tape(bad + "Final Thought: x", GOOD))
    assert [v.kind for v in tr.violations] == ["transition"]
    assert "Answer is not valid here; valid: Action" in tr.violations[0].detail
    assert tr.violations[0].discarded.startswith("Answer: 41")
    assert tr.corrections == 1 and tr.forced_choices == 0 and tr.wasted_tokens > 0
    # the correction appended the only valid text and generation resumed after it
    assert model.requests[1].messages[-1]["content"].endswith("Thought: easy\nAction:")
    assert tr.trace[-1] == "Answer" and "41" not in tr.transcript


def test_chunking_stops_a_violation_early():
    bad = "Question: What is 6*7?\nThought: easy\nAnswer: " + "blah " * 40
    tr, _ = _run(REACT_TOOLS, Tape(bad, GOOD), chunk_tokens=4)
    assert [v.kind for v in tr.violations] == ["transition"]
    # the wrong line was noticed as soon as its state text was complete, not after 40 words
    assert tr.wasted_tokens <= 4
    assert tr.trace[-1] == "Answer"


def test_preamble_before_any_state_text_is_removed_by_forced_choice():
    good = "Question: What is 6*7?\nFinal Thought: I know it\nAnswer: 42"

    def model(req):
        if req.stop == ("\n",):  # the forced choice question
            assert "Thought:\nFinal Thought:" in req.messages[-1]["content"]
            return "Final Thought:"
        return Tape("Question: What is 6*7?\nSure! Let me help.\nThought: hmm", good)(req)

    tr, _ = _run(REACT_TOOLS, model)
    assert [v.kind for v in tr.violations] == ["preamble"]
    assert tr.forced_choices == 1 and tr.corrections == 1
    assert tr.trace == ["Question", "Final-Thought", "Answer"]
    assert "Sure!" not in tr.transcript


def test_content_constraint_is_a_violation_and_the_model_must_choose_a_value():
    replies = iter(["Google it", "search"])  # first forced reply matches nothing

    def model(req):
        if req.stop == ("\n",):
            return next(replies)
        return Tape(
            "Question: What is 6*7?\nThought: look up\nAction: Google\nAction Input: 6*7\n",
            "Question: What is 6*7?\nThought: look up\nAction: search\nAction Input: 6*7\nObservation: 42\n"
            "Final Thought: ok\nAnswer: 42",
        )(req)

    tr, _ = _run(REACT_TOOLS, model)
    kinds = [v.kind for v in tr.violations]
    assert kinds == ["constraint", "bad-choice"]
    assert "'Google' is not one of ['search', 'finish']" in tr.violations[0].detail
    action = [s for s in tr.steps if s.state == "Action"]
    assert [a.content for a in action] == ["search"]  # chosen by the model, never defaulted
    assert tr.trace[-1] == "Answer"


def test_constraint_values_with_common_prefix_are_cued():
    spec = AgentSpec.from_text(
        '(define t (:states (Q "Q:" :env-input) (Tool "Tool:" (:output-constrs "sql_exec" "sql_desc")))'
        " (:behavior (next Q Tool)))"
    )
    tr, model = _run(spec, ["Tool: shell", "desc"])
    assert [v.kind for v in tr.violations] == ["constraint"]
    assert model.requests[1].messages[-1]["content"].endswith("Tool: sql_")
    assert tr.steps[-1].content == "sql_desc"


def test_early_stop_is_corrected_by_the_next_cue():
    tr, model = _run(
        REACT_TOOLS,
        ["Thought: hmm", " search\nAction Input: x", "Final Thought: done\nAnswer: 42"],
    )
    assert [v.kind for v in tr.violations] == ["early-stop"]
    assert model.requests[1].messages[-1]["content"].endswith("Thought: hmm\nAction:")
    assert tr.trace == ["Question", "Thought", "Action", "Action-Input", "Observation", "Final-Thought", "Answer"]


def test_text_after_must_stop_is_discarded():
    tr, _ = _run(REACT_TOOLS, ["Final Thought: done\nAnswer: 42\nThought: and also more\nAction: search"])
    assert tr.trace[-1] == "Answer" and tr.stop_reason == "must_stop"
    assert [v.kind for v in tr.violations] == ["transition"]
    assert "more" not in tr.transcript and tr.calls == 1


def test_hallucinated_env_input_is_dropped_and_the_environment_answers():
    spec = library_spec("rewoo")
    model = ScriptedCompleter(
        [" p\nLabel: #E1\nAction: search\nAction Input: x\nAnswer: I made this up"], honour_stop=False
    )
    tr = DecodingMonitor(spec, model).run(PROMPT, env)
    assert tr.trace[-1] == "Answer"
    assert tr.steps[-1].source == "env" and tr.steps[-1].content == "(input)"
    assert "made this up" not in tr.transcript and tr.wasted_tokens > 0


def test_bracketed_texts_are_cued_by_their_common_prefix():
    spec = library_spec("pass")
    tr, model = _run(
        spec,
        [
            "Plan] p\n[Action] a1\n[Action Input] i1\n[Plan] again",  # [Plan] is invalid there
            "Action] a2\n[Action Input] i2",
            "Final Thought] f\n[Answer] 42",
        ],
    )
    # after the Question the valid texts [Plan]/[Final Thought] share the cue "["
    assert model.requests[0].messages[-1]["content"].endswith("[Question] What is 6*7?\n[")
    assert [v.kind for v in tr.violations] == ["transition"]
    # after [Action Input] the valid texts are [Action] and [Summary]: the cue is "["
    assert model.requests[1].messages[-1]["content"].endswith("[Action Input] i1\n[")
    assert tr.trace == [
        "Question",
        "Plan",
        "Action",
        "Action-Input",
        "Action",
        "Action-Input",
        "Summary",
        "Final-Thought",
        "Answer",
    ]


def test_correction_budget_raises_with_context():
    with pytest.raises(SpecViolationError) as info:
        _run(REACT_TOOLS, ["Thought: x\nAnswer: y"] * 50, max_corrections=3)
    assert "gave up after 4 corrections" in str(info.value) and info.value.valid


def test_grammar_mode_sends_a_turn_grammar():
    model = ScriptedCompleter(Tape(CLEAN), supports_grammar=True)
    tr = DecodingMonitor(REACT_TOOLS, model, use_grammar=True).run(PROMPT, env)
    assert tr.violations == []
    g = model.requests[0].grammar
    assert g is not None and 'c-action ::= " " ("search" | "finish")' in g
    assert model.requests[0].messages[-1]["content"] == "Question: What is 6*7?\n"


def test_chat_model_starting_a_new_step_on_the_cue_line_is_split_and_checked():
    # a chat model that cannot continue "Thought: x\nAction:" answers with a new step instead
    def model(req):
        if req.stop == ("\n",):
            return "search"
        last = req.messages[-1]["content"]
        if last.endswith("Question: What is 6*7?\n"):
            return "Thought: x"
        if last.endswith("Action:"):
            return "Action Input: 6*7"
        if last.endswith("Action: search\n"):
            return "Action Input: 6*7"
        return "Final Thought: ok\nAnswer: 42"

    tr, _ = _run(REACT_TOOLS, model)
    # stopping after the Thought is an early stop; the answer to the "Action:" cue starts a new step,
    # which is put on its own line: the Action content is empty, a constraint violation
    assert [v.kind for v in tr.violations] == ["early-stop", "constraint"]
    assert tr.violations[1].discarded == "\nAction Input: 6*7"
    assert tr.forced_choices == 1
    assert tr.trace == ["Question", "Thought", "Action", "Action-Input", "Observation", "Final-Thought", "Answer"]
    assert "Action:Action Input" not in tr.transcript
