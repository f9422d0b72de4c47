"""The UI's pages and server without a browser: what each page holds, and every refusal."""

from __future__ import annotations

import http.client
import json
import os

import pytest
from stateflow.tasks.reports.paired import compare
from stateflow.tasks.ui.app import UiApp
from stateflow.tasks.ui.index import RunIndex
from stateflow.tasks.ui.overview import wilson_interval
from stateflow.tasks.ui.server import running
from stateflow.tasks.ui.task_query import PAGE_SIZE

from tests.tasks.ui.conftest import make_record, write_records


@pytest.fixture
def app(tmp_path):
    a = [make_record(i, method="a", success=i % 2 == 0) for i in range(120)]
    b = [make_record(i, method="b", success=i % 3 == 0, turns=i % 7, hardness="hard") for i in range(120)]
    b[5] = make_record(5, method="b", success=False, status="error", error="model unreachable")
    write_records(tmp_path, a + b)
    (tmp_path / "run.json").write_text("{}")
    return UiApp(RunIndex([tmp_path]))


def _html(app, path, **params):
    resp = app.handle(path, {k: str(v) for k, v in params.items()})
    assert resp.status == 200, resp.body.decode()[-500:]
    return resp.body.decode()


def test_wilson_interval_matches_the_formula():
    lo, hi = wilson_interval(6, 6)
    assert (round(lo, 3), hi) == (0.61, 1.0)
    lo, hi = wilson_interval(30, 100)
    assert (round(lo, 4), round(hi, 4)) == (0.2189, 0.3958)


def test_overview_rows_and_the_paired_comparison(app):
    recs_a = [ep.record for ep in app.index.episodes() if ep.record.method == "a"]
    page = _html(app, "/")
    table = page.split('id="cells"')[1].split("</table>")[0]
    assert table.count('<tr data-cell="') == 2 and page.count('<g class="point"') == 2
    bars = page.split('id="state-bars"')[1].split("</table>")[0]
    # one segment per row: Solve, the mean of 100 + task plus 7 completion tokens (Init and End used none)
    assert bars.count('<rect x="0.0"') == 2 and bars.count("<title>Solve: 166 tokens per episode</title>") == 2
    # a: every other task, its Wilson interval in the column beside the rate
    lo, hi = wilson_interval(sum(r.success for r in recs_a), len(recs_a))
    assert f'<td class="num sr">50.0</td>\n    <td class="num ci">{100 * lo:.1f}-{100 * hi:.1f}</td>' in page
    page = _html(app, "/", a="digest-a", b="digest-b")
    recs = [ep.record for ep in app.index.episodes()]
    expected = compare([r for r in recs if r.method == "a"], [r for r in recs if r.method == "b"])
    assert f'<strong id="won">{expected.won}</strong>' in page
    assert f'<strong id="lost">{expected.lost}</strong>' in page
    assert page.count('class="task-link won"') == expected.won
    intervals = [expected.interval(side).text() for side in ("baseline", "candidate")]
    assert "".join(f'<td class="num ci">{i}</td>' for i in intervals) in page  # beside each side's success


def test_task_filters_sorting_and_pages(app):
    page = _html(app, "/tasks")
    assert "240 episodes match; page 1 of 5." in page and page.count('class="task-row"') == PAGE_SIZE
    assert _html(app, "/tasks", page=5).count('class="task-row"') == 240 - 4 * PAGE_SIZE
    assert 'id="matched">1 episode match' in _html(app, "/tasks", outcome="errored")
    assert 'id="matched">1 episode match' in _html(app, "/tasks", error="yes")
    page = _html(app, "/tasks", method="b", turns_min=6, sort="reward", desc=1)
    n = sum(1 for i in range(120) if i % 7 == 6)
    assert f'id="matched">{n} episodes match' in page
    assert 'data-method="a"' not in page
    rewards = [row.split('<td class="num">')[1].split("<")[0] for row in page.split('class="task-row"')[1:]]
    assert rewards == sorted(rewards, reverse=True)
    assert 'id="matched">22 episodes match' in _html(app, "/tasks", q="question 11")  # 11 and 110-119, a and b


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"method": "<script>"}, "method=&#39;&lt;script&gt;&#39; is not one of: a, b"),
        ({"page": "-1"}, "page=&#39;-1&#39;: give a whole number"),
        ({"sort": "password"}, "sort=&#39;password&#39; is not one of"),
        ({"outcome": "won"}, "outcome=&#39;won&#39; is not one of: success, failed, errored"),
    ],
)
def test_bad_parameters_are_400_naming_them(app, params, message):
    resp = app.handle("/tasks", params)
    assert resp.status == 400 and message in resp.body.decode()


def test_episode_page_and_unknown_episodes(app):
    page = _html(app, "/episode", src=0, id="digest-a", task=4)
    assert "SELECT 4" in page and "104 prompt + 7 completion tokens, 40 cached, 0.250 s" in page
    for params in (
        {"src": "0", "id": "digest-a", "task": "999"},
        {"src": "7", "id": "x", "task": "1"},
        {"src": "0", "id": "digest-a", "task": "1e3"},
    ):
        assert app.handle("/episode", params).status == 400
    page = _html(app, "/side", a_src=0, a_id="digest-a", b_src=0, b_id="digest-b", task=3)
    assert page.count('class="aligned"') == 2


def test_paths_outside_the_given_directories_are_refused(app, tmp_path):
    assert app.handle("/runs/0/run.json", {}).status == 200
    outside = tmp_path.parent / "secret.txt"
    outside.write_text("secret")
    os.symlink(outside, tmp_path / "link.txt")
    for path in (
        "/runs/0/../secret.txt",
        "/runs/0/%2e%2e/secret.txt",
        "/runs/0/..%2Fsecret.txt",
        "/runs/0/link.txt",
        f"/runs/0/{outside}",
        "/runs/0/%2Fetc%2Fpasswd",
    ):
        resp = app.handle(path, {})
        assert resp.status == 403 and b"secret" not in resp.body.replace(b"secret.txt", b""), path
    assert app.handle("/runs/1/x", {}).status == 404
    assert app.handle("/static/../app.py", {}).status == 404


def test_server_refuses_traversal_foreign_hosts_and_writes(app, tmp_path):
    (tmp_path.parent / "secret.txt").write_text("secret")
    with running(app) as server:
        host, port = server.server_address[:2]

        def get(path, method="GET", host_header=None):
            conn = http.client.HTTPConnection(host, port, timeout=10)
            conn.putrequest(method, path, skip_host=True)  # the path goes out exactly as written
            conn.putheader("Host", host_header or f"127.0.0.1:{port}")
            conn.endheaders()
            resp = conn.getresponse()
            body = resp.read()
            conn.close()
            return resp, body

        resp, body = get("/runs/0/../secret.txt")
        assert resp.status == 403 and b"outside" in body
        resp, _ = get("/", host_header="evil.example:80")  # DNS rebinding
        assert resp.status == 421
        resp, _ = get("/", method="PUT")
        assert resp.status == 405
        resp, _ = get("/", method="POST")  # not a form of these pages
        assert resp.status == 415
        resp, body = get("/api/stamp")
        assert resp.status == 200 and json.loads(body)["stamp"].startswith("240,0,")
        resp, body = get("/")
        assert "script-src 'self'" in resp.getheader("Content-Security-Policy")


def test_a_source_named_as_a_file_serves_only_that_file(tmp_path):
    path = write_records(tmp_path / "archive.jsonl", [make_record(0)])
    (tmp_path / "neighbour.txt").write_text("not yours")
    app = UiApp(RunIndex([path]))
    assert app.handle("/runs/0/archive.jsonl", {}).status == 200
    assert app.handle("/runs/0/neighbour.txt", {}).status == 403


def test_a_failing_page_is_a_500_and_the_server_keeps_serving(app, monkeypatch, capsys):
    def broken(_params):
        raise RuntimeError("boom")

    monkeypatch.setattr(app, "tasks", broken)
    with running(app) as server:
        base = server.url
        import urllib.error
        import urllib.request

        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(base + "tasks", timeout=10)
        assert info.value.code == 500 and b"internal error" in info.value.read()
        with urllib.request.urlopen(base, timeout=10) as resp:  # the next request is served
            assert resp.status == 200
    assert "RuntimeError: boom" in capsys.readouterr().err


def test_a_users_flow_is_drawn_from_its_flow_card_and_never_imported(tmp_path):
    from stateflow.tasks.harness.flow_cards import FlowCard, save_cards

    # a module that would leave a mark if the UI imported it
    (tmp_path / "evil_flows.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\nFLOW = None\n")
    monkey_path = str(tmp_path)
    import sys

    sys.path.insert(0, monkey_path)
    try:
        rec = make_record(0, method="evil_flows:FLOW")
        write_records(tmp_path, [rec])
        app = UiApp(RunIndex([tmp_path]))
        page = _html(app, "/episode", src=0, id="digest-evil_flows:FLOW", task=0)
        assert "no flow card for this user flow" in page  # drawn from the record's transitions
        card = FlowCard("intercode-sql", "evil_flows:FLOW", "mine", "x", "", 'digraph g { "Plan" -> "Act"; }', "")
        save_cards(tmp_path, [card])
        page = _html(app, "/episode", src=0, id="digest-evil_flows:FLOW", task=0)
        assert "no flow card" not in page and "<title>Plan</title>" in page
        assert not (tmp_path / "imported").exists()
    finally:
        sys.path.remove(monkey_path)
