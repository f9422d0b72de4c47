"""How far could a majority vote among whole recorded methods go on the SQL development sample?

Every method recorded on the sample gave one final answer per task. This script re-runs each
failed answer's final statement read-only on the task's database, then simulates a vote among
every combination of ``--sizes`` methods: the result most of them returned wins, a tie goes to
the method with the higher success of its own, and a statement that fails to run has no vote.
It prints the best combinations, the median one and the union (a task solved by any method),
so a claim like "no vote among what we tried reaches 65 %" can be checked from the archives::

    .venv/bin/python scripts/vote_ceiling.py docs/data/paper/intercode-sql/local.jsonl \\
        docs/data/levers/intercode-sql/local.jsonl --min-success 30

How the answers are compared (an approximation of the scorer, stated in the output): an answer
the record scored a success is "the gold result"; a failed answer is its statement's result as
text; a failed record without its final statement (older records kept none) is an answer no
other method shares. So the simulation is optimistic: wrong answers that would have agreed with
one another are counted as disagreeing. Picking the best combination on the same sample is
tuning on it; the median is the unbiased figure for "a vote among k of these methods".
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

GOLD = "<the gold result>"

#: one method's answer to one task: GOLD, a result as text, or None (it failed to run)
Answer = str | None


def vote_wins(answers: Sequence[Answer]) -> bool:
    """Whether the majority among ``answers`` (in tie order: the first of the tied wins) is GOLD.

    A ``None`` answer (a statement that failed) has no vote; with no votes at all the task is lost.
    """
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return False
    top = max(counts.values())
    return next(a for a in answers if a is not None and counts[a] == top) == GOLD


def simulate(
    answers: Mapping[str, Mapping[int, Answer]], size: int, tasks: Sequence[int]
) -> list[tuple[int, tuple[str, ...]]]:
    """Solved-task count of every ``size``-combination of the methods in ``answers``, best first.

    Methods are put in tie order by their own success on ``tasks`` (then by name).
    """
    own = {m: sum(a[t] == GOLD for t in tasks) for m, a in answers.items()}
    ranked = sorted(answers, key=lambda m: (-own[m], m))
    scored = [
        (sum(vote_wins([answers[m][t] for m in combo]) for t in tasks), combo)
        for combo in itertools.combinations(ranked, size)
    ]
    return sorted(scored, key=lambda s: (-s[0], s[1]))


def _final_statement(record: Mapping[str, Any]) -> str | None:
    action = record.get("last_action")
    if not action or action == "submit":
        return None
    return action.removeprefix("execute[").removesuffix("]") if action.startswith("execute[") else action


def load_answers(paths: Iterable[Path], min_success: float, dataset: str) -> dict[str, dict[int, Answer]]:
    """Each method's answer per task, for the methods recorded on every task any method was
    recorded on, with success >= ``min_success`` percent; failed answers re-run read-only."""
    records: dict[str, dict[int, Mapping[str, Any]]] = defaultdict(dict)
    for path in paths:
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                records[record["method"]][record["task"]] = record  # a later record of a task wins
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{line_no}: not a JSON record ({e.msg})") from None
            except (KeyError, TypeError) as e:
                raise SystemExit(f"{path}:{line_no}: not an episode record (no {e} field)") from None
    tasks = sorted(set().union(*(set(r) for r in records.values())))
    complete = {m: r for m, r in records.items() if set(r) >= set(tasks)}
    if not complete:
        raise SystemExit(f"no method is recorded on all {len(tasks)} tasks; pass archives of one sample")
    for method in sorted(set(records) - set(complete)):
        print(f"left out: {method} ({len(records[method])} of {len(tasks)} tasks recorded)")
    kept = {
        m: r for m, r in complete.items() if 100 * sum(bool(r[t]["success"]) for t in tasks) / len(tasks) >= min_success
    }
    answers: dict[str, dict[int, Answer]] = {m: {} for m in kept}
    with ExitStack() as stack:
        env = None  # the database starts only if a failed answer must be re-run
        for method, by_task in kept.items():
            for task in tasks:
                record = by_task[task]
                statement = _final_statement(record)
                if record["success"]:
                    answers[method][task] = GOLD
                elif statement is None:
                    answers[method][task] = f"<unknown answer of {method}>"
                else:
                    if env is None:
                        from stateflow.envs.sql import open_sql_env  # here: the rest needs no MySQL driver

                        env = stack.enter_context(open_sql_env(dataset))
                    env.reset(task)
                    observation, *_ = env.step(statement)
                    text = str(observation)
                    answers[method][task] = None if text.startswith("Error") else text
    return answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archives", nargs="+", type=Path, help="record files (JSON lines) of one sample")
    parser.add_argument("--sizes", default="3,4,5", help="vote sizes to simulate (default: 3,4,5)")
    parser.add_argument("--min-success", type=float, default=0.0, help="only methods at or above this success %%")
    parser.add_argument("--top", type=int, default=3, help="best combinations to print per size")
    parser.add_argument("--dataset", default="spider")
    args = parser.parse_args(argv)
    answers = load_answers(args.archives, args.min_success, args.dataset)
    tasks = sorted(next(iter(answers.values())))
    n = len(tasks)
    print(f"{len(answers)} methods on {n} tasks (optimistic: see the module doc)")
    for m in sorted(answers, key=lambda m: -sum(answers[m][t] == GOLD for t in tasks)):
        print(f"  {m}: {100 * sum(answers[m][t] == GOLD for t in tasks) / n:.0f} %")
    union = sum(any(a[t] == GOLD for a in answers.values()) for t in tasks)
    print(f"union (solved by any method): {100 * union / n:.0f} %")
    for size in (int(s) for s in args.sizes.split(",")):
        scored = simulate(answers, size, tasks)
        if not scored:
            continue
        median = statistics.median(s for s, _ in scored)
        print(f"votes of {size} ({len(scored)} combinations): median {100 * median / n:.1f} %, best:")
        for solved, combo in scored[: args.top]:
            print(f"  {100 * solved / n:.0f} %  {', '.join(combo)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
