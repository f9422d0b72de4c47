"""The fault matrix: every command x every kind of bad input it takes ([edges], issue 57).

Each cell runs the real command line on one bad input and asserts what a user must get: a
non-zero exit, no traceback and never "unexpected error", one line that names the input (or its
option) and the problem, no secret printed, and nothing already recorded changed (a results
directory and a checkpoint store with a real thread, hashed before and after).

Cells run in this process through :func:`stateflow.cli.main.main` (the fast path), except the
"unreadable" ones: root reads every file, so those run in a child process that is root only in
a user namespace of its own (``unshare -U``), where file permissions apply to it.

To read the whole matrix: ``pytest tests/cli/test_fault_matrix.py -q -rA`` prints each cell's
message line (``STATEFLOW_MATRIX_SHOW=1`` prints it as a table).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from stateflow.cli.main import main
from stateflow.testing.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cret-pw"
ARCHIVE = ROOT / "docs/data/paper/intercode-sql/local-small.jsonl"
SPACE = ROOT / "examples/optimize/sql-measure-small.toml"

FLOW_PY = """
from stateflow import LLM, Flow, State, Transition
ask = State("Ask", LLM())
done = State("Done", final=True)
FLOW = Flow("matrix", initial=ask, transitions=[Transition(ask, done)])
"""


@dataclass
class World:
    """What the cells point at: good inputs to spoil, and what is already recorded."""

    root: Path
    results: Path  # a results directory of a real run's records
    store: Path  # a SQLite checkpoint store holding one finished thread "t"
    flow: Path  # a file defining FLOW
    text: Path  # a plain text file
    binary: Path  # a file that is not UTF-8
    folder: Path  # an empty directory
    port: int  # a port that is taken (a socket listens on it)

    def recorded(self) -> dict[str, str]:
        """A digest of every file of the records and the store."""
        digests = {}
        for base in (self.results, self.store.parent):
            for p in sorted(base.rglob("*")):
                if p.is_file() and not p.name.endswith(("-wal", "-shm")):
                    digests[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        return digests


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("matrix")
    results = root / "results"
    results.mkdir()
    shutil.copy(ARCHIVE, results / "results.jsonl")
    store = root / "store" / "threads.db"
    store.parent.mkdir()
    flow = root / "flows.py"
    flow.write_text(FLOW_PY)
    (root / "text.txt").write_text("just some words\nand more\n")
    (root / "binary.bin").write_bytes(b"\xff\xfe\x00garbage\x80\x81")
    (root / "folder").mkdir()
    from stateflow import run
    from stateflow.checkpoint import SQLiteCheckpointer
    from stateflow.flow_ref import load_flow

    with FakeOpenAIServer(lambda model, messages, body: "done") as srv:
        cp = SQLiteCheckpointer(store)
        try:
            run(
                load_flow(f"{flow}:FLOW"),
                "x",
                models={"default": f"openai:m@{srv.url}"},
                thread_id="t",
                checkpointer=cp,
            )
        finally:
            cp.close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        yield World(
            root, results, store, flow, root / "text.txt", root / "binary.bin", root / "folder", taken.getsockname()[1]
        )


@dataclass(frozen=True)
class Cell:
    """One command x one bad input: its arguments, and what the message must name."""

    command: str
    kind: str
    argv: Callable[[World], list[str]]
    names: Callable[[World], list[str]]  # every one of these appears in the message line
    child: bool = False  # run in a user namespace (the "unreadable" cells)


def _w(*parts: str) -> Callable[[World], list[str]]:
    """Arguments with placeholders: {results} {store} {flow} {text} {binary} {folder} {port} {root}."""
    return lambda w: [p.format(**vars(w)) for p in parts]


PG_MALFORMED = f"postgresql://alice:{SECRET}@[::1/db"
PG_UNREACHABLE = f"postgresql://alice:{SECRET}@127.0.0.1:1/db"

CELLS = [
    # -- run ---------------------------------------------------------------------------------------
    Cell("run", "flow file missing", _w("run", "{root}/nope.py:FLOW", "--task", "x"), _w("nope.py", "no such file")),
    Cell("run", "flow ref a directory", _w("run", "{folder}:FLOW", "--task", "x"), _w("folder", "directory")),
    Cell("run", "flow file not UTF-8", _w("run", "{binary}:FLOW", "--task", "x"), _w("binary.bin")),
    Cell("run", "flow file wrong format", _w("run", "{text}:FLOW", "--task", "x"), _w("text.txt")),
    Cell("run", "--config missing", _w("run", "intercode-sql", "--config", "{root}/no.toml"), _w("no.toml")),
    Cell("run", "--config a directory", _w("run", "intercode-sql", "--config", "{folder}"), _w("folder")),
    Cell("run", "--config not UTF-8", _w("run", "intercode-sql", "--config", "{binary}"), _w("binary.bin")),
    Cell("run", "--config wrong format", _w("run", "intercode-sql", "--config", "{flow}"), _w("flows.py")),
    Cell("run", "--out a file", _w("run", "intercode-sql", "--out", "{text}"), _w("--out", "is a file")),
    Cell("run", "--out under a file", _w("run", "intercode-sql", "--out", "{text}/x"), _w("--out", "text.txt")),
    Cell("run", "--tasks malformed", _w("run", "intercode-sql", "--tasks", "1-3"), _w("--tasks", "1-3")),
    Cell("run", "--tasks out of range", _w("run", "intercode-sql", "--tasks", "0:100000"), _w("--tasks", "outside")),
    Cell("run", "--workers zero", _w("run", "intercode-sql", "--workers", "0"), _w("--workers")),
    Cell("run", "--max-turns negative", _w("run", "intercode-sql", "--max-turns", "-3"), _w("--max-turns")),
    Cell("run", "--dataset unknown", _w("run", "intercode-sql", "--dataset", "nosuch"), _w("nosuch")),
    Cell(
        "run",
        "--checkpoints a directory",
        _w("run", "{flow}:FLOW", "--task", "x", "--thread", "n", "--checkpoints", "{folder}"),
        _w("folder", "is a directory"),
    ),
    Cell(
        "run",
        "--checkpoints URL malformed with password",
        _w("run", "{flow}:FLOW", "--task", "x", "--thread", "n", "--checkpoints", PG_MALFORMED),
        _w("not a valid PostgreSQL address"),
    ),
    Cell(
        "run",
        "--checkpoints on a benchmark",
        _w("run", "intercode-sql", "--checkpoints", "{store}"),
        _w("--checkpoints", "benchmark"),
    ),
    Cell(
        "run", "--model malformed URL", _w("run", "{flow}:FLOW", "--task", "x", "-m", "openai:m@notaurl"), _w("notaurl")
    ),
    # -- resume / fork / threads / history ----------------------------------------------------------
    Cell("resume", "thread missing", _w("resume", "nope", "--checkpoints", "{store}"), _w("nope")),
    Cell(
        "resume", "store missing", _w("resume", "t", "--checkpoints", "{root}/none.db"), _w("none.db", "no checkpoint")
    ),
    Cell("resume", "store a directory", _w("resume", "t", "--checkpoints", "{folder}"), _w("folder", "directory")),
    Cell("resume", "store not a database", _w("resume", "t", "--checkpoints", "{text}"), _w("text.txt")),
    Cell("resume", "finished thread", _w("resume", "t", "--checkpoints", "{store}"), _w("'t'", "finished")),
    Cell(
        "resume",
        "URL unreachable with password",
        _w("resume", "t", "--checkpoints", PG_UNREACHABLE),
        _w("127.0.0.1", "unavailable"),
    ),
    Cell("fork", "--at negative", _w("fork", "t", "--at", "-1", "--checkpoints", "{store}"), _w("--at")),
    Cell("fork", "--at out of range", _w("fork", "t", "--at", "99", "--checkpoints", "{store}"), _w("99")),
    Cell("fork", "thread missing", _w("fork", "nope", "--at", "0", "--checkpoints", "{store}"), _w("nope")),
    Cell(
        "fork",
        "--flow file missing",
        _w("fork", "t", "--at", "0", "--flow", "{root}/x.py:F", "--checkpoints", "{store}"),
        _w("x.py"),
    ),
    Cell("threads", "store a directory", _w("threads", "--checkpoints", "{folder}"), _w("folder", "directory")),
    Cell(
        "threads",
        "store under a file",
        _w("threads", "--checkpoints", "{text}/t.db"),
        _w("text.txt", "not a directory"),
    ),
    Cell("threads", "store not a database", _w("threads", "--checkpoints", "{text}"), _w("text.txt")),
    Cell("threads", "store not UTF-8", _w("threads", "--checkpoints", "{binary}"), _w("binary.bin")),
    Cell("threads", "store missing", _w("threads", "--checkpoints", "{root}/none.db"), _w("none.db", "no checkpoint")),
    Cell("threads", "URL malformed with password", _w("threads", "--checkpoints", PG_MALFORMED), _w("PostgreSQL")),
    Cell("threads", "URL unreachable with password", _w("threads", "--checkpoints", PG_UNREACHABLE), _w("unavailable")),
    Cell("threads", "--status unknown", _w("threads", "--status", "asleep", "--checkpoints", "{store}"), _w("asleep")),
    Cell("history", "thread missing", _w("history", "nope", "--checkpoints", "{store}"), _w("nope")),
    Cell("history", "store a directory", _w("history", "t", "--checkpoints", "{folder}"), _w("folder", "directory")),
    Cell("history", "URL malformed with password", _w("history", "t", "--checkpoints", PG_MALFORMED), _w("PostgreSQL")),
    # -- whatif / optimize / report / compare / ui ------------------------------------------------
    Cell("whatif", "run dir missing", _w("whatif", "{root}/none", "--at", "Solve", "-m", "Solve=local"), _w("none")),
    Cell("whatif", "run dir empty", _w("whatif", "{folder}", "--at", "Solve", "-m", "Solve=local"), _w("folder")),
    Cell(
        "whatif",
        "a text file",
        _w("whatif", "{text}", "--at", "Solve", "-m", "Solve=local"),
        _w("text.txt", "not a results"),
    ),
    Cell(
        "whatif", "not UTF-8", _w("whatif", "{binary}", "--at", "Solve", "-m", "Solve=local"), _w("binary.bin", "UTF-8")
    ),
    Cell(
        "whatif",
        "--out a file",
        _w("whatif", "{results}", "--at", "Solve", "-m", "Solve=local", "--out", "{text}"),
        _w("text.txt"),
    ),
    Cell(
        "whatif",
        "--timeout zero",
        _w("whatif", "{results}", "--at", "Solve", "-m", "Solve=local", "--timeout", "0"),
        _w("--timeout"),
    ),
    Cell("optimize", "space missing", _w("optimize", "{root}/none.toml"), _w("none.toml")),
    Cell("optimize", "space a directory", _w("optimize", "{folder}"), _w("folder")),
    Cell("optimize", "space not UTF-8", _w("optimize", "{binary}"), _w("binary.bin")),
    Cell("optimize", "space wrong format", _w("optimize", "{flow}"), _w("flows.py")),
    Cell("optimize", "--out a file", _w("optimize", str(SPACE), "--out", "{text}"), _w("--out", "is a file")),
    Cell("optimize", "--budget zero", _w("optimize", str(SPACE), "--budget", "0", "--dry-run"), _w("--budget")),
    Cell("optimize", "--budget negative", _w("optimize", str(SPACE), "--budget", "-5", "--dry-run"), _w("--budget")),
    Cell("optimize", "--budget too small", _w("optimize", str(SPACE), "--budget", "0.001", "--dry-run"), _w("budget")),
    Cell("optimize", "--workers zero", _w("optimize", str(SPACE), "--workers", "0"), _w("--workers")),
    Cell("report", "dir missing", _w("report", "{root}/none"), _w("none")),
    Cell("report", "a text file", _w("report", "{text}"), _w("text.txt", "not a results")),
    Cell("report", "not UTF-8", _w("report", "{binary}"), _w("binary.bin")),
    Cell("report", "--out a file", _w("report", "{results}", "--out", "{text}"), _w("text.txt")),
    Cell("compare", "path missing", _w("compare", "{root}/none", "{results}"), _w("none")),
    Cell("compare", "a text file", _w("compare", "{text}", "{results}"), _w("text.txt")),
    Cell("compare", "a directory without results", _w("compare", "{folder}", "{results}"), _w("folder")),
    Cell("ui", "path missing", _w("ui", "{root}/none"), _w("none")),
    Cell("ui", "a text file", _w("ui", "{text}"), _w("text.txt", "not a results")),
    Cell("ui", "not UTF-8", _w("ui", "{binary}"), _w("binary.bin", "UTF-8")),
    Cell("ui", "port taken", _w("ui", "{results}", "--port", "{port}"), _w("--port", "{port}", "in use")),
    Cell("ui", "port out of range", _w("ui", "{results}", "--port", "70000"), _w("--port", "65535")),
    Cell("ui", "port negative", _w("ui", "{results}", "--port", "-1"), _w("--port")),
    Cell("ui", "--config missing", _w("ui", "{results}", "--config", "{root}/no.toml"), _w("no.toml")),
    # -- serve -------------------------------------------------------------------------------------
    Cell(
        "serve",
        "port taken",
        _w("serve", "{flow}:FLOW", "--port", "{port}", "--checkpoints", "{root}/s.db"),
        _w("{port}", "in use"),
    ),
    Cell("serve", "port out of range", _w("serve", "{flow}:FLOW", "--port", "70000"), _w("--port", "65535")),
    Cell("serve", "port zero", _w("serve", "{flow}:FLOW", "--port", "0"), _w("--port")),
    Cell("serve", "flow file missing", _w("serve", "{root}/none.py:FLOW"), _w("none.py")),
    Cell(
        "serve",
        "URL malformed with password",
        _w("serve", "{flow}:FLOW", "--checkpoints", PG_MALFORMED),
        _w("PostgreSQL"),
    ),
    Cell("serve", "--timeout zero", _w("serve", "{flow}:FLOW", "--timeout", "0"), _w("--timeout")),
    Cell(
        "serve", "--max-transitions zero", _w("serve", "{flow}:FLOW", "--max-transitions", "0"), _w("--max-transitions")
    ),
    # -- validate / graph / spec / llm ------------------------------------------------------------
    Cell("validate", "flow file missing", _w("validate", "{root}/none.py:FLOW"), _w("none.py")),
    Cell("validate", "module missing", _w("validate", "no_such_module:FLOW"), _w("no_such_module")),
    Cell("validate", "flow file wrong format", _w("validate", "{text}:FLOW"), _w("text.txt")),
    Cell("validate", "attribute missing", _w("validate", "{flow}:NOPE"), _w("NOPE")),
    Cell("graph", "flow file not UTF-8", _w("graph", "{binary}:FLOW"), _w("binary.bin")),
    Cell("graph", "--out a directory", _w("graph", "{flow}:FLOW", "--out", "{folder}"), _w("folder")),
    Cell("graph", "--out under a file", _w("graph", "{flow}:FLOW", "--out", "{text}/g.md"), _w("text.txt")),
    Cell("spec", "file missing", _w("spec", "show", "{root}/none.toml"), _w("none.toml")),
    Cell("spec", "a directory", _w("spec", "show", "{folder}"), _w("folder")),
    Cell("spec", "not UTF-8", _w("spec", "show", "{binary}"), _w("binary.bin")),
    Cell("spec", "wrong format", _w("spec", "show", "{flow}"), _w("flows.py")),
    Cell("verify", "flow file missing", _w("verify", "{root}/nope.py:FLOW", "--spec", "chat-bot"), _w("nope.py")),
    Cell("verify", "spec missing", _w("verify", "{flow}:FLOW", "--spec", "{root}/none.lisp"), _w("none.lisp")),
    Cell("verify", "spec a directory", _w("verify", "{flow}:FLOW", "--spec", "{folder}"), _w("folder", "directory")),
    Cell("verify", "spec not UTF-8", _w("verify", "{flow}:FLOW", "--spec", "{binary}"), _w("binary.bin", "UTF-8")),
    Cell("verify", "spec wrong format", _w("verify", "{flow}:FLOW", "--spec", "{flow}"), _w("flows.py")),
    Cell("verify", "--bound zero", _w("verify", "{flow}:FLOW", "--spec", "chat-bot", "--bound", "0"), _w("--bound")),
    Cell(
        "verify", "--bound negative", _w("verify", "{flow}:FLOW", "--spec", "chat-bot", "--bound", "-3"), _w("--bound")
    ),
    Cell(
        "verify",
        "--map malformed",
        _w("verify", "{flow}:FLOW", "--spec", "chat-bot", "--map", "Ask"),
        _w("--map", "Ask"),
    ),
    Cell("verify", "state the spec lacks", _w("verify", "{flow}:FLOW", "--spec", "chat-bot"), _w("'Ask'", "--map")),
    Cell(
        "verify",
        "--records missing",
        _w("verify", "--records", "{root}/none.jsonl", "--spec", "chat-bot"),
        _w("none.jsonl"),
    ),
    Cell(
        "verify", "--records not UTF-8", _w("verify", "--records", "{binary}", "--spec", "chat-bot"), _w("binary.bin")
    ),
    Cell(
        "verify", "--records wrong format", _w("verify", "--records", "{text}", "--spec", "chat-bot"), _w("text.txt:1")
    ),
    Cell("verify", "--records empty folder", _w("verify", "--records", "{folder}", "--spec", "chat-bot"), _w("folder")),
    Cell("llm", "unknown profile", _w("llm", "serve", "no-such-model"), _w("no-such-model")),
    Cell("llm", "port out of range", _w("llm", "serve", "local-small", "--port", "70000"), _w("--port", "65535")),
    Cell("llm", "port taken", _w("llm", "serve", "local-small", "--port", "{port}"), _w("{port}", "in use")),
    # -- unreadable (a child process without root's read-everything) -------------------------------
    Cell(
        "threads",
        "store unreadable",
        _w("threads", "--checkpoints", "{root}/locked/threads.db"),
        _w("threads.db"),
        True,
    ),
    Cell("optimize", "space unreadable", _w("optimize", "{root}/locked/space.toml"), _w("space.toml"), True),
    Cell("report", "results unreadable", _w("report", "{root}/locked/results.jsonl"), _w("results.jsonl"), True),
    Cell("spec", "file unreadable", _w("spec", "show", "{root}/locked/spec.toml"), _w("spec.toml"), True),
    Cell(
        "run", "--config unreadable", _w("run", "intercode-sql", "--config", "{root}/locked/m.toml"), _w("m.toml"), True
    ),
]


def _message_line(output: str) -> str:
    """The line that states the problem: ``error: ...`` or Click's ``Invalid value ...`` box line."""
    for line in output.splitlines():
        text = line.strip(" │╭╰─┃\t")
        if text.lower().startswith(("error:", "invalid value", "missing", "no such option", "got unexpected")):
            return text
    return ""


def _locked(world: World) -> Path:
    """A folder of unreadable files (mode 000), made once."""
    locked = world.root / "locked"
    if not locked.exists():
        locked.mkdir()
        shutil.copy(world.store, locked / "threads.db")
        shutil.copy(SPACE, locked / "space.toml")
        shutil.copy(ARCHIVE, locked / "results.jsonl")
        (locked / "spec.toml").write_text("name = 'x'\n")
        (locked / "m.toml").write_text('[models]\ndefault = "local"\n')
        for p in locked.iterdir():
            p.chmod(0)
    return locked


def _run_child(argv: list[str], cwd: Path) -> tuple[int, str]:
    if os.geteuid() == 0 and shutil.which("unshare") is None:
        pytest.fail("running as root without `unshare`: cannot make a file unreadable to the command")
    prefix = ["unshare", "-U"] if os.geteuid() == 0 else []
    p = subprocess.run(
        [*prefix, sys.executable, "-m", "stateflow.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)},
    )
    return p.returncode, p.stdout + p.stderr


def _run_here(
    argv: list[str], cwd: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str]:
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("COLUMNS", "200")
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("cell", CELLS, ids=[f"{c.command}: {c.kind}" for c in CELLS])
def test_cell(cell: Cell, world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    before = world.recorded()
    if cell.child:
        _locked(world)
        code, output = _run_child(cell.argv(world), world.root)
    else:
        code, output = _run_here(cell.argv(world), world.root, capsys, monkeypatch)
    line = _message_line(output)
    if os.environ.get("STATEFLOW_MATRIX_SHOW"):
        print(f"| {cell.command} | {cell.kind} | {line} |", file=sys.__stderr__)
    assert code != 0, f"exit 0 for a bad input; output:\n{output}"
    assert "Traceback" not in output and "unexpected error" not in output, output
    assert SECRET not in output, output
    assert line, f"no line states the problem:\n{output}"
    for name in cell.names(world):
        assert name in line, f"{name!r} missing from the message line {line!r}"
    assert world.recorded() == before, "a bad input changed what was recorded"
