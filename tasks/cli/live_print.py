"""``stateflow run FLOW --task TEXT --stream``: a run's events printed as they come.

States and transitions as dim headings, model replies token by token, tool calls with their
results; the usual history and outcome follow when the run ends (:func:`print_run`).
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from stateflow.events import (
    Event,
    Interrupted,
    JudgeAnswered,
    StateEntered,
    TokenDelta,
    ToolCalled,
    ToolReturned,
    TransitionTaken,
)

__all__ = ["EventPrinter"]


class EventPrinter:
    """An ``on_event`` sink that prints to ``console`` (model text is never read as markup)."""

    def __init__(self, console: Console):
        self.console = console
        self._in_reply = False  # tokens printed since the last line break

    def _line(self, *parts: tuple[str, str] | str) -> None:
        if self._in_reply:
            self.console.file.write("\n")
            self._in_reply = False
        self.console.print(Text.assemble(*parts), highlight=False, soft_wrap=True)

    def __call__(self, event: Event) -> None:
        if isinstance(event, TokenDelta):
            if not self._in_reply:
                self.console.print(Text(f"{event.state}/{event.agent}: ", style="dim"), end="")
                self._in_reply = True
            self.console.file.write(event.text)
            self.console.file.flush()
        elif isinstance(event, StateEntered):
            self._line((f"== {event.state}", "bold"))
        elif isinstance(event, TransitionTaken):
            self._line((f"-> {event.record.target} ({event.record.rule})", "dim"))
        elif isinstance(event, ToolCalled):
            self._line((f"{event.state}/tool ", "dim"), f"{event.tool}({event.arguments})")
        elif isinstance(event, ToolReturned):
            content = event.step.message.content if event.step.message is not None else ""
            self._line(("   = ", "dim"), content[:500])
        elif isinstance(event, JudgeAnswered):
            self._line((f"{event.step.state}/judge ", "dim"), f"{event.step.output}: {event.step.detail.get('answer')}")
        elif isinstance(event, Interrupted):
            self._line(("paused: ", "yellow"), event.pending.question)
