"""Whatever a model writes, the monitor's committed run never leaves the spec (property-based)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stateflow.spec import AgentSpec, SpecViolationError, library_spec
from stateflow.spec.completer import ScriptedCompleter
from stateflow.spec.monitor import DecodingMonitor
from stateflow.spec.segment import Segmenter
from tests.spec.specs import react_tools

REACT_TOOLS = react_tools("until_2")
SPECS = [REACT_TOOLS, library_spec("pass"), library_spec("reflexion"), library_spec("chat-bot")]


def _outputs(spec: AgentSpec):
    texts = [d.text for d in spec.spec.states.values()]
    contents = ["search", "finish", "x y", "", "Thought: inline", "42"]
    line = st.one_of(
        st.tuples(st.sampled_from(texts), st.sampled_from(contents)).map(lambda t: f"{t[0]} {t[1]}".rstrip()),
        st.sampled_from(["Sure, here you go.", "search", "[", "Final"]),  # junk, bare values, partial texts
    )
    text = st.lists(line, min_size=1, max_size=4).map("\n".join)
    return st.lists(text, min_size=1, max_size=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_committed_run_always_stays_on_the_spec(data):
    spec = data.draw(st.sampled_from(SPECS))
    outputs = data.draw(_outputs(spec))
    calls = iter(range(10_000))
    model = ScriptedCompleter(lambda req: outputs[next(calls) % len(outputs)])

    def env(state, steps):
        return "input"

    mon = DecodingMonitor(spec, model, chunk_tokens=data.draw(st.sampled_from([3, 8, 64])), max_calls=40)
    try:
        tr = mon.run([{"role": "user", "content": "go"}], env)
    except SpecViolationError as err:
        assert err.valid or err.dfa_state >= 0
        return
    dfa = spec.dfa
    assert dfa.accepts_prefix(tr.trace), (tr.trace, outputs)
    if tr.stop_reason in ("must_stop", "model_ended", "env_ended"):
        assert dfa.accepts(tr.trace), (tr.trace, tr.stop_reason)
    for step in tr.steps:
        choices = spec.state(step.state).choices
        assert not choices or step.content in choices, step
    # the transcript says exactly what the steps say
    resplit = [
        (s.state, s.content) for s in Segmenter({n: d.text for n, d in spec.spec.states.items()}).split(tr.transcript)
    ]
    assert resplit == [(s.state, s.content) for s in tr.steps]
    assert tr.wasted_tokens >= 0 and tr.corrections >= len([v for v in tr.violations if v.kind != "bad-choice"]) - 1


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_segmenter_round_trips_single_line_contents(data):
    spec = data.draw(st.sampled_from(SPECS))
    names = list(spec.spec.states)
    steps = data.draw(
        st.lists(
            st.tuples(st.sampled_from(names), st.text(alphabet="abc :[]", max_size=12).map(str.strip)),
            max_size=6,
        )
    )
    text = "\n".join(f"{spec.state(n).text} {c}".rstrip() for n, c in steps)
    assert [(s.state, s.content) for s in spec.segmenter.split(text)] == steps
