"""Mutation testing with mutmut 3 over the modules where a silent bug costs the most.

Each *group* mutates a few modules and runs only the fast tests relevant to them, in its own
snapshot of the checkout (``.mutation/<group>/``), because mutmut 3 reads one configuration per
directory and copies the project into ``mutants/`` there. The snapshot is taken from the working
tree (tracked and untracked files, not ignored ones), so uncommitted tests count.

Every run starts from a fresh snapshot (no cached verdicts) and is reproducible: Hypothesis is
derandomised and its example database is off, so the same code and tests give the same table.
Not part of CI (a full run takes a while on 2 cores).

Usage (see ``scripts/mutation.sh``)::

    scripts/mutation.sh                 # every group
    scripts/mutation.sh flow dfa        # some groups
    scripts/mutation.sh --list          # the groups, their modules and tests
    scripts/mutation.sh --jobs 1 reward # fewer workers on a busy machine
    scripts/mutation.sh --survivors reward  # also print each surviving mutant's diff
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
#: top-level entries of the checkout copied into each snapshot, and where they go there: the
#: installed layout (pyproject's package-dir), so that mutants/ alone provides every `stateflow.*`
#: module and the checkout's editable install (which maps stateflow.envs to ./envs) is never used
LAYOUT = {
    "stateflow": "stateflow",
    "sf_agent": "stateflow/sf_agent",
    "envs": "stateflow/envs",
    "tasks": "stateflow/tasks",
    "prompts": "stateflow/prompts",
    "tests": "tests",
    "pyproject.toml": "pyproject.toml",
}
#: pytest plugin loaded in every mutmut run: a deterministic Hypothesis profile
PLUGIN = '''"""Loaded by scripts/mutation.py: deterministic Hypothesis runs, no example database."""

from hypothesis import settings

settings.register_profile("mutation", derandomize=True, database=None, print_blob=False)
settings.load_profile("mutation")
'''
#: mutmut's status names, in table order; anything else is counted as "other"
STATUSES = ("killed", "survived", "timeout", "no tests")


@dataclass(frozen=True)
class Group:
    """Modules mutated together (paths in the snapshot, i.e. the installed layout) and the test
    files (globs, relative to the root) that judge them.

    ``deselect`` names slow tests left out (pytest node ids): every surviving mutant reruns every
    selected test that reaches it, so one 30-second property test costs hours over a module.
    """

    name: str
    modules: tuple[str, ...]
    tests: tuple[str, ...]
    deselect: tuple[str, ...] = ()


GROUPS = (
    Group(
        "reward",
        ("stateflow/envs/sql/reward.py", "stateflow/envs/bash/reward.py"),
        ("tests/envs/sql/test_reward*.py", "tests/envs/bash/test_reward*.py"),
    ),
    Group(
        "records",
        # episode_record.py: its from_dict (versions, validation) is how every record is loaded
        (
            "stateflow/tasks/harness/records.py",
            "stateflow/tasks/reports/metrics.py",
            "stateflow/tasks/kit/episode_record.py",
        ),
        (
            "tests/tasks/test_records*.py",
            "tests/tasks/test_episode_record*.py",
            "tests/tasks/test_metrics*.py",
            "tests/tasks/test_identity_resume.py",
        ),
        # Known equivalent survivors (no observable change; 13 on 2026-11-24):
        #   episode_record from_dict: the `or 'record'` text (2): unreachable, from_dict validates
        #   only dicts, so every pydantic error has a field location;
        #   metrics group_records: `identity_digest or "XXXX"`: a private key for records without
        #   identity, never shown (real digests are 16 hex digits, never "");
        #   metrics group_records: sort `key=None` / no key (2): labels within a group are distinct
        #   (equal identities have equal digests), so tuples compare by label, never by records;
        #   metrics group_records: zip `strict=None/False/absent` (3): one label per identity;
        #   records latest_records: sort `key=None` / no key (2): file positions are unique;
        #   records append: `ensure_ascii=True/None/absent` (3): the same JSON values, only
        #   non-ASCII text escaped in the file;
        #   records append: `.encode("UTF-8")` / `.encode()` (2): UTF-8 is the default, codec
        #   names ignore case.
    ),
    Group(
        "flow",
        ("stateflow/flow.py", "stateflow/conditions.py"),
        ("tests/core/test_flow*.py", "tests/core/test_runtime.py"),
    ),
    Group(
        "dfa",
        ("stateflow/spec/automaton.py", "stateflow/spec/compiled.py"),
        (
            "tests/spec/test_language.py",
            "tests/spec/test_library.py",
            "tests/spec/test_doctests.py",
            "tests/spec/test_automaton*.py",
            "tests/spec/test_compiled*.py",
        ),
        # 26 s together (brute-force languages up to length 8, 370 formulas); the same check at a
        # smaller scale runs in test_automaton_exact.py
        # Known equivalent survivors (no observable change; 5 on 2026-11-24):
        #   _NFA.star: `eps[s] = ...` / `eps[be] = ...` for `+=` (both lists are still empty there);
        #   _minimise: initial blocks `q not in accepting` (same partition, labels swapped);
        #   _minimise: `changed = None` (falsy like False);
        #   _warnings: `len(nxt) >= 1` (one state's own text is a non-empty prefix: the parser
        #   refuses empty texts).
        deselect=(
            "tests/spec/test_language.py::test_core_operators_match_brute_force",
            "tests/spec/test_language.py::test_optional_operators_match_brute_force",
        ),
    ),
)


def _test_files(group: Group) -> list[str]:
    found = sorted({str(p.relative_to(ROOT)) for pattern in group.tests for p in ROOT.glob(pattern)})
    if not found:
        raise SystemExit(f"group {group.name!r}: no test file matches {list(group.tests)}")
    return found


def _snapshot(dest: Path) -> None:
    """Copy the working tree's files under COPIED into ``dest`` (git's view: ignored files skipped)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *LAYOUT],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        rel = raw.decode()
        src = ROOT / rel
        if not src.is_file():  # deleted in the working tree but still in the index
            continue
        top, _, rest = rel.partition("/")
        target = dest / LAYOUT[top] / rest if rest else dest / LAYOUT[top]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def _config(group: Group, tests: list[str]) -> str:
    selection = tests + [arg for node in group.deselect for arg in ("--deselect", node)]

    def arr(items: list[str] | tuple[str, ...]) -> str:
        return "[" + ", ".join(json.dumps(i) for i in items) + "]"

    return (
        "\n\n[tool.mutmut]  # written by scripts/mutation.py for this snapshot only\n"
        f"source_paths = {arr(['stateflow'])}\n"
        f"only_mutate = {arr(group.modules)}\n"
        f"pytest_add_cli_args_test_selection = {arr(selection)}\n"
        f"pytest_add_cli_args = {arr(['-p', 'mutation_hypothesis', '-p', 'no:cacheprovider'])}\n"
        f"also_copy = {arr(['mutation_hypothesis.py'])}\n"
        "use_git_change_detection = false\n"
        # CPU-second limit per mutant = (tests' time + 1) * multiplier * 2; mutmut's default (15)
        # lets an infinite-loop mutant spin for many minutes on a loaded machine
        "timeout_multiplier = 5.0\n"
    )


_MODULE = re.compile(r"^(?P<module>.+?)\.x(?:_|ǁ)")


def _results(work: Path, env: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """``{module path: [(mutant, status)]}`` from ``mutmut results --all true``."""
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    by_module: dict[str, list[tuple[str, str]]] = {}
    for line in out.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if not sep:
            continue
        m = _MODULE.match(name)
        module = m.group("module").replace(".", "/") + ".py" if m else "?"
        by_module.setdefault(module, []).append((name, status))
    return by_module


def _row(label: str, counts: Counter[str], seconds: float | None) -> str:
    total = sum(counts.values())
    other = total - sum(counts[s] for s in STATUSES)
    caught = counts["killed"] + counts["timeout"]
    score = f"{100 * caught / total:5.1f}%" if total else "    -"
    secs = f"{seconds:7.0f}s" if seconds is not None else ""
    return (
        f"{label:<34} {total:>7} {counts['killed']:>7} {counts['survived']:>8} {counts['timeout']:>7} "
        f"{counts['no tests']:>8} {other:>5} {score:>7} {secs}"
    )


HEADER = (
    f"{'module':<34} {'mutants':>7} {'killed':>7} {'survived':>8} {'timeout':>7} {'no tests':>8} "
    f"{'other':>5} {'caught':>7}"
)


def run_group(group: Group, *, jobs: int, survivors: bool) -> tuple[dict[str, Counter[str]], float]:
    """Mutate one group from a fresh snapshot (no cached verdicts: every number is for this tree)."""
    work = WORK / group.name
    tests = _test_files(group)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    _snapshot(work)
    (work / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text() + _config(group, tests))
    (work / "mutation_hypothesis.py").write_text(PLUGIN)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # mutmut puts mutants/ first itself
    print(f"== {group.name}: mutating {', '.join(group.modules)}", flush=True)
    print(f"   tests: {' '.join(tests)}", flush=True)
    if group.deselect:
        print(f"   left out (slow): {' '.join(group.deselect)}", flush=True)
    start = time.monotonic()
    with open(work / "mutmut-run.log", "w") as log:
        proc = subprocess.run(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs)],
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        tail = (work / "mutmut-run.log").read_text(errors="replace")[-3000:]
        raise SystemExit(f"mutmut failed for group {group.name!r} (exit {proc.returncode}):\n{tail}")
    by_module = _results(work, env)
    counts = {m: Counter(status for _, status in rows) for m, rows in sorted(by_module.items())}
    report = {
        "group": group.name,
        "tests": tests,
        "seconds": round(seconds, 1),
        "modules": {m: dict(c) for m, c in counts.items()},
        "survivors": {m: [n for n, s in rows if s == "survived"] for m, rows in sorted(by_module.items())},
    }
    (work / "summary.json").write_text(json.dumps(report, indent=2) + "\n")
    if survivors:
        for module, names in report["survivors"].items():
            for name in names:
                diff = subprocess.run(
                    [sys.executable, "-m", "mutmut", "show", name], cwd=work, env=env, capture_output=True, text=True
                ).stdout
                print(f"--- {module}: {name}\n{diff}")
    return counts, seconds


def main(argv: list[str] | None = None) -> int:
    names = [g.name for g in GROUPS]
    parser = argparse.ArgumentParser(description="Mutation testing (mutmut 3) of the critical modules.")
    parser.add_argument("groups", nargs="*", metavar="GROUP", help=f"groups to run (default: all of {names})")
    parser.add_argument("--jobs", type=int, default=2, help="parallel mutant workers (default 2)")
    parser.add_argument("--survivors", action="store_true", help="print the diff of every surviving mutant")
    parser.add_argument("--list", action="store_true", help="list the groups and exit")
    args = parser.parse_args(argv)
    if args.list:
        for g in GROUPS:
            print(f"{g.name}: {' '.join(g.modules)}\n    tests: {' '.join(_test_files(g))}")
            if g.deselect:
                print(f"    left out (slow): {' '.join(g.deselect)}")
        return 0
    unknown = [n for n in args.groups if n not in names]
    if unknown:
        parser.error(f"unknown group(s) {unknown}; valid groups: {names}")
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    chosen = [g for g in GROUPS if not args.groups or g.name in args.groups]
    rows: list[str] = []
    for group in chosen:
        counts, seconds = run_group(group, jobs=args.jobs, survivors=args.survivors)
        for i, (module, c) in enumerate(counts.items()):
            rows.append(_row(module, c, seconds if i == 0 else None))
    head = f"{HEADER}  {'time (group)':>8}"
    print("\n" + head + "\n" + "-" * len(head) + "\n" + "\n".join(rows))
    print(f"\nper-group details: {WORK.relative_to(ROOT)}/<group>/summary.json, mutmut-run.log")
    print("inspect a mutant: cd .mutation/<group> && mutmut show <name>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
