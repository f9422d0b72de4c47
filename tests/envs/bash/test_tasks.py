"""Loading bash task sets: names, global order, file-system sources, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash import load_bash_dataset
from stateflow.envs.bash.rootfs import locate_base_root

from .conftest import bash_data_dir, needs_shared_data


def test_demo_set_ships_with_the_project() -> None:
    data = load_bash_dataset("demo")
    assert 15 <= len(data.tasks) <= 20
    assert {t.context for t in data.tasks} == {"demo"}
    assert [t.index for t in data.tasks] == list(range(len(data.tasks)))
    assert all(t.query and t.gold for t in data.tasks)


@needs_shared_data
def test_nl2bash_is_fs1_to_fs4_with_one_global_index() -> None:
    data = load_bash_dataset("nl2bash")
    contexts = [t.context for t in data.tasks]
    assert len(data.tasks) == 200
    assert contexts == sorted(contexts)  # fs_1 block, then fs_2, fs_3, fs_4
    assert [contexts.count(f"fs_{i}") for i in range(1, 5)] == [60, 53, 60, 27]
    first_fs2 = contexts.index("fs_2")
    assert data.tasks[first_fs2].extra["local_index"] == 0
    raw = json.loads((bash_data_dir() / "nl2bash_fs_2.json").read_text())
    assert data.tasks[first_fs2].gold == raw[0]["gold"]
    assert set(data.sources) == {"fs_1", "fs_2", "fs_3", "fs_4"}


@needs_shared_data
def test_single_fs_and_test_sets() -> None:
    assert len(load_bash_dataset("fs_3").tasks) == 60
    test = load_bash_dataset("test")
    assert len(test.tasks) == 24 and {t.context for t in test.tasks} == {"fs_1"}


def test_custom_file_with_fs_field(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps([{"query": "q", "gold": ["echo a", "echo b"], "fs": "demo"}]))
    data = load_bash_dataset(str(path))
    assert data.tasks[0].gold == "echo a;echo b" and data.tasks[0].context == "demo"


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{}", "JSON list"),
        ('[{"gold": "ls"}]', "record 0 needs a string 'query'"),
        ('[{"query": "q", "gold": 3}]', "record 0 needs a 'gold'"),
        ('[{"query": "q", "gold": "ls", "fs": "fs_9"}]', "unknown file system 'fs_9'"),
        ("not json", "cannot read"),
    ],
)
def test_bad_task_files_name_the_problem(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(EnvironmentError_, match=match):
        load_bash_dataset(str(path))


def test_unknown_dataset_lists_the_choices() -> None:
    with pytest.raises(EnvironmentError_, match="nl2bash"):
        load_bash_dataset("nl2sql")


def test_missing_data_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentError_, match="bash data not found in"):
        load_bash_dataset("fs_1", data_dir=str(tmp_path))


def test_missing_base_root_points_at_the_setup_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("STATEFLOW_BASH_ROOT", raising=False)
    with pytest.raises(EnvironmentError_, match=r"setup_bash\.sh"):
        locate_base_root()
