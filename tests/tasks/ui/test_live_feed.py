"""The runner's side files of episodes in flight and the UI's feed over them (no browser)."""

from __future__ import annotations

import json
import os

from stateflow.tasks.harness.live_file import MAX_BYTES, LiveEpisode, LiveFile, clear_live, live_path
from stateflow.tasks.harness.run_lock import LOCK_NAME
from stateflow.tasks.ui.app import UiApp
from stateflow.tasks.ui.index import RunIndex
from stateflow.tasks.ui.live import LiveFeed
from stateflow.tasks.ui.server import running

from stateflow.events import StateEntered, TokenDelta, TransitionTaken
from stateflow.trace import TransitionRecord

EPISODE = LiveEpisode("stateflow", 3, "how many?", "default=local", 0.0)


def _held(tmp_path):
    """The directory's run lock names this (live) process, as while a run writes there."""
    (tmp_path / LOCK_NAME).write_text(str(os.getpid()))


def test_side_file_lines_and_the_feed_follow_them(tmp_path) -> None:
    _held(tmp_path)
    path = live_path(tmp_path, "abcdef" * 5, 3)
    side = LiveFile(path, EPISODE)
    feed = LiveFeed([(0, tmp_path)])
    side(StateEntered("Solve", 1))
    side(TokenDelta("Solve", "assistant", "SEL"))
    first = feed.poll()
    assert [e["line"]["type"] for e in first] == ["episode", "state", "token"]
    assert first[2]["line"]["text"] == "SEL" and first[0]["line"]["task"] == 3
    side(TokenDelta("Solve", "assistant", "ECT"))
    side(TransitionTaken(TransitionRecord("Solve", "End", "Solve -> End", 2)))
    assert [e["line"].get("text") or e["line"]["type"] for e in feed.poll()] == ["ECT", "transition"]
    assert feed.poll() == []  # nothing new
    side.end("ok")
    assert [e["line"]["type"] for e in feed.poll()] == ["end"]
    path.unlink()
    assert feed.poll() == [{"src": 0, "file": path.stem, "gone": True}]


def test_a_torn_line_waits_for_its_newline_and_junk_is_skipped(tmp_path) -> None:
    _held(tmp_path)
    folder = tmp_path / "live"
    folder.mkdir()
    f = folder / "x-1.jsonl"
    f.write_bytes(b'not json\n[1, 2]\n{"type": "state", "sta')
    feed = LiveFeed([(0, tmp_path)])
    assert feed.poll() == []
    with f.open("ab") as out:
        out.write(b'te": "Solve"}\n')
    assert [e["line"] for e in feed.poll()] == [{"type": "state", "state": "Solve"}]


def test_files_of_a_killed_run_are_announced_stale_once(tmp_path) -> None:
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / LOCK_NAME).write_text(gone.stdout.strip())  # a pid that no longer runs
    LiveFile(live_path(tmp_path, "c" * 16, 4), EPISODE)(StateEntered("Solve", 1))
    feed = LiveFeed([(0, tmp_path)])
    first = feed.poll()
    assert [e.get("stale") or e["line"]["type"] for e in first] == ["episode", "state", True]
    assert feed.poll() == []  # said once
    _held(tmp_path)  # a live writer: nothing is stale
    assert all("stale" not in e for e in LiveFeed([(0, tmp_path)]).poll())


def test_the_side_file_is_bounded(tmp_path) -> None:
    path = live_path(tmp_path, "d" * 16, 0)
    side = LiveFile(path, EPISODE)
    for _ in range(MAX_BYTES // 100 + 10):
        side(TokenDelta("Solve", "assistant", "x" * 100))
    side.end("ok")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert path.stat().st_size <= MAX_BYTES + 100
    assert [x["type"] for x in lines[-2:]] == ["truncated", "end"]
    clear_live(tmp_path)
    assert not path.exists()


def test_a_side_file_that_cannot_be_written_does_not_stop_the_episode(tmp_path) -> None:
    blocker = tmp_path / "live"
    blocker.write_text("a file where the directory should be")
    side = LiveFile(live_path(tmp_path, "e" * 16, 1), EPISODE)
    side(TokenDelta("Solve", "assistant", "still fine"))  # no error: the run goes on
    side.end("ok")


def test_the_live_stream_over_http(tmp_path) -> None:
    import http.client

    side = LiveFile(live_path(tmp_path, "f" * 16, 2), EPISODE)
    side(StateEntered("Observe", 1))
    app = UiApp(RunIndex([tmp_path]), live_poll_s=0.1)
    with running(app) as server:
        host, port = server.server_address[:2]
        conn = http.client.HTTPConnection(host, port, timeout=10)
        conn.request("GET", "/api/live")
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
        got: list[dict] = []
        while len(got) < 2:
            line = resp.fp.readline()
            if line.startswith(b"data: "):
                got.append(json.loads(line[6:]))
        assert [g["line"]["type"] for g in got] == ["episode", "state"]
        assert got[1]["line"]["state"] == "Observe"
        import threading

        server.streams = threading.BoundedSemaphore(1)  # the one stream is open: a second is refused
        server.streams.acquire()
        other = http.client.HTTPConnection(host, port, timeout=10)
        other.request("GET", "/api/live")
        refused = other.getresponse()
        assert refused.status == 503 and b"live pages are open" in refused.read()
        other.close()
        page = app.handle("/live", {})
        assert page.status == 200 and b'id="live-episodes"' in page.body
        conn.close()
    assert server.stopping.is_set()
