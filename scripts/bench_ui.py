#!/usr/bin/env python3
"""`stateflow ui` on a results directory of 10,000 episodes: time to first page, memory, episode page.

The directory is made from real records: the gold-replay oracle runs three methods on the demo
SQL tasks (MariaDB needed, as for the tests), and its records are copied, with new task indices,
identities and outcomes, up to ``--episodes`` lines (each keeps its whole trace, ~4 KB a line, so
the file is as heavy as a real run's).

Measured over real HTTP on 127.0.0.1 (the server in a thread of this process):

* index: building the index of the file (every line read once, traces dropped);
* first page: from nothing to the overview's last byte (index + page), and the overview alone;
* the tasks page (filter + sort + one page of 50), an episode page (first: drawing the graph with
  Graphviz; then the median of ``--samples`` random episodes), side by side;
* refresh: a request when the file did not change, and after one more record was appended;
* memory: the process's resident set before and after indexing, and Python's traced peak while
  indexing (tracemalloc, in a second pass: it slows the pass down, so it is not timed).
* baseline, in the same process: loading every record whole, as ``stateflow report`` does
  (:meth:`ResultsFile.load`); the index's time and memory are also given as ratios to it, which
  hold on a busy machine where the absolute times do not.
* first page, before and after the persisted summaries (``--rounds`` rounds, alternating, so
  both see the same machine load; medians): *before* is the former first page (the full index of
  trace-less records, read with the former line reader, then the overview computed from them and
  rendered); *after, cold* is
  ``stateflow ui`` with no summary on disk yet (it summarises the file and writes the summary);
  *after, warm* is the next start, which reads the persisted summary (over HTTP, server start
  included). Memory: Python's traced allocations held by each structure.

Usage: .venv/bin/python scripts/bench_ui.py [--episodes 10000] [--samples 50] [--rounds 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
import tracemalloc
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

from stateflow.tasks.harness.records import ResultsFile, record_key
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.sql.benchmark import INTERCODE_SQL
from stateflow.tasks.ui import index as index_module
from stateflow.tasks.ui import summary as summary_module
from stateflow.tasks.ui.app import UiApp
from stateflow.tasks.ui.figures import CellTotals, EpisodeFigures, cell_key, totals_of
from stateflow.tasks.ui.index import RunIndex
from stateflow.tasks.ui.lines import Problem, _parse_carefully, parse_line
from stateflow.tasks.ui.overview import cells, state_bars, success_plot
from stateflow.tasks.ui.server import running
from stateflow.tasks.ui.summary import SourceSummary

from stateflow import ModelAssignment


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make_dir(out: Path, episodes: int, seed: int = 0) -> Path:
    """A results directory of ``episodes`` records copied from a real oracle run."""
    seed_dir = out / "seed"
    spec = RunSpec(
        INTERCODE_SQL,
        ("stateflow", "react", "sf_agent"),
        out=seed_dir,
        models=ModelAssignment.of("local"),
        models_label="default=local",
        oracle=True,
    )
    evaluate(spec, progress=False)
    seeds = [json.loads(line) for line in (seed_dir / "results.jsonl").read_text().splitlines()]
    rng = random.Random(seed)
    big = out / "big"
    big.mkdir()
    methods = 5  # copies of each seed method, as if 15 methods (or settings) had run
    with (big / "results.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(episodes):
            r = dict(seeds[i % len(seeds)])
            copy = (i // len(seeds)) % methods
            r["method"] = f"{r['method']}_{copy}"
            r["identity_digest"] = f"{r['identity_digest']}{copy}"
            r["task"] = i // (len(seeds) * methods) * 20 + r["task"]
            ok = rng.random() < 0.3 + 0.1 * copy
            r["success"], r["reward_raw"], r["reward"] = ok, float(ok), float(ok)
            r["wall_s"] = round(rng.uniform(2, 20), 2)
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return big


def _get(url: str) -> tuple[float, int]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as resp:
        body = resp.read()
    return time.perf_counter() - t, len(body)


def _careful_only(line: bytes, path: Path, number: int, identities: dict, *, light: bool = False):
    """The line reader as it was before the one-step read (its code, moved, unchanged)."""
    return None if not line.strip() else _parse_carefully(line, path, number, identities)


def _first_page_before(big: Path) -> float:
    """The former first page, as it was: index every record (trace-less) with the former line
    reader, then the overview from the records."""
    t = time.perf_counter()
    index = RunIndex([big])
    index_module.parse_line = _careful_only  # the bench only: the former reader, for this index
    try:
        for src in index.sources:  # what RunIndex's constructor did before the summaries
            src.refresh()
    finally:
        index_module.parse_line = parse_line
    rows = cells(ep.record for src in index.sources for ep in src.episodes.values())
    app = UiApp(index)
    body = app._page(
        "overview.html",
        rows=rows,
        plot=success_plot(rows),
        bars=state_bars(rows),
        comparison=None,
        pairs={},
        a="",
        b="",
        problems=[],
    ).body
    assert body
    return time.perf_counter() - t


def _first_page_after(big: Path, summaries: Path) -> float:
    """``stateflow ui``'s first page now: summaries (persisted in ``summaries``), server, GET /."""
    t = time.perf_counter()
    index = RunIndex([big], summaries=summaries)
    index.refresh_summaries()
    with running(UiApp(index, template_cache=summaries / "templates")) as server:
        _get(server.url)
        took = time.perf_counter() - t  # to the page's last byte (not the server's shutdown)
    return took


def first_page_rounds(big: Path, rounds: int) -> None:
    """Before / after (cold, warm) first pages, alternating; medians, and the load average."""
    before, cold, warm = [], [], []
    for _ in range(rounds):
        store = Path(tempfile.mkdtemp(prefix="bench-ui-summaries-"))
        before.append(_first_page_before(big))
        cold.append(_first_page_after(big, store))
        warm.append(_first_page_after(big, store))
    load = Path("/proc/loadavg").read_text().split()[0]
    med = statistics.median
    print(
        f"first page, {rounds} rounds alternating (load average {load}): before {med(before) * 1000:.0f} ms; "
        f"after: cold (no summary yet) {med(cold) * 1000:.0f} ms, warm (persisted summary) {med(warm) * 1000:.0f} ms "
        f"({med(before) / med(warm):.1f}x faster)"
    )
    each = zip(before, cold, warm, strict=True)
    print(
        "   each round (before / cold / warm, ms): "
        + "; ".join(f"{b * 1e3:.0f} / {c * 1e3:.0f} / {w * 1e3:.0f}" for b, c, w in each)
    )
    # a run in progress: one more record since the summary was written (a new task, then a re-run)
    results = big / "results.jsonl"
    first_line = results.read_bytes().split(b"\n", 1)[0]
    with results.open("ab") as fh:
        fh.write(first_line.replace(b'"task": ', b'"task": 77', 1) + b"\n")
    grown = _first_page_after(big, store)
    print(f"   warm, after one appended record (a new episode): {grown * 1000:.0f} ms")
    rerun_rounds(big, store, rounds)
    store = Path(tempfile.mkdtemp(prefix="bench-ui-summaries-"))
    RunIndex([big], summaries=store).refresh_summaries()
    tracemalloc.start()
    warm_index = RunIndex([big], summaries=store)
    warm_index.refresh_summaries()
    held_summary, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    size = sum(f.stat().st_size for f in store.iterdir())
    print(f"   persisted summary: {size / 1e6:.1f} MB on disk; a warm start holds {held_summary / 1e3:.0f} KB of it")


class _FormerSummary(SourceSummary):
    """The summary as it handled a re-run episode before its records' offsets were kept (the
    bench only): the whole rows file read back, every row's sums made again, the rows rewritten."""

    def _read_from_done(self) -> None:
        start, new, replaced = self._done, [], False
        for line, after in self._lines_from(start):
            self.lines += 1
            self._done = after
            parsed = summary_module.parse_line(line, self.path, self.lines, self.identities, light=True)
            if isinstance(parsed, Problem):
                self.problems.append(parsed)
            elif parsed is not None:
                key = record_key(parsed[0])
                replaced |= key in self._keys
                self._keys[key] = after - len(line) - 1
                new.append((key, EpisodeFigures.of(parsed[0])))
        if replaced:
            rows = self._rows if self._rows is not None else self._rows_at(start)
            if rows is None:
                self._reset(self._inode)
                self._read_from_done()
                return
            for key, figures in new:
                rows.pop(key, None)
                rows[key] = figures
            self._rows, self._rows_dirty = rows, True
            self.totals = totals_of(rows.values())
            return
        for key, figures in new:
            totals = self.totals.get(cell_key(figures))
            if totals is None:
                totals = self.totals[cell_key(figures)] = CellTotals(figures.key_digest)
            totals.add(figures)
            if self._rows is not None:
                self._rows[key] = figures


def _first_page_former(big: Path, summaries: Path) -> float:
    index_module.SourceSummary = _FormerSummary  # the bench only: the former re-run handling
    try:
        return _first_page_after(big, summaries)
    finally:
        index_module.SourceSummary = SourceSummary


def rerun_rounds(big: Path, store: Path, rounds: int) -> None:
    """The first open after a re-run episode was appended, before (the whole rows file read back,
    every sum made again, the rows rewritten) and after (the older record's one line read back
    by its offset), alternating on copies of the same persisted summary; medians."""
    results = big / "results.jsonl"
    lines = results.read_bytes().split(b"\n", 40)[:40]
    before, after = [], []
    for i in range(rounds):
        with results.open("ab") as fh:  # an episode of the file run again (a new record for its key)
            fh.write(lines[i % len(lines)] + b"\n")
        former, now = Path(tempfile.mkdtemp(prefix="bench-ui-former-")), Path(tempfile.mkdtemp(prefix="bench-ui-now-"))
        for copy in (former, now):
            shutil.copytree(store, copy, dirs_exist_ok=True)  # the summary and the compiled templates
        if i % 2:
            after.append(_first_page_after(big, now))
            before.append(_first_page_former(big, former))
        else:
            before.append(_first_page_former(big, former))
            after.append(_first_page_after(big, now))
        store = now  # the next round starts from the summary that includes this record
    med = statistics.median
    print(
        f"   warm, after a re-run episode was appended, {rounds} rounds alternating: "
        f"before {med(before) * 1000:.0f} ms, after {med(after) * 1000:.0f} ms "
        f"({med(before) / med(after):.1f}x faster); each (before / after, ms): "
        + "; ".join(f"{b * 1e3:.0f} / {a * 1e3:.0f}" for b, a in zip(before, after, strict=True))
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the before/after first-page comparison")
    ap.add_argument("--keep", type=Path, default=None, help="make the directory here (and keep it)")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-ui-"))
    root.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    big = make_dir(root, args.episodes)
    size = (big / "results.jsonl").stat().st_size
    print(f"results file: {args.episodes} episodes, {size / 1e6:.1f} MB (made in {time.perf_counter() - t:.1f} s)")

    first_page_rounds(big, args.rounds)

    rss0 = _rss_mb()
    t0 = time.perf_counter()
    index = RunIndex([big])
    index.refresh()  # both levels: the full index and the summary
    t_index = time.perf_counter() - t0
    rss1 = _rss_mb()
    app = UiApp(index)
    with running(app) as server:
        base = server.url.rstrip("/")
        t_over, n_over = _get(base + "/")
        t_first = time.perf_counter() - t0
        t_over2, _ = _get(base + "/")
        t_tasks, _ = _get(base + "/tasks?" + urlencode({"outcome": "failed", "sort": "tokens", "desc": "1"}))
        eps = list(index.episodes())
        rng = random.Random(1)
        sample = rng.sample(eps, min(args.samples, len(eps)))

        def ep_url(ep) -> str:
            return base + "/episode?" + urlencode({"src": 0, "id": ep.key[0], "task": ep.record.task})

        t_ep_first, _ = _get(ep_url(sample[0]))
        t_eps = [_get(ep_url(ep))[0] for ep in sample]
        a, b = eps[0], next(e for e in eps if e.record.task == eps[0].record.task and e is not eps[0])
        side = {"a_src": 0, "a_id": a.key[0], "b_src": 0, "b_id": b.key[0], "task": a.record.task}
        t_side, _ = _get(base + "/side?" + urlencode(side))
        t_idle, _ = _get(base + "/api/stamp")
        with (big / "results.jsonl").open("a", encoding="utf-8") as fh:
            fh.write((big / "results.jsonl").read_text().splitlines()[0].replace('"task": ', '"task": 9999') + "\n")
        t_grow, _ = _get(base + "/api/stamp")
    rss2 = _rss_mb()

    tracemalloc.start()
    kept = RunIndex([big])
    for src in kept.sources:  # the full index alone
        src.refresh()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    t = time.perf_counter()
    ResultsFile(big / "results.jsonl").load()
    t_full = time.perf_counter() - t
    t = time.perf_counter()
    for src in RunIndex([big]).sources:
        src.refresh()
    t_index2 = time.perf_counter() - t
    tracemalloc.start()
    whole = ResultsFile(big / "results.jsonl").load()
    held_full, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del whole

    print(f"index + summary, no cache ({len(eps)}): {t_index * 1000:6.0f} ms")
    print(
        f"first page, no summary cache:    {t_first * 1000:8.0f} ms   (overview alone {t_over * 1000:.0f} ms, "
        f"again {t_over2 * 1000:.0f} ms, {n_over / 1000:.0f} KB)"
    )
    print(f"tasks page (filter, sort, page): {t_tasks * 1000:8.0f} ms")
    print(f"episode page, first (graphviz):  {t_ep_first * 1000:8.0f} ms")
    print(
        f"episode page, median of {len(t_eps)}:     {statistics.median(t_eps) * 1000:8.1f} ms   "
        f"(max {max(t_eps) * 1000:.1f} ms)"
    )
    print(f"side by side:                    {t_side * 1000:8.1f} ms")
    print(
        f"refresh, file unchanged:         {t_idle * 1000:8.1f} ms   after one appended record: {t_grow * 1000:.1f} ms"
    )
    print(
        f"memory: RSS {rss0:.0f} MB before indexing, {rss1:.0f} MB after (+{rss1 - rss0:.0f} MB for a "
        f"{size / 1e6:.0f} MB file), {rss2:.0f} MB after the pages; traced peak while indexing {peak / 1e6:.0f} MB"
    )

    print(
        f"baseline, every record loaded whole: {t_full * 1000:.0f} ms, {held_full / 1e6:.0f} MB held; "
        f"the index: {t_index2 * 1000:.0f} ms ({t_full / t_index2:.1f}x faster), {held / 1e6:.0f} MB held "
        f"({held_full / held:.1f}x less)"
    )


if __name__ == "__main__":
    main()
