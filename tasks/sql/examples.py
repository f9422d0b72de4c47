"""Solved questions like this one, from other databases: retrieved worked answers for Solve.

Not the paper's flow; a lever measured on the development sample, where it lost (61 % -> 54 % on
the best flow; docs/results.md, "Worked answers retrieved per question"), so an option only.
Made-up worked answers hurt the 1.5B model (it copied their joins), so this tries what text-to-SQL
work found to help instead: examples picked per question, whose *structure* is like the
question's ("how many ... for each ...", "the ... with the most ..."), with their real gold
statements.

Where the examples come from, and why that is fair: the pool is the dataset's own tasks minus
both fixed samples (``dev`` and ``heldout``, :mod:`stateflow.tasks.kit.samples`) and minus every
task on the question's database. So no scored task ever shows its own gold or a paraphrase of
it (Spider asks most questions twice, in two wordings, on one database), and the examples are
cross-domain, as Spider's training set is to its dev set.

How they are matched: a question is reduced to its *structure words*, the words used in
questions on at least :data:`MIN_DATABASES` different databases of the pool (``how``, ``many``,
``each``, ``most``, ``average``, ``not``...); domain words (``singer``, ``stadium``) become a
gap, numbers ``<num>`` and quoted values ``<val>``. Each question is then a bag of those words
and of their adjacent pairs, and the pool's questions are ranked by cosine similarity. On the
development sample, the three nearest include one whose gold statement has the question's SQL
keyword skeleton for 37 of 100 tasks, against 8 for three random pool tasks.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise

from stateflow.envs.base import Task
from stateflow.tasks.kit.blackboard import Observation
from stateflow.tasks.kit.prompts import load_prompt
from stateflow.tasks.kit.samples import SAMPLE_NAMES, STRATA, sample_of

from stateflow import Context, Tool, ToolResult
from stateflow.stable_id import stable_id

__all__ = ["MIN_DATABASES", "ExamplePool", "similar_examples"]

#: a word is a structure word when questions on at least this many databases use it
MIN_DATABASES = 8

_TOKEN = re.compile(r"[a-z]+|\d+(?:\.\d+)?|\"[^\"]*\"|'[^']*'")
_GAP = "_"


def _tokens(question: str) -> list[str]:
    """Lower-case words, with every number as ``<num>`` and every quoted value as ``<val>``."""
    out = []
    for token in _TOKEN.findall(question.lower()):
        out.append("<num>" if token[0].isdigit() else "<val>" if token[0] in "\"'" else token)
    return out


class ExamplePool:
    """Solved tasks to draw examples from, ranked by how alike their questions are built.

    Args:
        tasks: the pool (each with its question, gold statement and database).
        min_databases: see :data:`MIN_DATABASES` (all of them when the pool has fewer).
    """

    def __init__(self, tasks: Sequence[Task], *, min_databases: int = MIN_DATABASES):
        seen: dict[str, set[str]] = {}
        for task in tasks:
            for token in set(_tokens(task.query)):
                seen.setdefault(token, set()).add(task.context.lower())
        # a pool of fewer databases (the demo's three) needs the word on all of them
        need = min(min_databases, len({t.context.lower() for t in tasks}))
        self.structure_words = frozenset(t for t, databases in seen.items() if len(databases) >= need or t[0] == "<")
        self.tasks = tuple(tasks)
        self._features = [self.features(t.query) for t in self.tasks]

    def features(self, question: str) -> Counter[str]:
        """The question's structure words and adjacent pairs (domain words are gaps), counted."""
        words = [t if t in self.structure_words else _GAP for t in _tokens(question)]
        bag = Counter(w for w in words if w != _GAP)
        bag.update(f"{a} {b}" for a, b in pairwise(words) if (a, b) != (_GAP, _GAP))
        return bag

    def similar(self, question: str, database: str, k: int) -> list[Task]:
        """The ``k`` pool tasks on other databases whose questions are most alike ``question``.

        Ties keep pool order, so the choice is the same on every run.
        """
        mine = self.features(question)
        norm = math.sqrt(sum(v * v for v in mine.values()))
        scored = []
        for i, (task, theirs) in enumerate(zip(self.tasks, self._features, strict=True)):
            if task.context.lower() == database.lower() or not theirs:
                continue
            dot = sum(n * theirs.get(f, 0) for f, n in mine.items())
            scored.append((-dot / ((norm or 1.0) * math.sqrt(sum(v * v for v in theirs.values()))), i))
        return [self.tasks[i] for _, i in sorted(scored)[:k]]

    @classmethod
    def for_dataset(cls, name: str, tasks: Sequence[Task]) -> ExamplePool:
        """The pool of a dataset: its tasks minus both fixed samples (when it has them)."""
        excluded: set[int] = set()
        if name in STRATA:
            for sample in SAMPLE_NAMES:
                excluded.update(sample_of(sample, name, tasks).indices)
        return cls([t for t in tasks if t.index not in excluded])


def similar_examples(k: int = 3) -> Tool:
    """A tool that shows ``k`` solved questions like the episode's, from other databases, each
    as the one-line answer the flow expects (``Action: execute[<gold>]``).

    No LLM call and no turn: like the schema listing it is the flow's own set-up. The pool is
    built once per dataset, on first use (:meth:`ExamplePool.for_dataset`).

    Raises:
        ValueError: ``k`` < 1.
    """
    if k < 1:
        raise ValueError(f"similar_examples: k must be >= 1, got {k}")
    pools: dict[str, ExamplePool] = {}  # one per dataset, owned by this tool (no module state)
    header = load_prompt("sql-levers", "similar_examples")

    @stable_id("stateflow.tasks.sql_examples.similar_examples.<locals>.run_examples")
    def run_examples(ctx: Context) -> ToolResult:
        env = ctx.env
        task = getattr(env, "current_task", None)
        dataset = getattr(env, "dataset", None)
        if task is None or dataset is None:
            raise RuntimeError("similar_examples needs a SQL environment with a current task: run(..., env=ENV)")
        pool = pools.get(dataset.name)
        if pool is None:
            pool = pools[dataset.name] = ExamplePool.for_dataset(dataset.name, dataset.tasks)
        found = pool.similar(task.query, task.context, k)
        if not found:  # a dataset with one database has nothing to show (the demo's)
            return ToolResult("(no solved questions from other databases)", Observation(ok=True).meta())
        lines = [header] + [f"Question: {t.query}\nAction: execute[{t.gold}]" for t in found]
        return ToolResult("\n".join(lines), Observation(ok=True).meta())

    return Tool(run_examples, f"similar_examples{k}")
