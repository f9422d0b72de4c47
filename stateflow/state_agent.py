"""The AutoGen agent that serves a state's LLM calls, and helpers for reading AutoGen replies."""

from __future__ import annotations

from typing import Any

from autogen import Agent, ConversableAgent

__all__ = ["StateAgent", "render_calls", "reply_text", "usage_totals"]


class StateAgent(ConversableAgent):
    """A ``ConversableAgent`` that calls its model with a per-call client and keeps the response.

    AutoGen builds the request (system message + the agent's view of the group history); this
    subclass only keeps the raw response of each call (``last_response``) so the run can record
    tokens, cached tokens, cost and latency per step.

    Args:
        name: the agent's name in the group chat.
        system_message: its system message (``""``: none is sent, so the model's own default
            system prompt, e.g. from its chat template, applies).
        system_last: send the system message after the conversation instead of before it.
    """

    def __init__(self, name: str, system_message: str, *, system_last: bool = False):
        super().__init__(
            name=name,
            system_message=system_message,
            llm_config=False,
            human_input_mode="NEVER",
            code_execution_config=False,
            max_consecutive_auto_reply=None,
        )
        self.last_response: Any = None
        self.system_last = system_last
        self._own_system_message = system_message
        if not system_message:
            # AutoGen always prepends the system message; an empty one would override the
            # model's own default system prompt (e.g. Qwen's chat template), so send none.
            self._oai_system_message = []

    def reset(self) -> None:
        """AutoGen's reset (histories, counters), plus this agent's last response and its own
        system message (a call may have rewritten it): the agent is as built, ready for the next
        run of a pool (:mod:`stateflow.episode.pool`)."""
        super().reset()
        self.last_response = None
        own = self._own_system_message
        self._oai_system_message = [{"content": own, "role": "system"}] if own else []

    @property
    def system_message(self) -> str:
        """The system message; ``""`` when none is sent (AutoGen's own property indexes the empty
        list and raises, e.g. when a model call's request is hashed for the call log)."""
        return self._oai_system_message[0]["content"] if self._oai_system_message else ""

    def _generate_oai_reply_from_client(self, llm_client, messages, cache, **kwargs: Any):  # type: ignore[override]
        if self.system_last and self._oai_system_message:
            # AutoGen put the system message first; move it after the conversation so that
            # consecutive calls share the longest possible prefix (a server's prompt cache).
            n = len(self._oai_system_message)
            messages = [*messages[n:], *messages[:n]]
        response = llm_client.create(messages=messages, cache=cache, agent=self, **kwargs)
        self.last_response = response
        extracted = llm_client.extract_text_or_completion_object(response)[0]
        if extracted is not None and not isinstance(extracted, str) and hasattr(extracted, "model_dump"):
            extracted = extracted.model_dump()
        return extracted


def reply_text(reply: Any) -> str:
    """The text of an AutoGen reply (a string, or a message dict's ``content``)."""
    if isinstance(reply, str):
        return reply
    if isinstance(reply, dict):
        return str(reply.get("content") or "")
    return "" if reply is None else str(reply)


def render_calls(calls: list[dict[str, Any]]) -> str:
    """OpenAI ``tool_calls`` as one ``call name(arguments)`` line each (for the history)."""
    return "\n".join(f"call {c['function']['name']}({c['function'].get('arguments') or ''})" for c in calls)


def usage_totals(agents: list[Agent]) -> dict[str, tuple[int, int, float]]:
    """``{model: (prompt tokens, completion tokens, cost)}`` reported so far by the agents' clients."""
    from autogen import gather_usage_summary

    summary = gather_usage_summary(agents)["usage_including_cached_inference"]
    return {
        model: (int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0)), float(u.get("cost", 0.0)))
        for model, u in summary.items()
        if isinstance(u, dict)
    }
