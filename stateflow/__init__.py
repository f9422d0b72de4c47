"""StateFlow: LLM agents as state machines on AutoGen.

Define a flow once (states, output functions, transition rules) and run it in either view:
the paper's StateFlow (one agent, instructions accumulate in the shared history) or SF_Agent
(``sf_agent.SFAgentView``: one agent per state with a private instruction and its own model).
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version
from typing import TYPE_CHECKING

try:
    __version__ = _version("stateflow")
except PackageNotFoundError:  # running from a source checkout that was never installed
    __version__ = "0+unknown"

from stateflow.blackboard import Blackboard
from stateflow.checkpoint import (
    CHECKPOINT_SCHEMA_VERSION,
    Checkpoint,
    CheckpointConflict,
    CheckpointCorrupt,
    Checkpointer,
    CheckpointError,
    CheckpointInvalid,
    CheckpointNotFound,
    CheckpointSchemaUnsupported,
    CheckpointStoreUnavailable,
    MemoryCheckpointer,
    PostgresCheckpointer,
    SQLiteCheckpointer,
    ThreadBusy,
    ThreadInfo,
    ThreadNotContinuable,
    ThreadNotFound,
    ThreadStatus,
)
from stateflow.conditions import Condition, Judge, last_contains, last_matches, meta_is, predicate, replies_in
from stateflow.context import Context
from stateflow.errors import (
    ChatEndedError,
    CheckpointMismatch,
    ConditionError,
    ConfigError,
    FlowDefinitionError,
    LLMError,
    NoTransitionError,
    ParallelBranchError,
    StateDefinitionError,
    StateFlowError,
    StructuredOutputError,
    ToolError,
)
from stateflow.flow import ANY, Flow, FlowWarning, State, Transition
from stateflow.mcp_tools import MCPServerError, MCPToolError, MCPTools
from stateflow.messages import History, Kind, Message, Usage
from stateflow.outputs import LLM, AutoGenAgent, Human, Prompt, Tool, ToolResult
from stateflow.parallel import BranchResult, Parallel
from stateflow.profiles import ModelAssignment, ModelProfile, load_config, parse_model_options
from stateflow.run_state import PendingQuestion, RunState
from stateflow.structured import parsed
from stateflow.threads import CheckpointSummary, history
from stateflow.trace import RunResult, Step, TransitionRecord
from stateflow.views import StateFlowView, View

if TYPE_CHECKING:  # for type checkers and IDEs; at run time these are imported on first use
    from stateflow.runtime import fork, resume, run

_RUNTIME = frozenset({"run", "resume", "fork"})


def __getattr__(name: str) -> object:
    # ``run`` needs AutoGen, whose import takes ~1.5 s (it loads matplotlib and every provider SDK).
    # Importing it on first use keeps ``import stateflow`` and the CLI's help, completion and
    # config errors fast; everything else here is plain Python.
    if name in _RUNTIME:
        from stateflow import runtime

        return getattr(runtime, name)
    raise AttributeError(f"module 'stateflow' has no attribute {name!r}")


__all__ = [
    "ANY",
    "CHECKPOINT_SCHEMA_VERSION",
    "LLM",
    "AutoGenAgent",
    "Blackboard",
    "BranchResult",
    "ChatEndedError",
    "Checkpoint",
    "CheckpointConflict",
    "CheckpointCorrupt",
    "CheckpointError",
    "CheckpointInvalid",
    "CheckpointMismatch",
    "CheckpointNotFound",
    "CheckpointSchemaUnsupported",
    "CheckpointStoreUnavailable",
    "CheckpointSummary",
    "Checkpointer",
    "Condition",
    "ConditionError",
    "ConfigError",
    "Context",
    "Flow",
    "FlowDefinitionError",
    "FlowWarning",
    "History",
    "Human",
    "Judge",
    "Kind",
    "LLMError",
    "MCPServerError",
    "MCPToolError",
    "MCPTools",
    "MemoryCheckpointer",
    "Message",
    "ModelAssignment",
    "ModelProfile",
    "NoTransitionError",
    "Parallel",
    "ParallelBranchError",
    "PendingQuestion",
    "PostgresCheckpointer",
    "Prompt",
    "RunResult",
    "RunState",
    "SQLiteCheckpointer",
    "State",
    "StateDefinitionError",
    "StateFlowError",
    "StateFlowView",
    "Step",
    "StructuredOutputError",
    "ThreadBusy",
    "ThreadInfo",
    "ThreadNotContinuable",
    "ThreadNotFound",
    "ThreadStatus",
    "Tool",
    "ToolError",
    "ToolResult",
    "Transition",
    "TransitionRecord",
    "Usage",
    "View",
    "__version__",
    "fork",
    "history",
    "last_contains",
    "last_matches",
    "load_config",
    "meta_is",
    "parse_model_options",
    "parsed",
    "predicate",
    "replies_in",
    "resume",
    "run",
]
