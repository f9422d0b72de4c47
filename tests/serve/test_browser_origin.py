"""A page in the user's browser attacks the served flow (issue 59 part 1), in Debian's headless
Chromium driven by Selenium (as the UI's browser tests).

A page from another loopback origin (another port) sends what any site can send without asking:
``fetch`` with ``text/plain`` (no CORS preflight) and HTML form posts (``text/plain`` and
url-encoded) to the AG-UI and A2A endpoints, and a ``fetch`` with ``application/json`` (which the
browser must preflight). Then a page on a name that resolves to 127.0.0.1 (DNS rebinding: the
browser's resolver is told so) posts same-origin JSON. No run may start: the fake model server is
never asked and the checkpointer stays empty; what the server answered each request is recorded.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from stateflow import LLM, Flow, Prompt, State, Transition
from tests.serve.served import served

webdriver = pytest.importorskip("selenium.webdriver", reason="pip install selenium (scripts/setup.sh does)")
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

REBIND = "rebind.test"  # resolved to 127.0.0.1 by the browser only


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium")
    driver_bin = shutil.which("chromedriver")
    if chromium is None or driver_bin is None:
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/setup_core.sh installs them)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--host-resolver-rules=MAP {REBIND} 127.0.0.1"):  # fmt: skip
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


def _flow() -> Flow:
    ask = State("Ask", Prompt("Talk."), LLM())
    return Flow("plain", initial=ask, transitions=[Transition(ask, State("Done", final=True))])


def _agui(thread: str) -> dict:
    return {"threadId": thread, "runId": "r1", "state": {}, "messages": [{"id": "1", "role": "user", "content": "hi"}],
            "tools": [], "context": [], "forwardedProps": {}}  # fmt: skip


def _a2a(context: str) -> dict:
    message = {"role": "user", "parts": [{"kind": "text", "text": "hi"}], "messageId": context, "contextId": context}
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}


def _form_field(body: dict) -> tuple[str, str]:
    """A text/plain form field whose ``name=value`` is ``body`` as JSON (the classic trick)."""
    text = json.dumps({**body, "pad": "PAD"})
    head, tail = text.split('"PAD"')
    return head + '"', '"' + tail


_ATTACK = """
window.attack = async function () {
  const results = {};
  for (const [name, path, body] of [["fetch-agui", "/agui", AGUI], ["fetch-a2a", "/a2a/", A2A]]) {
    try {  // a simple request: no preflight, the browser sends it and hides the answer
      await fetch(TARGET + path, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body});
      results[name] = "sent";
    } catch (e) { results[name] = "error: " + e; }
  }
  try {  // JSON needs a preflight first
    const json = {"Content-Type": "application/json"};
    const r = await fetch(TARGET + "/agui", {method: "POST", headers: json, body: JSONRUN});
    results["fetch-json"] = "answered " + r.status;
  } catch (e) { results["fetch-json"] = "blocked"; }
  let loaded = 0;
  for (const n of ["sink1", "sink2", "sink3"]) document.querySelector(`iframe[name=${n}]`).onload = () => loaded++;
  for (const f of ["f1", "f2", "f3"]) document.getElementById(f).submit();
  const end = Date.now() + 10000;
  while (loaded < 3 && Date.now() < end) await new Promise(r => setTimeout(r, 50));
  results["forms loaded"] = loaded;
  return results;
};
"""


def _page(target: str) -> str:
    fields = {key: _form_field(body) for key, body in
              (("agui", _agui("form-agui")), ("a2a", _a2a("form-a2a")))}  # fmt: skip

    def attr(s: str) -> str:
        return s.replace("&", "&amp;").replace("'", "&#39;")

    forms = f"""
<form id="f1" method="POST" action="{target}/agui" enctype="text/plain" target="sink1">
  <input type="hidden" name='{attr(fields["agui"][0])}' value='{attr(fields["agui"][1])}'></form>
<form id="f2" method="POST" action="{target}/a2a/" enctype="text/plain" target="sink2">
  <input type="hidden" name='{attr(fields["a2a"][0])}' value='{attr(fields["a2a"][1])}'></form>
<form id="f3" method="POST" action="{target}/agui" target="sink3">
  <input type="hidden" name="threadId" value="form-urlencoded"></form>"""
    consts = {"TARGET": target, "AGUI": json.dumps(_agui("fetch-agui")), "A2A": json.dumps(_a2a("fetch-a2a")),
              "JSONRUN": json.dumps(_agui("fetch-json"))}  # fmt: skip
    script = "".join(f"const {k} = {json.dumps(v)};" for k, v in consts.items()) + _ATTACK
    frames = "".join(f'<iframe name="sink{i}"></iframe>' for i in (1, 2, 3))
    head = "<!doctype html><html><head><title>a page</title></head>"
    return f"{head}<body>{frames}{forms}<script>{script}</script></body></html>"


@contextmanager
def _page_server(html: str) -> Iterator[str]:
    """Another origin: a plain HTTP server on another loopback port serving ``html``."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = html.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _recording(seen: list[dict]):
    """Wraps the application: every request's method, path, Origin, Host, type and answer."""

    def wrap(app):
        async def recorded(scope, receive, send):
            if scope["type"] != "http":
                return await app(scope, receive, send)
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            entry = {"method": scope["method"], "path": scope["path"], "origin": headers.get("origin"),
                     "host": headers.get("host"), "type": headers.get("content-type")}  # fmt: skip
            seen.append(entry)

            async def sending(message):
                if message["type"] == "http.response.start":
                    entry["status"] = message["status"]
                await send(message)

            await app(scope, receive, sending)

        return recorded

    return wrap


def test_a_page_of_another_origin_cannot_start_a_run(browser):
    seen: list[dict] = []
    with served(_flow(), lambda m, msgs, b: "a run", wrap=_recording(seen)) as (base, srv, store):
        with _page_server(_page(base)) as page:
            browser.get(page + "/")
            WebDriverWait(browser, 10).until(lambda d: d.execute_script("return typeof window.attack") == "function")
            results = browser.execute_async_script("window.attack().then(arguments[arguments.length - 1])")
        assert results == {"fetch-agui": "sent", "fetch-a2a": "sent", "fetch-json": "blocked", "forms loaded": 3}
        posts = [s for s in seen if s["method"] == "POST"]
        # every attempt reached the server, from the page's origin, and was refused there
        assert sorted((p["path"], (p["type"] or "").split(";")[0]) for p in posts) == [
            ("/a2a/", "text/plain"), ("/a2a/", "text/plain"), ("/agui", "application/x-www-form-urlencoded"),
            ("/agui", "text/plain"), ("/agui", "text/plain")]  # fmt: skip
        assert {p["origin"] for p in posts} == {page} and {p["status"] for p in posts} == {403}
        preflights = [s for s in seen if s["method"] == "OPTIONS"]
        assert [(p["path"], p["status"]) for p in preflights] == [("/agui", 403)]  # JSON was never sent
        assert srv.requests == [] and store.threads() == []  # no run started, nothing recorded
        statuses = sorted({s["status"] for s in seen})
        print(f"\ncross-origin attempts: {len(posts)} posts + {len(preflights)} preflight, statuses {statuses}, "
              f"model requests {len(srv.requests)}, threads {len(store.threads())}")  # fmt: skip


def test_a_rebound_name_cannot_start_a_run_even_same_origin(browser):
    seen: list[dict] = []
    with served(_flow(), lambda m, msgs, b: "a run", wrap=_recording(seen)) as (base, srv, store):
        port = base.rsplit(":", 1)[1]
        browser.get(f"http://{REBIND}:{port}/health")  # the attacker's name, now pointing at 127.0.0.1
        status = browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch('/agui', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: arguments[0]})"
            ".then(r => done(r.status), e => done('error: ' + e));",
            json.dumps(_agui("rebound")),
        )
        assert status == 421
        post = next(s for s in seen if s["method"] == "POST")
        assert post["host"] == f"{REBIND}:{port}" and post["origin"] == f"http://{REBIND}:{port}"  # same-origin
        assert srv.requests == [] and store.threads() == []
