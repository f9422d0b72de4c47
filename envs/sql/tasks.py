"""InterCode SQL task files and the named datasets (demo, spider, spider-test).

A task file is JSON (a list of records) or CSV (a header row), each record holding ``query``,
``gold`` and ``db``, optionally ``hardness`` and ``db_tables``; any other field is kept in
``Task.extra``. A dataset pairs tasks with the SQL dumps that create their databases.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stateflow.envs.base import Task
from stateflow.envs.datasets import locate_intercode_dir
from stateflow.envs.sql.dump import read_dump

from stateflow.paths import resource_path

__all__ = [
    "DEMO_DIR",
    "NAMED_DATASETS",
    "SqlDataset",
    "TaskFileError",
    "load_task_file",
    "resolve_dataset",
]

DEMO_DIR = resource_path(__package__, "demo")
NAMED_DATASETS = ("demo", "spider", "spider-test")
_REQUIRED = ("query", "gold", "db")
_SPIDER_DUMP = "ic_spider_dbs.sql"


class TaskFileError(ValueError):
    """A task file is missing, unreadable or malformed; the message names file and record."""


@dataclass(frozen=True)
class SqlDataset:
    """Tasks plus the dumps that create every database they use.

    Attributes:
        name: "demo", "spider", "spider-test" or the task file path.
        tasks: the tasks, ``Task.index`` equal to the position.
        dumps: SQL dump files (absolute paths) creating the databases.
        databases: lower-cased names of the databases the dumps create.
    """

    name: str
    tasks: tuple[Task, ...]
    dumps: tuple[Path, ...]
    databases: frozenset[str]


def _record_to_task(index: int, record: Any, where: str) -> Task:
    if not isinstance(record, dict):
        raise TaskFileError(f"{where}: record {index} is {type(record).__name__}, expected an object")
    for key in _REQUIRED:
        value = record.get(key)
        if not isinstance(value, str) or not value.strip():
            raise TaskFileError(f"{where}: record {index} needs a non-empty string '{key}' (got {value!r})")
    hardness = record.get("hardness")
    if hardness is not None and not isinstance(hardness, str):
        raise TaskFileError(f"{where}: record {index} has a non-string 'hardness' ({hardness!r})")
    extra = {k: v for k, v in record.items() if k not in (*_REQUIRED, "hardness")}
    return Task(
        index=index,
        query=record["query"],
        gold=record["gold"],
        context=record["db"],
        hardness=hardness or None,
        extra=extra,
    )


def load_task_file(path: str | Path) -> tuple[Task, ...]:
    """Read a JSON or CSV task file.

    Raises:
        TaskFileError: the file is missing, not JSON/CSV, or a record lacks ``query/gold/db``.
    """
    p = Path(path).expanduser()
    where = str(p)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise TaskFileError(f"cannot read task file {where}: {err.strerror or err}") from err
    if p.suffix.lower() == ".csv":
        records: list[Any] = list(csv.DictReader(text.splitlines()))
    elif p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise TaskFileError(f"{where}: invalid JSON at line {err.lineno}: {err.msg}") from err
        if not isinstance(data, list):
            raise TaskFileError(f"{where}: expected a JSON list of task records, got {type(data).__name__}")
        records = data
    else:
        raise TaskFileError(f"{where}: unknown task file type '{p.suffix}' (use .json or .csv)")
    if not records:
        raise TaskFileError(f"{where}: no task records")
    return tuple(_record_to_task(i, r, where) for i, r in enumerate(records))


def _spider_files(data_dir: str | None) -> Path:
    return locate_intercode_dir(data_dir, need="sql") / "sql"


def _check_databases(name: str, tasks: Sequence[Task], dumps: Sequence[Path]) -> frozenset[str]:
    databases: set[str] = set()
    for dump in dumps:
        databases.update(read_dump(dump).databases)
    missing = sorted({t.context.lower() for t in tasks} - databases)
    if missing:
        raise TaskFileError(
            f"dataset {name}: databases {missing} are not created by the dumps "
            f"{[str(d) for d in dumps]}; pass dumps=[...] naming a dump that creates them"
        )
    return frozenset(databases)


def resolve_dataset(
    dataset: str, *, data_dir: str | None = None, dumps: Sequence[str | Path] | None = None
) -> SqlDataset:
    """Turn a dataset name or task-file path into tasks plus dumps.

    Args:
        dataset: "demo" (ships with the project), "spider" (1034 Spider-dev tasks),
            "spider-test" (23 tasks of ``sql_queries.csv``) or a path to a JSON/CSV task file.
        data_dir: directory holding InterCode's ``sql/`` files (default: see stateflow.envs.datasets).
        dumps: SQL dumps creating the databases; default: the demo dump for "demo", the Spider
            dump otherwise (for a task file: the demo dump if it covers the file's databases).

    Raises:
        TaskFileError: unreadable tasks, or databases no dump creates.
        stateflow.envs.datasets.DataNotFoundError: Spider files requested but not found.
    """
    if dataset == "demo":
        tasks = load_task_file(DEMO_DIR / "demo_tasks.json")
        default_dumps: list[Path] = [DEMO_DIR / "demo_dbs.sql"]
    elif dataset == "spider":
        files = _spider_files(data_dir)
        tasks = load_task_file(files / "ic_spider_dev.json")
        default_dumps = [files / _SPIDER_DUMP]
    elif dataset == "spider-test":
        files = _spider_files(data_dir)
        tasks = load_task_file(files / "sql_queries.csv")
        default_dumps = [files / _SPIDER_DUMP]
    else:
        path = Path(dataset).expanduser()
        if not path.is_file():
            raise TaskFileError(
                f"unknown SQL dataset {dataset!r}: not one of {', '.join(NAMED_DATASETS)} and not a file"
            )
        tasks = load_task_file(path)
        wanted = {t.context.lower() for t in tasks}
        demo_dump = DEMO_DIR / "demo_dbs.sql"
        if dumps is None and wanted <= set(read_dump(demo_dump).databases):
            default_dumps = [demo_dump]
        else:
            default_dumps = [] if dumps is not None else [_spider_files(data_dir) / _SPIDER_DUMP]
    chosen = tuple(Path(d).expanduser().resolve() for d in dumps) if dumps else tuple(default_dumps)
    databases = _check_databases(dataset, tasks, chosen)
    return SqlDataset(name=dataset, tasks=tasks, dumps=chosen, databases=databases)
