"""Errors raised by the agent-spec package.

Every error about a spec file carries where it happened (source name, line, column) as
attributes and in its message, so a user can jump to the spot.
"""

from __future__ import annotations

from stateflow.errors import StateFlowError

__all__ = ["SpecError", "SpecSyntaxError", "SpecViolationError"]


class SpecError(StateFlowError):
    """A spec is malformed (syntax, unknown operator, undeclared state, ...).

    Attributes:
        source: file name or ``<string>``.
        line: 1-based line of the offending token (``None`` when not tied to one spot).
        col: 1-based column of the offending token.
        problem: the message without the location prefix.
    """

    def __init__(self, problem: str, *, source: str = "<string>", line: int | None = None, col: int | None = None):
        self.source = source
        self.line = line
        self.col = col
        self.problem = problem
        where = source if line is None else f"{source}:{line}:{col}"
        super().__init__(f"{where}: {problem}")


class SpecSyntaxError(SpecError):
    """The text is not a well-formed s-expression (unbalanced parentheses, bad string, ...)."""


class SpecViolationError(StateFlowError):
    """A run could not be brought back onto the spec (correction budget exhausted).

    Attributes:
        dfa_state: the automaton state where the run got stuck.
        valid: the declared states that were valid there.
        detail: what the model produced last.
    """

    def __init__(self, message: str, *, dfa_state: int, valid: tuple[str, ...], detail: str = ""):
        self.dfa_state = dfa_state
        self.valid = valid
        self.detail = detail
        super().__init__(message)
