"""Agent specs: Crouse-style behaviour formulas compiled to automata, and their enforcement.

Typical use::

    from stateflow.spec import AgentSpec, library_spec
    spec = library_spec("react")            # or AgentSpec.from_file("my.lisp")
    spec.dfa.next_states(spec.dfa.start)    # ('Question',)
    spec.dfa.accepts(["Question", "Thought", "Action", "Action-Input", "Observation",
                      "Final-Thought", "Answer"])
"""

from stateflow.spec.automaton import SpecDFA, compile_formula
from stateflow.spec.compiled import AgentSpec, common_prefix
from stateflow.spec.errors import SpecError, SpecSyntaxError, SpecViolationError
from stateflow.spec.library import library_names, library_path, library_spec
from stateflow.spec.model import Spec, StateDecl
from stateflow.spec.parser import parse_spec, read_spec_file
from stateflow.spec.segment import Segment, Segmenter

__all__ = [
    "AgentSpec",
    "Segment",
    "Segmenter",
    "Spec",
    "SpecDFA",
    "SpecError",
    "SpecSyntaxError",
    "SpecViolationError",
    "StateDecl",
    "common_prefix",
    "compile_formula",
    "library_names",
    "library_path",
    "library_spec",
    "parse_spec",
    "read_spec_file",
]
