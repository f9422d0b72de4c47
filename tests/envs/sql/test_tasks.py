"""Task files and named datasets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stateflow.envs.sql import TaskFileError, load_task_file, resolve_dataset

from .conftest import needs_spider


def test_demo_dataset() -> None:
    data = resolve_dataset("demo")
    assert len(data.tasks) == 20
    assert data.databases == {"library", "weather", "bakery"}
    assert {t.hardness for t in data.tasks} == {"easy", "medium", "hard", "extra"}
    assert all(t.index == i for i, t in enumerate(data.tasks))
    assert "db_tables" in data.tasks[0].extra


def test_json_and_csv_files(tmp_path: Path) -> None:
    records = [{"query": "q", "gold": "SELECT 1", "db": "library", "note": 7}]
    (tmp_path / "t.json").write_text(json.dumps(records))
    (tmp_path / "t.csv").write_text("query,gold,db\nq,SELECT 1,weather\n")
    task = load_task_file(tmp_path / "t.json")[0]
    assert (task.query, task.gold, task.context, task.extra) == ("q", "SELECT 1", "library", {"note": 7})
    assert load_task_file(tmp_path / "t.csv")[0].context == "weather"
    # a file on demo databases resolves to the demo dump
    assert resolve_dataset(str(tmp_path / "t.csv")).databases == {"library", "weather", "bakery"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{}", "expected a JSON list"),
        ("[1]", "record 0 is int"),
        ('[{"query": "q", "gold": "g"}]', "non-empty string 'db'"),
        ("[", "invalid JSON"),
        ("[]", "no task records"),
    ],
)
def test_bad_task_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TaskFileError, match=message):
        load_task_file(path)


def test_unknown_dataset_and_missing_databases(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="unknown SQL dataset"):
        resolve_dataset("nope")
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"query": "q", "gold": "g", "db": "atlantis"}]))
    demo_dump = Path(resolve_dataset("demo").dumps[0])
    with pytest.raises(TaskFileError, match="atlantis"):
        resolve_dataset(str(path), dumps=[demo_dump])


@needs_spider
def test_spider_datasets() -> None:
    spider = resolve_dataset("spider")
    assert len(spider.tasks) == 1034
    assert len(spider.databases) == 20
    counts = {h: sum(t.hardness == h for t in spider.tasks) for h in ("easy", "medium", "hard", "extra")}
    assert counts == {"easy": 248, "medium": 446, "hard": 174, "extra": 166}
    assert len(resolve_dataset("spider-test").tasks) == 23
