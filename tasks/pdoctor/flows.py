"""The flows under PDoctor's planning tests, and how they join the runner's methods.

Two flows, both starting with ``Init`` (a tool, no LLM call) that shows the tool list:

* **ReAct** (``react``, PDoctor's baseline agent)::

      Init ──► Act ◄─┐      Act: Thought + ``Action: call[TOOL]`` (or submit), then the tool runs
                 └───┘

* **Planning flow** (``stateflow`` / ``sf_agent``, our design)::

      Init ──► Extract ──► Check ──► Execute ──► End
                  ▲          │
                  └─ reject ─┘   (unknown tool names, a cycle, nothing listed; at most twice)

  The LLM does what needs language: ``Extract`` lists each stated requirement as
  ``A before B`` (extended: ``A starts after 10:30`` / ``A ends by 15:00``). The state machine
  does what needs bookkeeping: ``Check`` validates the list and orders the tools (topological
  sort; ties by earliest deadline, then listing order); ``Execute`` calls every tool once in that
  order (extended: each start is the later of the previous end, read from the tool's reply, and
  the stated start bound) and submits. Act Errors and lost actions are impossible by
  construction; what remains is whether the requirements were read correctly.

Both flows stop after a step budget of ``max(--max-turns, 2 x actions + 2)`` tool calls.

Size (~400 lines): the two flows share their tools and the episode error classes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from stateflow.envs.pdoctor import ErrorClass, PDoctorEnv, SynthesisConfig, Verdict, classify, parse_range, step_budget
from stateflow.tasks.kit.blackboard import EpisodeVars
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.kit.prompts import load_prompt

from stateflow import ANY, LLM, Context, Flow, Kind, Prompt, State, Tool, ToolResult, Transition, meta_is, predicate
from stateflow.errors import ConfigError
from stateflow.stable_id import stable_id

__all__ = [
    "ERROR_CLASSES",
    "PlanNotes",
    "build_planning_flow",
    "build_react_flow",
    "dataset_label",
    "episode_error_class",
    "order_from_requirements",
    "parse_reply",
    "parse_requirements",
]

ERROR_CLASSES = tuple(c.value for c in ErrorClass)

_ACTION = re.compile(r"^\s*\**Action\**\s*:\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_CALL = re.compile(r"^(?:call|execute)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)
_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\s*\(.*\))?$")
_FORMAT_HELP = (
    "Invalid response format. Reply with 'Thought: ...' and then 'Action: call[<tool name>]' or 'Action: submit'."
)
_END_TIME = re.compile(r"\bto (\d{2}):(\d{2})\b")


def _env(ctx: Context) -> PDoctorEnv:
    env = ctx.env
    if not isinstance(env, PDoctorEnv):
        raise RuntimeError(f"the pdoctor flows need a PDoctorEnv as env, got {type(env).__name__}")
    return env


# -- ReAct ------------------------------------------------------------------------------------


def parse_reply(text: str) -> tuple[str, str]:
    """``("submit", "")``, ``("call", CALL)`` or ``("invalid", TEXT)`` from the last Action line.

    >>> parse_reply("Thought: go\\nAction: call[feeding_lions]")
    ('call', 'feeding_lions')
    >>> parse_reply("Thought: x\\nAction: feeding_lions(start=09:00)")
    ('call', 'feeding_lions(start=09:00)')
    >>> parse_reply("I would feed the lions")[0]
    'invalid'
    """
    lines = _ACTION.findall(text)
    if not lines:
        return "invalid", text.strip()[:200]
    body = lines[-1].strip()
    if re.match(r"^submit\b", body, re.IGNORECASE):
        return "submit", ""
    m = _CALL.match(body)
    if m:
        return "call", m.group(1).strip()
    if _BARE.match(body):
        return "call", body
    return "invalid", body[:200]


def _tool_list(extended_note: str) -> Tool:
    """Init's tool: the tool list, plus the prompt ``extended_note`` for extended requests."""

    @stable_id("stateflow.tasks.pdoctor._tool_list.<locals>.list_tools")
    def list_tools(ctx: Context) -> ToolResult:
        env = _env(ctx)
        text = env.toolkit.describe() if env.toolkit else ""
        if env.current.extended:
            text += "\n" + load_prompt("pdoctor", extended_note)
        return ToolResult(text, {"ok": True, "done": False})

    return Tool(list_tools, "list_tools")


def _submit(ctx: Context, env: PDoctorEnv) -> ToolResult:
    _, reward, _, info = env.step("submit")
    EpisodeVars.of(ctx).submitted(reward, info)
    return ToolResult(f"Submitted. Reward: {reward}", {"ok": True, "done": True, "reward": reward, "action": "submit"})


@stable_id("stateflow.tasks.pdoctor._call_tool")
def _call_tool(ctx: Context) -> ToolResult:
    """Run the tool named in the last reply (or submit); malformed replies are logged calls too."""
    env = _env(ctx)
    last = ctx.history.last(Kind.LLM)
    kind, arg = parse_reply(last.content if last else "")
    if kind == "submit":
        return _submit(ctx, env)
    observation, _, _, info = env.step(arg if kind == "call" else f"<malformed> {arg}")
    ok = bool(info.get("action_executed"))
    EpisodeVars.of(ctx).count_turn(failed=not ok)
    text = str(observation) if kind == "call" else _FORMAT_HELP
    return ToolResult(text, {"ok": ok, "done": False, "action": arg if kind == "call" else None})


def _budget_used(ctx: Context) -> bool:
    env = _env(ctx)
    limit = max(int(ctx.vars.get("max_turns") or 0), step_budget(env.current))
    return EpisodeVars.of(ctx).turns >= limit


budget_exhausted = predicate(_budget_used, "step budget used")
submitted = meta_is("done", True, name="submitted")


def _gbnf_names(names: list[str]) -> str:
    return " | ".join(f'"{n}"' for n in names)


@stable_id("stateflow.tasks.pdoctor._react_grammar")
def _react_grammar(ctx: Context) -> str:
    # Free tool names (not the listed ones), so calls to nonexistent tools stay possible:
    # the grammar fixes the format, not the plan.
    time = ' ("(start=" [0-2] [0-9] ":" [0-5] [0-9] ")")?' if _env(ctx).current.extended else ""
    return (
        'root ::= "Thought: " thought "\\nAction: " action\n'
        'action ::= "submit" | "call[" name' + time + ' "]"\n'
        "name ::= [a-z_] [a-z0-9_]{0,60}\n"
        "thought ::= [^\\n]{1,200}\n"
    )


def build_react_flow(grammar: bool = False) -> Flow:
    """PDoctor's ReAct agent: one looping state that calls one tool per step."""
    init = State("Init", _tool_list("react_extended"), description="show the tools (no LLM call)")
    act = State("Act", LLM(grammar=_react_grammar if grammar else None), Tool(_call_tool, "call_tool"))
    end = State("End", final=True)
    return Flow(
        "pdoctor-react",
        initial=init,
        states=[init, act, end],
        transitions=[
            Transition(ANY, end, when=submitted),
            Transition(ANY, end, when=budget_exhausted),
            Transition(init, act),
            Transition(act, act),
        ],
        max_transitions=60,
        system_message=load_prompt("pdoctor", "system") + "\n\n" + load_prompt("pdoctor", "react"),
        description="PDoctor-style ReAct agent (Ji et al. 2024)",
    )


# -- the planning flow -----------------------------------------------------------------------

_BEFORE = re.compile(r"^\W*([A-Za-z_][A-Za-z0-9_]*)\W*\s+(?:before|<|->)\s+\W*([A-Za-z_][A-Za-z0-9_]*)\W*$", re.I)
_BOUND = re.compile(
    r"^\W*([A-Za-z_][A-Za-z0-9_]*)\W*\s+(starts?\s+(?:after|at)|ends?\s+(?:by|before))\s+(\d{1,2}):(\d{2})\W*$", re.I
)


def parse_requirements(text: str) -> tuple[list[tuple[str, str]], dict[str, int], dict[str, int]]:
    """``(orders, starts_after, ends_by)`` from an Extract reply; other lines are ignored.

    >>> parse_requirements("a before b\\nb ends by 15:00\\ndone")
    ([('a', 'b')], {}, {'b': 900})
    """
    orders: list[tuple[str, str]] = []
    starts: dict[str, int] = {}
    ends: dict[str, int] = {}
    for line in text.splitlines():
        m = _BEFORE.match(line.strip())
        if m:
            orders.append((m.group(1), m.group(2)))
            continue
        m = _BOUND.match(line.strip())
        if m:
            minute = int(m.group(3)) * 60 + int(m.group(4))
            (starts if m.group(2).lower().startswith("start") else ends)[m.group(1)] = minute
    return orders, starts, ends


def order_from_requirements(
    tools: list[str], orders: list[tuple[str, str]], deadlines: dict[str, int] | None = None
) -> tuple[list[str], list[tuple[str, str]]]:
    """A topological order of ``tools`` meeting ``orders``; ties go to the earliest deadline,
    then to the listing order. Requirements closing a cycle are dropped (latest listed first)
    and returned as the second element.

    >>> order_from_requirements(["a", "b", "c"], [("c", "a")])
    (['b', 'c', 'a'], [])
    """
    deadlines = deadlines or {}
    kept: list[tuple[str, str]] = []
    dropped: list[tuple[str, str]] = []
    for o in orders:
        if o[0] == o[1] or _reaches(kept, o[1], o[0]):
            dropped.append(o)
        elif o not in kept:
            kept.append(o)
    rank = {t: i for i, t in enumerate(tools)}
    indegree = dict.fromkeys(tools, 0)
    for _, b in kept:
        indegree[b] += 1
    out: list[str] = []
    ready = [t for t in tools if indegree[t] == 0]
    while ready:
        ready.sort(key=lambda t: (deadlines.get(t, 24 * 60), rank[t]))
        t = ready.pop(0)
        out.append(t)
        for a, b in kept:
            if a == t:
                indegree[b] -= 1
                if indegree[b] == 0:
                    ready.append(b)
    return out, dropped


def _reaches(edges: list[tuple[str, str]], src: str, dst: str) -> bool:
    seen, todo = {src}, [src]
    while todo:
        x = todo.pop()
        if x == dst:
            return True
        for a, b in edges:
            if a == x and b not in seen:
                seen.add(b)
                todo.append(b)
    return False


@dataclass
class PlanNotes:
    """The plan-then-execute flow's own notes (one per run, on ``ctx.board``).

    Attributes:
        plan: the tool order the Check state derived from the extracted requirements.
        starts_after: extended requests: the earliest start (minutes) per tool.
        repairs: times the extracted requirements were rejected and asked for again.
    """

    plan: list[str] = field(default_factory=list)
    starts_after: dict[str, int] = field(default_factory=dict)
    repairs: int = 0


_MAX_REPAIRS = 2


@stable_id("stateflow.tasks.pdoctor._check")
def _check(ctx: Context) -> ToolResult:
    """Validate the extracted requirements and order the tools (no LLM call)."""
    env = _env(ctx)
    tools = list(env.current.tools)
    last = ctx.history.last(Kind.LLM)
    orders, starts, ends = parse_requirements(last.content if last else "")
    unknown = sorted({n for o in orders for n in o if n not in tools} | {n for n in (*starts, *ends) if n not in tools})
    known = [o for o in orders if o[0] in tools and o[1] in tools]
    plan, cyclic = order_from_requirements(tools, known, {k: v for k, v in ends.items() if k in tools})
    problems = []
    if unknown:
        problems.append(f"these are not tool names: {', '.join(unknown)} (tools: {', '.join(tools)})")
    if cyclic:
        problems.append(
            "these requirements contradict the others (a cycle): " + "; ".join(f"{a} before {b}" for a, b in cyclic)
        )
    if not orders:
        problems.append("no requirement was listed in the form '<tool name> before <tool name>'")
    notes = ctx.board.setdefault(PlanNotes)
    if problems and notes.repairs < _MAX_REPAIRS:
        notes.repairs += 1
        text = "Rejected: " + "; ".join(problems) + ". List the requirements again, one per line, then done."
        return ToolResult(text, {"ok": False, "done": False})
    notes.plan = plan
    notes.starts_after = {k: v for k, v in starts.items() if k in tools}
    note = f" (ignored: {'; '.join(problems)})" if problems else ""
    return ToolResult("Plan: " + " -> ".join(plan) + note, {"ok": True, "done": False})


@stable_id("stateflow.tasks.pdoctor._execute")
def _execute(ctx: Context) -> ToolResult:
    """Call every tool of the plan once, in order, then submit (no LLM call)."""
    env = _env(ctx)
    request = env.current
    observations = []
    clock = request.day_start
    notes = ctx.board.setdefault(PlanNotes)
    for name in notes.plan:
        call = name
        if request.extended:
            start = max(clock, notes.starts_after.get(name, 0))
            call = f"{name}(start={start // 60:02d}:{start % 60:02d})"
        observation, _, _, info = env.step(call)
        EpisodeVars.of(ctx).count_turn(failed=not info.get("action_executed"))
        observations.append(f"call[{call}] -> {observation}")
        m = _END_TIME.search(str(observation))
        if m:
            clock = int(m.group(1)) * 60 + int(m.group(2))
    result = _submit(ctx, env)
    return ToolResult("\n".join([*observations, result.content]), result.meta)


@stable_id("stateflow.tasks.pdoctor._extract_grammar")
def _extract_grammar(ctx: Context) -> str:
    request = _env(ctx).current
    names = _gbnf_names(list(request.tools))
    bound = ' | name " starts after " hhmm | name " ends by " hhmm' if request.extended else ""
    return (
        'root ::= (line "\\n"){1,30} "done"\n'
        'line ::= name " before " name' + bound + "\n"
        f"name ::= {names}\n"
        'hhmm ::= [0-2] [0-9] ":" [0-5] [0-9]\n'
    )


def build_planning_flow(grammar: bool = False) -> Flow:
    """Our planning flow: Extract (LLM) → Check (ordering, no LLM) → Execute (no LLM) → End."""
    init = State(
        "Init",
        _tool_list("extract_extended"),
        description="show the tools (no LLM call)",
    )
    extract = State(
        "Extract",
        Prompt(load_prompt("pdoctor", "extract")),
        LLM(grammar=_extract_grammar if grammar else None),
        description="list every stated requirement",
    )
    check = State("Check", Tool(_check, "check_requirements"), description="validate, then order the tools")
    execute = State("Execute", Tool(_execute, "execute_plan"), description="call each tool once, in order; submit")
    end = State("End", final=True)
    return Flow(
        "pdoctor-plan",
        initial=init,
        states=[init, extract, check, execute, end],
        transitions=[
            Transition(ANY, end, when=submitted),
            Transition(init, extract),
            Transition(extract, check),
            Transition(check, extract, when=meta_is("ok", False, name="requirements rejected")),
            Transition(check, execute),
            Transition(execute, end),
        ],
        max_transitions=20,
        system_message=load_prompt("pdoctor", "system"),
        description="StateFlow planning flow: the LLM reads requirements, the machine orders and executes",
    )


# -- reports and the CLI ---------------------------------------------------------------------


def episode_error_class(record: EpisodeRecord) -> str | None:
    """The PDoctor error class of a result record (``None``: success; ``"errored"``: the harness
    or model failed, not the agent's planning)."""
    if record.status == "error":
        return "errored"
    verdict = Verdict.from_dict(record.verdict) if record.verdict else None
    finished = record.submitted and record.status != "timeout"
    c = classify(verdict, finished=finished)
    return c.value if c else None


def dataset_label(
    actions: str, sentences: str, n: int, seed: int, tries: int, extended: bool, *, oracle: bool = False
) -> str:
    """The dataset name of ``stateflow run pdoctor`` options (validated): it identifies the requests.

    Raises:
        ConfigError: a malformed range, a value out of bounds, or ``--policy oracle`` (there is no
            gold trajectory to replay: the oracle here is the checker, not a policy).
    """
    if oracle:
        raise ConfigError("--policy oracle does not apply to pdoctor: its oracle checks orders, it does not act")
    try:
        config = SynthesisConfig(
            n=n,
            actions=parse_range(actions, "--actions"),
            sentences=parse_range(sentences, "--sentences"),
            tries=tries,
            seed=seed,
            extended=extended,
        )
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return config.label
