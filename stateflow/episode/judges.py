"""LLM-judged transitions: a :class:`~stateflow.conditions.Judge` asks a model about the history.

A condition calls ``ctx.ask(judge)``; :class:`Judges` answers it with one model call on the
judge's profile (or the state's) and records the consultation as a step. Within one decision
(the evaluation of a state's rules) each judge is asked at most once, so rules that share a
judge share its answer and its cost.
"""

from __future__ import annotations

from stateflow.backends.autogen_clients import LLMBackends
from stateflow.conditions import Judge
from stateflow.context import Context
from stateflow.episode.step_log import StepLog
from stateflow.events import JudgeAsked
from stateflow.state_agent import StateAgent

__all__ = ["Judges"]


class Judges:
    """The judges of one run.

    Args:
        ctx: the run's context (the current state chooses the model when the judge names none).
        backends: the run's model clients.
        log: where each consultation is recorded (a step ``judge[<name>]`` with its usage).
    """

    def __init__(self, ctx: Context, backends: LLMBackends, log: StepLog):
        self.ctx, self.backends, self.log = ctx, backends, log
        self._answers: dict[int, str | None] = {}  # judge id -> answer, for the current decision

    def new_decision(self) -> None:
        """Forget the answers of the last decision: a new one asks again (the history changed)."""
        self._answers.clear()

    def ask(self, judge: Judge) -> str | None:
        """The judge's answer about the history so far: one of its choices, or ``None`` when the
        reply named none of them."""
        key = id(judge)
        if key in self._answers:
            return self._answers[key]
        profile = self.backends.profile(self.ctx.state, judge.profile)
        transcript = "\n".join(f"[{m.name}] {m.content}" for m in self.log.history)
        options = ", ".join(judge.choices)
        agent = StateAgent(f"judge_{judge.name}", f"You classify conversations. Reply with one word: {options}.")
        messages = [{"role": "user", "content": f"{transcript}\n\nQuestion: {judge.question}\nAnswer ({options}):"}]
        fields = self.backends.endpoint(profile).sampling_fields()
        self.log.announce(JudgeAsked(self.ctx.state, judge.name, judge.question))
        text, usage = self.backends.call(agent, profile, messages, None, fields)
        answer = judge.parse(text)
        self._answers[key] = answer
        self.log.record(
            f"judge[{judge.name}]", usage=usage, detail={"question": judge.question, "reply": text, "answer": answer}
        )
        return answer
