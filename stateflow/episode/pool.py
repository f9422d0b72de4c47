"""Prepared AutoGen agents that serve run after run: :class:`AgentPool`.

Building a run's agents is most of StateFlow's own CPU time per run: AutoGen registers about ten
reply functions per ``ConversableAgent`` and checks each trigger against its ``Agent`` protocol,
which is slow on Python 3.11 (measured with cProfile over 50 runs of a two-state flow: 29 % of a
run's CPU). When many runs of one flow share a process (a runner, ``stateflow serve``, 50
awaited ``arun``), a run takes a set of agents built for its flow and view from the pool and
gives it back when it ends; the set is then reset (every chat history, counter, reply
configuration, state agent response and system message) before it waits for the next run.

Guarantees:

* a set serves one run at a time (it leaves the pool while a run holds it), so no run ever
  sees another run's messages, whether runs follow each other or overlap;
* a set comes back only from a run that ended without an error (a failed or cancelled run may
  have left AutoGen half-way through a turn): such a set is dropped, the next run builds anew;
* a set only serves runs of the same flow object and the same view decisions
  (:func:`~stateflow.episode.agents.agents_key`).

The pool is a dependency, not run state: it lives in the run's shared
:class:`~stateflow.backends.http.HttpClients` (``HttpClients.shared``), so every run given the
same pools (``run(..., http=...)``) shares it, and a run without shared pools builds its agents
as before. A flow whose ``LLM`` uses an MCP server's tools always builds its own (its tools are
opened per run).

Example:
    >>> from stateflow import LLM, Flow, ModelProfile, Prompt, State, Transition, run
    >>> from stateflow.backends.http import HttpClients
    >>> from stateflow.backends.scripted import ScriptedLLM
    >>> ask, end = State("Ask", Prompt("Say hi."), LLM()), State("End", final=True)
    >>> flow = Flow("hello", initial=ask, transitions=[Transition(ask, end)])
    >>> script = ModelProfile("s", provider="scripted", model="s", api_key_env=None)
    >>> with HttpClients() as http:
    ...     for task in ("one", "two", "three"):
    ...         _ = run(flow, task, models=script, scripts={"s": ScriptedLLM(["hi"])}, http=http)
    ...     pool = http.shared(AgentPool, AgentPool)
    ...     (pool.stats.built, pool.stats.reused)
    (1, 2)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stateflow.episode.agents import ChatAgents, agents_key, build_agents

if TYPE_CHECKING:
    from stateflow.episode.loop import Episode

__all__ = ["AgentPool", "PoolStats"]


@dataclass
class PoolStats:
    """What a pool did so far.

    Attributes:
        built: agent sets built (a run found none waiting for its flow and view).
        reused: runs served by a set an earlier run gave back.
        dropped: sets not taken back (their run failed, or the pool was full).
    """

    built: int = 0
    reused: int = 0
    dropped: int = 0


class _Entry:
    """The idle agent sets of one key; holds the flow, so the ids in the key stay its own."""

    __slots__ = ("flow", "idle")

    def __init__(self, flow: object):
        self.flow = flow
        self.idle: list[ChatAgents] = []


class AgentPool:
    """Idle agent sets per (flow, view decisions); thread-safe.

    Args:
        max_idle: idle sets kept per key (a burst of N concurrent runs leaves up to N behind;
            more are dropped when they come back).
        max_keys: flows kept; the least recently used one is forgotten beyond it (a subflow
            flow is expanded into a new flow object per run, so its runs never share a key).
    """

    def __init__(self, max_idle: int = 64, max_keys: int = 32):
        self.max_idle = max_idle
        self.max_keys = max_keys
        self.stats = PoolStats()
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def idle(self) -> list[ChatAgents]:
        """The agent sets waiting for a run now (each reset when it came back)."""
        with self._lock:
            return [agents for entry in self._entries.values() for agents in entry.idle]

    def take(self, ep: Episode) -> tuple[ChatAgents, Hashable]:
        """A set of agents bound to ``ep``: one given back by an earlier run, else a new one.

        Returns:
            The set and its key (to give it back with :meth:`give_back`).

        Raises:
            ConfigError: as :func:`~stateflow.episode.agents.build_agents`, for a new set.
        """
        key = agents_key(ep.flow, ep.view)
        with self._lock:
            entry = self._entries.get(key)
            agents = entry.idle.pop() if entry is not None and entry.idle else None
            if agents is not None:
                self._entries.move_to_end(key)
                self.stats.reused += 1
        if agents is None:
            agents = build_agents(ep)  # outside the lock: building is the slow part
            with self._lock:
                self.stats.built += 1
            return agents, key
        agents.bind(ep)
        return agents, key

    def give_back(self, key: Hashable, agents: ChatAgents, ep: Episode) -> None:
        """Take ``agents`` back from ``ep``'s run: reset and kept for the next run of ``key``,
        or dropped when the run failed or ``key`` has ``max_idle`` sets waiting already."""
        agents.bind(None)
        if ep.failure is not None:
            with self._lock:
                self.stats.dropped += 1
            return
        agents.reset()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(ep.flow)
                while len(self._entries) > self.max_keys:
                    self._entries.popitem(last=False)
            if len(entry.idle) >= self.max_idle:
                self.stats.dropped += 1
                return
            entry.idle.append(agents)
