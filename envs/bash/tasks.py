"""Bash task sets: our demo set, NL2Bash (fs_1..fs_4, 200 tasks), upstream's test set, or a file.

Each task's ``context`` names the file system it runs on (``fs_1`` .. ``fs_4`` or ``demo``);
:class:`BashDataset.sources` says where each file system comes from.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stateflow.envs.base import EnvironmentError_, Task
from stateflow.envs.bash.layers import FsSource
from stateflow.envs.datasets import DataNotFoundError, locate_intercode_dir

from stateflow.paths import resource_path

__all__ = ["DEMO_DIR", "FS_IDS", "BashDataset", "load_bash_dataset"]

DEMO_DIR = resource_path(__package__, "demo")
FS_IDS = ("fs_1", "fs_2", "fs_3", "fs_4")
NAMED = ("demo", "nl2bash", *FS_IDS, "test")
_FS_FILE_RE = re.compile(r"nl2bash_(fs_[1-4])\.json$")


@dataclass(frozen=True)
class BashDataset:
    """Tasks in global index order plus the file systems they need."""

    name: str
    tasks: list[Task]
    sources: dict[str, FsSource]


def _read_records(path: Path) -> list[dict[str, Any]]:
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise EnvironmentError_(f"cannot read bash tasks from {path}: {err}") from err
    if not isinstance(records, list):
        raise EnvironmentError_(f"{path}: expected a JSON list of {{query, gold}} records")
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or not isinstance(rec.get("query"), str):
            raise EnvironmentError_(f"{path}: record {i} needs a string 'query'")
        gold = rec.get("gold")
        if not isinstance(gold, str) and not (isinstance(gold, list) and all(isinstance(g, str) for g in gold)):
            raise EnvironmentError_(f"{path}: record {i} needs a 'gold' command (string or list of strings)")
    return records


def _tasks(records: list[dict[str, Any]], fs_id: str | None, source: str, start: int) -> list[Task]:
    out = []
    for i, rec in enumerate(records):
        gold = rec["gold"] if isinstance(rec["gold"], str) else ";".join(rec["gold"])  # upstream joins lists
        ctx = rec.get("fs", fs_id)
        if ctx not in (*FS_IDS, "demo"):
            raise EnvironmentError_(f"{source}: record {i} has unknown file system {ctx!r}; use fs_1..fs_4 or demo")
        extra = {k: v for k, v in rec.items() if k not in ("query", "gold", "fs")}
        extra.update(source=source, local_index=i)
        out.append(Task(index=start + i, query=rec["query"], gold=gold, context=ctx, extra=extra))
    return out


def _bash_dir(data_dir: str | None) -> Path:
    if data_dir:  # an explicit directory is used as given, never silently replaced by a default
        given = Path(data_dir).expanduser()
        for candidate in (given, given / "bash"):
            if (candidate / "nl2bash_fs_1.json").exists():
                return candidate
        raise EnvironmentError_(f"InterCode bash data not found in {given}: no nl2bash_fs_1.json in it or in bash/")
    try:
        return locate_intercode_dir(data_dir, need="bash") / "bash"
    except DataNotFoundError as err:
        raise EnvironmentError_(str(err)) from err


def _fs_sources(bash_dir: Path) -> dict[str, FsSource]:
    sources: dict[str, FsSource] = {"fs_4": FsSource("fs_4")}
    for fs_id in ("fs_1", "fs_2", "fs_3"):
        tarball = bash_dir / f"nl2bash_{fs_id}.tar.gz"
        if tarball.exists():
            sources[fs_id] = FsSource(fs_id, tarball=tarball)
    return sources


def demo_source() -> FsSource:
    """Our demo tree, mounted at ``/demo``."""
    return FsSource("demo", tree=DEMO_DIR / "tree", mount_at="/demo")


def load_bash_dataset(
    dataset: str = "demo", data_dir: str | None = None, *, fs_scripts: str | None = None
) -> BashDataset:
    """Load a task set by name (``demo``, ``nl2bash``, ``fs_1``..``fs_4``, ``test``) or JSON path.

    A JSON file is a list of ``{query, gold}`` records; a record may name its file system in
    ``fs``; otherwise it is taken from a ``nl2bash_fs_N.json`` file name, else ``fs_1``.
    ``fs_scripts``: a directory of upstream's ``setup_nl2b_fs_N.sh`` scripts; the file systems
    are then built by running them instead of unpacking the tarballs.

    Raises:
        EnvironmentError_: unknown name, missing data (message lists where we looked), bad records,
            or a task whose file system has no source.
    """
    if dataset == "demo":
        records = _read_records(DEMO_DIR / "tasks.json")
        return BashDataset("demo", _tasks(records, "demo", "demo/tasks.json", 0), {"demo": demo_source()})
    if dataset in ("nl2bash", *FS_IDS, "test"):
        bash_dir = _bash_dir(data_dir)
        parts = list(FS_IDS) if dataset == "nl2bash" else [dataset] if dataset != "test" else []
        tasks: list[Task] = []
        for fs_id in parts:
            name = f"nl2bash_{fs_id}.json"
            tasks += _tasks(_read_records(bash_dir / name), fs_id, name, len(tasks))
        if dataset == "test":
            tasks = _tasks(_read_records(bash_dir / "test_queries.json"), "fs_1", "test_queries.json", 0)
        sources = _fs_sources(bash_dir)
    else:
        path = Path(dataset).expanduser()
        if not path.is_file():
            raise EnvironmentError_(
                f"unknown bash dataset {dataset!r}: use one of {', '.join(NAMED)} or the path of a JSON task file"
            )
        match = _FS_FILE_RE.search(path.name)
        tasks = _tasks(_read_records(path), match.group(1) if match else "fs_1", path.name, 0)
        sources = {"demo": demo_source(), "fs_4": FsSource("fs_4")}
        needed = {t.context for t in tasks} - {"demo", "fs_4"}
        if needed:
            local = path.parent if (path.parent / "nl2bash_fs_1.tar.gz").exists() else _bash_dir(data_dir)
            sources.update(_fs_sources(local))
    if fs_scripts is not None:
        from stateflow.envs.bash.upstream import script_sources

        sources.update(script_sources(fs_scripts))
    missing = sorted({t.context for t in tasks} - set(sources))
    if missing:
        raise EnvironmentError_(
            f"bash dataset {dataset!r} needs file system(s) {', '.join(missing)} but no nl2bash_<fs>.tar.gz was found"
        )
    return BashDataset(dataset, tasks, sources)
