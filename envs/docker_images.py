"""Build every image the Docker backends use, ahead of time (``scripts/setup_docker.sh`` runs this).

``python -m stateflow.envs.docker_images`` builds, or finds in the engine's cache, the base image, the
MariaDB server image with the demo (and, when the data is present, Spider) dataset loaded, and
the bash images of the demo file system and NL2Bash's fs_1..fs_4. Each line printed names an
image and how long it took; an image whose inputs did not change is a lookup (milliseconds).
Missing InterCode data only skips those images (with a note); an engine problem is an error.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from stateflow.envs.base import EnvironmentError_
from stateflow.envs.datasets import DataNotFoundError

__all__ = ["build_all"]


def _timed(label: str, build: Callable[[], str], log: Callable[[str], None]) -> None:
    start = time.monotonic()
    tag = build()
    log(f"[setup_docker] {label}: {tag} ({time.monotonic() - start:.1f} s)")


def build_all(client: Any, *, data_dir: str | None = None, log: Callable[[str], None] = print) -> None:
    """Build (or look up) every image; skip datasets whose data is absent.

    Raises:
        EnvironmentError_: an image build failed.
    """
    from stateflow.envs.bash.docker_backend import bash_image
    from stateflow.envs.bash.tasks import load_bash_dataset
    from stateflow.envs.docker_engine import DockerSession, ensure_base_image
    from stateflow.envs.sql.docker_server import data_image, server_image
    from stateflow.envs.sql.tasks import resolve_dataset

    _timed("base image", lambda: ensure_base_image(client), log)
    _timed("MariaDB server image", lambda: server_image(client), log)
    session = DockerSession(client, "setup")
    try:
        for name in ("demo", "spider"):
            try:
                dumps = resolve_dataset(name, data_dir=data_dir).dumps
            except DataNotFoundError as err:
                log(f"[setup_docker] SQL data {name!r} not found, image skipped ({err})")
                continue
            _timed(f"SQL data image ({name})", lambda d=dumps: data_image(session, d), log)
    finally:
        session.close()
    sources = dict(load_bash_dataset("demo", data_dir).sources)
    try:
        sources.update(load_bash_dataset("nl2bash", data_dir).sources)
    except (DataNotFoundError, EnvironmentError_) as err:
        log(f"[setup_docker] NL2Bash data not found, fs_1..fs_4 images skipped ({err})")
    for fs_id, source in sorted(sources.items()):
        _timed(f"bash image ({fs_id})", lambda s=source: bash_image(client, s), log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stateflow.envs.docker_images", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="InterCode data directory (default: as the environments find it)")
    args = parser.parse_args(argv)
    from stateflow.envs.docker_engine import connect_engine

    try:
        build_all(connect_engine(), data_dir=args.data_dir)
    except EnvironmentError_ as err:
        print(f"[setup_docker] error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
