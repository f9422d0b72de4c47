"""The file system listing a Bash episode can open with (laid out for reuse, issue 49).

Every task of InterCode-Bash runs on one of a few file systems (``fs_1`` .. ``fs_4``: the task's
context), reset to the same state before each episode. Listing its task directories once, before
the task, gives the model what an ``ls`` would and, placed before the question, is a prompt prefix
that every task on that file system shares, which the embedded server's prompt cache serves
instead of evaluating again.
"""

from __future__ import annotations

from stateflow.tasks.kit.blackboard import EpisodeVars, Observation

from stateflow import Context, Tool, ToolResult
from stateflow.stable_id import stable_id

__all__ = ["FILESYSTEM_LISTING", "describe_filesystem"]

#: Every top-level directory that is not the operating system's own, two levels deep, sorted and
#: at most 30 lines each; errors are dropped so the listing never reads like a failed command.
#: It must not start with ``cd``: the environment emulates a leading ``cd`` as upstream InterCode
#: does, keeping the whole rest of the line as the tracked directory, so every later action of
#: the episode would fail to start (a first version did, and solved 0 of 28 tasks).
FILESYSTEM_LISTING = (
    'for d in /*/; do d=${d%/}; case "${d#/}" in '
    "bin|boot|dev|etc|lib|lib32|lib64|libx32|media|mnt|opt|proc|run|sbin|srv|sys|tmp|usr|var) continue;; esac; "
    'find "$d" -maxdepth 2 2>/dev/null | LC_ALL=C sort | head -n 30; done'
)

_HEADER = "The file system (directories outside the system's own, two levels deep):\n"


@stable_id("stateflow.tasks.bash.listing.run_listing")
def _run_listing(ctx: Context) -> ToolResult:
    env = ctx.env
    if env is None:
        raise RuntimeError("describe_filesystem needs an environment: run(..., env=ENV)")
    EpisodeVars.of(ctx).count_turn()
    out, _, _, info = env.step(FILESYSTEM_LISTING)
    ok = bool(info.get("action_executed", True))
    text = str(out).strip() or "(no files outside the system directories)"
    return ToolResult(_HEADER + text, Observation(ok=ok, action="ls", statement="ls").meta())


def describe_filesystem() -> Tool:
    """A tool that lists the task directories of the episode's file system (no LLM call, one turn).

    It runs :data:`FILESYSTEM_LISTING` in the episode's shell, like the SQL flows' schema
    listing runs ``SHOW TABLES``: the flow's own set-up, not an agent action.
    """
    return Tool(_run_listing, "describe_filesystem")
