"""StateFlow's reply trigger matches exactly the senders AutoGen's ``[Agent, None]`` matches."""

from __future__ import annotations

from typing import Any

from autogen import Agent, ConversableAgent

from stateflow.episode.agents import _AnySender


class _ProtocolOnlyAgent:
    """An agent by AutoGen's ``Agent`` protocol that is no ConversableAgent."""

    name = "other"
    description = "an agent of another kind"

    def send(self, *a: Any, **k: Any) -> None: ...
    async def a_send(self, *a: Any, **k: Any) -> None: ...
    def receive(self, *a: Any, **k: Any) -> None: ...
    async def a_receive(self, *a: Any, **k: Any) -> None: ...
    def generate_reply(self, *a: Any, **k: Any) -> None: ...
    async def a_generate_reply(self, *a: Any, **k: Any) -> None: ...
    def set_ui_tools(self, *a: Any, **k: Any) -> None: ...
    def unset_ui_tools(self, *a: Any, **k: Any) -> None: ...


def test_the_trigger_matches_what_agent_or_none_matches():
    judge = ConversableAgent("judge", llm_config=False)
    senders = [ConversableAgent("a", llm_config=False), _ProtocolOnlyAgent(), None, object(), "a"]
    assert isinstance(senders[1], Agent)  # the fallback path is exercised
    expected = [judge._match_trigger([Agent, None], s) for s in senders]
    assert expected == [True, True, True, False, False]
    assert [judge._match_trigger(_AnySender, s) for s in senders] == expected
