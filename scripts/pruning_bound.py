"""Could showing the model only the tables its question mentions help the best SQL flow?

Schema pruning (show a subset of the tables) is a common text-to-SQL lever. Before building it
as a state, this script bounds what the simplest, LLM-free version could do on the development
sample. A table is *linked* to a question when a word of the question matches a word of the
table's name or of one of its column names (lower case, camel case and underscores split, a
plural ``s`` dropped, common question words ignored); a table that shares an ``...id`` column
with two linked tables is kept too, as the bridge of a many-to-many join. Then, for every task
of the best flow's candidate records::

    .venv/bin/python scripts/pruning_bound.py \\
        docs/data/levers/intercode-sql/local-prompt_vote-candidates.jsonl

it counts the failures pruning could fix (the gold statement reads only linked tables, the
submitted answer reads one that pruning removes) and the successes it would break (the gold
statement needs a table pruning removes). Both are upper bounds: a fixable failure still needs
the model to write the right statement over the smaller schema.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import sqlglot
from sqlglot import exp
from stateflow.envs.datasets import locate_intercode_dir

# Words of nearly every Spider question; matching on them would link every table.
_QUESTION_WORDS = frozenset(
    {
        *("the", "and", "for", "with", "what", "are", "all", "how", "many", "which", "that", "each"),
        *("show", "list", "find", "give", "return", "number", "count", "name", "names", "from", "have"),
        *("has", "whose", "who", "their", "its", "than", "more", "most", "least", "does", "did", "not"),
        *("there", "different", "distinct", "total", "average", "also"),
    }
)


def words(text: str) -> set[str]:
    """The matchable words of a question, table name or column name (see the module docstring)."""
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)  # camelCase -> camel Case
    out = set()
    for w in re.split(r"[^A-Za-z0-9]+", text.lower()):
        if len(w) < 3 or w in _QUESTION_WORDS:
            continue
        out.add(w.removesuffix("s") if len(w) > 4 else w)
    return out


def linked_tables(question: str, tables: Mapping[str, Sequence[str]]) -> set[str]:
    """The tables (lower case) a lexical pruning step would keep for ``question``."""
    asked = words(question)
    keep = {t.lower() for t, cols in tables.items() if words(t) & asked or any(words(c) & asked for c in cols)}
    key_columns = {t.lower(): {c.lower() for c in cols if c.lower().endswith("id")} for t, cols in tables.items()}
    all_columns = {t.lower(): {c.lower() for c in cols} for t, cols in tables.items()}
    bridges = {
        t for t, keys in key_columns.items() if t not in keep and sum(bool(keys & all_columns[k]) for k in keep) >= 2
    }
    return keep | bridges


def tables_read(statement: str) -> set[str] | None:
    """The tables a statement reads (lower case), or None when sqlglot cannot parse it."""
    try:
        return {t.name.lower() for t in sqlglot.parse_one(statement, read="mysql").find_all(exp.Table)}
    except sqlglot.errors.ParseError:
        return None


def submitted(record: Mapping) -> str | None:
    """The statement the flow's last vote chose, or None when the record has no vote."""
    if not record.get("votes"):
        return None
    vote = record["votes"][-1]
    return vote["candidates"][vote["winner"]]["action"]


def bound(records: Iterable[Mapping], tasks: Sequence[Mapping]) -> dict[str, list[int]]:
    """Task ids by outcome: ``gold_kept``, ``could_fix`` (failures) and ``would_break`` (successes)."""
    out: dict[str, list[int]] = {"gold_kept": [], "could_fix": [], "would_break": []}
    for record in records:
        task = tasks[record["task"]]
        keep = linked_tables(task["query"], task["db_tables"])
        gold = tables_read(task["gold"])
        gold_kept = gold is not None and gold <= keep
        if gold_kept:
            out["gold_kept"].append(record["task"])
        answer = submitted(record)
        answer_tables = tables_read(answer) if answer else None
        if not record["success"] and gold_kept and answer_tables and not answer_tables <= keep:
            out["could_fix"].append(record["task"])
        if record["success"] and not gold_kept:
            out["would_break"].append(record["task"])
    return out


def load_records(path: Path) -> list[dict]:
    """The candidate records of ``path``, one per task.

    Raises:
        SystemExit: the file is missing, or a line is not a record with a task, a success and
            votes (the message names the file and line).
    """
    if not path.is_file():
        raise SystemExit(f"{path}: no such file")
    records = []
    for line_no, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            missing = {"task", "success", "votes"} - set(record)
        except json.JSONDecodeError as e:
            raise SystemExit(f"{path}:{line_no}: not a JSON record ({e.msg})") from None
        except TypeError:
            missing = {"task"}
        if missing:
            raise SystemExit(f"{path}:{line_no}: not a candidate record (no {', '.join(sorted(missing))} field)")
        records.append(record)
    return records


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidates", type=Path, help="a vote flow's candidate records (JSON lines)")
    parser.add_argument("--data", help="the InterCode data directory (default: where `stateflow run` finds it)")
    args = parser.parse_args(argv)
    tasks = json.loads((locate_intercode_dir(args.data, need="sql") / "sql" / "ic_spider_dev.json").read_text())
    records = load_records(args.candidates)
    result = bound(records, tasks)
    solved = sum(r["success"] for r in records)
    n = len(records)
    print(f"{n} tasks, {solved} solved by the flow")
    print(f"pruning keeps every gold table on {len(result['gold_kept'])} of {n}")
    print(f"failures it could fix (at most): {len(result['could_fix'])} {result['could_fix']}")
    print(f"successes it would break: {len(result['would_break'])} {result['would_break']}")
    best = solved + len(result["could_fix"]) - len(result["would_break"])
    print(f"best case: {best} of {n} ({100 * best / n:.0f} %)")


if __name__ == "__main__":
    main()
