"""The overview's persisted summary: a second start reads it instead of the records, appended
records extend it, anything that does not match the file is summarised again, and the overview
it gives is the one the records give."""

from __future__ import annotations

import json
import os

import pytest
from stateflow.tasks.harness.archive import RecordArchive
from stateflow.tasks.reports.metrics import load_results, summarize
from stateflow.tasks.ui import summary as summary_module
from stateflow.tasks.ui.index import RunIndex
from stateflow.tasks.ui.overview import cells

from tests.tasks.ui.conftest import make_record, raw_line, write_records


@pytest.fixture
def parsed(monkeypatch):
    """Counts the lines the summaries parse (a spy around the real parser)."""
    calls: list[int] = []
    real = summary_module.parse_line

    def spy(line, path, number, identities, **kw):
        calls.append(number)
        return real(line, path, number, identities, **kw)

    monkeypatch.setattr(summary_module, "parse_line", spy)
    return calls


def _numbers(index: RunIndex) -> list[tuple[str, int, int, float, float, tuple]]:
    return [(c.method, c.n, c.solved, round(c.reward, 6), round(c.tokens, 6), c.states) for c in index.cells()]


def test_the_summary_overview_is_the_records_overview_and_the_cli_table(oracle_run, tmp_path):
    index = RunIndex([oracle_run], summaries=tmp_path / "s")
    records = load_results([str(oracle_run)])
    assert index.cells() == cells(records)
    table = {(*r.group, r.setting): r for r in summarize(records)}
    assert len(table) == len(index.cells())
    for c in index.cells():
        row = table[c.benchmark, c.method, c.models, c.setting]
        assert (c.n, c.solved, c.errored) == (row.n, row.solved, row.errored)
        assert (round(c.cost, 9), round(c.prompt_tokens, 6)) == (round(row.cost, 9), round(row.p_tokens, 6))


def test_a_second_start_reads_the_persisted_summary_not_the_records(tmp_path, parsed):
    store = tmp_path / "summaries"
    write_records(tmp_path, [make_record(i, success=i % 2 == 0) for i in range(6)])
    first = RunIndex([tmp_path], summaries=store)
    expected = _numbers(first)
    assert len(parsed) == 6 and len(list(store.iterdir())) == 2  # the head and the rows

    parsed.clear()
    second = RunIndex([tmp_path], summaries=store)
    assert _numbers(second) == expected and parsed == []
    assert second.stamps()[0].records == 6

    # a run appends an episode: only that line is read, the sums include it
    with (tmp_path / "results.jsonl").open("ab") as fh:
        fh.write(raw_line(make_record(6, success=True).to_dict()))
    assert second.refresh_summaries() and parsed == [7]
    (cell,) = second.cells()
    assert (cell.n, cell.solved) == (7, 4)
    parsed.clear()
    assert _numbers(RunIndex([tmp_path], summaries=store)) == _numbers(second) and parsed == []


def test_a_rerun_episode_replaces_its_older_record_in_the_persisted_sums(tmp_path, parsed):
    store = tmp_path / "summaries"
    write_records(tmp_path, [make_record(0, success=False), make_record(1, success=False)])
    RunIndex([tmp_path], summaries=store).refresh_summaries()
    with (tmp_path / "results.jsonl").open("ab") as fh:  # task 0 again, solved this time
        fh.write(raw_line(make_record(0, success=True).to_dict()))
    index = RunIndex([tmp_path], summaries=store)
    (cell,) = index.cells()
    assert (cell.n, cell.solved) == (2, 1)
    assert index.cells() == cells(load_results([str(tmp_path)]))


def test_a_replaced_or_shortened_file_is_summarised_again(tmp_path, parsed):
    store = tmp_path / "summaries"
    path = write_records(tmp_path, [make_record(i) for i in range(4)])
    RunIndex([tmp_path], summaries=store).refresh_summaries()
    # an archive is rewritten by a rename: another inode, and here fewer episodes
    other = tmp_path / "new.jsonl"
    other.write_bytes(b"".join(raw_line(make_record(i, success=False).to_dict()) for i in range(3)))
    os.replace(other, path)
    parsed.clear()
    (cell,) = RunIndex([tmp_path], summaries=store).cells()
    assert (cell.n, cell.solved) == (3, 0) and parsed == [1, 2, 3]
    # the same file cut short (a torn copy): its summary cannot extend, it is made again
    data = path.read_bytes()
    with path.open("r+b") as fh:
        fh.truncate(len(data) - len(data.splitlines(keepends=True)[-1]))
    parsed.clear()
    (cell,) = RunIndex([tmp_path], summaries=store).cells()
    assert cell.n == 2 and parsed == [1, 2]


def test_a_rewrite_in_place_is_noticed_by_the_tail_hash(tmp_path, parsed):
    store = tmp_path / "summaries"
    path = write_records(tmp_path, [make_record(0, success=False)])
    RunIndex([tmp_path], summaries=store).refresh_summaries()
    # same inode, longer file, but the summarised bytes changed (a different first record)
    path.write_bytes(raw_line(make_record(0, success=True).to_dict()) + raw_line(make_record(1).to_dict()))
    parsed.clear()
    (cell,) = RunIndex([tmp_path], summaries=store).cells()
    assert (cell.n, cell.solved) == (2, 2) and parsed == [1, 2]


@pytest.mark.parametrize(
    "damage",
    [
        lambda head, rows: head.write_text("{not json"),
        lambda head, rows: head.write_text(json.dumps(json.loads(head.read_text()) | {"path": "/elsewhere"})),
        lambda head, rows: head.write_text(json.dumps(json.loads(head.read_text()) | {"totals": [[1, 2]]})),
        lambda head, rows: head.write_text(json.dumps(json.loads(head.read_text()) | {"format": 99})),
    ],
    ids=["corrupt", "another-file", "wrong-types", "another-format"],
)
def test_an_unusable_summary_is_ignored_and_rewritten(tmp_path, parsed, damage):
    store = tmp_path / "summaries"
    write_records(tmp_path, [make_record(i, success=i < 2) for i in range(3)])
    expected = _numbers(RunIndex([tmp_path], summaries=store))
    (head,) = [p for p in store.iterdir() if not p.name.endswith(".rows.json")]
    damage(head, head.with_suffix(".rows.json"))
    parsed.clear()
    assert _numbers(RunIndex([tmp_path], summaries=store)) == expected and parsed == [1, 2, 3]
    parsed.clear()
    assert _numbers(RunIndex([tmp_path], summaries=store)) == expected and parsed == []  # rewritten


def test_appended_and_rerun_records_need_no_rows(tmp_path, parsed):
    store = tmp_path / "summaries"
    path = write_records(tmp_path, [make_record(i, success=False) for i in range(3)])
    RunIndex([tmp_path], summaries=store).refresh_summaries()
    (rows_file,) = store.glob("*.rows.json")
    rows_before = rows_file.read_bytes()
    with path.open("ab") as fh:  # a new episode: the sums grow, the rows file is left as it is
        fh.write(raw_line(make_record(3, success=True).to_dict()))
    parsed.clear()
    (cell,) = RunIndex([tmp_path], summaries=store).cells()
    assert (cell.n, cell.solved) == (4, 1) and parsed == [4]
    assert rows_file.read_bytes() == rows_before
    with path.open("ab") as fh:  # task 0 again: its older figures are read back from its line
        fh.write(raw_line(make_record(0, success=True).to_dict()))
    parsed.clear()
    index = RunIndex([tmp_path], summaries=store)
    (cell,) = index.cells()
    assert (cell.n, cell.solved) == (4, 2) and parsed == [5, 0]  # line 5, then task 0's older line by offset
    assert rows_file.read_bytes() == rows_before  # a re-run does not rewrite the rows either
    assert index.cells() == cells(load_results([str(tmp_path)]))


def test_rows_that_do_not_match_the_head_are_not_used(tmp_path, parsed):
    store = tmp_path / "summaries"
    write_records(tmp_path, [make_record(i, success=i != 0) for i in range(3)])
    RunIndex([tmp_path], summaries=store).refresh_summaries()
    (rows,) = store.glob("*.rows.json")
    data = json.loads(rows.read_text())
    data["columns"]["success"] = [False, False]  # one row short, and wrong
    rows.write_text(json.dumps(data))
    with (tmp_path / "results.jsonl").open("ab") as fh:
        fh.write(raw_line(make_record(0).to_dict()))
    parsed.clear()
    (cell,) = RunIndex([tmp_path], summaries=store).cells()
    # a re-run needs no rows: its older record's line is read back (0: read by offset)
    assert (cell.n, cell.solved) == (3, 3) and parsed == [4, 0]
    # two sources holding the same row need each episode's figures: the damaged rows are not used
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "results.jsonl").write_bytes((tmp_path / "results.jsonl").read_bytes())
    parsed.clear()
    (cell,) = RunIndex([tmp_path, copy], summaries=store).cells()
    assert (cell.n, cell.solved) == (3, 3)
    assert parsed.count(1) == 2  # the copy, and the first source summarised again
    assert len(json.loads(rows.read_text())["columns"]["success"]) == 3  # and its rows rewritten


def test_an_unwritable_summary_directory_only_costs_speed(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    write_records(tmp_path, [make_record(0), make_record(1, success=False)])
    (cell,) = RunIndex([tmp_path], summaries=blocker / "summaries").cells()
    assert (cell.n, cell.solved) == (2, 1)


def test_problems_are_kept_in_the_summary(tmp_path, parsed):
    store = tmp_path / "summaries"
    path = write_records(tmp_path, [make_record(0)])
    with path.open("ab") as fh:
        fh.write(b"{torn\n" + raw_line(make_record(1).to_dict() | {"schema_version": 99}))
    first = [(p.line, p.kind) for p in RunIndex([tmp_path], summaries=store).problems()]
    assert first == [(2, "corrupt"), (3, "newer-schema")]
    parsed.clear()
    again = RunIndex([tmp_path], summaries=store)
    assert [(p.line, p.kind) for p in again.problems()] == first and parsed == []
    assert [(p.line, p.kind) for p in again.problems()] == [(p.line, p.kind) for p in _full_problems(tmp_path)]


def _full_problems(path):
    index = RunIndex([path])
    index.refresh()
    return [p for s in index.sources for p in s.problems]


def test_the_same_episodes_in_two_sources_count_once(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    records = [make_record(i, success=i != 1) for i in range(4)]
    write_records(run, records)
    archive = tmp_path / "archive.jsonl"
    RecordArchive(archive).merge(records[:2])  # two of the run's episodes, archived
    index = RunIndex([archive, run], summaries=tmp_path / "s")
    (cell,) = index.cells()
    assert (cell.n, cell.solved) == (4, 3)
    assert index.cells() == cells(load_results([str(archive), str(run)]))


def test_rerun_episodes_with_partial_rewards_keep_the_sums_of_a_fresh_summary(tmp_path):
    """Sums kept by taking a re-run's older figures off equal a fresh summary's (to rounding)."""
    store = tmp_path / "summaries"
    rewards = [0.1, 0.7, 0.35, 1.0]
    path = write_records(tmp_path, [make_record(i, success=False, reward_raw=r) for i, r in enumerate(rewards)])
    index = RunIndex([tmp_path], summaries=store)
    index.refresh_summaries()
    for task, reward in [(1, 0.2), (1, 0.9), (3, 0.0), (0, 1.0)]:  # task 1 re-run twice
        with path.open("ab") as fh:
            fh.write(raw_line(make_record(task, success=reward == 1.0, reward_raw=reward).to_dict()))
        assert index.refresh_summaries()
        fresh = RunIndex([tmp_path])  # no persisted summary: every line read
        (kept,), (made,) = index.cells(), fresh.cells()
        assert (kept.n, kept.solved, kept.errored) == (made.n, made.solved, made.errored)
        assert kept.reward == pytest.approx(made.reward) and kept.tokens == pytest.approx(made.tokens)
        assert dict(kept.states) == pytest.approx(dict(made.states))
    assert RunIndex([tmp_path], summaries=store).cells() == index.cells()  # and persisted so
