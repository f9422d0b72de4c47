#!/usr/bin/env python3
"""Checkpoint cost per transition for each checkpointer, and bytes per thread: full copies vs deltas.

Synthetic payloads shaped like a run: a history of ~300-character messages growing by 2 per step
(with per-message metadata), a blackboard and vars that change every step. For threads of 10 and
50 steps it measures, per backend, the median cost of one ``put`` and one ``latest`` over every
checkpoint written (several threads), and the bytes a thread stores as full copies (what the
checkpointers store: ``Checkpoint.to_json``) against a delta scheme (``stateflow.checkpoint.delta``:
the new history items and changed keys only).

Episode ratio: the durable-run tests' 9-transition flow (tests/core/durable/flows.py: Prompt, LLM,
Tool, Judge, a user's AutoGen agent) against the fake OpenAI-compatible server on 127.0.0.1, run
alternately without and with each checkpointer in this process (a backend's rows, before, ``@REV``
and now, take turns episode by episode). Two ratios: the median extra wall
time per episode over the median episode without checkpoints (noisy on a shared machine: it is the
difference of two runs), and the *share* of the checkpointed episodes' wall time spent in the
checkpoint path itself (``Episode.snapshot`` plus ``ThreadJournal.save``: encoding and ``put``),
timed inside the same episodes (the median over episodes of each one's share; ``ckpt ms/ep`` is that
time itself, which does not depend on how long the loaded machine makes the episode). Rows marked "before"
run the former encoding (the whole history re-encoded at every transition, no pre-encoded payload
text), patched in for the row only, so before and after are measured in one process. Because an
episode's wall time on a shared machine is noisy, a third table saves the run states of one real
episode again into each store (the fastest of N repeats, before and after) and divides by that
episode's median wall time without checkpoints: the steadiest ratio, and the one the targets are
checked against. ``--baseline REV`` adds rows marked ``@REV`` that run that revision's run-state
encoding, row encoding, memory store and SQLite ``put`` in this process.

Last measured 2026-11-28 04:14 UTC (``--threads 2 --episodes 30 --no-postgres --no-sql --steps 10
--baseline main``, load average 4.0-4.8, episode 200-230 ms on the loaded machine, 63 ms on a quiet
one): memory 0.050 ms per checkpoint steady (0.052 at main), 2.11 ms per episode in the checkpoint
path (2.27 at main); SQLite ``sync="pauses"`` 0.148 ms steady (0.203 at main), 5.30 ms per episode
(5.92 at main). Against a 63 ms episode the steady ratios meet the targets (0.8 %, 2.3 %), the
in-episode times do not (3.3 %, 8.4 %). Details, a per-piece table and history: docs/checkpoints.md,
"Cost per transition".

The episodes' fake model server runs in a child process by default (``--server process``, as a
real endpoint; ``--server thread`` serves it from this process's threads, as before 2026-11-28).
Measured 2026-11-28 08:05 UTC on an idle machine (``--threads 1 --episodes 30 --no-postgres --no-sql
--steps 10``), child process / threads: memory 1.26 / 1.21 ms per episode in-episode (1.53 % /
1.42 %), 0.047 ms per checkpoint steady (0.76 %); SQLite ``sync="pauses"`` 2.80 / 3.69 ms in-episode
(3.35 % / 3.80 %), 0.141 ms steady (2.29 %).

Each episode table builds its flow once (until 2026-11-28 08:15 the alternated table built one per
timed episode: 23 ms of its 82-97 ms "episode", which made the in-episode shares look smaller).
``--pieces N`` times each piece of the checkpoint path (``perf_counter_ns`` around the snapshot,
``to_payload``, the payload's text, the record, the store's ``put`` and inside it ``check``,
``encode_row``, the writer's cache) over N checkpointed episodes per store (memory, SQLite
``sync="pauses"``), ms per episode. Measured 2026-11-28 08:16 UTC (``--baseline main --threads 1
--episodes 30 --pieces 60 --no-postgres --no-sql --steps 10``, load average 1.4-1.8, not quiet;
episode 60-65 ms): memory 0.047 ms per checkpoint steady (0.76 %), 1.44 ms per episode in-episode
(2.22 %); SQLite ``sync="pauses"`` 0.136 ms steady (2.22 %), 3.08 ms in-episode (4.70 %), of which
the ``INSERT`` and its commit about 1.65 ms. The in-episode targets are not met; the per-piece
table is in docs/checkpoints.md.

``--pieces N`` also times what a checkpointed run does once (the claim's enter and exit, ``latest``
at its start, the flow's fingerprint) and runs an episode without checkpoints before each
checkpointed one, printing the extra wall time three ways (difference of the medians, paired mean
with its standard error, paired median) next to what the timed pieces account for. ``--gaps N``
saves one run's states again with nothing, a 5 ms sleep or 5 ms of unrelated work before each save
(only the saves timed): what waiting for a model alone does to a checkpoint's cost. Measured
2026-11-28 10:24 UTC (``--episodes 0 --pieces 100 --gaps 20``, load average 2.4-2.6): the timed
pieces (memory 1.68 ms per episode, SQLite 4.60, of which 0.1 and 0.5 once per run) account for
the extra wall time within its noise (paired standard error about 3 ms over 100 pairs); a 5 ms
sleep before each save makes the same saves 1.8-2.5x slower (memory 0.50 -> 1.13 ms, SQLite 1.41 ->
2.58), the steady-to-in-episode factor. Fifth round (orjson writes the run encoder's own trees,
byte for byte the standard encoder's text: stateflow/checkpoint/tree_text.py), measured
2026-11-28 10:30 UTC (``--baseline main --threads 1 --episodes 30 --no-postgres --no-sql --steps 10
--pieces 30``, load average 1.2-2.5): memory 0.036 ms per checkpoint steady (0.048 at main; 0.59 %
of a 61 ms episode), 1.42 ms per episode in-episode (1.65 at main); SQLite ``sync="pauses"`` 0.108
ms steady (0.130 at main; 1.78 %), 3.64 ms in-episode (4.14 at main). The steady ratios meet the
targets; in-episode (about 2.3 % and 5.8 % of a 63 ms episode) they still do not. Details:
docs/checkpoints.md, "Fifth round".

``--floor N`` (sixth round) runs the ``--pieces`` table for the memory store as it is and as an
unsafe floor (no payload text, so no validation; ``put`` only appends the record), twice each,
alternated: what any memory store that keeps ``to_payload``'s copy costs at least. Measured
2026-11-28 11:28 UTC (with ``--baseline main --threads 1 --episodes 30 --no-postgres --no-sql --steps 10
--pieces 30``, load average 0.0-0.8, episodes 63-65 ms): the checkpoint path 1.43-1.49 ms per episode
as it is (2.3 %), 0.83-0.85 ms at the floor (1.3 %): deferring the text cannot reach the 1 % target.
Details: docs/checkpoints.md, "Sixth round".

PostgreSQL: ``--postgres DSN``, or by default a throwaway server started from the test helpers
(tests/core/checkpoint/pg_server.py; needs scripts/setup_postgres.sh); ``--no-postgres`` skips it.

SQL episode sizes: the bytes of each checkpoint of a real 10-transition episode of the paper's
SF_Agent SQL flow on the InterCode SQL environment's demo database (MariaDB; ``--no-sql`` skips it).

Usage: .venv/bin/python scripts/bench_checkpoint.py [--threads 20] [--steps 10 50]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' server helper

from stateflow.checkpoint import (
    Checkpoint,
    Checkpointer,
    MemoryCheckpointer,
    PostgresCheckpointer,
    SQLiteCheckpointer,
    ThreadStatus,
)
from stateflow.checkpoint.delta import payload_delta
from stateflow.checkpoint.record import canonical_json

FILLER = "SELECT name, country FROM singer WHERE age > 30 ORDER BY name; -- observation rows: " * 4


def message(thread: str, step: int, k: int) -> dict[str, Any]:
    return {
        "role": "assistant" if k else "user",
        "content": f"{thread}/{step}/{k} {FILLER}"[:300],
        "meta": {"state": f"S{step % 6}", "tokens": 80 + k, "kind": "llm" if k else "tool"},
    }


def run_payloads(thread: str, steps: int) -> Iterator[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for step in range(steps):
        history = [*history, message(thread, step, 0), message(thread, step, 1)]
        yield {
            "history": history,
            "blackboard": {"last_action": f"action {step}", "tables": ["singer", "concert"]},
            "vars": {"step": step, "errors": step // 7},
            "usage": {"prompt_tokens": 900 * (step + 1), "completion_tokens": 60 * (step + 1)},
        }


def checkpoints(thread: str, steps: int) -> list[Checkpoint]:
    return [
        Checkpoint(thread, step, "bench", "ab" * 32, f"S{step % 6}", ThreadStatus.RUNNING, payload, time.time())
        for step, payload in enumerate(run_payloads(thread, steps))
    ]


def measure(cp: Checkpointer, threads: int, steps: int, tag: str) -> tuple[float, float]:
    """Median seconds of one put and of one latest, over every checkpoint of every thread."""
    puts, latests = [], []
    for t in range(threads):
        name = f"{tag}-{steps}-{t}"
        for c in checkpoints(name, steps):
            start = time.perf_counter()
            cp.put(c)
            puts.append(time.perf_counter() - start)
            start = time.perf_counter()
            cp.latest(name)
            latests.append(time.perf_counter() - start)
    return statistics.median(puts), statistics.median(latests)


def stored_bytes(tmp: str, steps: int, snapshot_every: int) -> int:
    """Bytes of row bodies a SQLite store holds for one thread."""
    import sqlite3

    path = Path(tmp) / f"size-{steps}-{snapshot_every}.db"
    cp = SQLiteCheckpointer(path, sync="normal", snapshot_every=snapshot_every)
    for c in checkpoints("size", steps):
        cp.put(c)
    cp.close()
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT SUM(LENGTH(CAST(body AS BLOB))) FROM checkpoints").fetchone()[0]


def sizes(steps: int) -> tuple[int, int]:
    """Bytes a thread stores: full copies, and a delta scheme (step 0 full, then deltas)."""
    full = delta = 0
    previous: dict[str, Any] | None = None
    for c in checkpoints("size", steps):
        text = c.to_json()
        full += len(text.encode())
        if previous is None:
            delta += len(text.encode())
        else:
            record = c.to_dict()
            record["payload"] = payload_delta(previous, dict(c.payload))
            delta += len(canonical_json(record).encode())
        previous = dict(c.payload)
    return full, delta


@contextmanager
def postgres(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    from tests.core.checkpoint.pg_server import PgServer

    server = PgServer()
    try:
        server.start()
        yield server.create_database("bench")
    finally:
        server.destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=20, help="threads per backend and length")
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--postgres", metavar="DSN", help="an existing server (default: start a throwaway one)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--episodes", type=int, default=15, help="episodes per backend for the ratio (0: skip)")
    parser.add_argument(
        "--no-sql", action="store_true", help="skip the 10-transition SQL episode's checkpoint sizes (needs MariaDB)"
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also run the memory and SQLite rows with this git revision's encoding modules "
        "(stateflow/run_state.py, stateflow/checkpoint/rows.py, the memory store's module, the SQLite "
        "store's put) patched in: before/after in one process",
    )
    parser.add_argument(
        "--server",
        choices=["process", "thread"],
        default="process",
        help="where the episodes' fake model server runs: a child process (as a real endpoint; default) or "
        "threads of this process (as before 2026-11-28: its lock contention is counted in the episode)",
    )
    parser.add_argument(
        "--pieces",
        type=int,
        default=0,
        metavar="N",
        help="also time each piece of the checkpoint path inside N episodes per backend (memory, SQLite "
        "sync=pauses; fake server in a child process): ms per episode for each piece",
    )
    parser.add_argument(
        "--gaps",
        type=int,
        default=0,
        metavar="N",
        help="also save one run's states again with a pause before each save (none, a 5 ms sleep, 5 ms of "
        "unrelated work), fastest and median of N threads: what waiting for a model does to a checkpoint's cost",
    )
    parser.add_argument(
        "--floor",
        type=int,
        default=0,
        metavar="N",
        help="also run the --pieces table for the memory store twice each way, alternated: as it is, and as an "
        "unsafe floor (no payload text, put only appends the record): what any store that keeps to_payload's "
        "copy would cost at least",
    )
    args = parser.parse_args()
    baseline = Baseline.load(args.baseline) if args.baseline else None

    with tempfile.TemporaryDirectory() as tmp, contextmanager_or_none(not args.no_postgres, args.postgres) as dsn:
        backends: list[tuple[str, Callable[[], Checkpointer]]] = [
            ("memory", MemoryCheckpointer),
            ("sqlite (sync=full)", lambda: SQLiteCheckpointer(Path(tmp) / "full.db", sync="full")),
            ("sqlite (sync=pauses)", lambda: SQLiteCheckpointer(Path(tmp) / "pauses.db")),
            ("sqlite (sync=status)", lambda: SQLiteCheckpointer(Path(tmp) / "status.db", sync="status")),
            ("sqlite (sync=normal)", lambda: SQLiteCheckpointer(Path(tmp) / "normal.db", sync="normal")),
        ]
        if dsn:
            backends.append(("postgres", lambda: PostgresCheckpointer(dsn)))
        print(f"{'backend':28} {'steps':>5} {'put ms (median)':>16} {'latest ms (median)':>19}")
        for name, factory in backends:
            cp = factory()
            try:
                for steps in args.steps:
                    put, latest = measure(cp, args.threads, steps, name.split()[0])
                    print(f"{name:28} {steps:>5} {put * 1e3:>16.3f} {latest * 1e3:>19.3f}")
            finally:
                cp.close()
        if args.episodes:
            separate = args.server == "process"
            episode_ratios(backends, args.episodes, baseline, separate)  # new thread ids (e0, ...), same stores
            transition_costs(backends, args.episodes, baseline, separate)
        if args.pieces:
            piece_table([b for b in backends if b[0] in ("memory", "sqlite (sync=pauses)")], args.pieces)
        if args.floor:
            floor_table(args.floor)
        if args.gaps:
            gap_table([b for b in backends if b[0] in ("memory", "sqlite (sync=pauses)")], args.gaps)
        print()
        print("bytes per thread: full copies, pure deltas (step 0 full), and what SQLite stores per snapshot_every")
        intervals = [1, 5, 10, 25]
        head = " ".join(f"{'every=' + str(k):>12}" for k in intervals)
        print(f"{'steps':>5} {'full copies':>12} {'pure deltas':>12} {head}")
        for steps in args.steps:
            full, delta = sizes(steps)
            stored = " ".join(f"{stored_bytes(tmp, steps, k):>12,}" for k in intervals)
            print(f"{steps:>5} {full:>12,} {delta:>12,} {stored}")
        if not args.no_sql:
            sql_episode_sizes(Path(tmp))
        print()
        print("latest ms (median) by snapshot_every, SQLite sync=normal, 50-step threads")
        for k in intervals:
            cp = SQLiteCheckpointer(Path(tmp) / f"read-{k}.db", sync="normal", snapshot_every=k)
            put, latest = measure(cp, max(2, args.threads // 4), 50, f"k{k}")
            fresh = SQLiteCheckpointer(Path(tmp) / f"read-{k}.db", sync="normal", snapshot_every=k)
            cold = []
            for t in range(max(2, args.threads // 4)):  # a reader without the writer's cache
                for step in range(50):
                    start = time.perf_counter()
                    fresh.get(f"k{k}-50-{t}", step)
                    cold.append(time.perf_counter() - start)
            print(
                f"  every={k:<3} put {put * 1e3:.3f}  latest {latest * 1e3:.3f}  "
                f"cold get {statistics.median(cold) * 1e3:.3f}"
            )
            cp.close()
            fresh.close()


def _sql_respond(model: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """A fake model for the paper's SQL flow that takes 10 transitions: DESC in Observe, then four
    rounds of Solve (a SELECT) and Verify (a DESC of another table, back to Solve), then submit."""
    said = " ".join(str(m.get("content") or "") for m in messages)
    if "execute[DESC book]" not in said:
        return "Thought: the table.\nAction: execute[DESC book]"
    last_select = said.rfind("LIMIT 7]")
    last_desc = max(said.rfind("execute[DESC book]"), said.rfind("execute[DESC author]"))
    if last_select > last_desc:
        if said.count("LIMIT 7]") >= 4:
            return "Thought: done.\nAction: submit"
        return "Thought: the other table.\nAction: execute[DESC author]"
    return "Thought: query.\nAction: execute[SELECT title, year FROM book ORDER BY year LIMIT 7]"


def sql_episode_sizes(tmp: Path) -> None:
    """Bytes of each checkpoint of a real 10-transition SQL episode: the paper's SF_Agent flow on
    the InterCode SQL environment's demo database (MariaDB), with a fake model."""
    import shutil
    import sqlite3

    from stateflow.envs.sql import open_sql_env
    from stateflow.tasks.agents.methods import build_method
    from stateflow.tasks.harness.episode import opening_message
    from stateflow.tasks.sql.benchmark import INTERCODE_SQL

    from stateflow import ModelProfile, run
    from stateflow.testing.fake_openai import FakeOpenAIServer

    print()
    if shutil.which("mariadbd") is None and shutil.which("mysqld") is None:
        print("SQL episode sizes: skipped (no MariaDB server: scripts/setup.sh installs it)")
        return
    env = open_sql_env("demo")
    try:
        with FakeOpenAIServer(_sql_respond) as server:
            profile = ModelProfile(name="fake", model="fake", base_url=server.url, api_key_env=None, max_retries=0)
            flow, view = build_method("sf_agent", INTERCODE_SQL)
            task = env.task(0)
            env.reset(0)
            cp = SQLiteCheckpointer(tmp / "sql-episode.db")
            result = run(
                flow,
                opening_message(flow, task, INTERCODE_SQL.task_prompt),
                models=profile,
                view=view,
                env=env,
                vars={"max_turns": 20},
                telemetry=False,
                checkpointer=cp,
                thread_id="sql",
            )
            rows = [len(c.to_json().encode()) for c in cp.list("sql")]
            cp.close()
    finally:
        env.close()
    with sqlite3.connect(tmp / "sql-episode.db") as conn:
        stored = conn.execute("SELECT SUM(LENGTH(CAST(body AS BLOB))) FROM checkpoints").fetchone()[0]
    growth = [b - a for a, b in itertools.pairwise(rows)]
    print(
        f"SQL episode (sf_agent, demo database, {len(result.transitions)} transitions: "
        f"{' > '.join(result.path)}), {len(rows)} checkpoints"
    )
    print(f"  bytes per checkpoint: {', '.join(f'{b:,}' for b in rows)}")
    print(
        f"  growth per checkpoint: {min(growth):,}-{max(growth):,} B; the whole thread as full copies "
        f"{sum(rows):,} B, as SQLite stores it (default snapshot_every=10) {stored:,} B"
    )


class Baseline:
    """Another revision's run-state encoding, row encoding (with its deltas), memory store and SQLite
    ``put``, patched in while a row runs.

    The five modules are read from git (``git show REV:path``) and loaded under private names; they
    import everything else from this checkout, so only the encoding and the SQLite statements differ.
    """

    def __init__(self, rev: str, run_state: Any, rows: Any, memory: Any, sqlite: Any):
        self.rev, self.run_state, self.rows, self.memory, self.sqlite = rev, run_state, rows, memory, sqlite

    def factory(self, name: str, factory: Callable[[], Checkpointer]) -> Callable[[], Checkpointer]:
        """The backend's factory as it was at the baseline (the memory store's own module differs)."""
        return self.memory.MemoryCheckpointer if name == "memory" else factory

    @classmethod
    def load(cls, rev: str) -> Baseline:
        import importlib.util
        import subprocess

        root = Path(__file__).resolve().parents[1]
        modules = []
        paths = (
            "stateflow/run_state.py",
            "stateflow/checkpoint/rows.py",
            "stateflow/checkpoint/memory.py",
            "stateflow/checkpoint/sqlite.py",
            "stateflow/checkpoint/delta.py",
        )
        for path in paths:
            text = subprocess.run(
                ["git", "-C", str(root), "show", f"{rev}:{path}"], check=True, capture_output=True, text=True
            ).stdout
            name = f"_baseline_{Path(path).stem}"
            file = Path(tempfile.mkdtemp()) / f"{name}.py"
            file.write_text(text)
            spec = importlib.util.spec_from_file_location(name, file)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # dataclasses look their module up while the class is built
            spec.loader.exec_module(module)
            modules.append(module)
        *kept, delta = modules
        for name in ("identity_delta", "payload_delta", "apply_delta"):  # the revision's rows use its deltas
            setattr(kept[1], name, getattr(delta, name))
        return cls(rev, *kept)

    @contextmanager
    def patched(self) -> Iterator[None]:
        """The journal encodes with the baseline's encoder and ``to_payload``, the stores write rows
        with the baseline's ``encode_row`` and cache, and the SQLite store's ``put`` is the
        baseline's (its statements)."""
        import inspect

        import stateflow.checkpoint.postgres as pg
        import stateflow.checkpoint.sqlite as sq
        from stateflow.threads import ThreadJournal

        old_save, old_init = ThreadJournal.save, ThreadJournal.__init__
        encoder_cls, to_payload = self.run_state.PayloadEncoder, self.run_state.RunState.to_payload
        rows = self.rows

        def init(journal: Any, *args: Any, **kwargs: Any) -> None:
            old_init(journal, *args, **kwargs)
            journal._encoder = encoder_cls()

        # a revision whose encoder hands out the payload's text in parts (PayloadText) and whose
        # encode_row asks for the previous payload lazily runs as it does there; an older one gets
        # the joined text and the previous payload read up front, as its stores expected
        in_parts = hasattr(encoder_cls, "text")
        lazy = "Callable" in str(inspect.signature(rows.encode_row).parameters["previous"].annotation)

        def save(journal: Any, state: Any, status: str) -> None:
            payload = {**to_payload(state, journal._encoder), **journal.extra}
            try:
                text = journal._encoder.text(payload) if in_parts else journal._encoder.json(payload)
            except (TypeError, ValueError):
                text = None
            journal._put(state.state, ThreadStatus(status), payload, text)

        def encode_row(checkpoint: Any, previous: Any, every: int, given: Any = None) -> Any:
            if lazy:
                return rows.encode_row(checkpoint, previous, every, given)
            return rows.encode_row(checkpoint, previous() if callable(previous) else previous, every, given)

        saved = [(m, m.encode_row, m.PayloadCache) for m in (sq, pg, self.sqlite)]
        ThreadJournal.__init__, ThreadJournal.save = init, save  # type: ignore[method-assign]
        for m, _, _ in saved:
            m.encode_row, m.PayloadCache = encode_row, rows.PayloadCache  # type: ignore[assignment]
        put = sq.SQLiteCheckpointer.put
        sq.SQLiteCheckpointer.put = self.sqlite.SQLiteCheckpointer.put  # type: ignore[method-assign]
        try:
            yield
        finally:
            ThreadJournal.__init__, ThreadJournal.save = old_init, old_save  # type: ignore[method-assign]
            sq.SQLiteCheckpointer.put = put  # type: ignore[method-assign]
            for m, fn, cache in saved:
                m.encode_row, m.PayloadCache = fn, cache  # type: ignore[assignment]


class CheckpointTimer:
    """Seconds spent in the checkpoint path (``Episode.snapshot`` + ``ThreadJournal.save``), timed by
    wrapping both for the duration of a ``with`` block; ``before=True`` also swaps in the former
    ``save`` (whole payload re-encoded at every transition, no pre-encoded text)."""

    def __init__(self, before: bool = False):
        self.before = before
        self.seconds = 0.0

    def __enter__(self) -> CheckpointTimer:
        from stateflow.episode import Episode
        from stateflow.threads import ThreadJournal

        self._saved = (Episode.snapshot, ThreadJournal.save)
        snapshot, save = self._saved
        if self.before:

            def save(journal: Any, state: Any, status: str) -> None:
                journal._put(state.state, ThreadStatus(status), {**state.to_payload(), **journal.extra})

        Episode.snapshot = self._timed(snapshot)  # type: ignore[method-assign]
        ThreadJournal.save = self._timed(save)  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from stateflow.episode import Episode
        from stateflow.threads import ThreadJournal

        Episode.snapshot, ThreadJournal.save = self._saved  # type: ignore[method-assign]

    def _timed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def row_modes(name: str, baseline: Baseline | None) -> list[str]:
    """How a backend is measured: ``former`` (the whole run re-encoded at every transition),
    ``baseline`` (another revision's encoding, ``--baseline``), ``now`` (this checkout)."""
    modes = ["former"] if name == "memory" or "sync=full" in name else []
    if baseline is not None and (name == "memory" or "pauses" in name or "normal" in name):
        modes.append("baseline")
    return [*modes, "now"]


def row_label(name: str, mode: str, baseline: Baseline | None) -> str:
    if mode == "former":
        return f"{name} before"
    if mode == "baseline":
        assert baseline is not None
        return f"{name} @{baseline.rev}"
    return name


def episode_ratios(
    backends: list[tuple[str, Callable[[], Checkpointer]]],
    episodes: int,
    baseline: Baseline | None = None,
    separate: bool = False,
) -> None:
    """Median wall time of a fake-model episode without and with each checkpointer (alternated),
    the share of the checkpointed episodes' time spent in the checkpoint path, and that time.

    A backend's rows (before, ``@REV``, now) take turns episode by episode, so a change in the
    machine's load reaches all of them alike."""
    from contextlib import nullcontext

    from stateflow import run
    from tests.core.durable.flows import fake_profile, long_flow

    def patch(mode: str) -> Any:
        return baseline.patched() if mode == "baseline" and baseline is not None else nullcontext()

    print()
    print(
        f"episode wall time, {episodes} episodes each (alternated with a run without checkpoints, "
        "a backend's rows episode by episode; fake server "
        f"{'in a child process' if separate else 'in this process'})"
    )
    print(
        f"{'backend':28} {'without ms':>11} {'with ms':>9} {'extra ms':>9} {'ratio':>7} "
        f"{'in checkpoints':>15} {'ckpt ms/ep':>11} {'checkpoints':>12}"
    )
    with fake_server(separate) as url:
        model = fake_profile(url)
        # built once: building the flow (23 ms) is not part of an episode; the alternated table
        # built one per episode until 2026-11-28, which put it in both columns' wall time
        flow = long_flow(url)
        run(flow, "T", models=model, telemetry=False)  # warm-up (imports, connections)
        for name, factory in backends:
            modes = row_modes(name, baseline)
            stores: dict[str, Checkpointer] = {}
            for mode in modes:
                with patch(mode):
                    made = baseline.factory(name, factory) if mode == "baseline" and baseline is not None else factory
                    stores[mode] = made()
            timers = {mode: CheckpointTimer(mode == "former") for mode in modes}
            plain: dict[str, list[float]] = {mode: [] for mode in modes}
            saved: dict[str, list[float]] = {mode: [] for mode in modes}
            shares: dict[str, list[float]] = {mode: [] for mode in modes}
            try:
                for i in range(episodes):
                    for mode in modes:
                        tag = {"former": "b", "baseline": "r", "now": ""}[mode]
                        with patch(mode):
                            one_episode_pair(
                                stores[mode], timers[mode], flow, model, f"e{i}{tag}", plain[mode], saved[mode]
                            )
                        shares[mode].append(timers[mode].seconds / saved[mode][-1])
                per_thread = len(stores["now"].list("e0"))  # checkpoints one thread wrote
            finally:
                for store in stores.values():
                    store.close()
            for mode in modes:
                spent = [share * wall for share, wall in zip(shares[mode], saved[mode], strict=True)]
                base, with_cp = statistics.median(plain[mode]), statistics.median(saved[mode])
                print(
                    f"{row_label(name, mode, baseline):28} {base * 1e3:>11.1f} {with_cp * 1e3:>9.1f} "
                    f"{(with_cp - base) * 1e3:>9.1f} {(with_cp - base) / base:>7.1%} "
                    f"{statistics.median(shares[mode]):>15.2%} {statistics.median(spent) * 1e3:>11.2f} "
                    f"{per_thread:>12}"
                )


def one_episode_pair(
    cp: Checkpointer,
    timer: CheckpointTimer,
    flow: Any,
    model: Any,
    thread_id: str,
    plain: list[float],
    saved: list[float],
) -> None:
    """One episode without checkpoints, then one with ``cp`` as thread ``thread_id``, appending their
    wall times; ``timer.seconds`` is then the second one's time in the checkpoint path."""
    from stateflow import run

    start = time.perf_counter()
    run(flow, "T", models=model, telemetry=False)
    plain.append(time.perf_counter() - start)
    timer.seconds = 0.0
    with timer:
        start = time.perf_counter()
        run(flow, "T", models=model, telemetry=False, checkpointer=cp, thread_id=thread_id)
        saved.append(time.perf_counter() - start)


def captured_states(separate: bool, walls: int = 7) -> tuple[Any, list[tuple[Any, str]], float]:
    """The flow, the run states one real episode saved (with their statuses), and the median wall
    time of that episode without checkpoints (over ``walls`` episodes)."""
    from stateflow import run
    from stateflow.checkpoint import MemoryCheckpointer as Memory
    from stateflow.threads import ThreadJournal
    from tests.core.durable.flows import fake_profile, long_flow

    states: list[tuple[Any, str]] = []
    with fake_server(separate) as url:
        flow, model = long_flow(url), fake_profile(url)
        save = ThreadJournal.save

        def keep(journal: Any, state: Any, status: str) -> None:
            states.append((state, status))
            save(journal, state, status)

        ThreadJournal.save = keep  # type: ignore[method-assign]
        try:
            run(flow, "T", models=model, telemetry=False, checkpointer=Memory(), thread_id="capture")
        finally:
            ThreadJournal.save = save  # type: ignore[method-assign]
        times = []
        for _ in range(walls):
            start = time.perf_counter()
            run(flow, "T", models=model, telemetry=False)
            times.append(time.perf_counter() - start)
    return flow, states, statistics.median(times)


def gap_table(backends: list[tuple[str, Callable[[], Checkpointer]]], repeats: int) -> None:
    """The states of one run saved again, with nothing, a 5 ms sleep, or 5 ms of unrelated work before
    each save (only the saves timed): inside an episode every checkpoint follows a wait for a model
    reply, and this shows what such a wait alone does to the same work."""
    import json

    from stateflow.fingerprint import flow_fingerprint
    from stateflow.threads import ThreadJournal

    flow, states, _ = captured_states(True)
    fingerprint = flow_fingerprint(flow)
    junk = [{"n": list(range(50)), "s": "x" * 200} for _ in range(400)]

    def busy() -> None:  # touches a few MB of other objects, about 5 ms here
        json.loads(json.dumps(junk))

    gaps: dict[str, Callable[[], None]] = {
        "none": lambda: None,
        "sleep 5 ms": lambda: time.sleep(0.005),
        "5 ms of other work": busy,
    }
    print()
    print(f"one run's {len(states)} states saved again, a pause before each save; ms per episode in the saves")
    print(f"{'backend':22} {'before each save':20} {'fastest':>8} {'median':>8}")
    for name, factory in backends:
        times: dict[str, list[float]] = {g: [] for g in gaps}
        cp = factory()
        try:
            for r in range(repeats):
                for label, gap in gaps.items():  # interleaved, thread by thread
                    journal = ThreadJournal(cp, f"gap{r}-{label}", flow, fingerprint, 0)
                    spent = 0.0
                    for state, status in states:
                        gap()
                        start = time.perf_counter()
                        journal.save(state, status)
                        spent += time.perf_counter() - start
                    times[label].append(spent)
        finally:
            cp.close()
        for label, spent in times.items():
            print(f"{name:22} {label:20} {min(spent) * 1e3:>8.2f} {statistics.median(spent) * 1e3:>8.2f}")


def transition_costs(
    backends: list[tuple[str, Callable[[], Checkpointer]]],
    repeats: int,
    baseline: Baseline | None = None,
    separate: bool = False,
) -> None:
    """Checkpoint cost of one episode, without the episode's noise: the run states one real episode
    saved, saved again through a ThreadJournal into each store (fastest of ``repeats`` threads),
    before and after, over the median wall time of that episode without checkpoints."""
    from contextlib import nullcontext

    from stateflow.fingerprint import flow_fingerprint
    from stateflow.threads import ThreadJournal

    flow, states, wall = captured_states(separate, walls=max(5, repeats))
    fingerprint = flow_fingerprint(flow)
    print()
    print(
        f"checkpoint cost of one episode ({len(states)} checkpoints, the states of one run saved again; "
        f"fastest of {repeats}) over its median wall time without checkpoints ({wall * 1e3:.1f} ms)"
    )
    print(f"{'backend':28} {'ms / episode':>13} {'ms / checkpoint':>16} {'ratio':>7}")
    for name, factory in backends:
        for mode in row_modes(name, baseline):
            patch = baseline.patched() if mode == "baseline" and baseline is not None else nullcontext()
            with patch:
                cp = baseline.factory(name, factory)() if mode == "baseline" and baseline is not None else factory()
                best = float("inf")
                try:
                    for r in range(repeats):
                        journal = ThreadJournal(cp, f"offline{r}{mode}", flow, fingerprint, 0)
                        start = time.perf_counter()
                        for state, status in states:
                            if mode == "former":
                                payload = {**state.to_payload(), **journal.extra}
                                journal._put(state.state, ThreadStatus(status), payload)
                            else:
                                journal.save(state, status)
                        best = min(best, time.perf_counter() - start)
                finally:
                    cp.close()
            label = row_label(name, mode, baseline)
            print(f"{label:28} {best * 1e3:>13.2f} {best / len(states) * 1e3:>16.3f} {best / wall:>7.2%}")


class PieceTimer:
    """Nanoseconds spent in each piece of the checkpoint path, by wrapping the functions that make it
    up (``perf_counter_ns``) for the duration of a ``with`` block. Pieces nest (``save`` holds
    ``to_payload``, ``text`` and ``put``; a store's ``put`` holds ``encode_row`` and ``check``): the
    table reports each piece's own time and the rest of its parent."""

    #: (label, module path, owner attribute or None for a module-level function, function name)
    PIECES = (
        ("snapshot (copy vars/board/history)", "stateflow.episode", "Episode", "snapshot"),
        ("save (the journal, whole)", "stateflow.threads", "ThreadJournal", "save"),
        ("  to_payload (encode items)", "stateflow.run_state", "RunState", "to_payload"),
        ("  encoder.text (value texts)", "stateflow.run_state", "PayloadEncoder", "text"),
        ("  Checkpoint record", "stateflow.checkpoint.record", "Checkpoint", "__init__"),
        ("  memory put", "stateflow.checkpoint.memory", "MemoryCheckpointer", "put"),
        ("    check (fields)", "stateflow.checkpoint.record", "Checkpoint", "check"),
        ("  sqlite put", "stateflow.checkpoint.sqlite", "SQLiteCheckpointer", "put"),
        ("    encode_row (delta body)", "stateflow.checkpoint.sqlite", None, "encode_row"),
        ("    _given (writer cache)", "stateflow.checkpoint.sqlite", "SQLiteCheckpointer", "_given"),
        # once per run, outside the checkpoint path (the rest of the extra wall time)
        ("run: flow_fingerprint", "stateflow.runtime", None, "flow_fingerprint"),
        ("run: memory latest (new thread?)", "stateflow.checkpoint.memory", "MemoryCheckpointer", "latest"),
        ("run: sqlite latest (new thread?)", "stateflow.checkpoint.sqlite", "SQLiteCheckpointer", "latest"),
        ("run: memory claim (enter + exit)", "stateflow.checkpoint.memory", "MemoryCheckpointer", "claim"),
        ("run: sqlite claim (enter + exit)", "stateflow.checkpoint.sqlite", "SQLiteCheckpointer", "claim"),
    )

    #: the pieces that are context managers (timed from entering to leaving, minus the block)
    CONTEXTS = frozenset({"run: memory claim (enter + exit)", "run: sqlite claim (enter + exit)"})

    def __init__(self) -> None:
        self.ns: dict[str, int] = {label: 0 for label, *_ in self.PIECES}
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> PieceTimer:
        import importlib

        for label, module_name, owner_name, name in self.PIECES:
            module = importlib.import_module(module_name)
            owner = module if owner_name is None else getattr(module, owner_name)
            original = owner.__dict__[name] if owner_name is not None else getattr(module, name)
            self._saved.append((owner, name, original))
            timed = self._timed_context(label, original) if label in self.CONTEXTS else self._timed(label, original)
            setattr(owner, name, timed)
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()

    def _timed(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        ns, clock = self.ns, time.perf_counter_ns

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                ns[label] += clock() - start

        return timed

    def _timed_context(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        ns, clock = self.ns, time.perf_counter_ns

        @contextmanager
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            start = clock()
            with fn(*args, **kwargs) as value:
                ns[label] += clock() - start
                try:
                    yield value
                finally:
                    start = clock()
            ns[label] += clock() - start

        return timed


def piece_table(backends: list[tuple[str, Callable[[], Checkpointer]]], episodes: int) -> None:
    """ms per episode in each piece of the checkpoint path, and in the work a run does once with a
    checkpointer (claiming the thread, looking for its latest checkpoint, the flow's fingerprint),
    over ``episodes`` checkpointed episodes per backend (the fake server in a child process), each
    after an episode without checkpoints: what the extra wall time holds, and what it leaves."""
    from stateflow import run
    from tests.core.durable.flows import fake_profile, long_flow

    print()
    print(
        f"pieces of the checkpoint path in-episode, ms per episode (mean of {episodes} episodes, "
        "fake server in a child process; each after an episode without checkpoints)"
    )
    with fake_server(True) as url:
        model = fake_profile(url)
        flow = long_flow(url)  # once: building it is not part of an episode
        run(flow, "T", models=model, telemetry=False)  # warm-up
        for name, factory in backends:
            cp = factory()
            timer, walls, plain = PieceTimer(), [], []
            try:
                with timer:  # the wrapped functions run only in checkpointed episodes
                    for i in range(episodes):
                        start = time.perf_counter()
                        run(flow, "T", models=model, telemetry=False)
                        plain.append(time.perf_counter() - start)
                        start = time.perf_counter()
                        run(flow, "T", models=model, telemetry=False, checkpointer=cp, thread_id=f"p{i}")
                        walls.append(time.perf_counter() - start)
            finally:
                cp.close()
            wall, without = statistics.median(walls), statistics.median(plain)
            paired = [a - b for a, b in zip(walls, plain, strict=True)]  # each episode after its plain one
            mean_extra = statistics.mean(paired)
            error = statistics.stdev(paired) / len(paired) ** 0.5 if len(paired) > 1 else float("nan")
            print(
                f"{name} (episode {wall * 1e3:.1f} ms median with the timers, {without * 1e3:.1f} without "
                f"checkpoints; extra wall time: difference of the medians {(wall - without) * 1e3:.2f} ms, "
                f"paired mean {mean_extra * 1e3:.2f} ± {error * 1e3:.2f} ms (standard error), paired median "
                f"{statistics.median(paired) * 1e3:.2f} ms)"
            )
            for label, ms in ((label, n / episodes / 1e6) for label, n in timer.ns.items()):
                if ms:
                    print(f"  {label:38} {ms:>7.3f} ms  {ms / wall / 1e3:>7.2%}")
            top = ("snapshot", "save", "run:")
            accounted = sum(n for label, n in timer.ns.items() if label.startswith(top)) / episodes / 1e6
            print(
                f"  {'accounted (snapshot + save + run:)':38} {accounted:>7.3f} ms; extra wall time not in them: "
                f"{mean_extra * 1e3 - accounted:.3f} ms (mean)"
            )


@contextmanager
def unsafe_floor() -> Iterator[None]:
    """The memory store reduced to what no lazy design can avoid: the run's copy (``to_payload``)
    and the record, with no payload text (so no validation) and a ``put`` that only appends. Not a
    store: for :func:`floor_table` only."""
    from stateflow.run_state import PayloadEncoder

    text, put, latest = PayloadEncoder.text, MemoryCheckpointer.put, MemoryCheckpointer.latest

    def appended(store: Any, checkpoint: Checkpoint) -> None:
        with store._lock:
            store._rows.setdefault(checkpoint.thread_id, []).append(checkpoint)

    PayloadEncoder.text = lambda encoder, payload: None  # type: ignore[assignment,method-assign,return-value]
    MemoryCheckpointer.put = appended  # type: ignore[method-assign]
    MemoryCheckpointer.latest = lambda store, thread_id: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        PayloadEncoder.text, MemoryCheckpointer.put, MemoryCheckpointer.latest = text, put, latest  # type: ignore[method-assign]


def floor_table(episodes: int) -> None:
    """The ``--pieces`` table for the memory store as it is and for :func:`unsafe_floor`, twice
    each, alternated (``episodes`` checkpointed episodes per table)."""
    from contextlib import nullcontext

    for name in ("memory", "memory floor (unsafe)", "memory", "memory floor (unsafe)"):
        with unsafe_floor() if "floor" in name else nullcontext():
            piece_table([(name, MemoryCheckpointer)], episodes)


SERVE_CHILD = """
import sys
from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.core.durable.flows import responder
with FakeOpenAIServer(responder) as server:
    print(server.url, flush=True)
    sys.stdin.read()  # until the bench closes the pipe
"""


@contextmanager
def fake_server(separate: bool) -> Iterator[str]:
    """The durable tests' fake OpenAI-compatible server: its address, served from this process's
    threads, or (``separate``) from a child process, as a real model endpoint is. In this process the
    server's threads take the interpreter lock while the episode runs, which the checkpoint path's
    timers then count as its own."""
    import subprocess

    if not separate:
        from stateflow.testing.fake_openai import FakeOpenAIServer
        from tests.core.durable.flows import responder

        with FakeOpenAIServer(responder) as server:
            yield server.url
        return
    root = Path(__file__).resolve().parents[1]
    child = subprocess.Popen(
        [sys.executable, "-c", SERVE_CHILD], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the fake server's child process did not start (it said {url!r})")
        yield url
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


@contextmanager
def contextmanager_or_none(wanted: bool, dsn: str | None) -> Iterator[str | None]:
    if not wanted:
        yield None
        return
    with postgres(dsn) as address:
        yield address


if __name__ == "__main__":
    main()
