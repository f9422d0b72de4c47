"""One state's instruction rewritten by a model from the failed episodes' feedback.

After the search, the pick's failed episodes (the question, the statement it submitted, the
error, the gold answer and the environment's evaluation) are shown to a model together with the
state's current instruction, and the model writes a new one. The new instruction is a new
prompt set of one file, ``OUT/prompts/<name>/<State>.md``, whose name carries the first 12 hex
digits of its SHA-256 (its fingerprint); it is written once and read back on every re-run, so
a resumed search never asks the model again and evaluates exactly the same text.

The rewritten flow is the pick's flow with that state's first :class:`~stateflow.Prompt`
replaced; it runs as a method of its own (``<pick>@<State>-<sha12>``) registered on a copy of
the benchmark (:func:`with_rewritten`), so the runner records, identifies (the flow fingerprint
covers the instruction) and resumes it like any other method.

The model's reply is untrusted text: it is only ever used as an instruction, code fences around
it are removed, and an empty or oversized reply is refused with an error naming the file it
would have been saved to.

Records of a rewritten method carry its name, and the name alone cannot rebuild the flow: the
text lives in the saved prompt set. So the prompt set travels with the records: archiving a
search copies it next to the archive file (``<archive dir>/prompts/<name>/<State>.md``,
:func:`save_prompt_set`), and whatever rebuilds a record's flow from its identity (the golden
identity test, a resumed run reading an archive) resolves the method with
:func:`resolve_recorded`, which reads that file and checks its SHA-256 against the name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from stateflow.tasks.agents.methods import resolve_method
from stateflow.tasks.kit.benchmark import Benchmark, Method
from stateflow.tasks.kit.episode_record import EpisodeRecord

from stateflow import LLM, Flow, ModelAssignment, Prompt, State, Transition, run
from stateflow.errors import ConfigError

__all__ = [
    "RewriteSettings",
    "RewrittenPrompt",
    "ask_for_rewrite",
    "feedback",
    "load_or_rewrite",
    "prompt_set_file",
    "resolve_recorded",
    "save_prompt_set",
    "saved_rewrite",
    "with_rewritten",
]

MAX_INSTRUCTION_CHARS = 4000
#: ``<method>@<State>-<sha12>``: the name a rewritten flow's records carry (RewrittenPrompt.name)
_REWRITTEN_NAME = re.compile(r"^(?P<method>.+)@(?P<state>[A-Za-z_][A-Za-z0-9_]*)-(?P<sha>[0-9a-f]{12})$")
_FIELD_CHARS = 400  # each piece of feedback is cut here: a long error must not crowd the others out


class RewriteSettings(BaseModel):
    """``[rewrite]``: rewrite one state's instruction of the pick from its failures.

    Attributes:
        state: the state whose instruction is rewritten (it must have a Prompt).
        profile: the model profile that writes the new instruction.
        failures: how many failed episodes it is shown (the first ones in task order).
    """

    model_config = ConfigDict(extra="forbid")

    state: str = Field(min_length=1)
    profile: str = Field(min_length=1)
    failures: int = Field(5, ge=1, le=50)


@dataclass(frozen=True)
class RewrittenPrompt:
    """A rewritten instruction of ``state`` for ``method``."""

    method: str
    state: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def name(self) -> str:
        """The method name of the rewritten flow: ``<method>@<state>-<sha12>``."""
        return f"{self.method}@{self.state}-{self.sha256[:12]}"


def _cut(text: str | None) -> str:
    text = (text or "").strip()
    return text if len(text) <= _FIELD_CHARS else text[:_FIELD_CHARS] + " [...]"


def feedback(records: Sequence[EpisodeRecord], limit: int) -> list[str]:
    """One paragraph per failed episode (first ``limit`` in task order): what was asked, submitted, expected."""
    failed = sorted((r for r in records if not r.success), key=lambda r: r.task)[:limit]
    out = []
    for r in failed:
        evaluation = "; ".join(f"{k}: {_cut(v)}" for k, v in sorted(r.eval.items()))
        out.append(
            "\n".join(
                [
                    f"Question: {_cut(r.query)}",
                    f"Submitted: {_cut(r.last_action) or '(nothing executed)'}",
                    f"Error: {_cut(r.error) or 'none'}; reward {r.reward_raw:.2f}",
                    f"Expected (gold): {_cut(r.gold)}",
                    *([f"Evaluation: {evaluation}"] if evaluation else []),
                ]
            )
        )
    return out


def _request(current: str, failures: list[str]) -> str:
    cases = "\n\n".join(f"Failure {i}:\n{f}" for i, f in enumerate(failures, 1))
    return (
        "You improve the instruction given to one step of an agent. Here is the current instruction:\n"
        f"<<<\n{current}\n>>>\n\n"
        f"The agent failed these tasks:\n\n{cases}\n\n"
        "Write an improved instruction for the same step that would avoid these failures in general "
        "(never mention a particular task or answer), keeping the reply format the current instruction "
        "asks for. Reply with the new instruction only."
    )


def _clean(reply: str) -> str:
    text = reply.strip()
    fenced = re.fullmatch(r"```[a-zA-Z]*\n(.*)\n```", text, flags=re.DOTALL)
    return (fenced.group(1) if fenced else text).strip()


def ask_for_rewrite(current: str, failures: list[str], models: ModelAssignment, profile: str) -> str:
    """The new instruction ``profile`` writes (one model call, through a one-state flow).

    Raises:
        ConfigError: an unknown profile (from the run).
    """
    ask = State("Rewrite", Prompt(_request(current, failures)), LLM())
    done = State("End", final=True)
    flow = Flow("rewrite-instruction", initial=ask, transitions=[Transition(ask, done)])
    result = run(
        flow, "Rewrite the instruction.", models=ModelAssignment.of(profile, profiles=models.profiles.values())
    )
    replies = [m.content for m in result.history.messages if m.kind == "llm"]
    return _clean(replies[-1] if replies else "")


def _replaced(flow: Flow, state: str, text: str) -> Flow:
    s = flow.states[state]
    at = next(i for i, o in enumerate(s.outputs) if isinstance(o, Prompt))
    outputs = (*s.outputs[:at], Prompt(text), *s.outputs[at + 1 :])
    return flow.variant(flow.name, replace=[s.with_outputs(*outputs)])


def has_prompt(flow: Flow, state: str) -> bool:
    """``state`` is a state of ``flow`` with a Prompt to rewrite."""
    return state in flow.states and any(isinstance(o, Prompt) for o in flow.states[state].outputs)


def with_rewritten(benchmark: Benchmark, rewritten: RewrittenPrompt) -> Benchmark:
    """A copy of ``benchmark`` with the rewritten flow as a method named :attr:`RewrittenPrompt.name`."""
    base = resolve_method(benchmark, rewritten.method)
    method = Method(
        rewritten.name,
        lambda grammar: _replaced(base.build(grammar), rewritten.state, rewritten.text),
        base.view,
        f"{rewritten.method} with {rewritten.state}'s instruction rewritten (sha256 {rewritten.sha256[:12]})",
        family=base.family,
    )
    return dataclasses.replace(benchmark, methods={**benchmark.methods, rewritten.name: method})


def prompt_set_file(name: str, state: str) -> Path:
    """Where a rewritten method's instruction is saved, relative to a results or archive folder:
    ``prompts/<name, + as _ and @ as __>/<state>.md``."""
    return Path("prompts") / name.replace("+", "_").replace("@", "__") / f"{state}.md"


def save_prompt_set(root: Path, rewritten: RewrittenPrompt) -> Path:
    """Write ``rewritten``'s instruction under ``root`` (:func:`prompt_set_file`); returns the path."""
    path = root / prompt_set_file(rewritten.name, rewritten.state)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rewritten.text, encoding="utf-8")
    return path


def saved_rewrite(name: str, roots: Sequence[Path]) -> RewrittenPrompt | None:
    """The rewrite a recorded method name refers to, read from the first of ``roots`` holding it.

    Returns ``None`` when ``name`` is not a rewritten method's name.

    Raises:
        ConfigError: the prompt set is in none of ``roots`` (the message lists where it looked),
            or its text does not hash to the digits in the name (an edited file would rebuild
            another flow under the old name).
    """
    found = _REWRITTEN_NAME.match(name)
    if found is None:
        return None
    method, state, sha = found.group("method", "state", "sha")
    relative = prompt_set_file(name, state)
    for root in roots:
        path = root / relative
        if path.is_file():
            rewritten = RewrittenPrompt(method, state, path.read_text(encoding="utf-8"))
            if rewritten.sha256[:12] != sha:
                raise ConfigError(
                    f"{path}: the saved instruction hashes to {rewritten.sha256[:12]}, not {sha} as the method "
                    f"name {name!r} says; restore the file as it was saved (or re-run that method)"
                )
            return rewritten
    looked = ", ".join(str(root / relative) for root in roots) or "(no folder given)"
    raise ConfigError(f"method {name!r} is a rewritten instruction whose prompt set is missing: looked for {looked}")


def resolve_recorded(benchmark: Benchmark, name: str, roots: Sequence[Path]) -> tuple[Benchmark, Method]:
    """The method a record names, rewritten ones included, and the benchmark that holds it.

    A rewritten method (``<method>@<State>-<sha12>``) is rebuilt from its prompt set saved under
    one of ``roots`` (:func:`saved_rewrite`) on a copy of ``benchmark``; any other name resolves
    as ``--method`` does.

    Raises:
        ConfigError: a rewritten method whose prompt set is missing or altered.
        ValueError: an unknown method (from :func:`~stateflow.tasks.agents.methods.resolve_method`).
    """
    rewritten = saved_rewrite(name, roots)
    if rewritten is None:
        return benchmark, resolve_method(benchmark, name)
    bench = with_rewritten(benchmark, rewritten)
    return bench, bench.methods[name]


def load_or_rewrite(
    out: Path,
    benchmark: Benchmark,
    method: str,
    records: Sequence[EpisodeRecord],
    settings: RewriteSettings,
    models: ModelAssignment,
) -> RewrittenPrompt | None:
    """The rewrite of ``method``'s ``settings.state`` saved under ``out``, or a new one (``None``:
    the method failed no episode, there is nothing to learn from).

    Raises:
        ConfigError: the model's reply is empty or longer than 4,000 characters (nothing saved).
    """
    ledger = out / "rewrite.json"
    if ledger.exists():
        saved = json.loads(ledger.read_text())
        if saved.get("method") == method and saved.get("state") == settings.state:
            return RewrittenPrompt(method, settings.state, (out / saved["file"]).read_text())
    failures = feedback(records, settings.failures)
    if not failures:
        return None
    current = resolve_method(benchmark, method).build(False).states[settings.state].instruction
    text = ask_for_rewrite(current, failures, models, settings.profile)
    if not text or len(text) > MAX_INSTRUCTION_CHARS:
        raise ConfigError(
            f"{ledger}: the rewrite model ({settings.profile}) replied with an instruction of {len(text)} characters; "
            f"one of 1..{MAX_INSTRUCTION_CHARS} is needed (nothing was saved; re-run to ask again)"
        )
    rewritten = RewrittenPrompt(method, settings.state, text)
    file = prompt_set_file(rewritten.name, settings.state)
    save_prompt_set(out, rewritten)
    ledger.write_text(
        json.dumps(
            {
                "method": method,
                "state": settings.state,
                "file": str(file),
                "sha256": rewritten.sha256,
                "failures": failures,
            },
            indent=2,
        )
    )
    return rewritten
