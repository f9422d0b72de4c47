"""Parse agent-spec text into a :class:`~stateflow.spec.model.Spec`.

Accepted forms (see ``docs/agent-spec.md``)::

    (define NAME
      (:states
        (Thought (:text "Thought:"))                     ; full form
        (Observation (:text "Observation:") (:flags :env-input))
        (Action (:text "Action:") (:output-constrs "Search" "Lookup"))
        (Plan "[Plan]")                                  ; shorthand
        (Tool "[Tool]" :env-input)                       ; shorthand, env-input
        Answer)                                          ; bare: text "Answer:"
      (:behavior (next (until_5 (next Thought Action Observation) Plan) Answer)))

The parser never evaluates spec text; every problem is reported as a :class:`SpecError` with
the line and column of the offending token and a hint on how to fix it.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from types import MappingProxyType

from stateflow.spec.errors import SpecError
from stateflow.spec.model import (
    OPERATORS,
    Always,
    And,
    Atom,
    Eventually,
    Formula,
    Next,
    Not,
    Or,
    Spec,
    StateDecl,
    Until,
)
from stateflow.spec.sexpr import Keyword, SList, SNode, SString, SSymbol, read_sexprs

__all__ = ["MAX_BOUND", "default_text", "parse_spec", "read_spec_file"]

#: Largest ``N`` accepted in ``until_N``: bounded loops are unrolled, so N multiplies the automaton.
MAX_BOUND = 50

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")
_UNTIL_N_RE = re.compile(r"until_(\d+)\Z")
_FIXED_OPS = ("next", "or", "and", "not", "until", "always", "eventually")


def default_text(name: str) -> str:
    """Text derived from a bare state name: ``Action-Input`` -> ``"Action Input:"``."""
    return name.replace("-", " ").replace("_", " ") + ":"


class _Parser:
    def __init__(self, source: str):
        self.source = source

    def err(self, node: SNode | None, problem: str) -> SpecError:
        if node is None:
            return SpecError(problem, source=self.source)
        return SpecError(problem, source=self.source, line=node.line, col=node.col)

    # -- top level ---------------------------------------------------------------------------
    def spec(self, forms: list[SNode]) -> Spec:
        if not forms:
            raise SpecError("empty spec: expected (define NAME (:states ...) (:behavior ...))", source=self.source)
        if len(forms) > 1:
            raise self.err(forms[1], "only one top-level (define ...) form is allowed per spec")
        form = forms[0]
        if not (isinstance(form, SList) and form.items and _is_symbol(form.items[0], "define")):
            raise self.err(form, "a spec must be (define NAME (:states ...) (:behavior ...))")
        if len(form.items) < 2 or not isinstance(form.items[1], SSymbol):
            raise self.err(form, "(define ...) needs a name symbol right after 'define'")
        name = form.items[1].name
        states_node: SList | None = None
        behavior_node: SList | None = None
        for section in form.items[2:]:
            if not (isinstance(section, SList) and section.items and isinstance(section.items[0], Keyword)):
                raise self.err(section, "expected a section (:states ...) or (:behavior ...)")
            key = section.items[0].name
            if key == "states":
                if states_node is not None:
                    raise self.err(section, "(:states ...) given twice; declare all states in one section")
                states_node = section
            elif key in ("behavior", "behaviour"):
                if behavior_node is not None:
                    raise self.err(section, "(:behavior ...) given twice; combine them with (next ...) or (and ...)")
                behavior_node = section
            else:
                raise self.err(section.items[0], f"unknown section ':{key}'; valid sections: :states, :behavior")
        if states_node is None:
            raise self.err(form, "missing (:states ...) section")
        if behavior_node is None:
            raise self.err(form, "missing (:behavior ...) section (empty behaviour)")
        states = self.states(states_node)
        body = behavior_node.items[1:]
        if not body:
            raise self.err(behavior_node, "empty behaviour: (:behavior) needs one formula, e.g. (next A B)")
        if len(body) > 1:
            raise self.err(body[1], "(:behavior ...) takes exactly one formula; wrap several in (next ...)")
        behavior = self.formula(body[0], states)
        return Spec(name=name, states=MappingProxyType(states), behavior=behavior, source=self.source)

    # -- states ------------------------------------------------------------------------------
    def states(self, section: SList) -> dict[str, StateDecl]:
        out: dict[str, StateDecl] = {}
        by_text: dict[str, StateDecl] = {}
        for entry in section.items[1:]:
            decl = self.state(entry)
            if decl.name in out:
                first = out[decl.name]
                raise self.err(entry, f"duplicate state {decl.name!r} (first declared at {first.line}:{first.col})")
            if decl.text in by_text:
                other = by_text[decl.text]
                raise self.err(
                    entry,
                    f"state {decl.name!r} has the same text {decl.text!r} as {other.name!r} "
                    f"({other.line}:{other.col}); texts must differ so states can be told apart",
                )
            out[decl.name] = decl
            by_text[decl.text] = decl
        if not out:
            raise self.err(section, "(:states) declares no state")
        return out

    def state(self, entry: SNode) -> StateDecl:
        if isinstance(entry, SSymbol):
            self.check_name(entry)
            return StateDecl(entry.name, default_text(entry.name), line=entry.line, col=entry.col)
        if not (isinstance(entry, SList) and entry.items and isinstance(entry.items[0], SSymbol)):
            raise self.err(entry, 'a state is NAME, (NAME "Text"), (NAME "Text" :env-input) or (NAME (:text "..."))')
        head = entry.items[0]
        self.check_name(head)
        text: str | None = None
        text_node: SNode | None = None
        env = False
        choices: tuple[str, ...] = ()
        choices_node: SNode | None = None
        for item in entry.items[1:]:
            if isinstance(item, SString):
                if text is not None:
                    raise self.err(item, f"state {head.name!r}: text given twice")
                text, text_node = item.value, item
            elif isinstance(item, Keyword):
                if item.name != "env-input":
                    raise self.err(
                        item, f"state {head.name!r}: unknown flag ':{item.name}'; the only flag is :env-input"
                    )
                env = True
            elif isinstance(item, SList) and item.items and isinstance(item.items[0], Keyword):
                key, args = item.items[0].name, item.items[1:]
                if key == "text":
                    if len(args) != 1 or not isinstance(args[0], SString):
                        raise self.err(
                            item, f'state {head.name!r}: (:text ...) takes one string, e.g. (:text "Thought:")'
                        )
                    if text is not None:
                        raise self.err(item, f"state {head.name!r}: text given twice")
                    text, text_node = args[0].value, args[0]
                elif key == "flags":
                    for flag in args:
                        if not (isinstance(flag, Keyword) and flag.name == "env-input"):
                            raise self.err(flag, f"state {head.name!r}: unknown flag; the only flag is :env-input")
                        env = True
                elif key in ("output-constrs", "output-constraints"):
                    if not args or not all(isinstance(a, SString) for a in args):
                        raise self.err(item, f"state {head.name!r}: (:output-constrs ...) takes one or more strings")
                    values = tuple(a.value for a in args)  # type: ignore[union-attr]
                    bad = [v for v in values if not v.strip() or "\n" in v]
                    if bad:
                        raise self.err(item, f"state {head.name!r}: constraint values must be non-empty single lines")
                    if len(set(values)) != len(values):
                        raise self.err(item, f"state {head.name!r}: duplicate values in (:output-constrs ...)")
                    choices, choices_node = values, item
                else:
                    raise self.err(
                        item.items[0],
                        f"state {head.name!r}: unknown attribute ':{key}'; valid: :text, :flags, :output-constrs",
                    )
            else:
                raise self.err(
                    item, f"state {head.name!r}: unexpected item; expected a string, :env-input or (:key ...)"
                )
        if text is None:
            text = default_text(head.name)
        elif not text.strip():
            raise self.err(text_node, f'state {head.name!r}: empty text; give a cue such as "{head.name}:"')
        elif "\n" in text or text != text.lstrip():
            raise self.err(text_node, f"state {head.name!r}: text must be one line without leading blanks")
        if env and choices:
            raise self.err(
                choices_node,
                f"state {head.name!r}: content constraints are not allowed on an env-input state "
                "(its content comes from the environment, not the model)",
            )
        return StateDecl(head.name, text, env, choices, line=head.line, col=head.col)

    def check_name(self, sym: SSymbol) -> None:
        if not _NAME_RE.match(sym.name):
            raise self.err(sym, f"invalid state name {sym.name!r}; use letters, digits, '-' and '_'")
        if sym.name.lower() in _FIXED_OPS or _UNTIL_N_RE.match(sym.name.lower()) or sym.name.lower() == "define":
            raise self.err(sym, f"{sym.name!r} is an operator name and cannot name a state")

    # -- behaviour ---------------------------------------------------------------------------
    def formula(self, node: SNode, states: dict[str, StateDecl]) -> Formula:
        if isinstance(node, SSymbol):
            low = node.name.lower()
            if low in _FIXED_OPS or _UNTIL_N_RE.match(low):
                raise self.err(node, f"operator {node.name!r} used as a state; write ({node.name} ...)")
            if node.name not in states:
                close = difflib.get_close_matches(node.name, list(states), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise self.err(node, f"undeclared state {node.name!r}{hint} (declared: {', '.join(states)})")
            return Atom(node.name, node.line, node.col)
        if isinstance(node, SString | Keyword):
            raise self.err(node, "expected a state name or an (operator ...) form in the behaviour")
        if not node.items:
            raise self.err(node, "empty formula '()'; expected (operator args...)")
        head = node.items[0]
        if not isinstance(head, SSymbol):
            raise self.err(head, f"expected an operator name; valid operators: {', '.join(OPERATORS)}")
        op = head.name.lower()
        args = node.items[1:]
        bound: int | None = None
        m = _UNTIL_N_RE.match(op)
        if m:
            bound = int(m.group(1))
            if bound > MAX_BOUND:
                raise self.err(head, f"{head.name}: bound {bound} is too large (max {MAX_BOUND}); loops are unrolled")
            op = "until"
        elif op.startswith("until") and op != "until":
            raise self.err(head, f"malformed bounded loop {head.name!r}; write until_N with a number, e.g. until_5")
        if op not in _FIXED_OPS:
            close = difflib.get_close_matches(op, [*_FIXED_OPS, "until_N"], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            if head.name in states:
                hint = f"; {head.name!r} is a state, not an operator: wrap states in (next ...)"
            raise self.err(head, f"unknown operator {head.name!r}{hint} (valid: {', '.join(OPERATORS)})")
        arity = {"until": (2, 2), "always": (1, 1), "not": (1, 1), "eventually": (1, 1)}.get(op, (1, None))
        lo, hi = arity
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = f"exactly {lo}" if lo == hi else f"at least {lo}"
            raise self.err(head, f"({head.name} ...) takes {want} argument(s), got {len(args)}")
        parts = tuple(self.formula(a, states) for a in args)
        if op == "until":
            return Until(parts[0], parts[1], bound)
        if op == "always":
            return Always(parts[0])
        if op == "not":
            return Not(parts[0])
        if op == "eventually":
            return Eventually(parts[0])
        if len(parts) == 1:
            return parts[0]  # (next f) = (or f) = (and f) = f
        return {"next": Next, "or": Or, "and": And}[op](parts)


def _is_symbol(node: SNode, name: str) -> bool:
    return isinstance(node, SSymbol) and node.name.lower() == name


def parse_spec(text: str, source: str = "<string>") -> Spec:
    """Parse spec text.

    Args:
        text: the s-expression spec.
        source: name used in error messages.

    Raises:
        SpecError: any malformed input, with line and column.

    Example:
        >>> s = parse_spec('(define d (:states Question Answer) (:behavior (next Question Answer)))')
        >>> s.state_names, s.states["Answer"].text
        (('Question', 'Answer'), 'Answer:')
    """
    return _Parser(source).spec(read_sexprs(text, source))


def read_spec_file(path: str | Path) -> Spec:
    """Parse a spec file (UTF-8); errors name the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"spec file not found: {p}") from None
    except UnicodeDecodeError as err:
        raise SpecError(f"not UTF-8 text: {err}", source=str(p)) from err
    return parse_spec(text, source=str(p))
