"""The UI's pages: a request (path and query parameters) in, a :class:`Response` out.

No sockets here (:mod:`stateflow.tasks.ui.server` serves this over HTTP), so every page and every
refusal can be tested by calling :meth:`UiApp.handle`. Every parameter is hostile until checked:
source numbers must name a source, digests and tasks an indexed episode, filter values one of
the values the index holds; files are served only from inside the directories the user named
(:meth:`UiApp.run_file`), and static assets only from a fixed list.
"""

from __future__ import annotations

import hmac
import json
import mimetypes
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlencode

import jinja2
from stateflow.tasks.harness.flow_cards import FlowCard, load_cards
from stateflow.tasks.ui.graph import GraphCache
from stateflow.tasks.ui.index import IndexedEpisode, RunIndex
from stateflow.tasks.ui.live import LiveFeed
from stateflow.tasks.ui.overview import Cell, paired, state_bars, success_plot
from stateflow.tasks.ui.steps import Step, align, ending_of, steps_of, submission_of, taken_edges
from stateflow.tasks.ui.task_query import QueryError, TaskQuery, choices_of, run_query
from stateflow.tasks.ui.whatif_jobs import SCOPES, BusyError, WhatIfJob, WhatIfJobs, describe_change

from stateflow.errors import ConfigError

__all__ = ["ASSETS", "Response", "UiApp", "asset", "renderer"]

_HERE = Path(__file__).parent
ASSETS = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8"}


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


def renderer(template_cache: Path | None = None) -> jinja2.Environment:
    """The templates, HTML-escaping every value (model output is shown on these pages).

    Args:
        template_cache: a directory for Jinja2's compiled templates (compiling them is most of
            a first page's time once the runs are summarised); ``None`` compiles them in memory.
    """
    cache = None
    if template_cache is not None:
        try:
            template_cache.mkdir(parents=True, exist_ok=True)
            cache = jinja2.FileSystemBytecodeCache(str(template_cache))
        except OSError:  # a read-only cache directory: compile at each start
            cache = None
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        bytecode_cache=cache,
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["qs"] = lambda params: urlencode(params)
    env.filters["tojson_attr"] = lambda value: json.dumps(value, ensure_ascii=False)
    return env


def asset(name: str) -> str:
    """The text of a static asset (the static report inlines them)."""
    return (_HERE / "static" / name).read_text(encoding="utf-8")


class UiApp:
    """The pages over a :class:`RunIndex` (see the module docstring)."""

    def __init__(
        self,
        index: RunIndex,
        *,
        live_poll_s: float = 2.0,
        template_cache: Path | None = None,
        whatif: WhatIfJobs | None = None,
    ):
        """Serve ``index``; ``template_cache`` keeps compiled templates between starts (see
        :func:`renderer`); ``whatif`` lets episode pages start replays (``None``: they cannot)."""
        self.index = index
        self.graphs = GraphCache()
        self.env = renderer(template_cache)
        self.live_poll_s = live_poll_s
        self.whatif = whatif
        # Every form that changes something carries this; a page elsewhere cannot read it (the
        # same-origin policy), so it cannot post on the user's behalf (CSRF).
        self.token = secrets.token_urlsafe(24)

    # -- changes (POST) ----------------------------------------------------------------------------
    def post(self, path: str, params: Mapping[str, str]) -> Response:
        """Answer a POST of ``path`` with the form ``params`` (only ``/whatif``)."""
        if path != "/whatif":
            return self._error(404, f"no form posts to {path!r}")
        if not hmac.compare_digest(params.get("token", ""), self.token):
            return self._error(403, "the form's token is missing or stale: reload the episode page and try again")
        if self.whatif is None:
            return self._error(404, "replays are off in this server")
        try:
            self.index.refresh()
            ep = self._episode_param(params)
            source = self.index.sources[ep.ref.source]
            record = self.index.load(ep)
            refusal = self.whatif.refusal(record, given_file=source.given_file)
            if refusal:
                raise ConfigError(f"source {ep.ref.source} task {record.task} cannot be replayed: {refusal}")
            at, profile = params.get("at", ""), params.get("profile", "")
            scope = params.get("scope", "on")
            if at not in record.path:
                raise QueryError(f"at={at!r} is not a state of this episode's path ({' > '.join(record.path)})")
            if profile not in self.whatif.profile_names():
                known = ", ".join(self.whatif.profile_names()) or "none (start `stateflow ui` with --config)"
                raise QueryError(f"profile={profile!r} is not a known model profile; known: {known}")
            if scope not in SCOPES:
                raise QueryError(f"scope={scope!r}: expected one of {', '.join(SCOPES)}")
            job = self.whatif.start(ep.ref.source, source.root, record, at, profile, scope)
        except QueryError as err:
            return self._error(400, str(err))
        except BusyError as err:
            return self._error(429, str(err))
        except ConfigError as err:
            return self._error(409, str(err))
        where = urlencode({"src": ep.ref.source, "id": record.identity_digest or "", "task": record.task})
        return Response(303, b"", headers={"Location": f"/episode?{where}&job={job.id}#whatif"})

    def whatif_status(self, params: Mapping[str, str]) -> Response:
        """``/api/whatif?job=N``: a replay's status as JSON (the episode page polls it)."""
        raw = params.get("job", "")
        job = self.whatif.get(int(raw)) if self.whatif is not None and raw.isdigit() and len(raw) < 9 else None
        if job is None:
            raise QueryError(f"no replay job={raw!r}")
        return Response(200, json.dumps(job.to_dict()).encode(), "application/json")

    # -- dispatch ----------------------------------------------------------------------------------
    def handle(self, path: str, params: Mapping[str, str]) -> Response:
        """Answer a GET of ``path`` (percent-encoded, as on the request line) with ``params``."""
        try:
            if path.startswith("/static/"):
                return self.static(path.removeprefix("/static/"))
            if path.startswith("/runs/"):
                return self.run_file(path.removeprefix("/runs/"))
            # The overview and the live check read the summaries only; other pages need records.
            if path in ("/", "/api/stamp") and not (params.get("a") and params.get("b")):
                self.index.refresh_summaries()
            else:
                self.index.refresh()
            pages = {
                "/": self.overview,
                "/tasks": self.tasks,
                "/episode": self.episode,
                "/side": self.side_by_side,
                "/api/stamp": self.stamp,
                "/live": self.live,
                "/api/whatif": self.whatif_status,
            }
            page = pages.get(path)
            if page is None:
                return self._error(404, f"no page {path!r}: the pages are /, /tasks, /episode, /side, /live")
            return page(params)
        except QueryError as err:
            return self._error(400, str(err))
        except ConfigError as err:
            return self._error(409, str(err))

    def _error(self, status: int, message: str) -> Response:
        body = self.env.get_template("error.html").render(status=status, message=message, **self._common())
        return Response(status, body.encode())

    def _page(self, template: str, **values: Any) -> Response:
        body = self.env.get_template(template).render(**values, **self._common())
        return Response(200, body.encode("utf-8", errors="backslashreplace"))

    def _common(self) -> dict[str, Any]:
        return {
            "sources": self.index.summaries,
            "stamp": self._stamp_text(),
            "poll_ms": int(self.live_poll_s * 1000),
            "static": False,
            "inline_css": "",
            "inline_js": "",
        }

    def _stamp_text(self) -> str:
        return ";".join(f"{s.records},{s.problems},{s.size}" for s in self.index.stamps())

    # -- files ---------------------------------------------------------------------------------------
    def static(self, name: str) -> Response:
        if name not in ASSETS:
            return self._error(404, f"no static file {name!r}")
        return Response(200, asset(name).encode(), ASSETS[name], {"Cache-Control": "no-cache"})

    def run_file(self, rest: str) -> Response:
        """A file inside a named directory, as ``/runs/<source>/<relative path>``; anything that
        resolves outside that directory (``..``, a symbolic link, an absolute path) is refused."""
        number, _, rel = rest.partition("/")
        if not number.isdigit() or int(number) >= len(self.index.sources):
            return self._error(404, f"no source {number!r}: sources are 0..{len(self.index.sources) - 1}")
        source = self.index.sources[int(number)]
        root = source.root
        rel = unquote(rel)
        if "\x00" in rel:
            return self._error(400, "a path may not hold a NUL character")
        target = (root / rel).resolve()
        if source.given_file and target != source.path:
            return self._error(403, f"{rel!r}: source {number} is the file {source.path.name}; only it is served")
        if not target.is_relative_to(root):
            return self._error(403, f"{rel!r} is outside {root}: only files inside the given directories are served")
        if not target.is_file():
            return self._error(404, f"no file {rel!r} in {root}")
        kind = mimetypes.guess_type(target.name)[0] or "text/plain"
        if kind not in ("application/json", "text/plain", "text/csv"):
            kind = "text/plain"  # never let a run directory's file run as a page here
        return Response(200, target.read_bytes(), f"{kind}; charset=utf-8")

    def stamp(self, _params: Mapping[str, str]) -> Response:
        return Response(200, json.dumps({"stamp": self._stamp_text()}).encode(), "application/json")

    def live_feed(self) -> LiveFeed:
        """A follower of the side files of every source that is a directory (``/api/live``)."""
        roots = [(s.number, s.root) for s in self.index.sources if not s.given_file]
        return LiveFeed(roots, poll_s=min(self.live_poll_s, 0.1))

    # -- pages ---------------------------------------------------------------------------------------
    def live(self, _params: Mapping[str, str]) -> Response:
        """The episodes in flight (filled by the page's script from ``/api/live``)."""
        folders = [s.root for s in self.index.sources if not s.given_file]
        return self._page("live.html", folders=folders)

    def _cells(self) -> list[Cell]:
        return self.index.cells()

    def overview(self, params: Mapping[str, str]) -> Response:
        rows = self._cells()
        by_id = {c.id: c for c in rows}
        comparison, a, b = None, params.get("a", ""), params.get("b", "")
        for name, value in (("a", a), ("b", b)):
            if value and value not in by_id:
                raise QueryError(f"{name}={value!r} is not a row of this overview (pick one from the list)")
        pairs: dict[int, tuple[IndexedEpisode | None, IndexedEpisode | None]] = {}
        if a and b:
            comparison = paired(by_id[a], by_id[b], (ep.record for ep in self.index.episodes()))
            for task in (*comparison.won_tasks, *comparison.lost_tasks):
                pairs[task] = (self.index.find_any(a, task), self.index.find_any(b, task))
        return self._page(
            "overview.html",
            rows=rows,
            plot=success_plot(rows),
            bars=state_bars(rows),
            comparison=comparison,
            pairs=pairs,
            a=a,
            b=b,
            problems=self.index.problems(),
        )

    def tasks(self, params: Mapping[str, str]) -> Response:
        episodes = list(self.index.episodes())
        choices = choices_of(episodes)
        query = TaskQuery.parse(params, choices)
        page = run_query(episodes, query)
        return self._page("tasks.html", page=page, query=query, choices=choices, problems=self.index.problems())

    def _episode_param(self, params: Mapping[str, str], prefix: str = "") -> IndexedEpisode:
        src, digest, task = params.get(f"{prefix}src", "0"), params.get(f"{prefix}id", ""), params.get("task", "")
        if not src.isdigit() or not task.isdigit() or len(task) > 9 or len(src) > 6:
            raise QueryError(f"{prefix}src={src!r} and task={task!r} must be whole numbers")
        ep = self.index.find(int(src), digest, int(task))
        if ep is None:
            raise QueryError(f"no episode with {prefix}src={src}, {prefix}id={digest!r}, task={task} in the index")
        return ep

    def _cards(self, source: int) -> list[FlowCard]:
        """The flow cards of a results directory (read at each use: a run may write them later)."""
        src = self.index.sources[source]
        if src.given_file:
            return []
        try:
            return load_cards(src.root)
        except ConfigError:  # not a cards file: the graph falls back, the page still shows
            return []

    def _others(self, ep: IndexedEpisode) -> list[IndexedEpisode]:
        """The same task under other methods or settings (for the side-by-side links)."""
        r = ep.record
        return [
            o
            for o in self.index.episodes()
            if (o.record.benchmark, o.record.dataset, o.record.task) == (r.benchmark, r.dataset, r.task)
            and o.ref != ep.ref
        ]

    def episode(self, params: Mapping[str, str]) -> Response:
        ep = self._episode_param(params)
        record = self.index.load(ep)
        jobs = self.whatif.of_episode(ep.ref.source, record.identity_digest or "", record.task) if self.whatif else []
        replays = [(j, _fork_steps(j)) for j in jobs]
        given_file = self.index.sources[ep.ref.source].given_file
        refusal = self.whatif.refusal(record, given_file=given_file) if self.whatif else ""
        replay_states = [s for s in dict.fromkeys(record.path) if any(c.get("state") == s for c in record.calls)]
        profiles = self.whatif.profile_names() if self.whatif else []
        changes: dict[str, str] = {}
        if self.whatif is not None and not refusal:
            llm_states = self.whatif.llm_states(record)
            changes = {
                f"{at}|{p}|{scope}": describe_change(record, llm_states, at, p, scope)
                for at in replay_states
                for p in profiles
                for scope in SCOPES
            }
        return self._page(
            "episode.html",
            replays=replays,
            can_replay=self.whatif is not None and not refusal,
            refusal=refusal,
            changes=changes,
            replay_states=replay_states,
            profiles=profiles,
            token=self.token,
            ep=ep,
            r=record,
            graph=self.graphs.for_episode(record, self._cards(ep.ref.source)),
            steps=steps_of(record.history),
            edges=taken_edges(record.transitions),
            sub=submission_of(record),
            others=self._others(ep),
            ending=ending_of(record),
            max_turns=_max_turns(record),
        )

    def side_by_side(self, params: Mapping[str, str]) -> Response:
        a, b = self._episode_param(params, "a_"), self._episode_param(params, "b_")
        ra, rb = self.index.load(a), self.index.load(b)
        return self._page(
            "side.html",
            a=a,
            b=b,
            ra=ra,
            rb=rb,
            rows=align(steps_of(ra.history), steps_of(rb.history)),
            sub_a=submission_of(ra),
            sub_b=submission_of(rb),
        )


def _max_turns(record: Any) -> int | None:
    """The episode's turn limit, from its identity (``None`` when the record does not say)."""
    value = (record.identity or {}).get("max_turns")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _fork_steps(job: WhatIfJob) -> list[Step]:
    """A finished replay's steps from its fork point on (the steps before it are the recording's)."""
    if job.outcome is None:
        return []
    steps = steps_of(job.outcome.after.history)
    first = next((i for i, s in enumerate(steps) if s.state == job.at), len(steps))
    return steps[first:]
