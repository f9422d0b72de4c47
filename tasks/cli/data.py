"""`stateflow data ...`: find, verify and download InterCode's task data.

* ``data locate``: where each SQL and Bash file is, whether it is present and intact (sha256);
  exits 1 when a selected file is missing or damaged (``--only sql`` checks just SQL).
* ``data fetch``: download missing files from upstream's public repository (or a mirror given
  with ``--base-url``), verify them and store them where ``stateflow.envs.datasets`` looks.

The files stay outside the repository (they derive from Spider, CC BY-SA 4.0, and NL2Bash).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from stateflow.envs.datasets import candidate_dirs

from stateflow.errors import StateFlowError

__all__ = [
    "DATA_FILES",
    "UPSTREAM_BASE_URL",
    "DataFile",
    "FetchError",
    "app",
    "default_fetch_dir",
    "fetch_files",
    "locate_files",
    "register",
]

UPSTREAM_BASE_URL = "https://raw.githubusercontent.com/princeton-nlp/intercode/master/"


class FetchError(StateFlowError):
    """A download failed, or a file (downloaded or found) has the wrong checksum."""


@dataclass(frozen=True)
class DataFile:
    """One InterCode data file.

    Attributes:
        path: location inside an InterCode data directory (``sql/...`` or ``bash/...``).
        sha256: expected checksum.
        upstream: paths in upstream's repository, newest layout first (empty: not published
            upstream; only a mirror serving ``path`` itself can provide it).
    """

    path: str
    sha256: str
    upstream: tuple[str, ...] = ()

    @property
    def component(self) -> str:
        return self.path.split("/", 1)[0]


DATA_FILES: tuple[DataFile, ...] = (
    DataFile(
        "sql/ic_spider_dbs.sql",
        "61f6e8000cb5bb696f123fa55e111acdcd8da7eca64f452a36fd1a6e5fb1781a",
        ("data/sql/spider/ic_spider_dbs.sql",),
    ),
    DataFile(
        "sql/ic_spider_dev.json",
        "68c9ecb0692c80770f46c724cc073ea76be4f301a294caa532c050546948128e",
        ("data/sql/spider/ic_spider_dev.json",),
    ),
    DataFile(
        "sql/sql_queries.csv",
        "39462538167795ca93fbf23b0277d70d700eadd49f934df8d2b74770985bf99b",
        ("data/test/sql_queries.csv",),
    ),
    *(
        DataFile(
            f"bash/nl2bash_fs_{n}.json",
            digest,
            (f"data/bash/nl2bash/nl2bash_fs_{n}.json", f"data/nl2bash/nl2bash_fs_{n}.json"),
        )
        for n, digest in (
            (1, "60f88e1aacc7ebba535093f9890c5c33203f4e5f32958e0e94fbe90ec4f01c82"),
            (2, "8f4ce24e535fab782fda607e37db2ae1d6c5f99993c638d1ac0a7e0b542f633e"),
            (3, "a2d4ec8bc7ad69a4e2fb3eb84033994cf65ee9cfb355e3e63099df67a339b2e1"),
            (4, "ce41b89450f87765a02a51df259ca0c1762e8249185c022adb089147e2c16200"),
        )
    ),
    DataFile(
        "bash/test_queries.json",
        "d24a7a1eb61c2621c48a42f942d08f6aa02066630ab49c2a07de2530a226e0aa",
        ("data/test/bash_queries.json",),
    ),
    # file-system tarballs are built from upstream's set-up scripts; no public copy exists
    DataFile("bash/nl2bash_fs_1.tar.gz", "5a68247d2d61290ac35917014a6ee41ec9893d9dfb5aab9bbcefda04aec02ec1"),
    DataFile("bash/nl2bash_fs_2.tar.gz", "a0ed7820b3dc4d65d0ed8763c3928ca2c847e6472d86792a3084898509a608ba"),
    DataFile("bash/nl2bash_fs_3.tar.gz", "d6dc8c9303936c9cf7942ad9108a46db7afffd9e60d04e6a65c6058589ebd2c8"),
)

_COMPONENTS = ("sql", "bash", "all")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _select(component: str) -> list[DataFile]:
    if component not in _COMPONENTS:
        raise ValueError(f"unknown data component {component!r}; choose one of {', '.join(_COMPONENTS)}")
    return [f for f in DATA_FILES if component == "all" or f.component == component]


def default_fetch_dir() -> Path:
    """Where ``fetch`` stores files by default (the last place ``stateflow.envs.datasets`` looks)."""
    return candidate_dirs()[-1]


def locate_files(data_dir: str | None = None, component: str = "all") -> list[tuple[DataFile, Path | None, str]]:
    """For each file: the first candidate directory holding it and its status.

    Status is ``"ok"``, ``"checksum mismatch"`` or ``"missing"``.
    """
    out: list[tuple[DataFile, Path | None, str]] = []
    dirs = candidate_dirs(data_dir)
    for item in _select(component):
        found = next((d / item.path for d in dirs if (d / item.path).is_file()), None)
        if found is None:
            out.append((item, None, "missing"))
        else:
            out.append((item, found, "ok" if _sha256(found) == item.sha256 else "checksum mismatch"))
    return out


def _download(url: str, target: Path, timeout: float) -> None:
    request = urllib.request.Request(url, headers={"User-Agent": "stateflow-data-fetch"})
    with urllib.request.urlopen(request, timeout=timeout) as response, open(target, "wb") as out:
        while chunk := response.read(1 << 16):
            out.write(chunk)


def fetch_files(
    dest: str | Path | None = None,
    *,
    base_url: str = UPSTREAM_BASE_URL,
    component: str = "all",
    timeout: float = 30.0,
) -> list[tuple[DataFile, str]]:
    """Download missing or damaged files into ``dest`` and verify their checksums.

    Each file is tried at its upstream paths, then at its own path under ``base_url`` (so a
    mirror of an InterCode data directory works too). Files already present and intact are
    kept. Returns ``(file, outcome)`` pairs; outcome is ``"present"``, ``"downloaded from URL"``
    or ``"unavailable: ..."``.

    Raises:
        FetchError: a download succeeded but its checksum is wrong (the file is discarded).
    """
    root = Path(dest).expanduser() if dest else default_fetch_dir()
    base = base_url if base_url.endswith("/") else base_url + "/"
    results: list[tuple[DataFile, str]] = []
    for item in _select(component):
        target = root / item.path
        if target.is_file() and _sha256(target) == item.sha256:
            results.append((item, "present"))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        errors: list[str] = []
        outcome = None
        for rel in (*item.upstream, item.path):
            url = base + rel
            fd, tmp_name = tempfile.mkstemp(prefix=".fetch-", dir=target.parent)
            os.close(fd)
            tmp = Path(tmp_name)
            try:
                _download(url, tmp, timeout)
            except (urllib.error.URLError, OSError, ValueError) as err:
                tmp.unlink(missing_ok=True)
                errors.append(f"{url}: {getattr(err, 'reason', err)}")
                continue
            digest = _sha256(tmp)
            if digest != item.sha256:
                tmp.unlink(missing_ok=True)
                raise FetchError(f"{url}: sha256 {digest} does not match the expected {item.sha256} for {item.path}")
            os.replace(tmp, target)
            outcome = f"downloaded from {url}"
            break
        results.append((item, outcome or "unavailable: " + "; ".join(errors)))
    return results


app = typer.Typer(
    help="InterCode task data: locate, verify (sha256), download.", no_args_is_help=True, rich_markup_mode=None
)


def register(root: typer.Typer) -> None:
    """Attach the ``data`` command group to the root CLI app."""
    root.add_typer(app, name="data")


ComponentOpt = Annotated[str, typer.Option("--only", help="sql, bash or all")]


@app.command("locate")
def locate_cmd(
    data: Annotated[str | None, typer.Option("--data", help="an InterCode data directory to check first")] = None,
    only: ComponentOpt = "all",
) -> None:
    """Show where each InterCode file is and whether its checksum matches (exit 1 if one is missing)."""
    console = Console()
    table = Table("file", "status")
    table.add_column("location", overflow="fold")
    rows = locate_files(data, only)
    for item, path, status in rows:
        style = {"ok": "green", "missing": "yellow"}.get(status, "red")
        table.add_row(Text(item.path), Text(status, style=style), Text(str(path) if path else "-"))
    console.print(table)
    searched = dict.fromkeys(str(d) for d in candidate_dirs(data))
    console.print("searched: " + ", ".join(searched), highlight=False, soft_wrap=True)
    damaged = [item.path for item, _, status in rows if status == "checksum mismatch"]
    if damaged:
        raise FetchError(f"checksum mismatch for {', '.join(damaged)}; re-run `stateflow data fetch`")
    missing = [item.path for item, _, status in rows if status == "missing"]
    if missing:
        raise FetchError(
            f"{len(missing)} of {len(rows)} InterCode file(s) missing ({', '.join(missing)}); "
            "run `stateflow data fetch`, pass --data DIR, or check only what you need with --only sql|bash"
        )


@app.command("fetch")
def fetch_cmd(
    dest: Annotated[str | None, typer.Option("--dest", help="target directory (default: user cache)")] = None,
    base_url: Annotated[str, typer.Option("--base-url", help="upstream repository or mirror")] = UPSTREAM_BASE_URL,
    only: ComponentOpt = "all",
    timeout: Annotated[float, typer.Option(help="seconds per request")] = 30.0,
) -> None:
    """Download missing InterCode files (verified by sha256) where StateFlow finds them."""
    console = Console()
    results = fetch_files(dest, base_url=base_url, component=only, timeout=timeout)
    for item, outcome in results:
        colour = "red" if outcome.startswith("unavailable") else "green"
        console.print(Text.assemble((item.path, colour), f": {outcome}"), highlight=False)
    console.print(f"directory: {Path(dest).expanduser() if dest else default_fetch_dir()}", highlight=False)
    missing = [item.path for item, outcome in results if outcome.startswith("unavailable") and item.component == "sql"]
    if missing:
        raise FetchError(f"could not download {', '.join(missing)} (offline? try --base-url with a mirror)")
