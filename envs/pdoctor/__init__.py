"""PDoctor-style planning tests: synthesized requests, mock tools, an exact Z3 oracle.

See docs/pdoctor.md of the shared folder for the method (Ji et al. 2024) and
:mod:`stateflow.envs.pdoctor.synthesis`, :mod:`stateflow.envs.pdoctor.oracle`, :mod:`stateflow.envs.pdoctor.dissection`.
"""

from stateflow.envs.pdoctor.env import PDoctorEnv, open_pdoctor_env, step_budget
from stateflow.envs.pdoctor.oracle import Call, judge, violated_constraints
from stateflow.envs.pdoctor.request import Clause, ClauseForm, Group, Order, Relative, Request, Sentence, TimeBound
from stateflow.envs.pdoctor.synthesis import SynthesisConfig, parse_range, synthesize
from stateflow.envs.pdoctor.tools import MockToolkit, flow_tools, parse_call
from stateflow.envs.pdoctor.verdict import ErrorClass, Verdict, classify

__all__ = [
    "Call",
    "Clause",
    "ClauseForm",
    "ErrorClass",
    "Group",
    "MockToolkit",
    "Order",
    "PDoctorEnv",
    "Relative",
    "Request",
    "Sentence",
    "SynthesisConfig",
    "TimeBound",
    "Verdict",
    "classify",
    "flow_tools",
    "judge",
    "open_pdoctor_env",
    "parse_call",
    "parse_range",
    "step_budget",
    "synthesize",
    "violated_constraints",
]
