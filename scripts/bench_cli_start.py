"""How long the command line takes before it answers: ``import stateflow``, ``stateflow --help``
and commands refused for a bad argument, this checkout against another revision.

Each command runs as its own process (what a user pays), alternated between the two checkouts
so that load on the machine falls on both alike; the figures are medians of wall time and of CPU
time (user + system of the child), and each is also given as a ratio to ``python -c pass`` timed
in the same rounds (the interpreter's own start, the floor no change can go under).

Usage::

    python scripts/bench_cli_start.py                      # this checkout only
    python scripts/bench_cli_start.py --baseline 5a2bac0   # and that revision, alternated
    python scripts/bench_cli_start.py --rounds 15

The baseline is exported with ``git archive`` into a temporary folder and run through
``PYTHONPATH`` with the ``stateflow.*`` package mapping of ``pyproject.toml`` recreated as
symbolic links (the editable install maps ``stateflow.tasks`` to this checkout's ``tasks/``).

Measured 2026-11-29 on the 2-core machine (``--baseline 5a2bac0 --rounds 5``, load 2.9 from
other work: read the CPU column), median CPU seconds, this change against 5a2bac0:

=========================  ======  =========
command                    now     @5a2bac0
=========================  ======  =========
``import stateflow``       0.37    0.34
``stateflow --help``       0.92    0.89
run: bad ``--tasks``       0.91    5.58
run: ``--out`` is a file   0.93    4.81
optimize: ``--out`` file   0.90    5.43
=========================  ======  =========

A refused argument now costs what ``--help`` costs: the checks run before AutoGen and the
benchmarks are imported.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPED = ("tasks", "envs", "sf_agent", "prompts")  # pyproject's package-dir: stateflow.<name> = <name>/


@dataclass(frozen=True)
class Probe:
    """One command line to time: its label and the interpreter arguments."""

    label: str
    argv: tuple[str, ...]


def probes(scratch: Path) -> list[Probe]:
    afile = scratch / "a-file"
    afile.write_text("not a directory\n")
    cli = ("-m", "stateflow.cli.main")
    return [
        Probe("python -c pass", ("-c", "pass")),
        Probe("import stateflow", ("-c", "import stateflow")),
        Probe("stateflow --help", (*cli, "--help")),
        Probe("run: bad --tasks", (*cli, "run", "intercode-sql", "--tasks", "bogus")),
        Probe("run: --out is a file", (*cli, "run", "intercode-sql", "--out", str(afile))),
        Probe(
            "optimize: --out is a file",
            (*cli, "optimize", str(ROOT / "examples/optimize/sql-measure-small.toml"), "--out", str(afile)),
        ),
    ]


def export(revision: str, into: Path) -> Path:
    """``revision`` of this repository as files in ``into`` (with the package mapping as links)."""
    archive = subprocess.run(["git", "archive", revision], cwd=ROOT, capture_output=True, check=True).stdout
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    link_mapping(into)
    return into


def link_mapping(checkout: Path) -> None:
    for name in MAPPED:
        link = checkout / "stateflow" / name
        if not link.exists():
            link.symlink_to(Path("..") / name)


def time_once(checkout: Path, probe: Probe, scratch: Path) -> tuple[float, float]:
    """(wall seconds, child CPU seconds) of one run of ``probe`` against ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "COLUMNS": "120"}
    before = os.times()
    start = time.perf_counter()
    subprocess.run([sys.executable, *probe.argv], cwd=scratch, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a git revision to compare with (e.g. 5a2bac0)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        scratch = Path(tmp) / "cwd"
        scratch.mkdir()
        trees = {"now": ROOT}  # the editable install maps stateflow.tasks & co. to this checkout already
        if args.baseline:
            trees[f"@{args.baseline}"] = export(args.baseline, Path(tmp) / "baseline")
        listed = probes(scratch)
        walls: dict[tuple[str, str], list[float]] = {}
        cpus: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for probe in listed:
                for name, tree in trees.items():
                    wall, cpu = time_once(tree, probe, scratch)
                    walls.setdefault((name, probe.label), []).append(wall)
                    cpus.setdefault((name, probe.label), []).append(cpu)
        load = os.getloadavg()[0]
        print(f"medians of {args.rounds} rounds; load average now {load:.1f}")
        print(f"{'command':28} {'tree':>10} {'wall s':>8} {'cpu s':>8} {'x pass (wall)':>14}")
        for probe in listed:
            for name in trees:
                wall = statistics.median(walls[(name, probe.label)])
                cpu = statistics.median(cpus[(name, probe.label)])
                floor = statistics.median(walls[(name, "python -c pass")])
                print(f"{probe.label:28} {name:>10} {wall:8.2f} {cpu:8.2f} {wall / floor:14.1f}")


if __name__ == "__main__":
    main()
