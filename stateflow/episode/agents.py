"""The AutoGen agents of one run and the group chat they speak in.

Which agents exist is decided by the flow and the :class:`~stateflow.views.View`:

* ``user`` opens the chat with the task;
* ``instructions`` says a state's :class:`~stateflow.outputs.Prompt` texts;
* ``environment`` runs :class:`~stateflow.outputs.Tool` s, registered in its AutoGen function map;
* ``tools`` runs the tools given to ``LLM`` output functions;
* one :class:`~stateflow.state_agent.StateAgent` per LLM agent name the view gives (one per state
  in SF_Agent, one shared ``assistant`` in StateFlow);
* a bridge per user :class:`~stateflow.outputs.AutoGenAgent` (the user's object is never modified);
* ``human`` when a state asks a person.

Each agent answers through one handler of :mod:`stateflow.episode.replies`, given the episode
the agents are bound to (:meth:`ChatAgents.bind`): a set of agents outlives one run when it is
kept in an :class:`~stateflow.episode.pool.AgentPool`, and serves one run at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autogen import Agent, ConversableAgent, GroupChat, GroupChatManager

from stateflow.episode import replies
from stateflow.errors import ConfigError
from stateflow.outputs import LLM, AutoGenAgent, Human, Tool
from stateflow.state_agent import StateAgent
from stateflow.tool_protocol import ToolSet
from stateflow.views import ASSISTANT, EXECUTOR, HUMAN, PROMPTER, RESERVED_NAMES, TOOLS, USER

if TYPE_CHECKING:
    from stateflow.episode.loop import Episode
    from stateflow.flow import Flow
    from stateflow.views import View

__all__ = ["ChatAgents", "agents_key", "build_agents", "poolable"]

Handler = Callable[["Episode", Agent, Any, "Agent | None"], str]


class _Binding:
    """The episode a set of agents serves now; their reply functions and the speaker selection
    read it at every turn (``None`` while the set waits in a pool)."""

    __slots__ = ("episode",)

    def __init__(self) -> None:
        self.episode: Episode | None = None

    def current(self) -> Episode:
        ep = self.episode
        if ep is None:  # a pooled agent spoke outside a run: a bug, never a silent reply
            raise RuntimeError("StateFlow agents were asked to reply while bound to no run")
        return ep


@dataclass
class ChatAgents:
    """The agents of one run, the group chat and the tool registries its handlers need.

    Attributes:
        tool_keys: ``id(Tool)`` -> its key in ``executor``'s function map (two tools may share a
            display name).
        toolsets: ``id(LLM)`` -> the tools that output function may call.
        binding: the episode the agents serve now (see :meth:`bind`).
    """

    user: ConversableAgent
    prompter: ConversableAgent
    executor: ConversableAgent
    tool_runner: ConversableAgent
    llm_agents: dict[str, StateAgent]
    bridges: dict[str, ConversableAgent]
    human: ConversableAgent | None
    groupchat: GroupChat
    manager: GroupChatManager
    tool_keys: dict[int, str]
    toolsets: dict[int, ToolSet]
    binding: _Binding

    def members(self) -> list[ConversableAgent]:
        """Every agent of the set: the group's members, the tool runner and the chat manager."""
        agents: list[ConversableAgent] = [self.user, self.prompter, self.executor, self.tool_runner]
        agents += [*self.llm_agents.values(), *self.bridges.values(), self.manager]
        return agents + ([self.human] if self.human is not None else [])

    def bind(self, ep: Episode | None) -> None:
        """Serve ``ep`` from now on (``None``: no run). The chat's round bound follows the run's
        transition bound."""
        self.binding.episode = ep
        if ep is not None:
            self.groupchat.max_round = _max_round(ep)

    def reset(self) -> None:
        """Forget everything a run left in the agents: every agent's chat history with every
        other, its reply counters and reply configurations (AutoGen's ``reset``; the chat
        manager's clears the group's messages), each state agent's last response and system
        message (a vote variant rewrites it for one call). Tools and wiring stay."""
        for agent in self.members():
            agent.reset()
        self.groupchat.reset()


def _max_round(ep: Episode) -> int:
    """AutoGen's round bound, which only backs up the flow's own bound: a state takes one round
    per output function the view emits, plus the selection that leaves it."""
    view = ep.view
    per_state = max((len(view.emitted_outputs(s)) for s in ep.flow.states.values()), default=1) + 1
    return (ep.max_transitions + 2) * per_state + 2


def poolable(flow: Flow) -> bool:
    """Whether ``flow``'s agents may serve run after run: not when an ``LLM`` lists an MCP
    server's tools, which are opened for each run and closed at its end."""
    from stateflow.mcp_tools import MCPTools

    return not any(
        isinstance(t, MCPTools)
        for st in flow.states.values()
        for out in st.outputs
        if isinstance(out, LLM)
        for t in out.tools or ()
    )


def agents_key(flow: Flow, view: View) -> Hashable:
    """Everything :func:`build_agents` builds from: equal keys give interchangeable agent sets.

    The flow by identity (its pool entry keeps it alive, so the ids of its output functions stay
    unique), each state's output functions and tools by identity, and what the view decides per
    state: the agent's name, its system message, the outputs it emits, where it sends its system
    message.
    """
    per_state = tuple(
        (
            name,
            view.llm_agent_name(st),
            view.system_message(flow, st),
            tuple(map(id, st.outputs)),
            tuple(map(id, view.emitted_outputs(st))),
            tuple(id(t) for o in st.outputs if isinstance(o, LLM) for t in o.tools or ()),
        )
        for name, st in flow.states.items()
    )
    return (id(flow), type(view), view.name, view.system_last, view.system_message(flow, None), per_state)


class _SenderMeta(type):
    def __instancecheck__(cls, sender: object) -> bool:
        # StateFlow's agents are ConversableAgents: a plain class check first, AutoGen's Agent
        # protocol (slow on Python 3.11) only for any other sender.
        return sender is None or isinstance(sender, (ConversableAgent, Agent))  # checked in order


class _AnySender(metaclass=_SenderMeta):
    """A reply trigger that matches what ``[Agent, None]`` matches (any agent, or no sender).

    AutoGen checks a reply function's trigger against the sender at every turn
    (``ConversableAgent._match_trigger``). For the list ``[Agent, None]`` that costs two
    ``isinstance`` checks against its ``Agent`` protocol, about 35 us per turn on Python 3.11;
    a type trigger is one ``isinstance`` call, which this class answers with a class check.
    """


def _never_terminate(message: dict[str, Any]) -> bool:
    """The chat manager's termination check: the flow, not a message text, ends a run."""
    return False


def _answering(binding: _Binding, handler: Handler) -> Callable[..., tuple[bool, str]]:
    """``handler`` in AutoGen's reply-function signature (it always answers), for the episode
    the agents are bound to."""

    def reply(recipient: Agent, messages: Any = None, sender: Agent | None = None, config: Any = None):
        return True, handler(binding.current(), recipient, messages, sender)

    return reply


def _selecting(binding: _Binding) -> Callable[[Agent, GroupChat], Agent | None]:
    """The group chat's speaker selection: the bound episode's transition function."""

    def select(last_speaker: Agent, groupchat: GroupChat) -> Agent | None:
        return binding.current().select(last_speaker, groupchat)

    return select


def build_agents(ep: Episode) -> ChatAgents:
    """Every agent ``ep``'s flow and view need, wired to the handlers of :mod:`replies`, in one
    group chat whose speaker selection is the transition function; bound to ``ep``.

    ``ep`` supplies the flow, the view and the run's MCP sessions; a set built for one episode
    serves any other of the same :func:`agents_key` once :meth:`ChatAgents.bind` to it.

    Raises:
        ConfigError: two different tools or user agents share a name, or a name clashes with a
            built-in agent.
    """
    flow, view = ep.flow, ep.view
    binding = _Binding()
    quiet = {"llm_config": False, "human_input_mode": "NEVER", "code_execution_config": False}
    user = ConversableAgent(USER, **quiet)
    prompter = ConversableAgent(PROMPTER, **quiet)
    prompter.register_reply(_AnySender, _answering(binding, replies.prompter_reply), position=0)
    executor = ConversableAgent(EXECUTOR, **quiet)
    executor.register_reply(_AnySender, _answering(binding, replies.tool_reply), position=0)
    # Tools are registered in AutoGen's function map and invoked through it. Two different
    # tools may share a display name, so each Tool object gets its own key.
    tools: dict[str, Any] = {}
    tool_keys: dict[int, str] = {}
    for st in flow.states.values():
        for out in st.outputs:
            if isinstance(out, Tool) and id(out) not in tool_keys:
                key = out.name if out.name not in tools else f"{out.name}_{len(tools)}"
                tools[key] = out.fn
                tool_keys[id(out)] = key
    executor.register_function(tools)
    # Tools given to LLM output functions run in their own executor's function map.
    tool_runner = ConversableAgent(TOOLS, **quiet)
    toolsets: dict[int, ToolSet] = {}
    by_name: dict[str, Any] = {}
    for st in flow.states.values():
        for out in st.outputs:
            if isinstance(out, LLM) and out.tools and id(out) not in toolsets:
                toolset = ToolSet(ep.mcp.expand(out.tools))  # an MCP server's tools join the plain ones
                for name, fn in toolset.functions().items():
                    if by_name.setdefault(name, fn) is not fn:
                        raise ConfigError(f"two different LLM tools are named {name!r}; rename one")
                toolsets[id(out)] = toolset
    tool_runner.register_function(by_name)
    llm_agents: dict[str, StateAgent] = {}
    for st in flow.states.values():
        if not any(isinstance(o, LLM) for o in view.emitted_outputs(st)):
            continue
        name = view.llm_agent_name(st)
        if name not in llm_agents:
            if name != ASSISTANT and name in RESERVED_NAMES:
                raise ConfigError(f"state name {name!r} clashes with a built-in agent; rename the state")
            system = view.system_message(flow, st if name != ASSISTANT else None)
            agent = StateAgent(name, system, system_last=view.system_last)
            agent.register_reply(_AnySender, _answering(binding, replies.llm_reply), position=0)
            llm_agents[name] = agent
    # The user's own agents speak through bridges (the user's agent object is never modified).
    bridges: dict[str, ConversableAgent] = {}
    owners: dict[str, Any] = {}
    for st in flow.states.values():
        for out in view.emitted_outputs(st):
            if not isinstance(out, AutoGenAgent):
                continue
            if owners.setdefault(out.name, out.agent) is not out.agent:
                raise ConfigError(f"two different AutoGen agents are named {out.name!r}; rename one")
            if out.name in RESERVED_NAMES or out.name in llm_agents:
                raise ConfigError(f"agent name {out.name!r} clashes with a built-in or state agent; rename it")
            if out.name not in bridges:
                bridge = ConversableAgent(out.name, **quiet)
                bridge.register_reply(_AnySender, _answering(binding, replies.agent_reply), position=0)
                bridges[out.name] = bridge
    human: ConversableAgent | None = None
    if any(isinstance(o, Human) for st in flow.states.values() for o in view.emitted_outputs(st)):
        human = ConversableAgent(HUMAN, llm_config=False, human_input_mode="ALWAYS", code_execution_config=False)
        human.register_reply(_AnySender, _answering(binding, replies.human_reply), position=0)
    members: list[Agent] = [user, prompter, executor, *llm_agents.values()]
    members += [*bridges.values(), *([human] if human is not None else [])]
    # ep.select returns the next agent itself, which AutoGen takes as an override of its
    # speaker-transition graph: the graph is never consulted. Its default (every agent to every
    # other) is validated with one isinstance check against AutoGen's Agent protocol per edge,
    # slow on Python 3.11 (~1 ms per run for 5 agents, measured with cProfile): a ring keeps the
    # validation to one check per agent, and leaves no agent isolated (AutoGen warns of those).
    ring = {a: [members[(i + 1) % len(members)]] for i, a in enumerate(members)}
    groupchat = GroupChat(
        agents=members,
        messages=[],
        max_round=_max_round(ep),
        speaker_selection_method=_selecting(binding),
        allowed_or_disallowed_speaker_transitions=ring,
        speaker_transitions_type="allowed",
        admin_name="__stateflow_admin__",
        send_introductions=False,
    )
    manager = GroupChatManager(
        groupchat, llm_config=False, human_input_mode="NEVER", silent=True, is_termination_msg=_never_terminate
    )
    agents = ChatAgents(
        user,
        prompter,
        executor,
        tool_runner,
        llm_agents,
        bridges,
        human,
        groupchat,
        manager,
        tool_keys,
        toolsets,
        binding,
    )
    agents.bind(ep)
    return agents
