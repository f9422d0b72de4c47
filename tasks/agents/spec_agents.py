"""The library's spec agents (ReAct, ReWOO, Reflexion, PASS, chain-of-thought, direct) on InterCode.

Each agent is a library spec run by one of three engines, which is what "enforcement" varies:

* ``none``: :class:`~stateflow.spec.unenforced.UnenforcedRunner` (violations measured, kept);
* ``monitor``: the black-box :class:`~stateflow.spec.monitor.DecodingMonitor`;
* ``grammar``: the monitor with a per-turn GBNF grammar from the automaton (token level).

The environment is the tool: ``Action: execute`` with ``Action Input: <command>``; an
``Observation`` runs the last listed command; PASS's ``Summary`` and ReWOO's ``Answer`` run every
listed command as one concurrent step (:mod:`stateflow.spec.concurrent`; one InterCode
environment is one connection / one shell, so its calls are serialised within the step); PASS's
summariser keeps the summary or the raw numbered results by the agent's model's likelihood.
When the agent ends, its ``Answer`` command is run and the episode is submitted, so the score
is InterCode's usual score of the last observation.

For the runner an agent is a two-state flow (``Agent`` -> ``End``) whose one tool runs the whole
episode and reports its model usage, so ``stateflow run`` records and reports it like any method.
Per-episode spec facts (valid steps, violations, concurrent steps, summary scores) are in the
tool message's ``meta["spec"]``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from stateflow.envs.base import Environment
from stateflow.tasks.kit.actions import statement_kind
from stateflow.tasks.kit.blackboard import EpisodeVars
from stateflow.tasks.kit.spec_prompts import SpecDomain, system_message
from stateflow.tasks.kit.tools import ObservationFormat

from stateflow import Context, Flow, State, Tool, ToolResult, Transition
from stateflow.errors import ConfigError, LLMError, StateFlowError
from stateflow.messages import Usage
from stateflow.profiles import ModelProfile
from stateflow.scoring import Scorer, scorer_for
from stateflow.spec import AgentSpec, SpecViolationError, library_spec
from stateflow.spec.completer import Completer, Completion, CompletionRequest, ScriptedCompleter, completer_for
from stateflow.spec.concurrent import ActionCall, Summariser, numbered_results, pending_calls, run_concurrently
from stateflow.spec.monitor import DecodingMonitor, MonitorTrace, SpecStep
from stateflow.spec.unenforced import UnenforcedRunner
from stateflow.stable_id import stable_id

__all__ = [
    "ENFORCEMENTS",
    "SPEC_AGENTS",
    "Enforcement",
    "EpisodeTimeout",
    "SpecAgentConfig",
    "build_spec_agent",
    "run_spec_episode",
]

Enforcement = Literal["none", "monitor", "grammar"]
ENFORCEMENTS: tuple[Enforcement, ...] = ("none", "monitor", "grammar")
#: method-name stem -> library spec
SPEC_AGENTS: dict[str, str] = {
    "react": "react",
    "rewoo": "rewoo",
    "reflexion": "reflexion",
    "pass": "pass",
    "cot": "chain-of-thought",
    "direct": "direct",
}
_TURN_LIMIT_NOTE = "Turn limit reached: no more commands are run. Write your final answer now."


@dataclass(frozen=True)
class SpecAgentConfig:
    """How a spec agent runs.

    Attributes:
        spec: library spec name.
        enforcement: ``none``, ``monitor`` or ``grammar``.
        chunk_tokens, max_calls: the engine's bounds (per chunk / per episode).
        max_concurrency: bound on concurrent calls in a multi-action step.
        alpha: the summary-choice length normalisation exponent.
        max_seconds: wall-clock budget of an episode, checked before each model call (the
            runner's own timeout cannot interrupt a tool); then the episode ends and submits.
        scorer: overrides the scorer built from the model profile (tests, other endpoints).
    """

    spec: str
    enforcement: Enforcement = "monitor"
    chunk_tokens: int = 96
    max_calls: int = 30
    max_concurrency: int = 4
    alpha: float = 0.7
    max_seconds: float = 600.0
    scorer: Scorer | None = field(default=None, compare=False)


class EpisodeTimeout(StateFlowError):
    """A spec-agent episode used up its wall-clock budget."""


@dataclass
class _DeadlineCompleter:
    """Refuses model calls once the episode's budget is spent."""

    inner: Completer
    deadline: float

    def complete(
        self, messages: list[dict[str, Any]], *, stop: Sequence[str], max_tokens: int, grammar: str | None = None
    ) -> Completion:
        if time.monotonic() > self.deadline:
            raise EpisodeTimeout("the episode's time budget is spent")
        return self.inner.complete(messages, stop=stop, max_tokens=max_tokens, grammar=grammar)


class _InterCodeTool:
    """Env-input states of a spec agent, served by an InterCode environment."""

    def __init__(
        self,
        env: Environment,
        fmt: ObservationFormat,
        question: str,
        spec: AgentSpec,
        episode: EpisodeVars,
        max_turns: int,
        completer: Completer,
        summariser: Callable[[], Summariser | None],
        max_concurrency: int,
        messages: list[dict[str, Any]],
    ):
        self.env, self.fmt, self.question, self.spec = env, fmt, question, spec
        self.episode = episode
        self.max_turns = max_turns
        self.completer = completer
        self.summariser = summariser
        self.max_concurrency = max_concurrency
        self.messages = messages
        self.steps_log: list[dict[str, Any]] = []  # concurrent steps and summaries, for the record
        self.extra_prompt_tokens = 0
        self.extra_completion_tokens = 0
        self.solver_answer: str | None = None

    # -- executing commands ----------------------------------------------------------------------

    def execute(self, command: str) -> str:
        """Run one command as an agent action (counts a turn)."""
        command = command.strip().strip("`").strip()
        if self.episode.turns >= self.max_turns:
            return _TURN_LIMIT_NOTE
        if not command or command.lower() == "submit":
            self.episode.count_turn(failed=True)
            return "No command given: write the command to run after the input label."
        self.episode.turns += 1
        observation, _, _, info = self.env.step(command)
        if not info.get("action_executed", True):
            self.episode.failed += 1
        text = self.fmt.render(observation, statement_kind(command))
        return text or "(no output)"

    def _call_tool(self, call: ActionCall) -> str:
        if call.action and call.action.strip().lower() not in ("execute", "execute[]"):
            return f"Unknown tool {call.action!r}: the only tool is execute."
        return self.execute(call.argument)

    def run_listed(self, steps: tuple[SpecStep, ...]) -> tuple[str, Any]:
        calls = pending_calls(steps)
        if not calls:
            return "No actions were listed.", None
        step = run_concurrently(calls, self._call_tool, max_concurrency=self.max_concurrency, serialise=True)
        return numbered_results(step), step

    # -- the env-input callback --------------------------------------------------------------------

    def __call__(self, state: str, steps: tuple[SpecStep, ...]) -> str | None:
        if state == "Question":
            return self.question
        if state == "Observation":
            calls = pending_calls(steps)
            if not calls:
                return "No action was given: write Action: execute and the command after Action Input:."
            return self._call_tool(calls[-1])
        if state == "Evaluation":
            proposed = next((s.content for s in reversed(steps) if s.state == "Proposed-Answer"), "")
            return self.execute(proposed)
        if state == "Summary":
            return self._summary(steps)
        if state == "Answer":  # ReWOO: the solver
            return self._solve(steps)
        raise ConfigError(f"the InterCode tool has no handler for env-input state {state!r}")

    def _summary(self, steps: tuple[SpecStep, ...]) -> str:
        raw, step = self.run_listed(steps)
        entry: dict[str, Any] = {"state": "Summary", "concurrent": None if step is None else step.to_dict()}
        summariser = self.summariser() if step is not None else None
        text = raw
        if summariser is not None:
            prefix = _transcript(self.spec, steps) + self.spec.state("Summary").text
            outcome = summariser(self.question, raw, self.messages, prefix)
            self.extra_prompt_tokens += outcome.prompt_tokens
            self.extra_completion_tokens += outcome.completion_tokens
            entry["summary"] = outcome.to_dict()
            text = outcome.text
        self.steps_log.append(entry)
        return text

    def _solve(self, steps: tuple[SpecStep, ...]) -> str:
        raw, step = self.run_listed(steps)
        msgs = [
            {"role": "system", "content": "Write only the final command that answers the task, on one line."},
            {"role": "user", "content": f"Task: {self.question}\n\nEvidence:\n{raw}\n\nFinal command:"},
        ]
        comp = self.completer.complete(msgs, stop=("\n",), max_tokens=160)
        self.extra_prompt_tokens += comp.prompt_tokens
        self.extra_completion_tokens += comp.completion_tokens
        self.solver_answer = comp.text.strip().strip("`").strip()
        self.steps_log.append(
            {"state": "Answer", "concurrent": None if step is None else step.to_dict(), "solver": self.solver_answer}
        )
        return f"{self.solver_answer}\n(evidence:\n{raw})"


def _transcript(spec: AgentSpec, steps: tuple[SpecStep, ...]) -> str:
    return "".join(f"{spec.state(s.state).text} {s.content}\n" for s in steps)


def _completer(ctx: Context, profile: ModelProfile) -> Completer:
    if profile.provider == "scripted":
        script = ctx.scripts.get(profile.name)
        if script is None:
            raise ConfigError(f"profile {profile.name!r} is scripted but the run has no script for it")

        def reply(req: CompletionRequest) -> str:
            params = {"stop": list(req.stop), "max_tokens": req.max_tokens, "grammar": req.grammar}
            return script.reply_to(req.messages, params)

        return ScriptedCompleter(reply, supports_grammar=True)
    return completer_for(profile, http=ctx.http)


def _question(env: Environment, domain: SpecDomain, task_text: str, episode: EpisodeVars) -> str:
    """The task as the agent sees it; with ``domain.describe_schema`` followed by every table's
    columns (the set-up counts one turn, as the schema variant of the StateFlow flow does)."""
    query = task_text.removeprefix("Question: ").removeprefix("Task: ")
    if not domain.describe_schema:
        return query
    episode.count_turn()
    tables, _, _, info = env.step("SHOW TABLES")
    if not info.get("action_executed", True) or not isinstance(tables, list):
        return query
    described = []
    for row in tables:
        cols, _, _, info = env.step(f"DESC `{row[0]}`")
        if info.get("action_executed", True) and isinstance(cols, list):
            columns = ", ".join(f"{c[0]} {str(c[1]).split('(')[0]}" for c in cols)
            described.append(f"{row[0]}({columns})")
    return f"{query}\nTables: {', '.join(described)}"


def run_spec_episode(ctx: Context, config: SpecAgentConfig, domain: SpecDomain, fmt: ObservationFormat) -> ToolResult:
    """Run one spec-agent episode on ``ctx.env`` (already reset to the task) and submit.

    Records turns, failures and the submission in the run's
    :class:`~stateflow.tasks.kit.blackboard.EpisodeVars` like the other methods' tools. A monitor
    that gives up (:class:`SpecViolationError`), a spent time budget or a failed model call ends
    the episode there; what was executed is still submitted, the usage so far is kept and the
    error is in ``meta["spec"]["error"]``.
    """
    env: Environment = ctx.env
    if env is None:
        raise ConfigError("a spec agent needs run(..., env=ENVIRONMENT)")
    if ctx.models is None:
        raise ConfigError("a spec agent needs the run's model assignment (ctx.models)")
    profile = ctx.models.profile_for(ctx.state)
    spec = library_spec(config.spec)
    t0 = time.perf_counter()
    completer = _DeadlineCompleter(_completer(ctx, profile), time.monotonic() + config.max_seconds)
    episode = EpisodeVars.of(ctx)
    question = _question(env, domain, ctx.task, episode)
    messages = [{"role": "system", "content": system_message(spec, domain)}, {"role": "user", "content": "Begin."}]
    scorer_box: list[Scorer | None] = []

    def summariser() -> Summariser | None:
        if not scorer_box:
            scorer_box.append(config.scorer or scorer_for(profile))
        scorer = scorer_box[0]
        return None if scorer is None else Summariser(completer, scorer, alpha=config.alpha)

    tool = _InterCodeTool(
        env,
        fmt,
        question,
        spec,
        episode,
        int(ctx.vars.get("max_turns", 10)),
        completer,
        summariser,
        config.max_concurrency,
        messages,
    )
    options: dict[str, Any] = {"chunk_tokens": config.chunk_tokens, "max_calls": config.max_calls}
    engine: DecodingMonitor
    if config.enforcement == "none":
        engine = UnenforcedRunner(spec, completer, **options)
    elif config.enforcement in ("monitor", "grammar"):
        engine = DecodingMonitor(spec, completer, use_grammar=config.enforcement == "grammar", **options)
    else:
        raise ConfigError(f"enforcement {config.enforcement!r}: choose one of {', '.join(ENFORCEMENTS)}")
    error = None
    trace: MonitorTrace | None = None
    try:
        trace = engine.run(messages, tool)
    except (SpecViolationError, EpisodeTimeout, LLMError) as err:  # ends the episode; what ran is scored
        error = f"{type(err).__name__}: {err}"
        trace = getattr(err, "trace", None)
    answer = tool.solver_answer
    if answer is None and trace is not None:
        answer = next((s.content for s in reversed(trace.steps) if s.state == "Answer" and s.source == "llm"), None)
    if answer:
        tool.execute(answer)
    _, reward, _, info = env.step("submit")
    episode.submitted(reward, info)
    p_tok = (trace.prompt_tokens if trace else 0) + tool.extra_prompt_tokens
    c_tok = (trace.completion_tokens if trace else 0) + tool.extra_completion_tokens
    usage = Usage(
        prompt_tokens=p_tok,
        completion_tokens=c_tok,
        cost=profile.cost(p_tok, c_tok),
        latency_s=time.perf_counter() - t0,
        model=profile.model,
        profile=profile.name,
    )
    meta = {
        "done": True,
        "reward": reward,
        "action": "submit",
        "spec": {
            "spec": spec.name,
            "enforcement": config.enforcement,
            "answer": answer,
            "error": error,
            "trace": trace.to_dict() if trace else None,
            "multi_action_steps": tool.steps_log,
        },
    }
    return ToolResult(trace.transcript if trace else "", meta, usage)


def build_spec_agent(
    stem: str,
    enforcement: Enforcement,
    domain: SpecDomain,
    *,
    prefix: str,
    fmt: ObservationFormat,
    config: SpecAgentConfig | None = None,
) -> Flow:
    """The runner's flow for spec agent ``stem`` (a key of :data:`SPEC_AGENTS`) under ``enforcement``.

    ``domain`` describes the benchmark to the agent, ``fmt`` shows its observations, ``prefix``
    (the benchmark's domain name) starts the flow's name. ``config`` replaces the default
    settings (its ``spec`` and ``enforcement`` then rule).
    """
    config = config or SpecAgentConfig(SPEC_AGENTS[stem], enforcement)
    enforcement = config.enforcement

    @stable_id("stateflow.tasks.spec_agents.build_spec_agent.<locals>.spec_agent")
    def spec_agent(ctx: Context) -> ToolResult:
        return run_spec_episode(ctx, config, domain, fmt)

    agent = State("Agent", Tool(spec_agent, f"spec_{stem}"), description=f"{config.spec} spec agent ({enforcement})")
    end = State("End", final=True)
    return Flow(
        f"{prefix}-spec-{stem}-{enforcement}",
        initial=agent,
        states=[agent, end],
        transitions=[Transition(agent, end)],
        max_transitions=2,
        description=f"library spec {config.spec!r} run with enforcement {enforcement!r}",
    )
