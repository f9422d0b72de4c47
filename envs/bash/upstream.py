"""Rebuilding the NL2Bash file systems from upstream's public set-up scripts (for online users).

Upstream creates each task file system with a shell script (``docker/bash_scripts/
setup_nl2b_fs_N.sh`` in princeton-nlp/intercode). Instead of the shipped tarballs, a user may
download those scripts once (:func:`download_upstream_scripts`) and pass the directory as
``fs_scripts``: each script then runs as root inside a build sandbox over the base root and its
effects become the task layer (see :class:`stateflow.envs.bash.layers.LayerStore`). As upstream, some
script lines fail silently; file mtimes are those of the build.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash.layers import FsSource

__all__ = ["UPSTREAM_SCRIPT_URL", "download_upstream_scripts", "script_sources"]

UPSTREAM_SCRIPT_URL = (
    "https://raw.githubusercontent.com/princeton-nlp/intercode/master/docker/bash_scripts/setup_nl2b_{fs}.sh"
)
FS_WITH_FILES = ("fs_1", "fs_2", "fs_3")


def script_sources(script_dir: str | Path) -> dict[str, FsSource]:
    """File-system sources built from ``setup_nl2b_fs_N.sh`` files in ``script_dir``.

    Raises:
        EnvironmentError_: the directory holds none of the scripts.
    """
    directory = Path(script_dir).expanduser()
    sources = {}
    for fs_id in FS_WITH_FILES:
        path = directory / f"setup_nl2b_{fs_id}.sh"
        if path.is_file():
            sources[fs_id] = FsSource(fs_id, script=path.read_text(encoding="utf-8"))
    if not sources:
        raise EnvironmentError_(
            f"no upstream set-up scripts (setup_nl2b_fs_1.sh ...) in {directory}; "
            "fetch them with stateflow.envs.bash.upstream.download_upstream_scripts(DIR)"
        )
    return sources


def download_upstream_scripts(dest: str | Path, *, timeout: float = 30.0) -> Path:
    """Download upstream's three set-up scripts into ``dest`` (needs internet); returns ``dest``.

    Raises:
        EnvironmentError_: a download failed (the URL is named).
    """
    directory = Path(dest).expanduser()
    directory.mkdir(parents=True, exist_ok=True)
    for fs_id in FS_WITH_FILES:
        url = UPSTREAM_SCRIPT_URL.format(fs=fs_id)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                (directory / f"setup_nl2b_{fs_id}.sh").write_bytes(response.read())
        except OSError as err:
            raise EnvironmentError_(f"downloading {url} failed: {err}") from err
    return directory
