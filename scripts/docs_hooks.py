"""MkDocs hooks for the documentation site (mkdocs.yml ``hooks:``).

The API reference reads the source with Griffe, which finds ``stateflow`` but not the folders the
wheel maps into it (``envs/`` is ``stateflow.envs``, see pyproject.toml ``package-dir``).
:func:`on_config` therefore lays out the package as installed, as symbolic links (and a copy of
its ``__init__.py``) under ``build/api-src/stateflow`` (mkdocs.yml points mkdocstrings there).

The offline search shim comes from StateFlow's cache (see ``scripts/docs_assets.py``).

``reference/cli.md`` is generated at every build from the ``stateflow`` commands themselves
(:func:`stateflow.cli.reference.cli_reference`); it is never written to ``docs/``, so it cannot
go stale or be edited by hand.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

from stateflow.cli.reference import cli_reference

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/ is not a package
from docs_assets import IFRAME_WORKER

CLI_PAGE = "reference/cli.md"
SHIM = "assets/javascripts/iframe-worker-shim.js"  # mkdocs.yml extra.polyfills names it
API_SRC = Path("build/api-src")  # relative to mkdocs.yml; mkdocs.yml's mkdocstrings ``paths``


def _package_dirs(root: Path) -> dict[str, Path]:
    """``{"stateflow": root/stateflow, "stateflow.envs": root/envs, ...}`` from pyproject.toml."""
    import tomllib

    setup = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    return {name: root / folder for name, folder in setup["package-dir"].items()}


def _link(target: Path, link: Path) -> None:
    if target.name == "__init__.py":
        # a copy: Griffe resolves a package's __init__.py to its real folder and would then look
        # for the mapped subpackages there
        if link.is_symlink():
            link.unlink()
        if not link.exists() or link.read_bytes() != target.read_bytes():
            shutil.copyfile(target, link)
        return
    if link.is_symlink() and link.resolve() == target.resolve():
        return
    if link.is_symlink():
        link.unlink()
    link.symlink_to(target.resolve(), target_is_directory=target.is_dir())


# Before every plugin's on_config (hooks run after the plugins by default): mkdocstrings reads its
# ``paths`` there, and a folder that does not exist yet is skipped, so the first build on a fresh
# clone found ``stateflow`` on sys.path instead (the checkout, without the mapped folders) and failed.
@event_priority(100)
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Lay out ``stateflow`` as installed under ``build/api-src`` for the API reference."""
    root = Path(config.config_file_path).parent
    mapped = _package_dirs(root)
    top = root / API_SRC / "stateflow"
    top.mkdir(parents=True, exist_ok=True)
    subpackages = {name.split(".", 1)[1]: path for name, path in mapped.items() if "." in name}
    for entry in mapped["stateflow"].iterdir():
        if entry.name not in subpackages and entry.name != "__pycache__":
            _link(entry, top / entry.name)
    for name, path in subpackages.items():
        _link(path, top / name)
    return config


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    """Add the generated command-line reference and the offline search shim to the site's files."""
    files.append(File.generated(config, CLI_PAGE, content=cli_reference()))
    shim = IFRAME_WORKER.path()
    if not shim.is_file():
        raise PluginError(f"{shim} is missing (the site's offline search shim): run scripts/setup_docs.sh")
    files.append(File.generated(config, SHIM, abs_src_path=str(shim)))
    return files
