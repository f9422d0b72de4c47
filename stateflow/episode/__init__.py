"""One run of a flow on AutoGen.

* :mod:`~stateflow.episode.loop`: :class:`Episode`, the loop (speaker selection as the
  transition function, checkpoints at each state entered, the driver);
* :mod:`~stateflow.episode.agents`: the AutoGen agents a flow and view need, and their group chat;
* :mod:`~stateflow.episode.replies`: what each kind of output function replies (prompt, tool,
  LLM, a user's AutoGen agent, a person);
* :mod:`~stateflow.episode.levers`: vote, retry, repeat guard and degenerate-tail cut around an
  LLM call;
* :mod:`~stateflow.episode.tool_calls`: tools a model calls (function calling or text protocol);
* :mod:`~stateflow.episode.judges`: LLM-judged transitions;
* :mod:`~stateflow.episode.step_log`: the one constructor of a run's steps.

Everything a run needs lives in one :class:`Episode` object, so any number of runs can share a
process (threads included).
"""

from stateflow.episode.loop import Episode, Journal

__all__ = ["Episode", "Journal"]
