"""Output functions: what a state does when it is entered.

A state runs its output functions in order; each appends one message to the history:

* :class:`Prompt` - a fixed instruction (the "prompter");
* :class:`LLM` - a model completes the history (served by an AutoGen agent);
* :class:`Tool` - a callable reads the run context (usually the last LLM message) and returns
  feedback, e.g. the observation of executing an action in an environment;
* :class:`AutoGenAgent` - the user's own AutoGen ``ConversableAgent`` (its system message, tools,
  nested chats) replies to the history;
* :class:`Human` - a person answers, through AutoGen's human input.

An :class:`LLM` may also be given tools (plain typed functions or ``autogen.tools.Tool``): the
model calls them through OpenAI function calling when its profile supports it, else through a
Thought/Action text protocol; every call and result is traced.

They are plain, immutable descriptions; the runtime decides how to execute them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from stateflow.context import Context
from stateflow.messages import Usage

if TYPE_CHECKING:
    from autogen import ConversableAgent

    from stateflow.degenerate import DegenerateCut
    from stateflow.repetition import RepeatGuard
    from stateflow.vote import Vote

__all__ = [
    "LLM",
    "OUTPUT_TYPES",
    "AutoGenAgent",
    "Human",
    "OutputFunction",
    "Prompt",
    "Tool",
    "ToolResult",
]


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: the text appended to the history plus structured facts.

    ``meta`` keys used by the built-in conditions: ``ok`` (bool: the action succeeded),
    ``done`` (bool: the environment ended the episode). ``usage``: the model usage of a tool
    that called a model itself (counted in the run's usage like an LLM step's).
    """

    content: str
    meta: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    usage: Usage | None = None


@dataclass(frozen=True)
class Prompt:
    """A fixed instruction.

    In the StateFlow view it is appended to the shared history (instructions accumulate);
    in the SF_Agent view it becomes the private system message of the state's own agent.
    """

    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError("Prompt text must be a non-empty string")

    @property
    def label(self) -> str:
        return "prompt"


@dataclass(frozen=True)
class LLM:
    """A model call that completes the history.

    Attributes:
        profile: profile name serving this call; ``None`` uses the run's assignment for the state.
        grammar: a GBNF grammar constraining the output (sent to llama.cpp / vLLM servers; for
            OpenAI profiles it is not sent and a one-time warning says so), or a function
            ``ctx -> GBNF | None`` computing it for each call from the run so far (e.g. only the
            table names the environment listed).
        regex: a regular expression constraining the output (converted for llama.cpp, sent
            natively to vLLM, monitor-only elsewhere).
        stop: extra stop sequences for this call.
        retry_when: ``(ctx, reply) -> bool``; when it holds, the reply is discarded (but its
            usage is traced) and the model is asked once more at ``retry_temperature``. Small
            models at temperature 0 repeat a failing action forever; one warmer sample breaks it.
        retry_temperature: the temperature of that second sample.
        guard: a :class:`~stateflow.repetition.RepeatGuard`; when the reply's action was already
            executed, the model is re-asked with an instruction naming that action and its
            observation (see :mod:`stateflow.repetition`). Applied after ``retry_when``.
        cut: a :class:`~stateflow.degenerate.DegenerateCut`; a reply with a character/digit run or
            a runaway line is cut there before anything reads it, and the step records the cut.
        vote: a :class:`~stateflow.vote.Vote`; the model is sampled ``k`` times, each action run
            read-only, and the reply whose result has the most votes stands (replaces the single
            call; ``guard`` and ``retry_when`` do not apply).
        tools: functions the model may call (typed Python callables with a docstring, or
            ``autogen.tools.Tool`` objects). Profiles with ``native_tools`` get them as OpenAI
            ``tools``; others get a text protocol (``Action: name[{json arguments}]``, answered
            with ``Observation: ...``). The exchange repeats until a reply calls no tool.
        max_tool_rounds: bound on model calls that request tools within one output function.
        schema: a pydantic model class: the reply is asked for as that object (its JSON schema
            constrains decoding where the server can enforce it), parsed and validated, re-asked
            once with the validation error, and put on the run's blackboard; see
            :mod:`stateflow.structured`. Not combinable with ``grammar``/``regex`` (the schema is
            the constraint), ``vote`` or ``tools``.
    """

    profile: str | None = None
    grammar: str | Callable[[Context], str | None] | None = None
    regex: str | None = None
    stop: tuple[str, ...] = ()
    retry_when: Callable[[Context, str], bool] | None = None
    retry_temperature: float = 0.8
    guard: RepeatGuard | None = None
    cut: DegenerateCut | None = None
    vote: Vote | None = None
    tools: tuple[Any, ...] = ()
    max_tool_rounds: int = 5
    schema: type[BaseModel] | None = None

    def __post_init__(self) -> None:
        if self.grammar is not None and self.regex is not None:
            raise ValueError("LLM: give either grammar or regex, not both")
        object.__setattr__(self, "tools", tuple(self.tools))
        for t in self.tools:
            if not callable(t) and not hasattr(t, "tool_schema") and not hasattr(t, "mcp_server"):
                raise TypeError(f"LLM tools: {t!r} is neither a callable, an autogen.tools.Tool nor MCPTools")
        if self.schema is not None:
            if not (isinstance(self.schema, type) and issubclass(self.schema, BaseModel)):
                raise TypeError(f"LLM schema: {self.schema!r} is not a pydantic model class (a BaseModel subclass)")
            clash = [k for k in ("grammar", "regex", "vote") if getattr(self, k) is not None]
            clash += ["tools"] if self.tools else []
            if clash:
                raise ValueError(
                    f"LLM: schema= cannot be combined with {', '.join(clash)} (the schema is the constraint)"
                )
        if self.max_tool_rounds < 1:
            raise ValueError(f"LLM: max_tool_rounds must be >= 1, got {self.max_tool_rounds}")

    @property
    def label(self) -> str:
        return "llm" if self.profile is None else f"llm[{self.profile}]"


@dataclass(frozen=True)
class Tool:
    """A callable over the run context returning feedback.

    ``fn(ctx) -> ToolResult | str``. It is registered with the run's AutoGen executor agent
    under ``name`` and invoked through AutoGen's function map.
    """

    fn: Callable[[Context], ToolResult | str]
    name: str = ""

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"Tool {self.name!r}: fn must be callable")
        if not self.name:
            object.__setattr__(self, "name", getattr(self.fn, "__name__", "tool"))

    @property
    def label(self) -> str:
        return f"tool[{self.name}]"


@dataclass(frozen=True)
class AutoGenAgent:
    """The user's own AutoGen ``ConversableAgent`` serves this output function.

    The agent answers the history with its own system message, model, tools and nested chats
    (``agent.generate_reply``); tool calls it requests are executed by ``executor`` (default: the
    agent itself, for tools registered with ``executor=agent``) and fed back until it replies
    with text. Its reply is appended to the history; the tokens and cost its clients reported
    during the call (``gather_usage_summary`` over the agent and ``usage_agents``) are traced.

    Attributes:
        agent: any ``autogen.ConversableAgent``; never modified by the run.
        executor: the agent whose function map runs the requested tools.
        usage_agents: further agents whose usage belongs to this call (e.g. the recipients of
            the agent's nested chats).
        max_tool_rounds: bound on replies that request tools within one call.
    """

    agent: ConversableAgent
    executor: ConversableAgent | None = None
    usage_agents: tuple[ConversableAgent, ...] = ()
    max_tool_rounds: int = 5

    def __post_init__(self) -> None:
        if not hasattr(self.agent, "generate_reply") or not getattr(self.agent, "name", ""):
            raise TypeError(f"AutoGenAgent: {self.agent!r} is not an AutoGen ConversableAgent")
        object.__setattr__(self, "usage_agents", tuple(self.usage_agents))

    @property
    def name(self) -> str:
        return str(self.agent.name)

    @property
    def label(self) -> str:
        return f"agent[{self.name}]"


@dataclass(frozen=True)
class Human:
    """A person answers, through AutoGen's human input (``ConversableAgent.get_human_input``).

    The run's input stream is the console by default; ``run(..., human_input=...)`` takes any
    AutoGen ``InputStream`` (e.g. :class:`stateflow.testing.ScriptedHuman` in tests).

    With ``defer=True`` the run does not wait for an answer: it saves a checkpoint and returns
    ``status == "paused"`` with the question (``RunResult.pending``); the answer arrives later,
    in this process or another one, through :func:`stateflow.resume`. A deferred question
    needs a checkpointer (``run(..., checkpointer=...)``) to keep the run in.

    Attributes:
        prompt: the question shown to the person.
        show_last: show the last message of the history above the question.
        name: the name the answer is recorded under.
        defer: pause the run instead of waiting on the console.
    """

    prompt: str = "Your reply: "
    show_last: bool = True
    name: str = "human"
    defer: bool = False

    @property
    def label(self) -> str:
        return f"human[{self.name}]"


OutputFunction = Prompt | LLM | Tool | AutoGenAgent | Human
OUTPUT_TYPES: tuple[type, ...] = (Prompt, LLM, Tool, AutoGenAgent, Human)
"""Every output-function class (for ``isinstance`` checks)."""
