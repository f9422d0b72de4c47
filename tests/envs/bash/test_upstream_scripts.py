"""File systems rebuilt from upstream's set-up scripts match the shipped tarballs.

Needs the scripts on disk (no internet here): set STATEFLOW_INTERCODE_SCRIPTS to a directory with
setup_nl2b_fs_1.sh .. fs_3.sh (stateflow.envs.bash.upstream.download_upstream_scripts fetches them).
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash.layers import LayerStore
from stateflow.envs.bash.rootfs import locate_base_root
from stateflow.envs.bash.tasks import load_bash_dataset
from stateflow.envs.bash.upstream import script_sources

from .conftest import needs_sandbox, needs_shared_data

SCRIPTS = os.environ.get("STATEFLOW_INTERCODE_SCRIPTS")


def _content(path: Path) -> object:
    if not path.is_file():
        return None
    if path.name.endswith(".tar.gz"):  # archives embed build-time mtimes: compare their members
        with tarfile.open(path) as tar:
            return sorted((m.name, m.size, m.mode, tar.extractfile(m).read() if m.isfile() else None) for m in tar)
    return path.read_bytes()


def _snapshot(layer: Path, tops: list[str]) -> dict[str, tuple[int, object]]:
    """Path -> (mode, content) for the task directories of a layer."""
    out = {}
    for top in tops:
        for path in sorted((layer / top).rglob("*")):
            out[str(path.relative_to(layer))] = (path.lstat().st_mode, _content(path))
    return out


def test_script_dir_without_scripts_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentError_, match="no upstream set-up scripts"):
        script_sources(tmp_path)


@needs_sandbox
@needs_shared_data
@pytest.mark.skipif(not SCRIPTS, reason="STATEFLOW_INTERCODE_SCRIPTS not set (upstream set-up scripts not on disk)")
@pytest.mark.parametrize(
    ("fs_id", "tops"), [("fs_1", ["testbed"]), ("fs_2", ["system"]), ("fs_3", ["workspace", "backup"])]
)
def test_script_built_fs_matches_tarball(fs_id: str, tops: list[str]) -> None:
    store = LayerStore(locate_base_root())
    from_tar = store.layer(load_bash_dataset(fs_id).sources[fs_id])
    from_script = store.layer(load_bash_dataset(fs_id, fs_scripts=SCRIPTS).sources[fs_id])
    assert from_tar != from_script
    assert _snapshot(from_script, tops) == _snapshot(from_tar, tops)
