"""InterCode's bash environment (``intercode-bash``) on our own execution hosts.

Behaviour follows upstream's ``BashEnv`` (see ``docs/intercode.md``): a fresh shell per action,
emulated ``cd``, a 10 s timeout, merged output, ``Malformed command`` for bad quoting or
non-UTF-8 output, and the three-part reward computed against a gold run in a second, freshly
reset host. Safer than upstream where it does not change what a well-behaved agent sees: every
reset restores the *whole* root (upstream's ``git clean`` leaves ignored directories such as
``/usr`` or ``/etc`` changed), commands that outlive their step are killed, and the gold command
has the same timeout as the agent's.

Quoting: by default an action is split like upstream (``shlex.split('/bin/bash -c "<action>"')``);
with ``exact_quoting=True`` bash receives it verbatim, and ``cd`` is resolved by bash itself. The
gold command is run the same way as the agent's actions, so gold replays score the same in both
modes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from stateflow.envs.base import EnvironmentError_, Task
from stateflow.envs.bash.command import (
    MALFORMED,
    TIMED_OUT,
    ActionTooLong,
    action_argv,
    cd_target,
    decode_output,
    hash_argv,
    simplify_path,
)
from stateflow.envs.bash.comparison import BashComparison
from stateflow.envs.bash.hosts import ExecutionHost
from stateflow.envs.bash.reward import Change, bash_reward, content_targets, parse_git_status
from stateflow.envs.bash.tasks import BashDataset

__all__ = ["COMPARISON", "BashEnv"]

GIT_STATUS = ["git", "status", "--short"]
ACTION_EXEC = "action_executed"
COMPARISON = "comparison"
"""The ``info`` key of a submission holding its :class:`~stateflow.envs.bash.comparison.BashComparison`."""


class BashEnv:
    """The ``intercode-bash`` environment (implements :class:`stateflow.envs.base.Environment`).

    Args:
        dataset: the tasks and their file systems.
        agent_host: where the agent's actions run.
        eval_host: where the gold commands run (a host distinct from ``agent_host``).
        exact_quoting: pass actions to bash verbatim instead of upstream's re-splitting.

    One instance is used by one thread at a time; several instances may run concurrently.
    """

    name = "intercode-bash"

    def __init__(
        self,
        dataset: BashDataset,
        agent_host: ExecutionHost,
        eval_host: ExecutionHost,
        *,
        exact_quoting: bool = False,
    ) -> None:
        self.dataset = dataset
        self.exact_quoting = exact_quoting
        self._agent = agent_host
        self._eval = eval_host
        self._task: Task | None = None
        self._closed = False
        self._helper: ThreadPoolExecutor | None = None
        self.observation: Any = None
        self.info: dict[str, Any] = {}
        self.workdir = "/"

    @property
    def current_task(self) -> Task | None:
        """The task of the last :meth:`reset` (``None`` before the first), as the SQL env has it."""
        return self._task

    # ---------------------------------------------------------------- Environment API
    def __len__(self) -> int:
        return len(self.dataset.tasks)

    def task(self, index: int) -> Task:
        if not 0 <= index < len(self.dataset.tasks):
            raise IndexError(f"task index {index} out of range 0..{len(self.dataset.tasks) - 1} ({self.dataset.name})")
        return self.dataset.tasks[index]

    def reset(self, index: int) -> tuple[Any, dict[str, Any]]:
        """Start task ``index`` on a pristine file system; the observation is the NL query."""
        self._check_open()
        task = self.task(index)
        self._agent.reset(task.context)
        self._task = task
        self.info = {}
        self.observation = task.query
        self.workdir = "/"
        return self.observation, dict(self.info)

    def step(self, action: str) -> tuple[Any, float, bool, dict[str, Any]]:
        """Execute ``action``; ``submit...`` scores the last observation, ``skip`` gives up."""
        self._check_open()
        if self._task is None:
            raise EnvironmentError_("call reset(index) before step()")
        if not isinstance(action, str):
            raise TypeError(f"action must be a string, got {type(action).__name__}")
        if action == "skip":
            return "skipped", 0, True, {}
        if action.startswith("submit"):
            reward, info = self._score()
            info[ACTION_EXEC] = True
            return self.observation, reward, True, info
        self._execute(action)
        return self.observation, 0, False, dict(self.info)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._helper is not None:
            self._helper.shutdown(wait=True)
        try:
            self._agent.close()
        finally:
            self._eval.close()

    def __enter__(self) -> BashEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- execution
    def _execute(self, action: str) -> None:
        target = cd_target(action)
        if target is not None and self.exact_quoting:
            self._execute_exact_cd(action)
            return
        if target is not None:
            new_path = simplify_path(self.workdir, target)
            command, cwd = f"cd {new_path}", "/"
        else:
            command, cwd = action, self.workdir
        self.observation, executed = self._run_text(self._agent, command, cwd)
        self.info[ACTION_EXEC] = executed
        if target is not None and executed:
            self.workdir = new_path

    def _execute_exact_cd(self, action: str) -> None:
        """Exact-quoting ``cd``: bash resolves the directory itself and reports where it ended up.

        Upstream's lexical emulation keeps quotes and ``&& ...`` tails in the tracked directory
        (``cd "a b"`` would track ``/"a b"``); with exact quoting the action runs as written in
        the current directory, followed by a NUL and ``$PWD``, which becomes the new directory.
        """
        command = f'{action}\n__sf_rc=$?; printf "\\0%s" "$PWD"; exit $__sf_rc'
        text, executed = self._run_text(self._agent, command, self.workdir)
        head, sep, pwd = text.rpartition("\0")
        if sep and pwd.startswith("/"):
            text = head
            if executed:
                self.workdir = pwd
        self.observation = text
        self.info[ACTION_EXEC] = executed

    def _run_text(self, host: ExecutionHost, command: str, cwd: str) -> tuple[str, bool]:
        """Observation and success flag of ``command`` run like upstream's ``exec_action``."""
        try:
            argv = action_argv(command, exact_quoting=self.exact_quoting)
            result = host.run(argv, cwd=cwd)
        except ActionTooLong as err:  # upstream's execve would refuse it too: not run
            return str(err), False
        except ValueError:  # unbalanced quotes, NUL byte, empty after splitting
            return MALFORMED, False
        if result.timed_out:
            return TIMED_OUT, False
        text = decode_output(result.output, truncated=result.truncated)
        if text is None:
            return MALFORMED, False
        return text, result.exit_code == 0

    # ---------------------------------------------------------------- reward
    def _score(self) -> tuple[float, dict[str, Any]]:
        assert self._task is not None
        # The agent's `git status` overlaps with resetting the gold sandbox and running the gold
        # command there: the two sandboxes are independent.
        agent_status_future = self._pool().submit(self._status, self._agent)
        try:
            eval_obs, corrupt, gold_status = self._gold_side()
        except BaseException:
            wait([agent_status_future])  # never leave the helper using the sandbox behind us
            raise
        agent_status = agent_status_future.result()
        same: dict[Change, bool] = {}
        for change in content_targets(agent_status, gold_status):
            try:
                argv = hash_argv(change[0])
            except ValueError:  # both sides would fail to split it identically
                same[change] = True
                continue
            same[change] = self._agent.run(argv, cwd="/").output == self._eval.run(argv, cwd="/").output
        scored = bash_reward(agent_status, gold_status, same, self.observation, eval_obs)
        info = scored.info()
        info.update(agent_obs=self.observation, eval_obs=eval_obs, corrupt_gold=corrupt)
        # What the score was computed from, for the episode record (plain values: info is data).
        info[COMPARISON] = BashComparison.of(
            agent=agent_status,
            gold=gold_status,
            same=same,
            diff_score=scored.file_diff,
            content_score=scored.file_changes,
            answer_score=scored.answer_similarity_score,
            similarity=scored.similarity,
            corrupt_gold=corrupt,
        ).model_dump()
        self.info.update(info)
        return scored.reward, info

    def _gold_side(self) -> tuple[str | None, bool, list[Change]]:
        """Reset the gold host, run the gold command there: (output or None, corrupt, git status)."""
        assert self._task is not None
        self._eval.reset(self._task.context)
        eval_obs: str | None
        try:
            argv = action_argv(self._task.gold, exact_quoting=self.exact_quoting)
            result = self._eval.run(argv, cwd="/")
            eval_obs = TIMED_OUT if result.timed_out else decode_output(result.output, truncated=result.truncated)
            corrupt = eval_obs is None
        except ValueError:
            eval_obs, corrupt = None, True
        return eval_obs, corrupt, self._status(self._eval)

    def _pool(self) -> ThreadPoolExecutor:
        if self._helper is None:
            self._helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bash-env-score")
        return self._helper

    @staticmethod
    def _status(host: ExecutionHost) -> list[Change]:
        return parse_git_status(host.run(GIT_STATUS, cwd="/").output.decode("utf-8", errors="replace"))

    def _check_open(self) -> None:
        if self._closed:
            raise EnvironmentError_("the bash environment is closed")
